//! Records whose tensor statistics a framework is still reducing on the device (issue #21).
//!
//! torch_npu / MindSpore reduce a device tensor with their own device ops into a small result
//! that stays on the device; the layer fetches many of them at once (one non-blocking copy into
//! pinned memory, one wait) and hands the values over with `msprobe_resolve_stats`. Until then
//! the record is held here, and so is every record that ends after it: dump.json keeps the
//! order in which records ended. `msprobe_stop`/`msprobe_step`/`msprobe_finish` first end every
//! held record; a leaf whose values never arrived is written with null statistics and counted.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use msprobe_core::record::{RecordBuilder, TensorRef};
use msprobe_core::recorder::Recorder;
use msprobe_core::stats::{Stat, Stats};

struct Held {
    b: RecordBuilder,
    rec: Arc<Recorder>,
    t0: Instant,
}

#[derive(Default)]
struct State {
    /// Records in the order they ended; the head ends first.
    fifo: VecDeque<Held>,
    /// Values that arrived for slots of records still held.
    values: HashMap<u64, Stats>,
    /// Host copies that arrived for pending-data slots of records not ended yet (a batch
    /// fetched while its record was still open): kept until the record ends.
    data: HashMap<u64, Owned>,
}

/// A host copy of a pending-data leaf's tensor, owned.
struct Owned {
    dtype: msprobe_core::dtype::DType,
    shape: Vec<i64>,
    bytes: Vec<u8>,
    mean_norm: Option<(f64, f64)>,
}

static STATE: std::sync::LazyLock<Mutex<State>> = std::sync::LazyLock::new(Mutex::default);
/// Records held (the FIFO's length, kept outside the lock): 0 lets `end` skip the lock.
static HELD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Leaves completed from device statistics.
pub static RESOLVED: AtomicU64 = AtomicU64::new(0);
/// Leaves completed from a framework's non-blocking host copy (msprobe_resolve_tensor).
pub static COPIED: AtomicU64 = AtomicU64::new(0);
/// Leaves written with null statistics because their values never arrived.
pub static UNRESOLVED: AtomicU64 = AtomicU64::new(0);
/// Leaves with NaN/Inf whose `*_except_inf_nan` keys are null (not reduced on the device).
pub static NO_EXCEPT: AtomicU64 = AtomicU64::new(0);
/// Leaves of only NaN and ±inf with a NaN, whose `*_except_inf_nan` keys are written as NaN.
pub static AMBIGUOUS: AtomicU64 = AtomicU64::new(0);

fn lock() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ends `b` now, or holds it when it (or a record before it) still waits for device values.
pub(crate) fn end(b: RecordBuilder, rec: Arc<Recorder>, t0: Instant) {
    // Records of threads that end concurrently have no order between them: one that sees
    // nothing held ends at once, without the lock (the CPU-only sessions never take it).
    if b.pending == 0 && HELD.load(Relaxed) == 0 {
        rec.end(b);
        rec.add_capture_time(t0);
        return;
    }
    let mut st = lock();
    if b.pending == 0 && st.fifo.is_empty() {
        drop(st);
        rec.end(b);
        rec.add_capture_time(t0);
        return;
    }
    // Durable now: a kill before the values arrive must not lose the record. Its planned form
    // (pending statistics null) goes into the journal; `msprobe recover` writes it, counted as
    // uncertain, only if the record itself never ends.
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut pb = b.planned_copy();
        pb.fill_pending(&mut |_| Some(Stats::null()));
        pb.null_pending_data();
        rec.journal_planned(pb);
    }))
    .is_err()
    {
        log::warn!("a held record could not be journaled in planned form (a kill before its device statistics arrive loses it)");
    }
    st.fifo.push_back(Held { b, rec, t0 });
    HELD.store(st.fifo.len(), Relaxed);
    drain(&mut st, false);
}

/// Values for slots `first .. first + n`, `width` per slot: 4 (Max, Min, Mean, Norm, as the
/// device computed them, NaN/Inf included) or 6 (then also the largest and the smallest finite
/// value, see [`stats_of`]); ends the held records that are now complete.
pub(crate) fn resolve(first: u64, values: &[f64], width: usize) {
    // MindSpore dumps have no `*_except_inf_nan` keys (1.1.1's MindSpore processor): nothing to
    // derive for them, and nothing to count as missing or uncertain.
    let except =
        crate::session::recorder().is_none_or(|r| r.config().dialect != msprobe_core::dtype::Dialect::MindSpore);
    let mut st = lock();
    for (i, v) in values.chunks_exact(width).enumerate() {
        st.values.insert(first + i as u64, stats_of(v, except));
    }
    drain(&mut st, false);
}

/// The host copy `t` of pending-data slot `slot` (msprobe_resolve_tensor): completes its leaf
/// (statistics, CRC, file) and ends the held records that are now complete. A slot whose
/// record has not ended yet keeps an owned copy of the data until it does.
pub(crate) fn resolve_data(slot: u64, t: &TensorRef, mean_norm: Option<(f64, f64)>) -> Result<(), String> {
    let mut st = lock();
    let mut found = false;
    for h in st.fifo.iter_mut() {
        if h.b.fill_pending_data(slot, t, mean_norm, h.rec.budget()).map_err(|e| e.to_string())? {
            COPIED.fetch_add(1, Relaxed);
            found = true;
            break;
        }
    }
    if found {
        drain(&mut st, false);
    } else {
        let o = Owned { dtype: t.dtype, shape: t.shape.to_vec(), bytes: t.data.to_vec(), mean_norm };
        st.data.insert(slot, o);
    }
    Ok(())
}

/// Completes `b`'s pending-data leaves whose host copies arrived before it ended.
fn fill_data(b: &mut RecordBuilder, rec: &Recorder, data: &mut HashMap<u64, Owned>) -> u32 {
    let mut n = 0;
    if data.is_empty() {
        return 0;
    }
    for slot in b.pending_data_slots() {
        let Some(o) = data.remove(&slot) else { continue };
        let t = TensorRef { dtype: o.dtype, shape: &o.shape, data: &o.bytes, requires_grad: None, type_name: None };
        match b.fill_pending_data(slot, &t, o.mean_norm, rec.budget()) {
            Ok(true) => n += 1,
            Ok(false) => {}
            Err(e) => log::warn!("a tensor copied to the host does not match its leaf ({e}); written as null"),
        }
    }
    n
}

/// Ends every held record (stop, step, finish): missing values become nulls, counted.
pub(crate) fn flush() {
    let mut st = lock();
    drain(&mut st, true);
    st.values.clear();
    st.data.clear();
}

/// [`flush`] at exit or on a signal: skipped if another thread holds the lock (never waits).
pub(crate) fn flush_at_exit() {
    if let Ok(mut st) = STATE.try_lock() {
        drain(&mut st, true);
    }
}

fn drain(st: &mut State, force: bool) {
    while let Some(h) = st.fifo.front_mut() {
        if h.b.pending > 0 {
            COPIED.fetch_add(u64::from(fill_data(&mut h.b, &h.rec, &mut st.data)), Relaxed);
            let before = h.b.pending;
            let values = &mut st.values;
            let left = h.b.fill_pending(&mut |slot| values.remove(&slot));
            RESOLVED.fetch_add(u64::from(before - left), Relaxed);
            if left > 0 {
                if !force {
                    return;
                }
                h.b.fill_pending(&mut |_| Some(Stats::null()));
                h.b.null_pending_data();
                if UNRESOLVED.fetch_add(u64::from(left), Relaxed) == 0 {
                    log::warn!("device statistics or host copies of {left} tensor(s) never arrived: written as null (counted in the run summary)");
                }
            }
        }
        let Some(h) = st.fifo.pop_front() else { break };
        HELD.store(st.fifo.len(), Relaxed);
        h.rec.end(h.b);
        h.rec.add_capture_time(h.t0);
    }
}

/// msprobe's statistics from the device's float values: NaN/Inf are kept (as 1.1.1 writes
/// them). 1.1.1 adds `Max_except_inf_nan` (`Min_...`) only when Max (Min) is NaN/Inf: the
/// largest (smallest) finite value; NaN when every element is NaN; else (only ±inf and NaN) the
/// largest (smallest) non-NaN one. From 4 values (no data for them) those keys are null, counted.
/// From 6, `v[4]`/`v[5]` are the largest/smallest of the tensor with NaN/±inf replaced by
/// −inf/+inf (NaN for a 0-d NaN): exact, except for a tensor of only NaN and ±inf with a NaN,
/// which the six values cannot tell from an all-NaN one: NaN then, counted. `except` false (a
/// MindSpore dump): no such keys.
fn stats_of(v: &[f64], except: bool) -> Stats {
    let f = Stat::Float;
    let (max, min) = (v[0], v[1]);
    let need = (except && !max.is_finite(), except && !min.is_finite());
    let (mx, mn) = if !(need.0 || need.1) {
        (None, None)
    } else if v.len() >= 6 {
        let (fmax, fmin) = (v[4], v[5]);
        let (emax, emin) = if fmax.is_finite() {
            (fmax, fmin) // some finite element
        } else if fmax.is_nan() || !max.is_nan() {
            (max, min) // a 0-d tensor (its value), or no NaN: only ±inf, whose extremes Max/Min are
        } else {
            if AMBIGUOUS.fetch_add(1, Relaxed) == 0 {
                log::warn!("a device tensor holds only NaN and ±inf with a NaN: its *_except_inf_nan are written as NaN (counted in the run summary)");
            }
            (f64::NAN, f64::NAN)
        };
        (need.0.then_some(f(emax)), need.1.then_some(f(emin)))
    } else {
        if NO_EXCEPT.fetch_add(1, Relaxed) == 0 {
            log::warn!("a device tensor holds NaN/Inf: its Max/Min_except_inf_nan are null (device statistics; counted in the run summary)");
        }
        (need.0.then_some(Stat::Null), need.1.then_some(Stat::Null))
    };
    Stats { max: f(max), min: f(min), mean: f(v[2]), norm: f(v[3]), max_except_inf_nan: mx, min_except_inf_nan: mn }
}

/// The run summary's lines, when device statistics or non-blocking host copies were used.
pub(crate) fn summary_line() -> Option<String> {
    let (r, u, n) = (RESOLVED.load(Relaxed), UNRESOLVED.load(Relaxed), NO_EXCEPT.load(Relaxed));
    let (a, c) = (AMBIGUOUS.load(Relaxed), COPIED.load(Relaxed));
    let mut lines = Vec::new();
    if r + u + n + a > 0 {
        lines.push(format!(
            "  device statistics: {r} tensors; never arrived (null): {u}; NaN/Inf without *_except_inf_nan: {n}; \
             only NaN/±inf, *_except_inf_nan written as NaN: {a}"
        ));
    }
    if c > 0 {
        lines.push(format!("  device tensors copied to the host without blocking: {c}"));
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}
