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

/// The runtime functions the tool calls, remembered when a client looks them up.
pub(crate) static OBSERVED: [&Slot; 3] = [&ACLRT_MEMCPY, &ACLRT_SYNC_STREAM, &HCCL_GET_RANK_SIZE];

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

/// Waits for `stream` (the tool's own call, never captured).
pub(crate) fn sync_stream(stream: *mut c_void) -> Result<(), DeviceError> {
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
    if HCCL_GET_RANK_SIZE.resolve().is_null() {
        return None;
    }
    type F = unsafe extern "C" fn(*mut c_void, *mut u32) -> c_int;
    let mut v = 0u32;
    // SAFETY: the slot holds the real HcclGetRankSize(comm, uint32_t*).
    let rc = unsafe { HCCL_GET_RANK_SIZE.get::<F>()(comm, &mut v) };
    (rc == 0).then_some(v)
}
