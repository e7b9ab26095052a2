//! The tool's own CANN runtime calls: stream synchronisation, device-to-host copies and HCCL rank
//! queries, used by the L2 capture and by the C ABI's device-tensor path.
//!
//! Each goes to the real function (a [`Slot`] remembered from the client's own lookups or
//! resolved in the loaded CANN libraries), never to one of our wrappers, so none is captured.

use crate::hook::Slot;
use cann_abi::memcpy::ACL_MEMCPY_DEVICE_TO_HOST;
use std::ffi::{c_int, c_void};

static ACLRT_MEMCPY: Slot = Slot::new(c"aclrtMemcpy");
static ACLRT_SYNC_STREAM: Slot = Slot::new(c"aclrtSynchronizeStream");
static HCCL_GET_RANK_SIZE: Slot = Slot::new(c"HcclGetRankSize");
static HCCL_GET_RANK_ID: Slot = Slot::new(c"HcclGetRankId");
static ACLRT_CREATE_EVENT: Slot = Slot::new(c"aclrtCreateEvent");
static ACLRT_RECORD_EVENT: Slot = Slot::new(c"aclrtRecordEvent");
static ACLRT_SYNC_EVENT: Slot = Slot::new(c"aclrtSynchronizeEvent");

/// The runtime functions the tool calls, remembered when a client looks them up.
pub(crate) static OBSERVED: [&Slot; 7] = [
    &ACLRT_MEMCPY,
    &ACLRT_SYNC_STREAM,
    &HCCL_GET_RANK_SIZE,
    &HCCL_GET_RANK_ID,
    &ACLRT_CREATE_EVENT,
    &ACLRT_RECORD_EVENT,
    &ACLRT_SYNC_EVENT,
];

thread_local! {
    /// This thread's event for waiting on streams (created on first use, kept for the thread's
    /// life). Const-initialised with no destructor: never allocates.
    static EVENT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Why a device operation could not be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeviceError {
    /// The runtime function is not loaded.
    Unresolved,
    /// The host buffer could not be allocated (a huge or bogus size).
    NoMemory,
    /// The runtime returned this `aclError`.
    Acl(c_int),
}

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceError::Unresolved => f.write_str("the CANN runtime function is not loaded"),
            DeviceError::NoMemory => f.write_str("no host memory for the copy"),
            DeviceError::Acl(rc) => write!(f, "aclError {rc}"),
        }
    }
}

/// Waits for `stream` (the tool's own calls, never captured): for an event of ours recorded on it
/// when the runtime has events, else with `aclrtSynchronizeStream`. The event leaves the error of
/// a failed task where it is: `aclrtSynchronizeStream` returns such an error and clears it, so
/// waiting with it would hide the failure from the client's own synchronisation.
pub(crate) fn sync_stream(stream: *mut c_void) -> Result<(), DeviceError> {
    if let Some(r) = sync_by_event(stream) {
        return r;
    }
    let f = ACLRT_SYNC_STREAM.resolve();
    if f.is_null() {
        return Err(DeviceError::Unresolved);
    }
    type F = unsafe extern "C" fn(*mut c_void) -> c_int;
    // SAFETY: the slot is resolved and holds the real aclrtSynchronizeStream(aclrtStream).
    let rc = unsafe { ACLRT_SYNC_STREAM.get::<F>()(stream) };
    if rc == 0 {
        Ok(())
    } else {
        Err(DeviceError::Acl(rc))
    }
}

/// Records this thread's event on `stream` and waits for it; None (use the stream sync) when the
/// runtime has no events or the event cannot be created or recorded (e.g. another device).
fn sync_by_event(stream: *mut c_void) -> Option<Result<(), DeviceError>> {
    let (create, record, wait) =
        (ACLRT_CREATE_EVENT.resolve(), ACLRT_RECORD_EVENT.resolve(), ACLRT_SYNC_EVENT.resolve());
    if create.is_null() || record.is_null() || wait.is_null() {
        return None;
    }
    type Create = unsafe extern "C" fn(*mut *mut c_void) -> c_int;
    type Record = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
    type Wait = unsafe extern "C" fn(*mut c_void) -> c_int;
    let mut ev = EVENT.with(|e| e.get()) as *mut c_void;
    if ev.is_null() {
        // SAFETY: the slot holds the real aclrtCreateEvent(aclrtEvent *).
        let rc = unsafe { ACLRT_CREATE_EVENT.get::<Create>()(&mut ev) };
        if rc != 0 || ev.is_null() {
            return None;
        }
        EVENT.with(|e| e.set(ev as usize));
    }
    // SAFETY: the slot holds the real aclrtRecordEvent(event, stream); ev is our live event.
    if unsafe { ACLRT_RECORD_EVENT.get::<Record>()(ev, stream) } != 0 {
        return None;
    }
    // SAFETY: the slot holds the real aclrtSynchronizeEvent(event).
    let rc = unsafe { ACLRT_SYNC_EVENT.get::<Wait>()(ev) };
    Some(if rc == 0 { Ok(()) } else { Err(DeviceError::Acl(rc)) })
}

/// Copies `len` device bytes at `src` into a new host buffer.
pub(crate) fn copy_to_host(src: usize, len: usize) -> Result<Vec<u8>, DeviceError> {
    if ACLRT_MEMCPY.resolve().is_null() {
        return Err(DeviceError::Unresolved);
    }
    // A huge or bogus size must fail this copy, not abort the process on allocation failure.
    let mut buf = Vec::new();
    if buf.try_reserve_exact(len).is_err() {
        return Err(DeviceError::NoMemory);
    }
    buf.resize(len, 0);
    if len == 0 {
        return Ok(buf);
    }
    type F = unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, c_int) -> c_int;
    // SAFETY: the slot holds the real aclrtMemcpy(dst, destMax, src, count, kind); dst has len bytes.
    let rc = unsafe {
        ACLRT_MEMCPY.get::<F>()(
            buf.as_mut_ptr() as *mut c_void,
            len,
            src as *const c_void,
            len,
            ACL_MEMCPY_DEVICE_TO_HOST,
        )
    };
    if rc == 0 {
        Ok(buf)
    } else {
        Err(DeviceError::Acl(rc))
    }
}

/// `HcclGetRankSize(comm)`.
pub(crate) fn hccl_rank_size(comm: *mut c_void) -> Option<u32> {
    hccl_query(&HCCL_GET_RANK_SIZE, comm)
}

/// `HcclGetRankId(comm)`: this process's rank in `comm`.
pub(crate) fn hccl_rank_id(comm: *mut c_void) -> Option<u32> {
    hccl_query(&HCCL_GET_RANK_ID, comm)
}

/// `HcclResult f(HcclComm, uint32_t *)`.
fn hccl_query(slot: &Slot, comm: *mut c_void) -> Option<u32> {
    if slot.resolve().is_null() {
        return None;
    }
    type F = unsafe extern "C" fn(*mut c_void, *mut u32) -> c_int;
    let mut v = 0u32;
    // SAFETY: the slot holds the real HcclGetRankSize / HcclGetRankId, both (comm, uint32_t*).
    let rc = unsafe { slot.get::<F>()(comm, &mut v) };
    (rc == 0).then_some(v)
}

static GET_VIEW_SHAPE: Slot = Slot::new(c"aclGetViewShape");
/// libstdc++'s `operator delete[](void*)`: CANN's getters return arrays made with `new[]`.
static DELETE_ARRAY: Slot = Slot::new(c"_ZdaPv");

/// The view shape the library gives aclTensor `h` now (a kernel may have set it, as aclnnNonzero's
/// does), by the real aclGetViewShape. `None` if it cannot be read. The returned array is the
/// caller's (CANN: `delete[]`): freed with libstdc++'s `operator delete[]`, leaked if that is not
/// loaded.
pub(crate) fn view_shape_now(h: usize) -> Option<Vec<i64>> {
    let f = GET_VIEW_SHAPE.resolve();
    if f.is_null() || h == 0 {
        return None;
    }
    type F = unsafe extern "C" fn(*mut c_void, *mut *mut i64, *mut u64) -> i32;
    let (mut dims, mut n) = (std::ptr::null_mut::<i64>(), 0u64);
    // SAFETY: `f` is the real aclGetViewShape; `h` is an aclTensor bound to the executor being
    // launched (the client destroys it only after the launch); the out-pointers are ours.
    let rc = unsafe { std::mem::transmute::<*mut c_void, F>(f)(h as *mut c_void, &mut dims, &mut n) };
    if rc != 0 || dims.is_null() {
        return None;
    }
    // SAFETY: on success the library wrote `n` dims at `dims` (a rank is small: at most 8 in CANN).
    let v = (n <= 64).then(|| unsafe { std::slice::from_raw_parts(dims, n as usize) }.to_vec());
    let del = DELETE_ARRAY.resolve();
    if !del.is_null() {
        // SAFETY: `dims` came from the library's `new int64_t[]`, freed once here by `delete[]`.
        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void)>(del)(dims.cast()) };
    }
    v
}
