//! One kernel launch captured. The copy path: inputs copied off the device before the real launch,
//! outputs after it, each through the tool's own (real) `aclrtSynchronizeStream` + `aclrtMemcpy`.
//! By default every task instead copies asynchronously on the launch's stream into pinned memory
//! (`MSPROBE_L2_ASYNC_COPY`, see [`devstats`]); the statistics task then computes its statistics
//! on the completion thread with the copy path's host code, except that tensors above
//! `MSPROBE_L2_DEVICE_STATS_MIN_BYTES` are reduced on the device (the hybrid, the statistics
//! default; `MSPROBE_L2_DEVICE_STATS=0` turns it off).
//!
//! A side's copies are made only once its stream synchronisation succeeded: a copy made without it
//! could read the device before the kernels that write it ran. A sync or copy that fails is
//! counted (the run summary) and its tensors are recorded as null, never as stale bytes.

use super::activation::{
    self, Side, CAPTURED, COPY_FAILURES, FILTERED, INTERNAL_ERRORS, L2, NESTED, NOT_SYNCED_TENSORS, REJECTED,
    UNBOUND_LAUNCHES,
};
use super::devstats;
use super::meta::{self, Bound, Role, TensorMeta};
use crate::device::{self, DeviceError};
use msprobe_core::dtype::DType;
use msprobe_core::json::Json;
use msprobe_core::layout;
use msprobe_core::record::{RecordBuilder, TensorRef};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Once;
use std::time::Instant;

thread_local! {
    /// Set while this thread makes a launch the capture saw (captured or filtered out by the
    /// recorder): launches nested in it (callbacks, library-internal calls, of any kernel type)
    /// pass through and are counted. Const-initialised with no destructor, so it never allocates.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// The re-entrancy guard of every kernel type: marks this thread busy and restores the previous
/// state when dropped (also on unwinding), so a nested launch never clears its outer launch's mark.
struct Busy(bool);

impl Busy {
    fn enter() -> Busy {
        Busy(BUSY.with(|c| c.replace(true)))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        BUSY.with(|c| c.set(self.0));
    }
}

/// Whether this thread is inside a launch the capture saw.
fn nested() -> bool {
    BUSY.with(Cell::get)
}

/// A kernel argument resolved at launch time.
#[derive(Clone)]
pub(crate) enum KArg {
    Tensor(TensorMeta, Role),
    /// A tensor in host memory (a host-placed or const aclop input): its bytes, read at launch.
    HostTensor(TensorMeta, Vec<u8>, Role),
    List(Vec<TensorMeta>, Role),
    /// A NULL optional tensor.
    Missing(Role),
    Value(Json),
}

/// Phase 2 of an aclnn op.
pub(crate) fn aclnn_launch(op: &str, ex: usize, stream: *mut c_void, real: impl FnOnce() -> i32) -> i32 {
    activation::note_seen();
    // Ordinary executors are freed by the launch (their pointers are reused): take the state,
    // also for a launch that passes through.
    let st = {
        let mut exs = meta::executors();
        match exs.get(&ex) {
            Some(s) if s.repeatable => Some(s.clone()),
            Some(_) => exs.remove(&ex),
            None => None,
        }
    };
    if nested() {
        NESTED.fetch_add(1, Relaxed);
        return real();
    }
    let Some(l2) = activation::l2() else { return pass_filtered(real) };
    let Some(st) = st else {
        UNBOUND_LAUNCHES.fetch_add(1, Relaxed);
        return real();
    };
    let args = resolve(&st.args);
    if !SHAPE_BY_KERNEL.contains(&op) {
        return record_launch(&l2, "Aclnn", op, args, stream, real, None);
    }
    let refresh = || kernel_shaped_outputs(op, &st.args, stream);
    record_launch(&l2, "Aclnn", op, args, stream, real, Some(&refresh))
}

/// The outputs of a launch of a [`SHAPE_BY_KERNEL`] operator at the shape its kernel gave them:
/// the stream is synchronised (the client syncs there too, to read the shape) and each output's
/// view shape read back. If either fails, or a shape read back is not within the launch-time one's
/// elements, the launch-time outputs are kept, counted and warned about. A NULL output stays null.
fn kernel_shaped_outputs(op: &str, bound: &[Bound], stream: *mut c_void) -> Vec<KArg> {
    let launch_time = || {
        activation::note_shape_by_kernel(&format!("aclnn{op}"));
        resolve(bound)
            .into_iter()
            .filter(|a| matches!(a, KArg::Tensor(_, Role::Out) | KArg::Missing(Role::Out)))
            .collect()
    };
    if device::sync_stream(stream).is_err() {
        return launch_time();
    }
    let mut out = Vec::new();
    for b in bound {
        match b {
            Bound::Tensor(0, Role::Out) => out.push(KArg::Missing(Role::Out)),
            Bound::Tensor(h, Role::Out) => {
                let (Some(t), Some(shape)) = (meta::tensor(*h), device::view_shape_now(*h)) else {
                    return launch_time();
                };
                // never read past the output: the real shape is at most the allocated one
                let fits = shape.iter().all(|d| *d >= 0) && layout::numel(&shape) <= layout::numel(&t.shape);
                if !fits {
                    return launch_time();
                }
                // an output the kernel did not reshape (Unique's inverseOut) keeps its own strides; a
                // reshaped one is the contiguous head the kernel wrote
                let t = if shape == t.shape { t } else { TensorMeta { shape, strides: None, ..t } };
                out.push(KArg::Tensor(t, Role::Out));
            }
            _ => {}
        }
    }
    activation::RESHAPED.fetch_add(1, Relaxed);
    out
}

/// aclnn operators (names without `aclnn`) whose output shape their kernel decides (the client
/// allocates the largest possible output, syncs, then reads the real shape with `aclGetViewShape`).
/// L2 does the same after the launch (one stream sync on the launching thread, where the client
/// waits anyway; counted in the run summary) and records the outputs at the real shape; when that
/// fails they are recorded at the launch-time (largest) shape, whose rows past the real count are
/// not the op's result: counted and warned about, never silent. The Unique forms set the view shape of
/// valueOut and countsOut; inverseOut keeps self's shape, and an output read back at its launch-time
/// shape keeps its launch-time strides.
const SHAPE_BY_KERNEL: &[&str] = &["Nonzero", "NonzeroV2", "MaskedSelect", "Unique", "Unique2", "UniqueConsecutive"];

/// The aclop op types of the same kind (torch_npu runs `x[mask]`, `masked_select`, `unique` and
/// `unique_consecutive` this way). Through a V2 entry every aclop launch's outputs are re-read from
/// the descs after the call: for such an op the call returns once the kernel ran, with the descs
/// holding the real shape (CANN's contract, which torch_npu relies on), so the record is exact (for
/// any other op the descs are unchanged). Through a V1 entry (const descs) the outputs keep the
/// launch-time shape: counted as above when they are recorded.
const ACLOP_SHAPE_BY_KERNEL: &[&str] =
    &["NonZero", "MaskedSelect", "UniqueWithCountsAndSorting", "UniqueConsecutive", "Unique", "UniqueV2"];

/// Re-reads a launch's outputs after the call returned (see [`ACLOP_SHAPE_BY_KERNEL`]).
pub(crate) type Refresh<'a> = &'a dyn Fn() -> Vec<KArg>;

/// `args` with its outputs replaced by `refresh`'s, when there is one and the launch succeeded.
fn refreshed(args: Vec<KArg>, refresh: Option<Refresh>, rc: i32) -> Vec<KArg> {
    let Some(f) = refresh.filter(|_| rc == 0) else { return args };
    let mut args: Vec<KArg> = args.into_iter().filter(|a| !is_output(a)).collect();
    args.extend(f());
    args
}

/// A launch of an aclop or HCCL kernel: `describe` gives the op name and its arguments (called
/// only when the launch is to be recorded); `refresh`, for the aclop V2 entries, re-reads the outputs
/// once the call returned.
pub(crate) fn launch(
    prefix: &str,
    describe: impl FnOnce() -> (String, Vec<KArg>),
    stream: *mut c_void,
    real: impl FnOnce() -> i32,
    refresh: Option<Refresh>,
) -> i32 {
    activation::note_seen();
    if nested() {
        NESTED.fetch_add(1, Relaxed);
        return real();
    }
    let Some(l2) = activation::l2() else { return pass_filtered(real) };
    let described = std::panic::catch_unwind(std::panic::AssertUnwindSafe(describe));
    let Ok((op, args)) = described else {
        INTERNAL_ERRORS.fetch_add(1, Relaxed);
        log::warn!("internal error describing a {prefix} launch; it ran uncaptured");
        return real();
    };
    if refresh.is_some() || prefix != "Aclop" || !ACLOP_SHAPE_BY_KERNEL.contains(&op.as_str()) {
        return record_launch(&l2, prefix, &op, args, stream, real, refresh);
    }
    // A V1 entry: the outputs stay at their launch-time shape. Counted only when they are
    // recorded (the launch succeeded, passed the filters and its outputs are selected).
    let outs: Vec<KArg> = args.iter().filter(|a| is_output(a)).cloned().collect();
    let as_launched = || {
        activation::note_shape_by_kernel(&format!("aclop {op}"));
        outs.clone()
    };
    record_launch(&l2, prefix, &op, args, stream, real, Some(&as_launched))
}

fn is_output(a: &KArg) -> bool {
    match a {
        KArg::Tensor(_, r) | KArg::HostTensor(_, _, r) | KArg::List(_, r) | KArg::Missing(r) => *r == Role::Out,
        KArg::Value(_) => false,
    }
}

/// A launch seen while capture is on but filtered out before its arguments are read.
pub(crate) fn pass_filtered(real: impl FnOnce() -> i32) -> i32 {
    FILTERED.fetch_add(1, Relaxed);
    let _busy = Busy::enter();
    real()
}

/// Looks up the current metadata of the bound tensors (addresses may have been re-bound).
fn resolve(bound: &[Bound]) -> Vec<KArg> {
    bound
        .iter()
        .map(|b| match b {
            Bound::Tensor(0, role) => KArg::Missing(*role),
            Bound::Tensor(p, role) => meta::tensor(*p).map(|t| KArg::Tensor(t, *role)).unwrap_or(KArg::Missing(*role)),
            Bound::List(0, role) => KArg::Missing(*role),
            Bound::List(p, role) => {
                let elems = meta::list(*p).unwrap_or_default();
                KArg::List(elems.iter().filter_map(|e| meta::tensor(*e)).collect(), *role)
            }
            Bound::Value(v) => KArg::Value(v.clone()),
        })
        .collect()
}

fn warn_copy_failure(e: DeviceError) {
    static ONCE: Once = Once::new();
    COPY_FAILURES.fetch_add(1, Relaxed);
    ONCE.call_once(|| log::warn!("a device-to-host copy failed ({e}); the tensor is recorded as null and counted"));
}

/// Synchronises `stream` before one side's copies; false (counted, warned once) if it failed.
fn sync_for(stream: *mut c_void, side: Side, record: &str) -> bool {
    match device::sync_stream(stream) {
        Ok(()) => true,
        Err(e) => {
            activation::note_sync_failure(side, record, e);
            false
        }
    }
}

/// Copies a view's span off the device and adds it as a tensor leaf; with `synced` false (its
/// stream could not be synchronised) the leaf is null and counted, nothing is copied.
fn add_device_tensor(b: &mut RecordBuilder, l2: &L2, t: &TensorMeta, synced: bool) {
    let Some(dtype) = DType::from_acl(t.dtype) else {
        let _ = b.add_value(None, Json::Null);
        return;
    };
    let es = dtype.size();
    let strides = t.strides.clone().unwrap_or_else(|| layout::contiguous_strides(&t.shape));
    let span = match layout::element_span(&t.shape, &strides, t.offset) {
        Ok(s) => s,
        Err(_) => {
            let _ = b.add_value(None, Json::Null);
            return;
        }
    };
    if !synced {
        NOT_SYNCED_TENSORS.fetch_add(1, Relaxed);
        let _ = b.add_value(None, Json::Null);
        return;
    }
    let (lo, hi) = span.unwrap_or((t.offset as u128, t.offset as u128));
    let host = match device::copy_to_host(t.addr + lo as usize * es, (hi - lo) as usize * es) {
        Ok(h) => h,
        Err(e) => {
            warn_copy_failure(e);
            let _ = b.add_value(None, Json::Null);
            return;
        }
    };
    match layout::gather(es, &t.shape, Some(&strides), t.offset - lo as i64, &host) {
        Ok(data) => {
            let tr = TensorRef { dtype, shape: &t.shape, data: &data, requires_grad: None, type_name: None };
            if let Err(e) = b.add_tensor(None, &tr, l2.recorder.budget()) {
                log::debug!("tensor not recorded: {e}");
                let _ = b.add_value(None, Json::Null);
            }
        }
        Err(_) => {
            let _ = b.add_value(None, Json::Null);
        }
    }
}

fn add_side(b: &mut RecordBuilder, l2: &L2, args: &[KArg], side: Side, synced: bool) {
    let before = side == Side::Before;
    let keep = |r: Role| if before { r != Role::Out } else { r != Role::In };
    for a in args {
        match a {
            KArg::Tensor(t, r) if keep(*r) => add_device_tensor(b, l2, t, synced),
            KArg::HostTensor(t, bytes, r) if keep(*r) => add_host_tensor(b, l2, t, bytes),
            KArg::List(ts, r) if keep(*r) => {
                let _ = b.open(None, false);
                for t in ts {
                    add_device_tensor(b, l2, t, synced);
                }
                let _ = b.close();
            }
            KArg::Missing(r) if keep(*r) && before => {
                let _ = b.add_value(None, Json::Null);
            }
            KArg::Value(v) if before => {
                let _ = b.add_value(None, v.clone());
            }
            _ => {}
        }
    }
}

/// Adds a tensor whose bytes were read from host memory at the launch (contiguous view).
fn add_host_tensor(b: &mut RecordBuilder, l2: &L2, t: &TensorMeta, bytes: &[u8]) {
    let Some(dtype) = DType::from_acl(t.dtype) else {
        let _ = b.add_value(None, Json::Null);
        return;
    };
    let need = layout::numel(&t.shape) * dtype.size() as u128;
    if need > bytes.len() as u128 {
        let _ = b.add_value(None, Json::Null);
        return;
    }
    let tr = TensorRef { dtype, shape: &t.shape, data: &bytes[..need as usize], requires_grad: None, type_name: None };
    if let Err(e) = b.add_tensor(None, &tr, l2.recorder.budget()) {
        log::debug!("tensor not recorded: {e}");
        let _ = b.add_value(None, Json::Null);
    }
}

/// Records one launch of `{prefix}.{op}`; `real` performs it. A launch the library rejects
/// (non-zero status) keeps its inputs and gains a `status` key (no outputs: the kernel did not run).
pub(crate) fn record_launch(
    l2: &L2,
    prefix: &str,
    op: &str,
    args: Vec<KArg>,
    stream: *mut c_void,
    real: impl FnOnce() -> i32,
    refresh: Option<Refresh>,
) -> i32 {
    let rec = &l2.recorder;
    let builder = if rec.is_enabled() {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let n = rec.next_index(&format!("{prefix}.{op}."));
            rec.begin(&msprobe_core::naming::api_name(prefix, op, n, "forward"))
        }))
        .unwrap_or(None)
    } else {
        None
    };
    let Some(mut b) = builder else {
        let rc = pass_filtered(real);
        activation::after_launch(l2, &format!("{prefix}.{op}"));
        return rc;
    };
    if let Some(lim) = device_limits(l2) {
        return record_launch_device(l2, b, args, stream, real, refresh, lim);
    }
    let t0 = Instant::now();
    let busy = Busy::enter();
    let pre = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if matches!(b.section("input_args"), Ok(true)) {
            let synced = sync_for(stream, Side::Before, &b.name);
            add_side(&mut b, l2, &args, Side::Before, synced);
        }
        let _ = b.section("input_kwargs");
    }));
    let kernel_start = Instant::now();
    let rc = real();
    let kernel_time = kernel_start.elapsed();
    let post = pre.is_ok()
        && std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // Outputs are copied only once the kernel is known to have run (the sync succeeded).
            if rc == 0 {
                if matches!(b.section("output"), Ok(true)) {
                    let args = refreshed(args, refresh, rc);
                    let synced = sync_for(stream, Side::After, &b.name);
                    add_side(&mut b, l2, &args, Side::After, synced);
                }
            } else {
                b.set_key("status", Json::Int(rc as i128));
            }
        }))
        .is_ok();
    drop(busy);
    let name = b.name.clone();
    if post {
        rec.end(b);
        CAPTURED.fetch_add(1, Relaxed);
        if rc != 0 {
            REJECTED.fetch_add(1, Relaxed);
        }
    } else {
        INTERNAL_ERRORS.fetch_add(1, Relaxed);
        log::warn!("internal error capturing {name}; the launch ran uncaptured");
    }
    // Time in capture excludes the kernel itself.
    rec.add_capture_nanos(t0.elapsed().saturating_sub(kernel_time));
    activation::after_launch(l2, &name);
    rc
}

/// The default of `MSPROBE_L2_DEVICE_STATS_MIN_BYTES`: in the hybrid (statistics with async
/// copies on, unless `MSPROBE_L2_DEVICE_STATS=0`) a tensor of at most this many bytes is copied
/// asynchronously, a larger one reduced on the device. From the cost model's mid constants
/// (scripts/bench_device.py): one async copy of N bytes costs N / 25 GB/s on the host link; the 6
/// reduction kernels cost 6 × 5 µs (t_kernel) + 6 × 1.5 × N / 1 TB/s (HBM) on the device. Equal at
/// N = 30 µs / (1/25e9 − 9/1e12) s/B ≈ 0.97 MB, rounded to 1 MiB. (Counting the kernels' 6 × 10 µs
/// host launch time as well gives ≈ 2.9 MB; on a launch-bound host the copy wins up to there, so
/// 1 MiB leans towards the device only where the host link is clearly the larger cost.)
const DEVICE_STATS_MIN_BYTES: u64 = 1 << 20;

/// Which of the device paths of issue #21 a launch uses (None: the copy path).
fn device_limits(l2: &L2) -> Option<devstats::Limits> {
    // Statistics, by default the hybrid: a tensor of at most `MSPROBE_L2_DEVICE_STATS_MIN_BYTES`
    // is copied asynchronously into pinned memory and its statistics computed on the completion
    // thread by the copy path's own host code (same values, no wait on the launching thread, no
    // tool kernel); a larger one is reduced on the device (~6 tool kernels, 32 result bytes over
    // the link), where the host link would cost more than the kernels (cost model). On
    // launch-bound workloads of small tensors the kernels cost more than the copies, hence the
    // threshold. `MSPROBE_L2_DEVICE_STATS=0`: async copies for every tensor; with async copies
    // off, `=1` reduces every tensor on the device.
    // md5/tensor: the bytes are needed on the host, async copies unless `MSPROBE_L2_ASYNC_COPY=0`.
    // Durability is the same for all: every record of these paths is journaled in planned form at
    // the launch (see `planned`).
    static DEVICE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    static COPIES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    static MIN_BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let cfg = l2.recorder.config();
    let stats = stats_mode(l2);
    let copies_on = *COPIES.get_or_init(|| env_switch("MSPROBE_L2_ASYNC_COPY", true));
    let copies = copies_on && {
        let _busy = Busy::enter();
        devstats::copies_available()
    };
    // The hybrid is the statistics default while async copies are on; with them off
    // (`MSPROBE_L2_ASYNC_COPY=0`, the copy path) device reductions only when asked for.
    let device = stats && *DEVICE.get_or_init(|| env_switch("MSPROBE_L2_DEVICE_STATS", copies_on)) && {
        let _busy = Busy::enter();
        devstats::available()
    };
    if !copies && !device {
        return None;
    }
    let device_min_bytes = if device && copies {
        *MIN_BYTES.get_or_init(|| env_bytes("MSPROBE_L2_DEVICE_STATS_MIN_BYTES", DEVICE_STATS_MIN_BYTES))
    } else {
        0
    };
    let except_keys = cfg.dialect != msprobe_core::dtype::Dialect::MindSpore;
    Some(devstats::Limits { on_full: cfg.on_full, cap: cfg.queue_bytes, stats, device, device_min_bytes, except_keys })
}

/// A byte count from the environment; unset or empty gives `default`, anything that is not a
/// non-negative integer gives one warning naming the variable and its value, and `default`.
fn env_bytes(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => default,
        Ok(v) => parse_bytes(var, &v, default),
        Err(std::env::VarError::NotUnicode(v)) => parse_bytes(var, &v.to_string_lossy(), default),
    }
}

fn parse_bytes(var: &str, v: &str, default: u64) -> u64 {
    match v.trim() {
        "" => default,
        t => t.parse().unwrap_or_else(|_| {
            log::warn!("{var}={t:?} is not a byte count (a non-negative integer); using {default}");
            default
        }),
    }
}

/// A `0`/`1` switch from the environment; unset or empty gives `default`, anything else gives one
/// warning naming the variable and its value, and `default`.
fn env_switch(var: &str, default: bool) -> bool {
    match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => default,
        Ok(v) => parse_switch(var, &v, default),
        Err(std::env::VarError::NotUnicode(v)) => parse_switch(var, &v.to_string_lossy(), default),
    }
}

fn parse_switch(var: &str, v: &str, default: bool) -> bool {
    match v.trim() {
        "" => default,
        "1" => true,
        "0" => false,
        other => {
            log::warn!("{var}={other:?} is not 0 or 1; using {}", u8::from(default));
            default
        }
    }
}

/// The statistics task and summary mode (statistics from async copies or device reductions);
/// otherwise (md5, tensor) the bytes are copied asynchronously into pinned memory.
fn stats_mode(l2: &L2) -> bool {
    let cfg = l2.recorder.config();
    cfg.task == msprobe_core::config::Task::Statistics
        && cfg.summary_mode == msprobe_core::config::SummaryMode::Statistics
}

/// One leaf of a record whose statistics complete later, in the order the record holds them.
enum Item {
    Section(&'static str),
    Value(Json),
    Open,
    Close,
    Host(TensorMeta, Vec<u8>),
    /// A tensor that took the copy path: its gathered bytes (None = null, counted).
    Copied(Option<(DType, Vec<i64>, Vec<u8>)>),
    Dev(DType, Vec<i64>, devstats::DevLeaf),
    /// md5 / tensor: the span copied asynchronously (None: dropped, recorded as null).
    Pinned(DType, Vec<i64>, Option<devstats::PinnedCopy>),
    Status(i32),
}

/// Enqueues one side's tensors: device reductions, or (per tensor) the copy path.
fn plan_side(
    items: &mut Vec<Item>,
    args: &[KArg],
    side: Side,
    stream: *mut c_void,
    record: &str,
    lim: &devstats::Limits,
    launch: &mut devstats::Launch,
) {
    let before = side == Side::Before;
    let keep = |r: Role| if before { r != Role::Out } else { r != Role::In };
    // The copy path's stream synchronisation, made once per side and only if a tensor needs it.
    let mut synced: Option<bool> = None;
    let mut dev = |items: &mut Vec<Item>, t: &TensorMeta| match if reduce_on_device(t, lim) {
        devstats::enqueue(t, stream, lim, launch)
            .map(|leaf| Item::Dev(DType::from_acl(t.dtype).expect("checked by enqueue"), t.shape.clone(), leaf))
    } else {
        devstats::enqueue_copy(t, stream, lim, launch).map(|c| {
            let dtype = DType::from_acl(t.dtype).expect("checked by enqueue_copy");
            match c {
                devstats::CopyOutcome::Copied(p) => Item::Pinned(dtype, t.shape.clone(), Some(p)),
                devstats::CopyOutcome::Dropped => Item::Pinned(dtype, t.shape.clone(), None),
            }
        })
    } {
        Ok(item) => items.push(item),
        Err(devstats::Fallback) => {
            devstats::FALLBACKS.fetch_add(1, Relaxed);
            let ok = *synced.get_or_insert_with(|| sync_for(stream, side, record));
            items.push(Item::Copied(copy_gathered(t, ok)));
        }
    };
    for a in args {
        match a {
            KArg::Tensor(t, r) if keep(*r) => dev(items, t),
            KArg::HostTensor(t, bytes, r) if keep(*r) => items.push(Item::Host(t.clone(), bytes.clone())),
            KArg::List(ts, r) if keep(*r) => {
                items.push(Item::Open);
                for t in ts {
                    dev(items, t);
                }
                items.push(Item::Close);
            }
            KArg::Missing(r) if keep(*r) && before => items.push(Item::Value(Json::Null)),
            KArg::Value(v) if before => items.push(Item::Value(v.clone())),
            _ => {}
        }
    }
}

/// Whether `t` is reduced on the device (statistics, device reductions on, and larger than the
/// hybrid's threshold); otherwise its bytes are copied asynchronously.
fn reduce_on_device(t: &TensorMeta, lim: &devstats::Limits) -> bool {
    if !lim.device {
        return false;
    }
    if lim.device_min_bytes == 0 {
        return true;
    }
    let es = DType::from_acl(t.dtype).map_or(1, |d| d.size() as u128);
    layout::numel(&t.shape).saturating_mul(es) > lim.device_min_bytes as u128
}

/// The copy path for one tensor: its elements in row-major order, or None (counted).
fn copy_gathered(t: &TensorMeta, synced: bool) -> Option<(DType, Vec<i64>, Vec<u8>)> {
    let dtype = DType::from_acl(t.dtype)?;
    let es = dtype.size();
    let strides = t.strides.clone().unwrap_or_else(|| layout::contiguous_strides(&t.shape));
    let span = layout::element_span(&t.shape, &strides, t.offset).ok()?;
    if !synced {
        NOT_SYNCED_TENSORS.fetch_add(1, Relaxed);
        return None;
    }
    let (lo, hi) = span.unwrap_or((t.offset as u128, t.offset as u128));
    let host = match device::copy_to_host(t.addr + lo as usize * es, (hi - lo) as usize * es) {
        Ok(h) => h,
        Err(e) => {
            warn_copy_failure(e);
            return None;
        }
    };
    let data = layout::gather(es, &t.shape, Some(&strides), t.offset - lo as i64, &host).ok()?;
    Some((dtype, t.shape.clone(), data.into_owned()))
}

/// Adds the planned leaves to the record (on the completion thread); `done` false: the event
/// failed, so device leaves are null.
/// The planned form of a record (statistics mode): every device leaf with its dtype and shape
/// and null statistics, the rest as the record will hold it. Journaled at the launch so that a
/// kill before the completion thread ends the record loses nothing (`recover` writes it).
/// In md5/tensor mode host leaves are null too (their CRC/file would be made twice, and a file
/// named by a plan is never written).
fn planned(b: &mut RecordBuilder, l2: &L2, items: &[Item], stats: bool) {
    let null = msprobe_core::stats::Stats::null();
    for it in items {
        match it {
            Item::Section(k) => {
                let _ = b.section(k);
            }
            Item::Value(v) => {
                let _ = b.add_value(None, v.clone());
            }
            Item::Open => {
                let _ = b.open(None, false);
            }
            Item::Close => {
                let _ = b.close();
            }
            Item::Host(t, bytes) if stats => add_host_tensor(b, l2, t, bytes),
            Item::Copied(Some((dtype, shape, data))) if stats => {
                let tr = TensorRef { dtype: *dtype, shape, data, requires_grad: None, type_name: None };
                if b.add_tensor(None, &tr, l2.recorder.budget()).is_err() {
                    let _ = b.add_value(None, Json::Null);
                }
            }
            Item::Dev(dtype, shape, _) => {
                let _ = b.add_stats_leaf(None, *dtype, shape, &null);
            }
            Item::Pinned(dtype, shape, _) if stats => {
                let _ = b.add_stats_leaf(None, *dtype, shape, &null);
            }
            Item::Host(..) | Item::Copied(_) | Item::Pinned(..) => {
                let _ = b.add_value(None, Json::Null);
            }
            Item::Status(rc) => b.set_key("status", Json::Int(*rc as i128)),
        }
    }
}

fn replay(b: &mut RecordBuilder, l2: &L2, items: Vec<Item>, done: bool) {
    // A tensor dropped for want of pinned memory (drop mode) drops the record's tensor files, all
    // of them, as the writer queue's drop does: a record with some of its files would look
    // complete and is not. Its statistics stay; the leaf is counted as the record's files are.
    let tensor_task = l2.recorder.config().task == msprobe_core::config::Task::Tensor;
    if tensor_task && items.iter().any(|i| matches!(i, Item::Pinned(_, _, None))) {
        b.drop_files(l2.recorder.budget());
    }
    for it in items {
        match it {
            Item::Section(k) => {
                let _ = b.section(k);
            }
            Item::Value(v) => {
                let _ = b.add_value(None, v);
            }
            Item::Open => {
                let _ = b.open(None, false);
            }
            Item::Close => {
                let _ = b.close();
            }
            Item::Host(t, bytes) => add_host_tensor(b, l2, &t, &bytes),
            Item::Copied(Some((dtype, shape, data))) => {
                let tr = TensorRef { dtype, shape: &shape, data: &data, requires_grad: None, type_name: None };
                if b.add_tensor(None, &tr, l2.recorder.budget()).is_err() {
                    let _ = b.add_value(None, Json::Null);
                }
            }
            Item::Copied(None) => {
                let _ = b.add_value(None, Json::Null);
            }
            Item::Dev(dtype, shape, leaf) => {
                if done {
                    let st = devstats::stats_of(&leaf, dtype);
                    let _ = b.add_stats_leaf(None, dtype, &shape, &st);
                } else {
                    let _ = b.add_value(None, Json::Null);
                }
            }
            Item::Pinned(dtype, shape, Some(p)) if done => {
                let es = dtype.size();
                match layout::gather(es, &shape, Some(&p.strides), p.offset, p.bytes()) {
                    Ok(data) => {
                        let tr = TensorRef { dtype, shape: &shape, data: &data, requires_grad: None, type_name: None };
                        if b.add_tensor(None, &tr, l2.recorder.budget()).is_err() {
                            let _ = b.add_value(None, Json::Null);
                        }
                    }
                    Err(_) => {
                        let _ = b.add_value(None, Json::Null);
                    }
                }
            }
            Item::Pinned(dtype, shape, None) => {
                // dropped (pinned memory full): dtype and shape, null statistics, no md5 or file
                let _ = b.add_stats_leaf(None, dtype, &shape, &msprobe_core::stats::Stats::null());
            }
            Item::Pinned(..) => {
                let _ = b.add_value(None, Json::Null);
            }
            Item::Status(rc) => b.set_key("status", Json::Int(rc as i128)),
        }
    }
}

/// [`record_launch`] with statistics on the device: reductions and small async copies enqueued on
/// `stream` around the launch, the record completed by the completion thread when the event
/// recorded after them is done. The launching thread does not wait for the stream.
fn record_launch_device(
    l2: &L2,
    b: RecordBuilder,
    args: Vec<KArg>,
    stream: *mut c_void,
    real: impl FnOnce() -> i32,
    refresh: Option<Refresh>,
    lim: devstats::Limits,
) -> i32 {
    let rec = &l2.recorder;
    let t0 = Instant::now();
    let busy = Busy::enter();
    let mut items = Vec::new();
    let mut launch = devstats::Launch::default();
    let name = b.name.clone();
    let pre = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if b.section_active("input_args") {
            items.push(Item::Section("input_args"));
            plan_side(&mut items, &args, Side::Before, stream, &name, &lim, &mut launch);
        }
        items.push(Item::Section("input_kwargs"));
    }));
    let kernel_start = Instant::now();
    let rc = real();
    let kernel_time = kernel_start.elapsed();
    let post = pre.is_ok()
        && std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if rc == 0 {
                if b.section_active("output") {
                    let args = refreshed(args, refresh, rc);
                    items.push(Item::Section("output"));
                    plan_side(&mut items, &args, Side::After, stream, &name, &lim, &mut launch);
                }
            } else {
                items.push(Item::Status(rc));
            }
        }))
        .is_ok();
    if !post {
        drop(busy);
        INTERNAL_ERRORS.fetch_add(1, Relaxed);
        log::warn!("internal error capturing {name}; the launch ran uncaptured");
        rec.abort(b);
        // Nothing waits for this launch's kernels: keep its slots and buffers (never reused).
        rec.add_capture_nanos(t0.elapsed().saturating_sub(kernel_time));
        activation::after_launch(l2, &name);
        return rc;
    }
    let needs_event = items.iter().any(|i| match i {
        Item::Dev(_, _, leaf) => {
            matches!(
                leaf,
                devstats::DevLeaf::ZeroDim(_) | devstats::DevLeaf::Reduced { .. } | devstats::DevLeaf::Bool(_)
            )
        }
        Item::Pinned(_, _, Some(p)) => p.len > 0,
        _ => false,
    });
    CAPTURED.fetch_add(1, Relaxed);
    if rc != 0 {
        REJECTED.fetch_add(1, Relaxed);
    }
    let event = if needs_event { devstats::record_event(stream) } else { None };
    if needs_event {
        // Durable at the launch: the planned record (statistics null) goes into the journal on
        // this thread; the completion thread's record supersedes it in `recover`.
        let mut pb = b.planned_copy();
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            planned(&mut pb, l2, &items, lim.stats);
            rec.journal_planned(pb);
        }))
        .is_ok()
        {
            devstats::PLANNED.fetch_add(1, Relaxed);
        }
    }
    drop(busy);
    // Every record goes through the completion queue, so records end in launch order.
    let (event, ctx, done) = match (needs_event, event) {
        (true, Some((e, c))) => (e, c, true),
        (true, None) => {
            // No event: the results cannot be known complete. Counted; the leaves are null.
            devstats::EVENT_FAILURES.fetch_add(1, Relaxed);
            (0, 0, false)
        }
        (false, _) => (0, 0, true),
    };
    match activation::l2() {
        Some(arc) => {
            let mut b = b;
            devstats::submit(devstats::Pending {
                event,
                ctx,
                launch,
                finish: Box::new(move |ok| {
                    replay(&mut b, &arc, items, ok && done);
                    arc.recorder.end(b);
                }),
            });
        }
        None => {
            let mut b = b;
            replay(&mut b, l2, items, false);
            rec.end(b);
        }
    }
    rec.add_capture_nanos(t0.elapsed().saturating_sub(kernel_time));
    activation::after_launch(l2, &name);
    rc
}

#[cfg(test)]
mod tests {
    use super::{parse_bytes, parse_switch};

    #[test]
    fn byte_values() {
        assert_eq!(parse_bytes("V", "4096", 7), 4096);
        assert_eq!(parse_bytes("V", " 0 ", 7), 0);
        assert_eq!(parse_bytes("V", "", 7), 7);
        // invalid values keep the default (with one warning)
        assert_eq!(parse_bytes("V", "-1", 7), 7);
        assert_eq!(parse_bytes("V", "1MiB", 7), 7);
    }

    #[test]
    fn switch_values() {
        assert!(parse_switch("V", "1", false));
        assert!(parse_switch("V", " 1 ", false));
        assert!(!parse_switch("V", "0", true));
        assert!(parse_switch("V", "", true));
        assert!(!parse_switch("V", "", false));
        // an invalid value keeps the default (with one warning)
        assert!(parse_switch("V", "yes", true));
        assert!(!parse_switch("V", "yes", false));
    }
}
