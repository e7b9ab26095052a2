//! Device-traffic counters (simulator only): bytes copied host↔device by copy kind (synchronous
//! `aclrtMemcpy`/`aclrtMemcpy2d` vs stream-ordered `aclrtMemcpyAsync`), host waits per calling
//! thread (stream / device / event synchronisations, and `aclrtStreamWaitEvent` requests), and
//! kernels launched per library (aclnn = libopapi, aclop, HCCL), per operator.
//!
//! Read with the exported `cannsimStatsJson` (ffi/runtime.rs); with `CANNSIM_STATS=<path>` the same
//! JSON is written at process exit (`{pid}` in the path is replaced by the process id).
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, Once};

/// Copy directions, in JSON order.
const DIRS: [&str; 4] = ["host_to_device", "device_to_host", "device_to_device", "host_to_host"];

/// Index `direction * 4 + (0 = sync, 1 = async) * 2 + (0 = copies, 1 = bytes)`.
static COPIES: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];

fn slot(dir: usize, is_async: usize, field: usize) -> &'static AtomicU64 {
    &COPIES[dir * 4 + is_async * 2 + field]
}

/// Host waits of one thread.
#[derive(Default, Clone)]
struct Waits {
    name: String,
    stream_syncs: u64,
    device_syncs: u64,
    event_syncs: u64,
    stream_wait_events: u64,
}

#[derive(Clone, Copy)]
pub enum Wait {
    /// aclrtSynchronizeStream(WithTimeout)
    Stream,
    /// aclrtSynchronizeDevice(WithTimeout)
    Device,
    /// aclrtSynchronizeEvent
    Event,
    /// aclrtStreamWaitEvent (a stream-side wait, requested by this thread)
    StreamWaitEvent,
}

struct State {
    waits: BTreeMap<i64, Waits>,
    /// library -> operator -> launches
    kernels: BTreeMap<&'static str, BTreeMap<String, u64>>,
}

fn state() -> std::sync::MutexGuard<'static, State> {
    static S: Mutex<State> = Mutex::new(State { waits: BTreeMap::new(), kernels: BTreeMap::new() });
    S.lock().unwrap_or_else(|e| e.into_inner())
}

/// Register the exit writer once if `CANNSIM_STATS` is set.
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("CANNSIM_STATS").is_some() {
            // SAFETY: registering a plain extern "C" function without arguments.
            unsafe { libc::atexit(write_at_exit) };
        }
    });
}

extern "C" fn write_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(p) = std::env::var_os("CANNSIM_STATS") {
            let path = p.to_string_lossy().replace("{pid}", &std::process::id().to_string());
            if let Err(e) = std::fs::write(&path, json()) {
                eprintln!("[cannsim] cannot write CANNSIM_STATS to {path}: {e}");
            }
        }
    });
}

/// Count one copy of `bytes` (`dst_dev`/`src_dev`: whether each side is device memory).
pub fn copy(dst_dev: bool, src_dev: bool, is_async: bool, bytes: usize) {
    init();
    let dir = match (dst_dev, src_dev) {
        (true, false) => 0,
        (false, true) => 1,
        (true, true) => 2,
        (false, false) => 3,
    };
    slot(dir, usize::from(is_async), 0).fetch_add(1, Relaxed);
    slot(dir, usize::from(is_async), 1).fetch_add(bytes as u64, Relaxed);
}

fn thread_name() -> String {
    std::fs::read_to_string("/proc/thread-self/comm").map(|s| s.trim_end().to_string()).unwrap_or_default()
}

/// Count one host wait on the calling thread.
pub fn wait(kind: Wait) {
    init();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as i64;
    let mut st = state();
    let w = st.waits.entry(tid).or_insert_with(|| Waits { name: thread_name(), ..Default::default() });
    match kind {
        Wait::Stream => w.stream_syncs += 1,
        Wait::Device => w.device_syncs += 1,
        Wait::Event => w.event_syncs += 1,
        Wait::StreamWaitEvent => w.stream_wait_events += 1,
    }
}

/// Count one kernel launch; the library is derived from the traced operator name.
pub fn launch(op: &str) {
    init();
    let lib = if op.starts_with("aclnn") {
        "aclnn"
    } else if op.starts_with("Hccl") {
        "hccl"
    } else {
        "aclop"
    };
    let mut st = state();
    let ops = st.kernels.entry(lib).or_default();
    match ops.get_mut(op) {
        Some(n) => *n += 1,
        None => {
            ops.insert(op.to_string(), 1);
        }
    }
}

/// Peak bytes of device memory allocated (`aclrtMalloc`, page-rounded) and of pinned host memory
/// (`aclrtMallocHost`) at once.
static DEVICE_PEAK: AtomicU64 = AtomicU64::new(0);
static PINNED_PEAK: AtomicU64 = AtomicU64::new(0);

/// Device memory in use is now `bytes`.
pub fn device_mem(bytes: usize) {
    DEVICE_PEAK.fetch_max(bytes as u64, Relaxed);
}

/// `aclrtMallocHost` calls: pinning host memory is a costly driver call on a real device (page
/// locking and an IOMMU mapping), so a tool must pool it rather than pin per tensor.
static PINNED_ALLOCS: AtomicU64 = AtomicU64::new(0);

/// Pinned host memory in use is now `bytes`.
pub fn pinned_mem(bytes: usize) {
    PINNED_PEAK.fetch_max(bytes as u64, Relaxed);
}

/// Count one `aclrtMallocHost`.
pub fn pinned_alloc() {
    init();
    PINNED_ALLOCS.fetch_add(1, Relaxed);
}

/// Reset every counter (cannsimStatsReset); the device peak restarts from what is in use now
/// (`device_in_use`, passed in so that the counters never depend on the allocator).
pub fn reset(device_in_use: usize) {
    DEVICE_PEAK.store(device_in_use as u64, Relaxed);
    PINNED_PEAK.store(0, Relaxed);
    PINNED_ALLOCS.store(0, Relaxed);
    for c in &COPIES {
        c.store(0, Relaxed);
    }
    let mut st = state();
    st.waits.clear();
    st.kernels.clear();
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The counters as one JSON object.
pub fn json() -> String {
    let mut copies = Vec::new();
    for (i, d) in DIRS.iter().enumerate() {
        let k = |a: usize, b: usize| slot(i, a, b).load(Relaxed);
        copies.push(format!(
            "\"{d}\":{{\"sync\":{{\"copies\":{},\"bytes\":{}}},\"async\":{{\"copies\":{},\"bytes\":{}}}}}",
            k(0, 0),
            k(0, 1),
            k(1, 0),
            k(1, 1)
        ));
    }
    let st = state();
    let threads: Vec<String> = st
        .waits
        .iter()
        .map(|(tid, w)| {
            format!(
                "{{\"tid\":{tid},\"name\":{},\"stream_syncs\":{},\"device_syncs\":{},\"event_syncs\":{},\"stream_wait_events\":{}}}",
                esc(&w.name),
                w.stream_syncs,
                w.device_syncs,
                w.event_syncs,
                w.stream_wait_events
            )
        })
        .collect();
    let kernels: Vec<String> = ["aclnn", "aclop", "hccl"]
        .iter()
        .map(|lib| {
            let ops = st.kernels.get(lib).cloned().unwrap_or_default();
            let total: u64 = ops.values().sum();
            let list: Vec<String> = ops.iter().map(|(op, n)| format!("{}:{n}", esc(op))).collect();
            format!("\"{lib}\":{{\"launches\":{total},\"ops\":{{{}}}}}", list.join(","))
        })
        .collect();
    format!(
        "{{\"pid\":{},\"copies\":{{{}}},\"threads\":[{}],\"kernels\":{{{}}},\"memory\":{{\"device_peak_bytes\":{},\"pinned_peak_bytes\":{},\"pinned_allocs\":{}}}}}",
        std::process::id(),
        copies.join(","),
        threads.join(","),
        kernels.join(","),
        DEVICE_PEAK.load(Relaxed),
        PINNED_PEAK.load(Relaxed),
        PINNED_ALLOCS.load(Relaxed)
    )
}
