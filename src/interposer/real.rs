//! The real `dlsym`, and real CANN functions for the tool's own calls.
//!
//! The real `dlsym` comes from `dlvsym(RTLD_NEXT, "dlsym", version)` (we do not interpose
//! `dlvsym`, so this cannot recurse). The tool's own ACL calls (stream sync, device-to-host
//! copies, rank queries) use pointers from the real `dlsym` on `RTLD_NOLOAD` handles, or the
//! addresses clients looked up through our hook, never our wrappers: they are never captured.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering::*};

/// The real `dlsym`; read by the trampoline's assembly.
pub(crate) static MSPROBE_REAL_DLSYM: AtomicPtr<c_void> = AtomicPtr::new(null_mut());

pub type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

// The architecture's base version first: it exists on every glibc, so the probe never fails (a
// failed dlvsym allocates its error string) before our constructor has run.
#[cfg(target_arch = "x86_64")]
const VERSIONS: [&CStr; 2] = [c"GLIBC_2.2.5", c"GLIBC_2.34"];
#[cfg(target_arch = "aarch64")]
const VERSIONS: [&CStr; 2] = [c"GLIBC_2.17", c"GLIBC_2.34"];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const VERSIONS: [&CStr; 1] = [c"GLIBC_2.34"];

/// Stands in when no real dlsym can be found (never expected on glibc): lookups fail cleanly.
unsafe extern "C" fn no_dlsym(_h: *mut c_void, _s: *const c_char) -> *mut c_void {
    null_mut()
}

/// Resolves (once) and returns the real dlsym. Called by the trampoline before the constructor
/// ran, so it uses only atomics.
pub(crate) extern "C" fn resolve() -> *mut c_void {
    let cur = MSPROBE_REAL_DLSYM.load(Acquire);
    if !cur.is_null() {
        return cur;
    }
    for v in VERSIONS {
        // SAFETY: dlvsym with RTLD_NEXT and static NUL-terminated strings; we do not interpose
        // dlvsym, so this reaches glibc.
        let p = unsafe { libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), v.as_ptr()) };
        if !p.is_null() {
            MSPROBE_REAL_DLSYM.store(p, Release);
            return p;
        }
    }
    no_dlsym as *mut c_void
}

pub(crate) fn real_dlsym() -> DlsymFn {
    let p = resolve();
    // SAFETY: p is glibc's dlsym (or no_dlsym), both with the DlsymFn signature.
    unsafe { std::mem::transmute::<*mut c_void, DlsymFn>(p) }
}

/// Looks `name` up in an already loaded library (`RTLD_NOLOAD`), through the real dlsym.
pub(crate) fn in_loaded(lib: &CStr, name: &CStr) -> *mut c_void {
    // SAFETY: dlopen with RTLD_NOLOAD only returns a handle for an already loaded object; the
    // handle is not closed (closing a NOLOAD handle just drops the extra reference, which we keep
    // so the pointer stays valid).
    let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return null_mut();
    }
    // SAFETY: h is a live handle and name is NUL-terminated.
    unsafe { real_dlsym()(h, name.as_ptr()) }
}

/// A real runtime function, remembered from clients' lookups or found in the loaded libraries.
pub(crate) struct RealFn {
    ptr: AtomicPtr<c_void>,
    name: &'static CStr,
}

impl RealFn {
    pub const fn new(name: &'static CStr) -> RealFn {
        RealFn { ptr: AtomicPtr::new(null_mut()), name }
    }

    /// Records an address a client looked up (no allocation: called from the dlsym hook).
    pub fn observe(&self, p: *mut c_void) {
        let _ = self.ptr.compare_exchange(null_mut(), p, Release, Relaxed);
    }

    /// The function, searching the usual CANN libraries if no client looked it up yet.
    pub fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Acquire);
        if !p.is_null() {
            return p;
        }
        for lib in [c"libascendcl.so", c"libacl_rt.so", c"libhccl.so", c"libnnopbase.so", c"libopapi.so"] {
            let f = in_loaded(lib, self.name);
            if !f.is_null() {
                self.observe(f);
                return f;
            }
        }
        // SAFETY: RTLD_DEFAULT lookup of a NUL-terminated name through the real dlsym.
        let f = unsafe { real_dlsym()(libc::RTLD_DEFAULT, self.name.as_ptr()) };
        if !f.is_null() {
            self.observe(f);
        }
        f
    }
}

pub(crate) static ACLRT_MEMCPY: RealFn = RealFn::new(c"aclrtMemcpy");
pub(crate) static ACLRT_SYNC_STREAM: RealFn = RealFn::new(c"aclrtSynchronizeStream");
pub(crate) static HCCL_GET_RANK_SIZE: RealFn = RealFn::new(c"HcclGetRankSize");
pub(crate) static HCCL_GET_RANK_ID: RealFn = RealFn::new(c"HcclGetRankId");

/// The runtime functions the tool calls, by name (for the dlsym hook's `observe`).
pub(crate) fn observed(name: &[u8]) -> Option<&'static RealFn> {
    match name {
        b"aclrtMemcpy" => Some(&ACLRT_MEMCPY),
        b"aclrtSynchronizeStream" => Some(&ACLRT_SYNC_STREAM),
        b"HcclGetRankSize" => Some(&HCCL_GET_RANK_SIZE),
        b"HcclGetRankId" => Some(&HCCL_GET_RANK_ID),
        _ => None,
    }
}

const ACL_MEMCPY_DEVICE_TO_HOST: c_int = 2;

/// Waits for `stream` (the tool's own call, never captured). Returns the ACL error code.
pub(crate) fn sync_stream(stream: *mut c_void) -> c_int {
    let f = ACLRT_SYNC_STREAM.get();
    if f.is_null() {
        return -1;
    }
    type F = unsafe extern "C" fn(*mut c_void) -> c_int;
    // SAFETY: f is the real aclrtSynchronizeStream(aclrtStream).
    unsafe { std::mem::transmute::<*mut c_void, F>(f)(stream) }
}

/// Copies `len` device bytes at `src` into a new host buffer.
pub(crate) fn copy_to_host(src: usize, len: usize) -> Result<Vec<u8>, c_int> {
    let f = ACLRT_MEMCPY.get();
    if f.is_null() {
        return Err(-1);
    }
    // A huge or bogus size must fail this copy, not abort the process on allocation failure.
    let mut buf = Vec::new();
    if buf.try_reserve_exact(len).is_err() {
        return Err(-2);
    }
    buf.resize(len, 0);
    if len == 0 {
        return Ok(buf);
    }
    type F = unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, c_int) -> c_int;
    // SAFETY: f is the real aclrtMemcpy(dst, destMax, src, count, kind); dst has len bytes.
    let rc = unsafe {
        std::mem::transmute::<*mut c_void, F>(f)(buf.as_mut_ptr() as *mut c_void, len, src as *const c_void, len, ACL_MEMCPY_DEVICE_TO_HOST)
    };
    if rc == 0 {
        Ok(buf)
    } else {
        Err(rc)
    }
}

/// `HcclGetRankSize(comm)`.
pub(crate) fn hccl_rank_size(comm: *mut c_void) -> Option<u32> {
    hccl_u32(&HCCL_GET_RANK_SIZE, comm)
}

fn hccl_u32(f: &RealFn, comm: *mut c_void) -> Option<u32> {
    let p = f.get();
    if p.is_null() {
        return None;
    }
    type F = unsafe extern "C" fn(*mut c_void, *mut u32) -> c_int;
    let mut v = 0u32;
    // SAFETY: p is the real HcclGetRankSize/HcclGetRankId(comm, uint32_t*).
    let rc = unsafe { std::mem::transmute::<*mut c_void, F>(p)(comm, &mut v) };
    (rc == 0).then_some(v)
}

/// Remembers `found` as the real function behind wrapper `w` and returns what the dlsym hook
/// should hand out: the wrapper, or `found` itself when the slot already holds a different
/// implementation of the name (e.g. a custom op library; not wrapped) or `found` is our own.
pub(crate) fn claim(slot: &AtomicPtr<c_void>, found: *mut c_void, w: *mut c_void) -> Option<*mut c_void> {
    if found == w {
        return Some(w);
    }
    match slot.compare_exchange(null_mut(), found, AcqRel, Acquire) {
        Ok(_) => Some(w),
        Err(prev) if prev == found => Some(w),
        Err(_) => None,
    }
}
