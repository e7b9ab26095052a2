//! The one hook mechanism: a [`Slot`] holds the real CANN function behind a name, and
//! [`hook_table!`] declares a library's hooked names, their slots and their wrappers in one table.
//!
//! A slot is filled in one of two ways:
//! - **claimed** by the dlsym hook when a client looks the name up (the wrapper is handed out
//!   and the real address remembered), or
//! - **resolved** on first use from the CANN libraries already loaded, for the functions the tool
//!   calls itself (stream sync, device copies, getters) and for our exported link-time entry
//!   points. These use the real `dlsym` ([`real_dlsym`]), never our own hook, so the tool's own
//!   calls are never captured.

use std::ffi::{c_char, c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering::*};

/// The real `dlsym`; read by the trampoline's assembly (`interposer::entry`).
pub(crate) static MSPROBE_REAL_DLSYM: AtomicPtr<c_void> = AtomicPtr::new(null_mut());

pub(crate) type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

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

/// glibc's dlsym.
pub(crate) fn real_dlsym() -> DlsymFn {
    let p = resolve();
    // SAFETY: p is glibc's dlsym (or no_dlsym), both with the DlsymFn signature.
    unsafe { std::mem::transmute::<*mut c_void, DlsymFn>(p) }
}

/// The CANN libraries that define the functions we hook or call, searched in this order.
const CANN_LIBS: [&CStr; 7] = [
    c"libascendcl.so",
    c"libacl_rt.so",
    c"libacl_op_compiler.so",
    c"libacl_op_executor.so",
    c"libhccl.so",
    c"libnnopbase.so",
    c"libopapi.so",
];

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

/// The real function behind one CANN name.
pub(crate) struct Slot {
    ptr: AtomicPtr<c_void>,
    name: &'static CStr,
}

impl Slot {
    pub(crate) const fn new(name: &'static CStr) -> Slot {
        Slot { ptr: AtomicPtr::new(null_mut()), name }
    }

    pub(crate) fn name(&self) -> &'static CStr {
        self.name
    }

    /// The remembered address (NULL until claimed, observed or resolved).
    #[inline]
    pub(crate) fn load(&self) -> *mut c_void {
        self.ptr.load(Relaxed)
    }

    /// Remembers an address a client looked up (the first one wins; no allocation: called from
    /// the dlsym hook).
    pub(crate) fn observe(&self, p: *mut c_void) {
        let _ = self.ptr.compare_exchange(null_mut(), p, Release, Relaxed);
    }

    /// Remembers `found` as the real function behind wrapper `w` and returns what the dlsym hook
    /// should hand out: the wrapper, or `None` (hand out `found` itself) when the slot already
    /// holds a different implementation of the name (e.g. a custom op library; not wrapped).
    pub(crate) fn claim(&self, found: *mut c_void, w: *mut c_void) -> Option<*mut c_void> {
        if found == w {
            return Some(w);
        }
        match self.ptr.compare_exchange(null_mut(), found, AcqRel, Acquire) {
            Ok(_) => Some(w),
            Err(prev) if prev == found => Some(w),
            Err(_) => None,
        }
    }

    /// The real function: the remembered address, else the name in the loaded CANN libraries,
    /// else any loaded object's definition other than `own` (our export of the same name, which
    /// an `RTLD_DEFAULT` lookup finds first under LD_PRELOAD). NULL if CANN lacks the name.
    pub(crate) fn resolve(&self, own: *mut c_void) -> *mut c_void {
        let p = self.ptr.load(Acquire);
        if !p.is_null() {
            return p;
        }
        for lib in CANN_LIBS {
            let f = in_loaded(lib, self.name);
            if !f.is_null() && f != own {
                self.observe(f);
                return self.ptr.load(Acquire);
            }
        }
        // SAFETY: RTLD_DEFAULT lookup of a NUL-terminated name through the real dlsym.
        let f = unsafe { real_dlsym()(libc::RTLD_DEFAULT, self.name.as_ptr()) };
        if f.is_null() || f == own {
            return null_mut();
        }
        self.observe(f);
        self.ptr.load(Acquire)
    }

    /// The remembered address as a function pointer of type `F`.
    ///
    /// # Safety
    /// `F` must be the C signature of this slot's function, and the slot must be filled (a
    /// wrapper is only handed out after its slot was claimed).
    #[inline]
    pub(crate) unsafe fn get<F: Copy>(&self) -> F {
        const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
        let p = self.load();
        // SAFETY: F is a function-pointer type of pointer size (asserted above) and p is the real
        // function with F's signature, per this function's contract.
        unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
    }
}

/// Declares one library's hooked names in one table: a [`Slot`] per name and a dispatch
/// function `fn $wrap(name, found) -> Option<wrapper>` for the dlsym hook.
///
/// ```ignore
/// hook_table! {
///     /// Wraps an HCCL function.
///     pub(crate) fn wrap {
///         c"HcclAllReduce" => ALL_REDUCE: all_reduce,
///     }
/// }
/// ```
macro_rules! hook_table {
    ($(#[$doc:meta])* $vis:vis fn $wrap:ident { $($name:literal => $slot:ident : $wrapper:expr),* $(,)? }) => {
        $( static $slot: $crate::hook::Slot = $crate::hook::Slot::new($name); )*

        $(#[$doc])*
        $vis fn $wrap(name: &[u8], found: *mut std::ffi::c_void) -> Option<*mut std::ffi::c_void> {
            $(
                if name == $slot.name().to_bytes() {
                    return $slot.claim(found, $wrapper as *mut std::ffi::c_void);
                }
            )*
            None
        }
    };
}
pub(crate) use hook_table;
