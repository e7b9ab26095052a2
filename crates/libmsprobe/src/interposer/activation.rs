//! Activation (is capture on?), step boundaries, and the run summary.
//!
//! `WRAP` is decided in the library constructor from the environment alone (no allocation):
//! wrappers are handed out only when `MSPROBE_LEVEL=L2` or a config file is named. The full
//! configuration is loaded at the first wrapper call ([`activate`]); until then and whenever
//! capture is off, a wrapper costs one relaxed atomic load before the real call.
//!
//! Capture that a value turns off is never silent: a config whose level is not L2 says so at
//! activation, and an `MSPROBE_LEVEL` other than `L2` (`L1`, `x`, `l2`) says so at the first
//! CANN name the client looks up ([`lookup_while_off`]), so a preloaded process that never
//! touches CANN (a shell, a compiler) prints nothing.

use super::ops;
use crate::session;
use msprobe_core::config::{self, Level};
use msprobe_core::recorder::Recorder;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};

pub const UNKNOWN: u8 = 0;
pub const ACTIVATING: u8 = 1;
pub const OFF: u8 = 2;
pub const ON: u8 = 3;
/// A forked child: off for good, state leaked.
pub const DEAD: u8 = 4;

pub static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static WRAP: AtomicBool = AtomicBool::new(false);
/// `MSPROBE_LEVEL` is set to something other than `L2`: say why capture is off, once.
static REPORT_OFF: AtomicBool = AtomicBool::new(false);

/// Set by [`enable_from_api`] (`PrecisionDebugger(level="L2")`): the capture window is opened and
/// closed by the API's start()/stop(), so activation leaves the recorder as the API set it.
static API_DRIVEN: AtomicBool = AtomicBool::new(false);

/// Ops filtered out by the configured list (set at activation; checked on the hot path).
pub static OP_OFF: [AtomicBool; ops::N_OPS] = [const { AtomicBool::new(false) }; ops::N_OPS];

/// Whether the dlsym hook hands out wrappers at all.
#[inline]
pub fn wrapping() -> bool {
    WRAP.load(Relaxed)
}

/// The hot-path check of every wrapper: capture on (activating it on first use).
#[inline]
pub fn capturing() -> bool {
    match STATE.load(Relaxed) {
        ON => true,
        UNKNOWN => activate_slow(),
        _ => false,
    }
}

/// Capture is off for good or for now (nothing to do but the real call); false while activation
/// is pending. One relaxed load, for the exports' idle path.
#[inline]
pub fn idle() -> bool {
    matches!(STATE.load(Relaxed), OFF | DEAD)
}

/// Capture is on (already activated). One relaxed load.
#[inline]
pub fn on() -> bool {
    STATE.load(Relaxed) == ON
}

/// `capturing()` and the op not filtered out.
#[inline]
pub fn op_capturing(k: usize) -> bool {
    capturing() && !OP_OFF[k].load(Relaxed)
}

/// Library constructor: decide whether to wrap, from the environment only.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    crate::hook::resolve();
    // SAFETY: getenv with static NUL-terminated names; the constructor runs before any thread of
    // ours exists and we only read the pointers.
    let level = unsafe { libc::getenv(c"MSPROBE_LEVEL".as_ptr()) };
    // SAFETY: as above.
    let cfg = unsafe { libc::getenv(c"MSPROBE_CONFIG".as_ptr()) };
    // SAFETY: getenv returned NULL or a NUL-terminated string owned by the environment.
    let cfg_named = !cfg.is_null() && unsafe { *cfg } != 0;
    // Surrounding blanks are ignored and an empty value counts as unset, as in the configuration.
    let level: &[u8] = if level.is_null() {
        b""
    } else {
        // SAFETY: getenv returned a NUL-terminated string owned by the environment.
        unsafe { std::ffi::CStr::from_ptr(level) }.to_bytes().trim_ascii()
    };
    let l2 = level == b"L2";
    if !level.is_empty() && !l2 {
        REPORT_OFF.store(true, Relaxed);
    }
    // With only a config file named, the level is known after parsing it: wrap, decide later.
    if l2 || (level.is_empty() && cfg_named) {
        WRAP.store(true, Relaxed);
        // SAFETY: registering a plain extern "C" handler that only stores atomics; registered here
        // (not at activation) so a child forked before the first launch is covered too.
        unsafe {
            libc::pthread_atfork(None, None, Some(in_child));
        }
    } else {
        // Nothing is wrapped: the linked entry points (our exports) call the real function after
        // one relaxed load, and never load a configuration.
        STATE.store(OFF, Relaxed);
    }
}

/// `msprobe_l2_enable`: the process's API (the Python layers' `PrecisionDebugger(level="L2")`,
/// after `msprobe_init` made an L2 recorder) turns kernel capture on although the environment did
/// not ask for it at load time. Lookups from now on get wrappers, and the linked entry points
/// activate at their next call, with the API's recorder; launches before this call stay
/// uncaptured (a framework that looked a function up earlier keeps the real pointer). Capture
/// then records only while the API has the window open (start() .. stop()).
pub fn enable_from_api() {
    API_DRIVEN.store(true, Relaxed);
    if !WRAP.swap(true, Relaxed) {
        // SAFETY: as in `init`: a plain extern "C" handler that only stores atomics.
        unsafe {
            libc::pthread_atfork(None, None, Some(in_child));
        }
        // MSPROBE_LEVEL said something else; the API's explicit level wins, as in the config.
        REPORT_OFF.store(false, Relaxed);
        // `init` decided OFF for lack of an L2 request: activate at the next wrapper call.
        let _ = STATE.compare_exchange(OFF, UNKNOWN, AcqRel, Relaxed);
    }
}

/// The dlsym hook's call for a lookup while nothing is wrapped: one relaxed load, unless
/// `MSPROBE_LEVEL` turned capture off and this is the first CANN name looked up, which logs the
/// one line that says why. `name` is read only then (allocators look up other names).
#[inline]
pub fn lookup_while_off<'a>(name: impl FnOnce() -> &'a [u8]) {
    if REPORT_OFF.load(Relaxed) {
        let name = name();
        let cann =
            name.starts_with(b"Hccl") || (name.starts_with(b"acl") && name.get(3).is_some_and(u8::is_ascii_alphabetic));
        if cann && REPORT_OFF.swap(false, Relaxed) {
            report_off();
        }
    }
}

/// Why L2 capture is off, for a level that is not L2.
fn not_l2(cfg: &config::Config) -> String {
    let from = match &cfg.level_source {
        Some(s) => format!("from {s}"),
        None => "the default: neither MSPROBE_LEVEL nor a config file sets one".into(),
    };
    format!(
        "libmsprobe.so is preloaded but the level is {} ({from}); kernel capture runs only at level L2 (MSPROBE_LEVEL=L2). Capture is off; the job runs uncaptured.",
        cfg.level.as_str()
    )
}

#[cold]
#[inline(never)]
fn report_off() {
    let _ = std::panic::catch_unwind(|| {
        msprobe_core::logging::init();
        let env = |k: &str| std::env::var(k).ok();
        match config::load(&env, None) {
            // MSPROBE_LEVEL (which beats the file) is valid but not L2.
            Ok(cfg) => log::warn!("{}", not_l2(&cfg)),
            // MSPROBE_LEVEL=x, l2, ... (or another invalid input): the error line names it.
            Err(e) => log::error!("L2 kernel capture: {e}"),
        }
    });
}

#[cold]
#[inline(never)]
fn activate_slow() -> bool {
    if STATE.compare_exchange(UNKNOWN, ACTIVATING, AcqRel, Relaxed).is_err() {
        return STATE.load(Relaxed) == ON;
    }
    let on = std::panic::catch_unwind(activate).unwrap_or_else(|_| {
        log::warn!("internal error while starting L2 capture; the job runs uncaptured");
        false
    });
    STATE.store(if on { ON } else { OFF }, Release);
    on
}

/// L2 settings the hot paths need without locking the recorder.
pub(crate) struct L2 {
    pub recorder: Arc<Recorder>,
    step_end_op: Option<String>,
    step_end_count: u64,
    step_launches: Option<u64>,
    pid: u32,
}

static L2_STATE: Mutex<Option<Arc<L2>>> = Mutex::new(None);
static LAUNCHES: AtomicU64 = AtomicU64::new(0);
static STEP_OP_HITS: AtomicU64 = AtomicU64::new(0);
pub static UNBOUND_LAUNCHES: AtomicU64 = AtomicU64::new(0);
pub static COPY_FAILURES: AtomicU64 = AtomicU64::new(0);
pub static CAPTURED: AtomicU64 = AtomicU64::new(0);
/// Launches seen while capture was on, by the path they came in through (index: [`Path`]).
static SEEN: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
/// Captured launches the library rejected (non-zero status): recorded with their status.
pub static REJECTED: AtomicU64 = AtomicU64::new(0);
/// Launches passed through because the recorder filters them out (`scope`, `list`, `step`).
pub static FILTERED: AtomicU64 = AtomicU64::new(0);
/// Launches of aclnn ops the `list` filter rules out, by path (counted before anything else is
/// done: one relaxed add, no thread-local access).
pub static PREFILTERED: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
/// Launches made while this thread was capturing another launch (library-internal calls,
/// callbacks): passed through, never recorded inside the outer record.
pub static NESTED: AtomicU64 = AtomicU64::new(0);
/// Launches that ran uncaptured after an internal error of the capture.
pub static INTERNAL_ERRORS: AtomicU64 = AtomicU64::new(0);

/// How a launch reached its wrapper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// A function pointer the client looked up with `dlsym` (our wrapper handed out).
    Dlsym,
    /// A call to the name itself, linked by the client (our export, LD_PRELOAD interposition).
    Linked,
}

thread_local! {
    /// Set while a wrapper runs for one of our exported (linked) entry points. Const-initialised
    /// with no destructor: never allocates.
    static VIA_LINK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` (a wrapper) for a call that came in through an exported name; the previous path is
/// restored afterwards, also on unwinding.
pub(crate) fn linked<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            VIA_LINK.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(VIA_LINK.with(|c| c.replace(true)));
    f()
}

/// The path of the launch this thread is making.
pub(crate) fn path() -> Path {
    if VIA_LINK.with(|c| c.get()) {
        Path::Linked
    } else {
        Path::Dlsym
    }
}

fn seen(p: Path) -> u64 {
    SEEN[p as usize].load(Relaxed) + PREFILTERED[p as usize].load(Relaxed)
}

/// Counts a launch seen while capture is on (called once per launch, off the idle path).
pub(crate) fn note_seen() {
    SEEN[path() as usize].fetch_add(1, Relaxed);
}
/// Launches whose stream could not be synchronised before (index 0) / after (1) the kernel.
static SYNC_FAILURES: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
/// Tensors recorded as null because their stream could not be synchronised.
pub static NOT_SYNCED_TENSORS: AtomicU64 = AtomicU64::new(0);

/// Launches of operators whose output shape their kernel decides, recorded at the launch-time shape
/// (an aclop V1 entry, or the real shape could not be read).
pub static SHAPE_BY_KERNEL: AtomicU64 = AtomicU64::new(0);

/// aclnn launches whose outputs were re-read after a stream sync at the shape their kernel set.
pub static RESHAPED: AtomicU64 = AtomicU64::new(0);

/// Counts a launch of `op` (`aclnnNonzero`, `aclop NonZero`), whose output shape its kernel decides; the first one is logged.
pub(crate) fn note_shape_by_kernel(op: &str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    SHAPE_BY_KERNEL.fetch_add(1, Relaxed);
    ONCE.call_once(|| {
        log::warn!(
            "{op} decides its output shape in its kernel and L2 could not read the real shape: it records the \
             outputs at the launch-time (largest) shape, whose rows past the real count are not the op's result \
             (counted in the run summary)"
        )
    });
}

/// Which side of a launch the tool's copies are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// Inputs, copied before the kernel.
    Before,
    /// Outputs, copied after it.
    After,
}

/// Counts a stream synchronisation that failed around `record`'s launch (its tensors on that side
/// are recorded as null); the first one is logged as a warning.
pub(crate) fn note_sync_failure(side: Side, record: &str, e: impl std::fmt::Display) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    SYNC_FAILURES[side as usize].fetch_add(1, Relaxed);
    let when = if side == Side::Before { "before" } else { "after" };
    ONCE.call_once(|| {
        log::warn!(
            "aclrtSynchronizeStream {when} the launch of {record} failed ({e}); tensors that may not be ready are \
             recorded as null, not copied, and counted in the run summary"
        )
    });
}

pub(crate) fn l2() -> Option<Arc<L2>> {
    L2_STATE.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

fn activate() -> bool {
    msprobe_core::logging::init();
    let env = |k: &str| std::env::var(k).ok();
    // The API's recorder (msprobe_l2_enable) carries the configuration its arguments made.
    let api_cfg = session::recorder().filter(|_| API_DRIVEN.load(Relaxed)).map(|r| r.config().clone());
    let cfg = match api_cfg.map_or_else(|| config::load(&env, None), Ok) {
        Ok(c) => c,
        Err(e) => {
            log::error!("{e}");
            return false;
        }
    };
    if cfg.level != Level::L2 {
        log::warn!("{}", not_l2(&cfg));
        return false;
    }
    if session::recorder().is_none() {
        session::install(session::new_recorder(cfg.clone()));
    }
    let Some(rec) = session::recorder() else { return false };
    if rec.config().level != Level::L2 {
        log::warn!("a recorder with level {} exists already; kernel capture stays off", rec.config().level.as_str());
        return false;
    }
    let ranks: Vec<(&str, String)> = ["RANK_ID", "RANK"].into_iter().filter_map(|k| env(k).map(|v| (k, v))).collect();
    if let Some(r) = ranks.iter().find_map(|(_, v)| v.trim().parse::<u64>().ok()) {
        rec.set_rank(r);
    } else if let Some((var, v)) = ranks.first() {
        log::warn!(
            "environment variable {var} has value {:?}, not a rank number: it is ignored (the rank comes from HCCL if the job initialises it)",
            config::clip_text(v)
        );
    }
    // Op-level filter: an op none of whose records can match the list is skipped at the fast
    // path. Launch-count step boundaries need every launch, so they disable it.
    if !cfg.list.is_empty() && cfg.step_launches.is_none() {
        for (k, info) in ops::OPS.iter().enumerate() {
            let could = cfg.list.iter().any(|it| list_item_can_match(it, info.op))
                || cfg.step_end_op.as_deref().is_some_and(|s| list_item_can_match(s, info.op));
            OP_OFF[k].store(!could, Relaxed);
        }
    }
    if !API_DRIVEN.load(Relaxed) {
        rec.auto_start();
    }
    let l2 = L2 {
        recorder: rec.clone(),
        step_end_op: cfg.step_end_op.clone(),
        step_end_count: cfg.step_end_count,
        step_launches: cfg.step_launches,
        pid: std::process::id(),
    };
    *L2_STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(l2));
    crate::signals::at_exit(at_exit);
    // SIGTERM/SIGINT finish the files and print the L2 summary, then end the process.
    crate::signals::install(at_exit);
    log::info!(
        "L2 capture on: task {}, dump path {}, {} aclnn ops with wrappers",
        cfg.task.as_str(),
        cfg.dump_path.display(),
        ops::N_OPS
    );
    true
}

/// Whether `item` is a substring of some `Aclnn.{op}.{n}.forward`: tried with each run of digits
/// in the item as `n` (and with `0` for items without digits).
pub(crate) fn list_item_can_match(item: &str, op: &str) -> bool {
    let mut runs: Vec<&str> = item.split(|c: char| !c.is_ascii_digit()).filter(|r| !r.is_empty()).collect();
    runs.push("0");
    runs.iter().any(|n| format!("Aclnn.{op}.{n}.forward").contains(item))
}

extern "C" fn in_child() {
    // The child has none of our threads; touching the writer could deadlock. Leak and stop.
    STATE.store(DEAD, Relaxed);
    session::forked_child();
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Some(l2) = l2() else { return };
        if l2.pid != std::process::id() || STATE.load(Relaxed) == DEAD {
            return;
        }
        STATE.store(OFF, Relaxed);
        super::devstats::drain(std::time::Duration::from_secs(60));
        if let Some(s) = l2.recorder.finish() {
            log::info!(
                concat!(
                    "L2 run summary:\n",
                    "  launches seen: {} (through dlsym: {}, linked: {})\n",
                    "  launches captured: {}\n",
                    "  launches rejected by the library (recorded with their status): {}\n",
                    "  launches passed through, filtered out: {}\n",
                    "  launches passed through, nested in a captured launch: {}\n",
                    "  launches passed through after an internal error: {}\n",
                    "  ops passed through uncaptured: {}\n",
                    "  launches without phase-1 binding (not captured): {}\n",
                    "  stream syncs failed: {} before launches, {} after launches\n",
                    "  tensors not copied, stream not synchronised (recorded as null): {}\n",
                    "  device copies failed (recorded as null): {}\n",
                    "  launches whose kernel decides the output shape (outputs recorded at the launch-time, largest shape): {}\n",
                    "  launches whose outputs were re-read at the shape their kernel set (one stream sync each on the launching thread): {}\n",
                    "  device statistics: {} tensors reduced on the device ({} tool kernels), {} by the copy path, {} dropped (no free result slot, recorded as null), {} with uncertain *_except_inf_nan (written as NaN), {} launches whose event failed (recorded as null), {} records journaled in planned form at the launch, device scratch peak {} bytes; async copies: {} tensors copied asynchronously, {} dropped (pinned memory full, recorded without statistics/md5/file), pinned peak {} bytes of {} allowed, {} pinned allocations ({} copies into a reused buffer)\n{}"
                ),
                seen(Path::Dlsym) + seen(Path::Linked),
                seen(Path::Dlsym),
                seen(Path::Linked),
                CAPTURED.load(Relaxed),
                REJECTED.load(Relaxed),
                FILTERED.load(Relaxed) + PREFILTERED.iter().map(|c| c.load(Relaxed)).sum::<u64>(),
                NESTED.load(Relaxed),
                INTERNAL_ERRORS.load(Relaxed),
                uncaptured_names(),
                UNBOUND_LAUNCHES.load(Relaxed),
                SYNC_FAILURES[Side::Before as usize].load(Relaxed),
                SYNC_FAILURES[Side::After as usize].load(Relaxed),
                NOT_SYNCED_TENSORS.load(Relaxed),
                COPY_FAILURES.load(Relaxed),
                SHAPE_BY_KERNEL.load(Relaxed),
                RESHAPED.load(Relaxed),
                super::devstats::DEVICE_TENSORS.load(Relaxed),
                super::devstats::KERNELS.load(Relaxed),
                super::devstats::FALLBACKS.load(Relaxed),
                super::devstats::DROPPED.load(Relaxed),
                super::devstats::UNCERTAIN.load(Relaxed),
                super::devstats::EVENT_FAILURES.load(Relaxed),
                super::devstats::PLANNED.load(Relaxed),
                super::devstats::SCRATCH_PEAK.load(Relaxed),
                super::devstats::ASYNC_COPIES.load(Relaxed),
                super::devstats::COPIES_DROPPED.load(Relaxed),
                super::devstats::PINNED_PEAK.load(Relaxed),
                l2.recorder.config().queue_bytes,
                super::devstats::PINNED_ALLOCS.load(Relaxed),
                super::devstats::PINNED_REUSED.load(Relaxed),
                s,
            );
        }
    });
}

/// Step accounting after each captured launch: `step_launches` or the `step_end_op` rule.
pub(crate) fn after_launch(l2: &L2, record_name: &str) {
    let n = LAUNCHES.fetch_add(1, Relaxed) + 1;
    let mut end = matches!(l2.step_launches, Some(every) if n.is_multiple_of(every));
    if let Some(op) = &l2.step_end_op {
        if record_name.contains(op.as_str()) {
            let hits = STEP_OP_HITS.fetch_add(1, Relaxed) + 1;
            end |= hits.is_multiple_of(l2.step_end_count);
        }
    }
    if end {
        // Records still waiting for their device statistics belong to the step ending now.
        super::devstats::drain(std::time::Duration::from_secs(60));
        l2.recorder.step();
        if l2.recorder.finished_steps() {
            // Past the last configured step: nothing more is recorded, so wrappers go idle.
            STATE.store(OFF, Relaxed);
            log::info!("the last configured step is done; kernel capture is now off");
        }
    }
}

// ---- names seen but not wrapped (fixed storage: the dlsym hook must not allocate) ----

const MAX_UNCAPTURED: usize = 64;
const NAME_LEN: usize = 64;
static UNCAPTURED_N: AtomicUsize = AtomicUsize::new(0);
static UNCAPTURED: [[AtomicU8; NAME_LEN]; MAX_UNCAPTURED] =
    [const { [const { AtomicU8::new(0) }; NAME_LEN] }; MAX_UNCAPTURED];

pub(crate) fn note_uncaptured(name: &[u8]) {
    let n = UNCAPTURED_N.load(Relaxed).min(MAX_UNCAPTURED);
    for slot in &UNCAPTURED[..n] {
        if slot.iter().zip(name.iter().chain(std::iter::once(&0))).all(|(a, b)| a.load(Relaxed) == *b) {
            return;
        }
    }
    let i = UNCAPTURED_N.fetch_add(1, Relaxed);
    if i < MAX_UNCAPTURED {
        for (j, b) in name.iter().take(NAME_LEN - 1).enumerate() {
            UNCAPTURED[i][j].store(*b, Relaxed);
        }
    }
}

fn uncaptured_names() -> String {
    let n = UNCAPTURED_N.load(Relaxed).min(MAX_UNCAPTURED);
    if n == 0 {
        return "none".into();
    }
    let names: Vec<String> = UNCAPTURED[..n]
        .iter()
        .map(|s| s.iter().map(|b| b.load(Relaxed)).take_while(|b| *b != 0).map(char::from).collect())
        .collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn list_prefilter_keeps_every_op_a_list_item_can_match() {
        use super::list_item_can_match as m;
        assert!(m("Mm.0.", "Mm"));
        assert!(m("Aclnn.Mm.", "Mm"));
        assert!(m("Mm", "Mm"));
        assert!(m("m.12.for", "Mm"));
        assert!(m("forward", "Mm"));
        assert!(!m("Relu", "Mm"));
        assert!(!m("Aclnn.Mm.x", "Mm"));
    }
}
