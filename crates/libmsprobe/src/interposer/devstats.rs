//! L2 statistics on the device (issue #21): for the statistics task and summary mode, each
//! captured device tensor is reduced by the real aclnn kernels on the launch's own stream (inputs
//! before the launch, outputs after it), the few result bytes travel with `aclrtMemcpyAsync` into
//! pinned host memory, and an event recorded after the copies completes the record on the
//! completion thread. The launching thread never synchronises a stream (but for the outputs of a
//! kernel that decides their shape: `capture::kernel_shaped_outputs`).
//!
//! Per tensor (f32/f16/bf16; integers and f64 first cast to f32 with aclnnCast, msprobe 1.1.1's
//! `get_stat_info` rule): aclnnAminmaxAll (Max and Min in one kernel), aclnnMean and aclnnNorm
//! (p = 2) into 0-d result slots of the reduction dtype, plus, for float tensors, the
//! `*_except_inf_nan` inputs: two aclnnNanToNum (NaN/±inf → -inf, → +inf) into the rows of one
//! [2, n] scratch and one aclnnAminmax over its dim 1, i.e. the largest / smallest finite value —
//! 6 tool kernels per float tensor (8 before: separate Max/Min and a Max/Min per except pass).
//! msprobe 1.1.1 writes the except keys only when Max or Min is not finite, but the device cannot
//! branch on a result without a sync and the tensor may be overwritten by then, so their inputs
//! are reduced for every float tensor. 32 bytes per tensor cross the host link. Empty tensors need no kernel (all null) and 0-d tensors
//! copy their one element. Bool tensors give any/all as Max/Min of their float32 cast. Complex
//! tensors, and any tensor a kernel or allocation fails
//! for, fall back to the copy path (synchronised, counted in the run summary).
//!
//! Every function is called through its real address ([`Slot`]), never through our wrappers, and
//! under the capture's re-entrancy guard, so none of these launches is captured.
//!
//! Bounds: result slots form a ring of [`SLOTS`] entries (device and pinned host memory, allocated
//! once). When all are in flight, `on_queue_full = block` waits for one (at most [`BLOCK_WAIT`],
//! then the tensor falls back to the copy path) and `drop` records the tensor's statistics as null;
//! both are counted.

use super::meta::TensorMeta;
use super::pinned::{Pool, Take, ROUND};
use crate::hook::Slot;
use msprobe_core::config::OnFull;
use msprobe_core::dtype::DType;
use msprobe_core::stats::{Stat, Stats};
use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Result slots in flight at most (each 32 bytes of device and of pinned host memory).
pub(crate) const SLOTS: usize = 4096;
const SLOT_BYTES: usize = 32;
/// Result bytes per reduced tensor that cross the host link (eight 4-byte positions: max, min,
/// mean, norm, the two row minima and the two row maxima of the except-key pass).
const RESULT_BYTES: usize = 32;
/// Longest wait for a free slot in block mode.
const BLOCK_WAIT: Duration = Duration::from_secs(10);
/// Longest wait for one launch's event on the completion thread.
const EVENT_WAIT: Duration = Duration::from_secs(120);

/// Tensors whose statistics were computed on the device.
pub static DEVICE_TENSORS: AtomicU64 = AtomicU64::new(0);
/// Tensors that fell back to the copy path (dtype, layout, a failed kernel or allocation, no slot).
pub static FALLBACKS: AtomicU64 = AtomicU64::new(0);
/// Tensors recorded with null statistics because no slot was free (`drop`).
pub static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Tensors holding only NaN and ±inf with a NaN: their `*_except_inf_nan` keys are written as NaN
/// (the device results cannot tell which infinities are present).
pub static UNCERTAIN: AtomicU64 = AtomicU64::new(0);
/// Records journaled in their planned form at the launch (statistics null until completion).
pub static PLANNED: AtomicU64 = AtomicU64::new(0);
/// The tool's own kernel launches (reductions) and async copies.
pub static KERNELS: AtomicU64 = AtomicU64::new(0);
/// Launches whose event did not complete in time (their tensors recorded as null).
pub static EVENT_FAILURES: AtomicU64 = AtomicU64::new(0);
/// Records waiting for their event.
static PENDING: AtomicUsize = AtomicUsize::new(0);

macro_rules! slots {
    ($($id:ident = $name:literal;)*) => { $(static $id: Slot = Slot::new($name);)* };
}
slots! {
    MALLOC = c"aclrtMalloc";
    FREE = c"aclrtFree";
    MALLOC_HOST = c"aclrtMallocHost";
    FREE_HOST = c"aclrtFreeHost";
    MEMCPY_ASYNC = c"aclrtMemcpyAsync";
    CREATE_EVENT = c"aclrtCreateEvent";
    DESTROY_EVENT = c"aclrtDestroyEvent";
    RECORD_EVENT = c"aclrtRecordEvent";
    QUERY_EVENT = c"aclrtQueryEventStatus";
    GET_CTX = c"aclrtGetCurrentContext";
    SET_CTX = c"aclrtSetCurrentContext";
    CREATE_TENSOR = c"aclCreateTensor";
    DESTROY_TENSOR = c"aclDestroyTensor";
    CREATE_SCALAR = c"aclCreateScalar";
    DESTROY_SCALAR = c"aclDestroyScalar";
    CREATE_INT_ARRAY = c"aclCreateIntArray";
    DESTROY_INT_ARRAY = c"aclDestroyIntArray";
    AMM_ALL_WS = c"aclnnAminmaxAllGetWorkspaceSize";
    AMM_ALL = c"aclnnAminmaxAll";
    AMM_WS = c"aclnnAminmaxGetWorkspaceSize";
    AMM = c"aclnnAminmax";
    MEAN_WS = c"aclnnMeanGetWorkspaceSize";
    MEAN = c"aclnnMean";
    NORM_WS = c"aclnnNormGetWorkspaceSize";
    NORM = c"aclnnNorm";
    CAST_WS = c"aclnnCastGetWorkspaceSize";
    CAST = c"aclnnCast";
    N2N_WS = c"aclnnNanToNumGetWorkspaceSize";
    N2N = c"aclnnNanToNum";
}

static ALL: [&Slot; 29] = [
    &FREE_HOST,
    &MALLOC,
    &FREE,
    &MALLOC_HOST,
    &MEMCPY_ASYNC,
    &CREATE_EVENT,
    &DESTROY_EVENT,
    &RECORD_EVENT,
    &QUERY_EVENT,
    &GET_CTX,
    &SET_CTX,
    &CREATE_TENSOR,
    &DESTROY_TENSOR,
    &CREATE_SCALAR,
    &DESTROY_SCALAR,
    &CREATE_INT_ARRAY,
    &DESTROY_INT_ARRAY,
    &AMM_ALL_WS,
    &AMM_ALL,
    &AMM_WS,
    &AMM,
    &MEAN_WS,
    &MEAN,
    &NORM_WS,
    &NORM,
    &CAST_WS,
    &CAST,
    &N2N_WS,
    &N2N,
];

const ACL_MEMCPY_DEVICE_TO_HOST: c_int = cann_abi::memcpy::ACL_MEMCPY_DEVICE_TO_HOST;
/// `ACL_EVENT_RECORDED_STATUS_COMPLETE` of `aclrtQueryEventStatus`.
const EVENT_COMPLETE: c_int = 1;

type H = *mut c_void;
type WsFn3 = unsafe extern "C" fn(H, H, H, *mut u64, *mut H) -> c_int;
type LaunchFn = unsafe extern "C" fn(H, u64, H, H) -> c_int;

/// The result-slot ring: device memory the kernels write, pinned host memory the copies land in.
struct Ring {
    dev: usize,
    host: usize,
    /// Free slot indices and the device scratch bytes (casts, NaN/inf-replaced copies) held by
    /// submitted launches, under one lock so one condition variable serves both.
    free: Mutex<Free>,
    cv: Condvar,
}

struct Free {
    slots: Vec<u32>,
    scratch: u64,
}

static RING: OnceLock<Option<Ring>> = OnceLock::new();

fn ring() -> Option<&'static Ring> {
    RING.get_or_init(|| {
        if ALL.iter().any(|s| s.resolve().is_null()) {
            log::info!("device statistics unavailable (the runtime lacks a needed function): the copy path is used");
            return None;
        }
        let dev = malloc(SLOTS * SLOT_BYTES)?;
        let mut host: H = std::ptr::null_mut();
        type F = unsafe extern "C" fn(*mut H, usize) -> c_int;
        // SAFETY: the slot holds the real aclrtMallocHost(void **hostPtr, size_t size).
        if unsafe { MALLOC_HOST.get::<F>()(&mut host, SLOTS * SLOT_BYTES) } != 0 || host.is_null() {
            free(dev);
            return None;
        }
        Some(Ring {
            dev,
            host: host as usize,
            free: Mutex::new(Free { slots: (0..SLOTS as u32).rev().collect(), scratch: 0 }),
            cv: Condvar::new(),
        })
    })
    .as_ref()
}

/// Whether the device path is usable in this process (resolves and allocates on first call).
pub(crate) fn available() -> bool {
    ring().is_some()
}

fn malloc(n: usize) -> Option<usize> {
    let mut p: H = std::ptr::null_mut();
    type F = unsafe extern "C" fn(*mut H, usize, c_int) -> c_int;
    // SAFETY: the slot holds the real aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy).
    let rc = unsafe { MALLOC.get::<F>()(&mut p, n.max(1), 0) };
    (rc == 0 && !p.is_null()).then_some(p as usize)
}

fn free(p: usize) {
    type F = unsafe extern "C" fn(H) -> c_int;
    // SAFETY: the slot holds the real aclrtFree(void *devPtr); p came from aclrtMalloc.
    unsafe { FREE.get::<F>()(p as H) };
}

/// How one tensor's statistics arrive.
pub(crate) enum DevLeaf {
    /// No elements: every statistic is null.
    Empty,
    /// A 0-d tensor: its element, copied into the slot.
    ZeroDim(u32),
    /// Reduced into the slot in dtype `rdt`; `except` when the except keys were reduced too.
    Reduced { slot: u32, rdt: DType, except: bool },
    /// No slot was free (`drop`): statistics null.
    Dropped,
    /// A bool tensor: Max/Min of its float32 cast in the slot (msprobe: any / all, no Mean/Norm).
    Bool(u32),
}

/// The device resources of one captured launch, released when its event completed.
#[derive(Default)]
pub(crate) struct Launch {
    slots: Vec<u32>,
    frees: Vec<usize>,
    /// Pinned host buffers of the md5/tensor copies and their rounded sizes (back to the pool when
    /// released), and their bytes.
    pinned: Vec<(usize, u64)>,
    pinned_bytes: u64,
    /// Device scratch bytes this launch holds (counted against the cap).
    scratch: u64,
}

/// Device scratch bytes in flight at most: `MSPROBE_QUEUE_MB` (what a tensor reduced on the device
/// holds instead of a queued host copy). A tensor needing more than the whole cap still goes
/// through when nothing else is in flight.
pub(crate) struct Limits {
    pub on_full: OnFull,
    pub cap: u64,
    /// The statistics task and summary mode (else md5 / tensor: the copies' bytes are the record's).
    pub stats: bool,
    /// Statistics reduced on the device (`MSPROBE_L2_DEVICE_STATS=1`); else async copies.
    pub device: bool,
    /// With `device`: tensors of at most this many bytes are still copied asynchronously (the
    /// hybrid); 0 = every tensor reduced on the device.
    pub device_min_bytes: u64,
    /// The dump has `*_except_inf_nan` keys (the PyTorch dialect; 1.1.1's MindSpore dumps have
    /// none): only then are their inputs reduced.
    pub except_keys: bool,
}

/// Peak device scratch bytes held at once (for tests and the summary).
pub static SCRATCH_PEAK: AtomicU64 = AtomicU64::new(0);
/// Pinned host memory of the async copies, in use and kept for reuse, capped together by
/// `MSPROBE_QUEUE_MB` (the books in [`super::pinned`]).
static PINNED: Mutex<Pool> = Mutex::new(Pool::new());
static PINNED_CV: Condvar = Condvar::new();
/// Peak pinned bytes held at once (in use plus kept).
pub static PINNED_PEAK: AtomicU64 = AtomicU64::new(0);
/// `aclrtMallocHost` calls of the async copies, and copies into memory pinned before.
pub static PINNED_ALLOCS: AtomicU64 = AtomicU64::new(0);
pub static PINNED_REUSED: AtomicU64 = AtomicU64::new(0);

fn pin(n: u64) -> Option<usize> {
    let mut host: H = std::ptr::null_mut();
    type F = unsafe extern "C" fn(*mut H, usize) -> c_int;
    // SAFETY: the slot holds the real aclrtMallocHost(void **hostPtr, size_t size).
    if unsafe { MALLOC_HOST.get::<F>()(&mut host, usize::try_from(n).ok()?) } != 0 || host.is_null() {
        return None;
    }
    PINNED_ALLOCS.fetch_add(1, Relaxed);
    Some(host as usize)
}

fn unpin(p: usize) {
    type F = unsafe extern "C" fn(H) -> c_int;
    // SAFETY: the slot holds the real aclrtFreeHost; p came from aclrtMallocHost and the pool
    // unpins it once, when no buffer in it is in use.
    unsafe { FREE_HOST.get::<F>()(p as H) };
}

/// Tensors whose bytes were copied asynchronously (statistics / md5 / tensor).
pub static ASYNC_COPIES: AtomicU64 = AtomicU64::new(0);

/// Tensors of async copies dropped because the pinned cap was full (`drop`): no statistics, md5 or file.
pub static COPIES_DROPPED: AtomicU64 = AtomicU64::new(0);

/// Takes `n` pinned bytes; the bytes held never exceed `lim.cap`. `own` = this launch's bytes:
/// released only after the launch, so a tensor that does not fit beside them alone (`own + n >
/// cap`, e.g. one larger than the cap) can never fit and takes the copy path at once (the writer
/// queue's own rules then apply to it), in both modes. None = full in drop mode; Err = copy path
/// (too large, or block mode timed out). `n` is already rounded; Ok holds the pinned buffer.
fn take_pinned(lim: &Limits, n: u64, own: u64) -> Option<Result<usize, Fallback>> {
    if own.saturating_add(n) > lim.cap {
        return Some(Err(Fallback));
    }
    let mut pool = PINNED.lock().unwrap_or_else(|e| e.into_inner());
    let t0 = Instant::now();
    loop {
        match pool.take(n, lim.cap, &mut pin, &mut unpin) {
            Take::Reused(p) => {
                PINNED_REUSED.fetch_add(1, Relaxed);
                return Some(Ok(p));
            }
            Take::Pinned(p) => {
                PINNED_PEAK.fetch_max(pool.held(), Relaxed);
                return Some(Ok(p));
            }
            Take::Failed => return Some(Err(Fallback)),
            Take::Full if lim.on_full == OnFull::Drop => return None,
            // Only this launch's own buffers are in use: nothing will be returned to wait for.
            Take::Full if pool.in_use() <= own => return Some(Err(Fallback)),
            Take::Full => {
                let left = BLOCK_WAIT.saturating_sub(t0.elapsed());
                if left.is_zero() {
                    return Some(Err(Fallback));
                }
                pool = PINNED_CV.wait_timeout(pool, left).unwrap_or_else(|e| e.into_inner()).0;
            }
        }
    }
}

/// A tensor's bytes copied asynchronously into pinned memory (md5 / tensor tasks).
pub(crate) struct PinnedCopy {
    /// Pinned address of the copied span, its length, and the view's element offset in it.
    pub host: usize,
    pub len: usize,
    pub offset: i64,
    pub strides: Vec<i64>,
}

impl PinnedCopy {
    /// The copied span (valid until the launch is released, after its record was built).
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: host is a live aclrtMallocHost buffer of len bytes owned by the launch, written by
        // a copy whose event completed; it is freed only after the record was built.
        unsafe { std::slice::from_raw_parts(self.host as *const u8, self.len) }
    }
}

/// What became of a tensor in the async copy path.
pub(crate) enum CopyOutcome {
    Copied(PinnedCopy),
    /// No room in drop mode: the tensor is recorded as null (counted).
    Dropped,
}

/// Enqueues an async copy of `t`'s span into a new pinned buffer on `stream`; `Err` = copy path.
pub(crate) fn enqueue_copy(t: &TensorMeta, stream: H, lim: &Limits, l: &mut Launch) -> Result<CopyOutcome, Fallback> {
    let Some(dtype) = DType::from_acl(t.dtype) else { return Err(Fallback) };
    let es = dtype.size();
    let strides = t.strides.clone().unwrap_or_else(|| msprobe_core::layout::contiguous_strides(&t.shape));
    let Ok(span) = msprobe_core::layout::element_span(&t.shape, &strides, t.offset) else { return Err(Fallback) };
    let (lo, hi) = span.unwrap_or((t.offset as u128, t.offset as u128));
    let len = ((hi - lo) as usize).checked_mul(es).ok_or(Fallback)?;
    let offset = t.offset - lo as i64;
    if len == 0 {
        return Ok(CopyOutcome::Copied(PinnedCopy { host: 0, len: 0, offset, strides }));
    }
    let size = (len as u64).div_ceil(ROUND).saturating_mul(ROUND);
    let host = match take_pinned(lim, size, l.pinned_bytes) {
        None => {
            COPIES_DROPPED.fetch_add(1, Relaxed);
            return Ok(CopyOutcome::Dropped);
        }
        Some(Err(f)) => return Err(f),
        Some(Ok(p)) => p,
    };
    l.pinned.push((host, size));
    l.pinned_bytes += size;
    if copy_async(host, t.addr + lo as usize * es, len, stream).is_none() {
        return Err(Fallback);
    }
    ASYNC_COPIES.fetch_add(1, Relaxed);
    Ok(CopyOutcome::Copied(PinnedCopy { host, len, offset, strides }))
}

/// Returns a launch's pinned buffers to the pool (their copies completed and records were built).
fn put_pinned(bufs: Vec<(usize, u64)>) {
    let mut pool = PINNED.lock().unwrap_or_else(|e| e.into_inner());
    for (p, size) in bufs {
        pool.put(p, size);
    }
    drop(pool);
    PINNED_CV.notify_all();
}

/// Whether the async copy path is usable (the runtime has what it needs).
pub(crate) fn copies_available() -> bool {
    !MALLOC_HOST.resolve().is_null()
        && !FREE_HOST.resolve().is_null()
        && !MEMCPY_ASYNC.resolve().is_null()
        && !CREATE_EVENT.resolve().is_null()
        && !RECORD_EVENT.resolve().is_null()
        && !QUERY_EVENT.resolve().is_null()
        && !DESTROY_EVENT.resolve().is_null()
        && !GET_CTX.resolve().is_null()
        && !SET_CTX.resolve().is_null()
}

/// Why a tensor takes the copy path instead.
pub(crate) struct Fallback;

/// Takes a free slot (see the module docs for full rings).
/// Takes a free slot and `scratch` bytes of the device scratch allowance (see [`Limits`]); None
/// = full in drop mode.
fn take_slot(lim: &Limits, scratch: u64, own: u64) -> Option<Result<u32, Fallback>> {
    let r = ring()?;
    let mut free = r.free.lock().unwrap_or_else(|e| e.into_inner());
    // Only other launches' scratch is waited for: this launch's is released after it is submitted.
    let fits = |f: &Free| !f.slots.is_empty() && (f.scratch <= own || f.scratch + scratch <= lim.cap);
    if !fits(&free) {
        if lim.on_full == OnFull::Drop {
            return None;
        }
        let t0 = Instant::now();
        while !fits(&free) {
            let left = BLOCK_WAIT.saturating_sub(t0.elapsed());
            if left.is_zero() {
                return Some(Err(Fallback));
            }
            free = r.cv.wait_timeout(free, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
    free.scratch += scratch;
    SCRATCH_PEAK.fetch_max(free.scratch, Relaxed);
    free.slots.pop().map(Ok)
}

fn add_scratch(n: u64) {
    if let Some(r) = ring() {
        let mut f = r.free.lock().unwrap_or_else(|e| e.into_inner());
        f.scratch += n;
        SCRATCH_PEAK.fetch_max(f.scratch, Relaxed);
    }
}

fn give_back(slots: &[u32], scratch: u64) {
    if let Some(r) = ring() {
        let mut f = r.free.lock().unwrap_or_else(|e| e.into_inner());
        f.slots.extend_from_slice(slots);
        f.scratch = f.scratch.saturating_sub(scratch);
        drop(f);
        r.cv.notify_all();
    }
}

/// An aclTensor over `addr` (the real aclCreateTensor: not seen by our side tables).
fn tensor(dtype: i32, shape: &[i64], strides: &[i64], offset: i64, addr: usize, storage: i64) -> Option<H> {
    type F = unsafe extern "C" fn(*const i64, u64, c_int, *const i64, i64, c_int, *const i64, u64, H) -> H;
    let st = [storage];
    // SAFETY: the slot holds the real aclCreateTensor; the arrays live for the call (the library
    // copies them); format 2 is ACL_FORMAT_ND.
    let t = unsafe {
        CREATE_TENSOR.get::<F>()(
            shape.as_ptr(),
            shape.len() as u64,
            dtype,
            strides.as_ptr(),
            offset,
            2,
            st.as_ptr(),
            1,
            addr as H,
        )
    };
    (!t.is_null()).then_some(t)
}

/// Objects created for one tensor's kernels, destroyed after the launches were enqueued (the
/// executors hold what they need).
#[derive(Default)]
struct Objs {
    tensors: Vec<H>,
    scalars: Vec<H>,
    arrays: Vec<H>,
}

impl Drop for Objs {
    fn drop(&mut self) {
        type F = unsafe extern "C" fn(H) -> c_int;
        // SAFETY: each handle came from the matching real create function and is destroyed once.
        unsafe {
            for &t in &self.tensors {
                DESTROY_TENSOR.get::<F>()(t);
            }
            for &s in &self.scalars {
                DESTROY_SCALAR.get::<F>()(s);
            }
            for &a in &self.arrays {
                DESTROY_INT_ARRAY.get::<F>()(a);
            }
        }
    }
}

impl Objs {
    fn tensor(
        &mut self,
        dtype: i32,
        shape: &[i64],
        strides: &[i64],
        offset: i64,
        addr: usize,
        storage: i64,
    ) -> Option<H> {
        let t = tensor(dtype, shape, strides, offset, addr, storage)?;
        self.tensors.push(t);
        Some(t)
    }
    /// A 0-d result tensor at `addr`.
    fn scalar_out(&mut self, dtype: DType, addr: usize) -> Option<H> {
        self.tensor(dtype.acl(), &[], &[], 0, addr, 1)
    }
}

/// Phase 2 of an op whose phase 1 gave `ws` and `ex`: allocates the workspace (freed with the
/// launch) and launches on `stream`.
fn launch(f: &Slot, ws: u64, ex: H, stream: H, l: &mut Launch) -> Option<()> {
    let w = if ws > 0 {
        let p = malloc(ws as usize)?;
        l.frees.push(p);
        // Counted (not waited for: the op needs it now) so the scratch peak is the whole truth.
        l.scratch += ws;
        add_scratch(ws);
        p
    } else {
        0
    };
    // SAFETY: the slot holds the real aclnnXxx(workspace, workspaceSize, executor, stream) of the
    // executor's op.
    let rc = unsafe { f.get::<LaunchFn>()(w as H, ws, ex, stream) };
    KERNELS.fetch_add(1, Relaxed);
    (rc == 0).then_some(())
}

/// aclnnAminmaxAll(self, minOut, maxOut): min and max of all elements in one kernel.
fn aminmax_all(a: H, lo: H, hi: H, stream: H, l: &mut Launch) -> Option<()> {
    let (mut ws, mut ex) = (0u64, std::ptr::null_mut());
    // SAFETY: the slot holds the real aclnnAminmaxAllGetWorkspaceSize(self, minOut, maxOut, ws, executor).
    if unsafe { AMM_ALL_WS.get::<WsFn3>()(a, lo, hi, &mut ws, &mut ex) } != 0 {
        return None;
    }
    launch(&AMM_ALL, ws, ex, stream, l)
}

/// Enqueues the reductions of `t` on `stream`; `Err` = use the copy path for it.
pub(crate) fn enqueue(t: &TensorMeta, stream: H, lim: &Limits, l: &mut Launch) -> Result<DevLeaf, Fallback> {
    let Some(dtype) = DType::from_acl(t.dtype) else { return Err(Fallback) };
    if matches!(dtype, DType::C64 | DType::C128) {
        return Err(Fallback);
    }
    if msprobe_core::layout::numel(&t.shape) == 0 {
        return Ok(DevLeaf::Empty);
    }
    let strides = t.strides.clone().unwrap_or_else(|| msprobe_core::layout::contiguous_strides(&t.shape));
    let Ok(Some((_, hi))) = msprobe_core::layout::element_span(&t.shape, &strides, t.offset) else {
        return Err(Fallback);
    };
    if hi > i64::MAX as u128 {
        return Err(Fallback);
    }
    // Scratch: the float32 cast (integers, f64, bool) and the NaN/inf-replaced copy (floats).
    let n = msprobe_core::layout::numel(&t.shape) as u64;
    let scratch = if t.shape.is_empty() {
        0
    } else {
        let cast = if matches!(dtype, DType::F32 | DType::F16 | DType::BF16) { 0 } else { n * 4 };
        let except = if lim.except_keys && float_kind(dtype) { 2 * n * 4 } else { 0 };
        cast + except
    };
    let slot = match take_slot(lim, scratch, l.scratch) {
        None if ring().is_none() => return Err(Fallback),
        None => {
            DROPPED.fetch_add(1, Relaxed);
            return Ok(DevLeaf::Dropped);
        }
        Some(Err(f)) => return Err(f),
        Some(Ok(s)) => s,
    };
    l.slots.push(slot);
    l.scratch += scratch;
    let r = ring().expect("a slot was taken");
    let dev = r.dev + slot as usize * SLOT_BYTES;
    let host = r.host + slot as usize * SLOT_BYTES;
    let es = dtype.size();
    let ok = if t.shape.is_empty() {
        copy_async(host, t.addr + t.offset as usize * es, es, stream).map(|_| DevLeaf::ZeroDim(slot))
    } else {
        reduce(t, &strides, hi as i64, dev, stream, l, lim.except_keys).and_then(|leaf| {
            copy_async(host, dev, RESULT_BYTES, stream)?;
            Some(leaf(slot))
        })
    };
    match ok {
        Some(leaf) => {
            DEVICE_TENSORS.fetch_add(1, Relaxed);
            Ok(leaf)
        }
        None => Err(Fallback),
    }
}

fn copy_async(dst: usize, src: usize, n: usize, stream: H) -> Option<()> {
    type F = unsafe extern "C" fn(H, usize, *const c_void, usize, c_int, H) -> c_int;
    // SAFETY: the slot holds the real aclrtMemcpyAsync(dst, destMax, src, count, kind, stream);
    // dst is pinned memory of at least n bytes that stays allocated until the copy's event completed.
    let rc =
        unsafe { MEMCPY_ASYNC.get::<F>()(dst as H, n, src as *const c_void, n, ACL_MEMCPY_DEVICE_TO_HOST, stream) };
    (rc == 0).then_some(())
}

/// The kernels of one tensor with at least one element and at least one dimension.
#[allow(clippy::type_complexity)]
fn reduce(
    t: &TensorMeta,
    strides: &[i64],
    storage: i64,
    dev: usize,
    stream: H,
    l: &mut Launch,
    except_keys: bool,
) -> Option<Box<dyn FnOnce(u32) -> DevLeaf>> {
    let dtype = DType::from_acl(t.dtype)?;
    let mut o = Objs::default();
    let n = msprobe_core::layout::numel(&t.shape) as usize;
    let src = o.tensor(t.dtype, &t.shape, strides, t.offset, t.addr, storage)?;
    let contiguous = msprobe_core::layout::contiguous_strides(&t.shape);
    let is_bool = dtype == DType::Bool;
    let (x, rdt) = if matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
        (src, dtype)
    } else {
        // Integers and float64 are reduced as float32 (msprobe 1.1.1); bool as its 0/1 cast.
        let buf = malloc(n * 4)?;
        l.frees.push(buf);
        let c = o.tensor(DType::F32.acl(), &t.shape, &contiguous, 0, buf, n as i64)?;
        let (mut ws, mut ex) = (0u64, std::ptr::null_mut());
        type F = unsafe extern "C" fn(H, c_int, H, *mut u64, *mut H) -> c_int;
        // SAFETY: the slot holds the real aclnnCastGetWorkspaceSize(self, dtype, out, ws, executor).
        if unsafe { CAST_WS.get::<F>()(src, DType::F32.acl(), c, &mut ws, &mut ex) } != 0 {
            return None;
        }
        launch(&CAST, ws, ex, stream, l)?;
        (c, DType::F32)
    };
    let out = |o: &mut Objs, k: usize| o.scalar_out(rdt, dev + 4 * k);
    let (o0, o1) = (out(&mut o, 0)?, out(&mut o, 1)?);
    // Max and Min in one kernel (NaN-propagating, as torch.max / torch.min).
    aminmax_all(x, o1, o0, stream, l)?;
    if is_bool {
        // any = max of the 0/1 cast, all = min.
        return Some(Box::new(DevLeaf::Bool));
    }
    let (o2, o3) = (out(&mut o, 2)?, out(&mut o, 3)?);
    type Create = unsafe extern "C" fn(*const i64, u64) -> H;
    let none: [i64; 1] = [0];
    // SAFETY: the slot holds the real aclCreateIntArray(value, size); an empty list = all dims.
    let dims = unsafe { CREATE_INT_ARRAY.get::<Create>()(none.as_ptr(), 0) };
    if dims.is_null() {
        return None;
    }
    o.arrays.push(dims);
    {
        let (mut ws, mut ex) = (0u64, std::ptr::null_mut());
        type F = unsafe extern "C" fn(H, H, bool, c_int, H, *mut u64, *mut H) -> c_int;
        // SAFETY: the slot holds the real aclnnMeanGetWorkspaceSize(self, dim, keepDim, dtype, out, ws, executor).
        if unsafe { MEAN_WS.get::<F>()(x, dims, false, rdt.acl(), o2, &mut ws, &mut ex) } != 0 {
            return None;
        }
        launch(&MEAN, ws, ex, stream, l)?;
    }
    {
        let p = 2.0f32;
        type CS = unsafe extern "C" fn(*mut c_void, c_int) -> H;
        // SAFETY: the slot holds the real aclCreateScalar(value, dtype); the value is copied.
        let ps = unsafe { CREATE_SCALAR.get::<CS>()(&p as *const f32 as *mut c_void, DType::F32.acl()) };
        if ps.is_null() {
            return None;
        }
        o.scalars.push(ps);
        let (mut ws, mut ex) = (0u64, std::ptr::null_mut());
        type F = unsafe extern "C" fn(H, H, H, bool, H, *mut u64, *mut H) -> c_int;
        // SAFETY: the slot holds the real aclnnNormGetWorkspaceSize(self, pScalar, dim, keepdim, out, ws, executor).
        if unsafe { NORM_WS.get::<F>()(x, ps, dims, false, o3, &mut ws, &mut ex) } != 0 {
            return None;
        }
        launch(&NORM, ws, ex, stream, l)?;
    }
    // Integers (and float64 cast to float32 from finite values... not always: a large f64
    // overflows to inf) -- the except keys are reduced for every float input.
    let except = except_keys && float_kind(dtype);
    if except {
        // One [2, n] scratch: row 0 = x with NaN/±inf → -inf, row 1 = x with NaN/±inf → +inf
        // (two aclnnNanToNum), then one aclnnAminmax over dim 1: row 0's max is the largest
        // finite value and row 1's min the smallest (±inf when there is none). 3 kernels where
        // NanToNum+Max and NanToNum+Min took 4.
        let es = rdt.size();
        let buf = malloc(2 * n * es)?;
        l.frees.push(buf);
        let rows = o.tensor(rdt.acl(), &[2, n as i64], &[n as i64, 1], 0, buf, 2 * n as i64)?;
        for (k, v) in [(0usize, f32::NEG_INFINITY), (1, f32::INFINITY)] {
            let y = o.tensor(rdt.acl(), &t.shape, &contiguous, 0, buf + k * n * es, n as i64)?;
            let (mut ws, mut ex) = (0u64, std::ptr::null_mut());
            type F = unsafe extern "C" fn(H, f32, f32, f32, H, *mut u64, *mut H) -> c_int;
            // SAFETY: the slot holds the real aclnnNanToNumGetWorkspaceSize(self, nan, posInf,
            // negInf, out, ws, executor).
            if unsafe { N2N_WS.get::<F>()(x, v, v, v, y, &mut ws, &mut ex) } != 0 {
                return None;
            }
            launch(&N2N, ws, ex, stream, l)?;
        }
        // Row minima at result positions 4-5, row maxima at 6-7 (4-byte positions, any float dtype).
        let step = (4 / es) as i64;
        let lo = o.tensor(rdt.acl(), &[2], &[step], 0, dev + 16, 2 * step)?;
        let hi = o.tensor(rdt.acl(), &[2], &[step], 0, dev + 24, 2 * step)?;
        let one: [i64; 1] = [1];
        // SAFETY: the slot holds the real aclCreateIntArray(value, size); the value is copied.
        let dim1 = unsafe { CREATE_INT_ARRAY.get::<Create>()(one.as_ptr(), 1) };
        if dim1.is_null() {
            return None;
        }
        o.arrays.push(dim1);
        let (mut ws, mut ex) = (0u64, std::ptr::null_mut());
        type F = unsafe extern "C" fn(H, H, bool, H, H, *mut u64, *mut H) -> c_int;
        // SAFETY: the slot holds the real aclnnAminmaxGetWorkspaceSize(self, dim, keepDim, minOut,
        // maxOut, ws, executor).
        if unsafe { AMM_WS.get::<F>()(rows, dim1, false, lo, hi, &mut ws, &mut ex) } != 0 {
            return None;
        }
        launch(&AMM, ws, ex, stream, l)?;
    }
    Some(Box::new(move |slot| DevLeaf::Reduced { slot, rdt, except }))
}

/// Reads one result value of dtype `dt` at pinned address `p`.
fn read(dt: DType, p: usize) -> f64 {
    // SAFETY: p is inside the pinned ring and the copy that wrote it completed (its event did).
    let b = unsafe { std::slice::from_raw_parts(p as *const u8, 8) };
    match dt {
        DType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
        DType::BF16 => half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
        _ => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
    }
}

/// The statistics of a completed leaf, as msprobe 1.1.1 writes them (see `stats.rs`).
pub(crate) fn stats_of(leaf: &DevLeaf, dtype: DType) -> Stats {
    let all = |v| Stats { max: v, min: v, mean: v, norm: v, max_except_inf_nan: None, min_except_inf_nan: None };
    let Some(r) = ring() else { return all(Stat::Null) };
    match *leaf {
        DevLeaf::Empty | DevLeaf::Dropped => all(Stat::Null),
        DevLeaf::Bool(slot) => {
            let p = r.host + slot as usize * SLOT_BYTES;
            Stats {
                max: Stat::Bool(read(DType::F32, p) != 0.0),
                min: Stat::Bool(read(DType::F32, p + 4) != 0.0),
                mean: Stat::Null,
                norm: Stat::Null,
                max_except_inf_nan: None,
                min_except_inf_nan: None,
            }
        }
        DevLeaf::ZeroDim(slot) => {
            let p = r.host + slot as usize * SLOT_BYTES;
            // SAFETY: as in `read`; the slot holds the element (at most 8 bytes).
            let b = unsafe { std::slice::from_raw_parts(p as *const u8, dtype.size()) };
            msprobe_core::stats::tensor_stats(dtype, true, b)
        }
        DevLeaf::Reduced { slot, rdt, except } => {
            let p = r.host + slot as usize * SLOT_BYTES;
            let v: Vec<f64> = (0..8).map(|k| read(rdt, p + 4 * k)).collect();
            let mut s = Stats {
                max: Stat::Float(v[0]),
                min: Stat::Float(v[1]),
                mean: Stat::Float(v[2]),
                norm: Stat::Float(v[3]),
                max_except_inf_nan: None,
                min_except_inf_nan: None,
            };
            if v[0].is_nan() {
                // msprobe: a NaN anywhere makes all four NaN (the device's Mean and Norm are NaN too).
                s.mean = Stat::Float(f64::NAN);
                s.norm = Stat::Float(f64::NAN);
            }
            if except && (!v[0].is_finite() || !v[1].is_finite()) {
                // Row 0's max (NaN/±inf → -inf) and row 1's min (→ +inf).
                let (fmax, fmin) = (v[6], v[5]);
                let any_finite = fmax.is_finite();
                let pick = |finite: f64, whole: f64| {
                    if any_finite {
                        Stat::Float(finite)
                    } else if !whole.is_nan() {
                        // No NaN and nothing finite: the largest / smallest non-NaN is the value itself.
                        Stat::Float(whole)
                    } else {
                        UNCERTAIN.fetch_add(1, Relaxed);
                        Stat::Float(f64::NAN)
                    }
                };
                if !v[0].is_finite() {
                    s.max_except_inf_nan = Some(pick(fmax, v[0]));
                }
                if !v[1].is_finite() {
                    s.min_except_inf_nan = Some(pick(fmin, v[1]));
                }
            }
            s
        }
    }
}

/// A captured launch whose record completes when `event` does.
pub(crate) struct Pending {
    /// 0: nothing to wait for (no device leaf), the record only keeps its place in the order.
    pub event: usize,
    pub ctx: usize,
    pub launch: Launch,
    /// Builds and ends the record (on the completion thread); `false` = the event failed.
    pub finish: Box<dyn FnOnce(bool) + Send>,
}

// SAFETY: the raw resources in Launch are plain addresses (usize); the closure is Send.
struct Queue {
    q: Mutex<VecDeque<Pending>>,
    cv: Condvar,
}

static QUEUE: OnceLock<Queue> = OnceLock::new();

fn queue() -> &'static Queue {
    QUEUE.get_or_init(|| {
        let _ = std::thread::Builder::new().name("msprobe-devstats".into()).spawn(completion_thread);
        Queue { q: Mutex::new(VecDeque::new()), cv: Condvar::new() }
    })
}

/// Records an event after the launch's copies on `stream`; None if the runtime refused.
pub(crate) fn record_event(stream: H) -> Option<(usize, usize)> {
    type Create = unsafe extern "C" fn(*mut H) -> c_int;
    type Record = unsafe extern "C" fn(H, H) -> c_int;
    type GetCtx = unsafe extern "C" fn(*mut H) -> c_int;
    let mut ev: H = std::ptr::null_mut();
    // SAFETY: the slots hold the real aclrtCreateEvent / aclrtRecordEvent / aclrtGetCurrentContext.
    unsafe {
        if CREATE_EVENT.get::<Create>()(&mut ev) != 0 || ev.is_null() {
            return None;
        }
        if RECORD_EVENT.get::<Record>()(ev, stream) != 0 {
            destroy_event(ev as usize);
            return None;
        }
        let mut ctx: H = std::ptr::null_mut();
        let _ = GET_CTX.get::<GetCtx>()(&mut ctx);
        Some((ev as usize, ctx as usize))
    }
}

fn destroy_event(ev: usize) {
    type F = unsafe extern "C" fn(H) -> c_int;
    // SAFETY: the slot holds the real aclrtDestroyEvent; ev is our event, destroyed once.
    unsafe { DESTROY_EVENT.get::<F>()(ev as H) };
}

/// Hands a launch to the completion thread.
pub(crate) fn submit(p: Pending) {
    let q = queue();
    PENDING.fetch_add(1, Relaxed);
    q.q.lock().unwrap_or_else(|e| e.into_inner()).push_back(p);
    q.cv.notify_one();
}

/// Releases a launch's device resources (its kernels are done, or were never enqueued).
pub(crate) fn release(l: Launch) {
    for p in l.frees {
        free(p);
    }
    if !l.pinned.is_empty() {
        put_pinned(l.pinned);
    }
    if !l.slots.is_empty() || l.scratch > 0 {
        give_back(&l.slots, l.scratch);
    }
}

/// Waits (at most `max`) until every submitted launch's record has ended: at step ends and exit,
/// so that a step's files hold all of its records.
pub(crate) fn drain(max: Duration) {
    let t0 = Instant::now();
    while PENDING.load(Relaxed) > 0 && t0.elapsed() < max {
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn completion_thread() {
    let q = queue();
    let mut cur_ctx = 0usize;
    loop {
        let p = {
            let mut g = q.q.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(p) = g.pop_front() {
                    break p;
                }
                g = q.cv.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if p.ctx != 0 && p.ctx != cur_ctx {
                type F = unsafe extern "C" fn(H) -> c_int;
                // SAFETY: the slot holds the real aclrtSetCurrentContext; ctx is the launching
                // thread's current context (the event belongs to its device).
                if unsafe { SET_CTX.get::<F>()(p.ctx as H) } == 0 {
                    cur_ctx = p.ctx;
                }
            }
            let done = p.event == 0 || wait_event(p.event);
            if !done {
                EVENT_FAILURES.fetch_add(1, Relaxed);
            }
            (p.finish)(done);
            if p.event != 0 {
                destroy_event(p.event);
            }
            if done {
                release(p.launch);
            }
            // An event that never completed: its kernels may still write, so the slots and
            // buffers are leaked rather than reused.
        }));
        PENDING.fetch_sub(1, Relaxed);
    }
}

/// Polls the event (backing off to 1 ms) until it completed; false on error or timeout.
fn wait_event(ev: usize) -> bool {
    type F = unsafe extern "C" fn(H, *mut c_int) -> c_int;
    let t0 = Instant::now();
    let mut nap = Duration::from_micros(20);
    loop {
        let mut st: c_int = 0;
        // SAFETY: the slot holds the real aclrtQueryEventStatus(event, aclrtEventRecordedStatus *).
        if unsafe { QUERY_EVENT.get::<F>()(ev as H, &mut st) } != 0 {
            return false;
        }
        if st == EVENT_COMPLETE {
            return true;
        }
        if t0.elapsed() > EVENT_WAIT {
            return false;
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(1));
    }
}

/// Float inputs can hold NaN/±inf (f64 also overflows to inf in its float32 cast).
fn float_kind(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
}
