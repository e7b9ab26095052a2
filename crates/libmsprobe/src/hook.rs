//! The one hook mechanism: a [`Slot`] holds the real CANN function behind a name (the tables of
//! hooked names, their slots, wrappers and exports are declared with `interposer::table`).
//!
//! A slot is filled in one of two ways:
//! - **claimed** by the dlsym hook when a client looks the name up (the wrapper is handed out
//!   and the real address remembered), or
//! - **resolved** on first use from the CANN libraries already loaded, for the functions the tool
//!   calls itself (stream sync, device copies, getters) and for our exported link-time entry
//!   points. These use the real `dlsym` ([`real_dlsym`]) on handles of the loaded objects, never
//!   our own hook or exports, so the tool's own calls are never captured. The objects are found
//!   whatever path or file name the client opened them by: first those defining the CANN
//!   functions clients resolved ([`note_cann`]), then the CANN client names, then every loaded
//!   object (`dl_iterate_phdr`).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::*};

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

/// The CANN libraries that define the functions we hook or call, by their client file names.
const CANN_LIBS: [&CStr; 7] = [
    c"libascendcl.so",
    c"libacl_rt.so",
    c"libacl_op_compiler.so",
    c"libacl_op_executor.so",
    c"libhccl.so",
    c"libnnopbase.so",
    c"libopapi.so",
];

/// The CANN library families whose functions the dlsym hook recognises.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Family {
    /// aclrt* and acl_base (the functions the tool calls itself).
    Runtime,
    /// nnopbase objects and executors.
    Nnopbase,
    /// aclnn ops (libopapi and its siblings).
    Aclnn,
    /// aclop.
    Aclop,
    /// HCCL.
    Hccl,
}

/// One real CANN function per family that a client resolved through the dlsym hook: the objects
/// defining them are where the client's CANN is, whatever path or name it was opened by.
static SEEN: [AtomicPtr<c_void>; 5] = [const { AtomicPtr::new(null_mut()) }; 5];

/// Remembers `p`, the real function a client's lookup of a CANN name found (the first per family
/// is kept). Called from the dlsym hook: an atomic load, once a compare-and-swap; no allocation,
/// no lock.
#[inline]
pub(crate) fn note_cann(family: Family, p: *mut c_void) {
    let s = &SEEN[family as usize];
    if s.load(Relaxed).is_null() {
        let _ = s.compare_exchange(null_mut(), p, Release, Relaxed);
    }
}

/// Looks `name` up in an already loaded library (`RTLD_NOLOAD`), through the real dlsym. `lib`
/// is matched like `dlopen` does: a path against the loaded objects' paths, a bare name against
/// their names and sonames, then the search path. A handle that yields a definition of our own
/// is dropped; one that yields a real definition is kept so the address stays valid.
pub(crate) fn in_loaded(lib: &CStr, name: &CStr) -> *mut c_void {
    // SAFETY: dlopen with RTLD_NOLOAD only returns a handle for an already loaded object.
    let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return null_mut();
    }
    // SAFETY: h is a live handle and name is NUL-terminated. A handle's lookup searches that
    // object and its dependencies only, not the global scope.
    let f = unsafe { real_dlsym()(h, name.as_ptr()) };
    if f.is_null() || in_own_object(f) {
        // SAFETY: drops the reference the NOLOAD dlopen above added; the object stays loaded.
        unsafe { libc::dlclose(h) };
        return null_mut();
    }
    f
}

/// Whether `p` lies in libmsprobe itself (one of our exports, never a real CANN function).
pub(crate) fn is_own(p: *mut c_void) -> bool {
    in_own_object(p)
}

/// Whether `p` lies in libmsprobe itself (our exports are never the real CANN function).
fn in_own_object(p: *mut c_void) -> bool {
    static OWN_BASE: AtomicPtr<c_void> = AtomicPtr::new(null_mut());
    let mut base = OWN_BASE.load(Relaxed);
    if base.is_null() {
        base = object_of(in_own_object as *mut c_void).map_or(null_mut(), |i| i.dli_fbase);
        OWN_BASE.store(base, Relaxed);
    }
    !base.is_null() && object_of(p).is_some_and(|i| i.dli_fbase == base)
}

/// `dladdr`: the loaded object holding `p`.
fn object_of(p: *mut c_void) -> Option<libc::Dl_info> {
    // SAFETY: Dl_info is plain data; all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables and fills `info`.
    let found = unsafe { libc::dladdr(p, &mut info) } != 0;
    (found && !info.dli_fbase.is_null()).then_some(info)
}

/// `name` in the object that defines `p` (and its dependencies), found by the object's path as
/// the loader knows it.
fn in_object_of(p: *mut c_void, name: &CStr) -> *mut c_void {
    match object_of(p) {
        // SAFETY: dli_fname is the loader's NUL-terminated name of a loaded object.
        Some(info) if !info.dli_fname.is_null() => in_loaded(unsafe { CStr::from_ptr(info.dli_fname) }, name),
        _ => null_mut(),
    }
}

/// The loaded objects' names (paths as opened; the main program's empty name left out) and the
/// loader's count of objects added so far (`dlpi_adds`, 0 if unknown).
fn loaded_objects(names: bool) -> (Vec<CString>, u64) {
    struct Walk {
        names: Option<Vec<CString>>,
        adds: u64,
    }
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, size: usize, data: *mut c_void) -> c_int {
        // SAFETY: data is the Walk passed to dl_iterate_phdr below, used by this walk only.
        let w = unsafe { &mut *(data as *mut Walk) };
        // SAFETY: the loader passes a valid dl_phdr_info of `size` bytes for this callback.
        let info = unsafe { &*info };
        if size >= std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs) {
            w.adds = info.dlpi_adds;
        }
        let Some(names) = w.names.as_mut() else { return 1 }; // the count only: stop here
        if !info.dlpi_name.is_null() {
            // SAFETY: dlpi_name is the loader's NUL-terminated name of this object.
            let n = unsafe { CStr::from_ptr(info.dlpi_name) };
            if !n.is_empty() {
                names.push(n.to_owned());
            }
        }
        0
    }
    let mut w = Walk { names: names.then(Vec::new), adds: 0 };
    // SAFETY: the callback only reads the info and writes `w`, which outlives the call; it calls
    // no loader function (dlopen happens after the walk).
    unsafe { libc::dl_iterate_phdr(Some(each), &mut w as *mut Walk as *mut c_void) };
    (w.names.unwrap_or_default(), w.adds)
}

/// The real definition of `name` in this process, never one of ours: in the objects of the CANN
/// functions clients resolved, in the CANN libraries by their client names, in every loaded
/// object, then in the global scope. NULL if no loaded object defines it.
fn find_real(name: &CStr) -> *mut c_void {
    let seen = SEEN.iter().map(|s| s.load(Acquire)).filter(|p| !p.is_null());
    let f = seen
        .map(|p| in_object_of(p, name))
        .chain(CANN_LIBS.iter().map(|lib| in_loaded(lib, name)))
        .find(|f| !f.is_null())
        .or_else(|| loaded_objects(true).0.iter().map(|o| in_loaded(o, name)).find(|f| !f.is_null()))
        .or_else(|| {
            // SAFETY: RTLD_DEFAULT lookup of a NUL-terminated name through the real dlsym.
            let f = unsafe { real_dlsym()(libc::RTLD_DEFAULT, name.as_ptr()) };
            (!f.is_null() && !in_own_object(f)).then_some(f)
        })
        .unwrap_or(null_mut());
    // Our failed lookups set dlerror's message; clear it so the client's next dlerror() is its own.
    // SAFETY: dlerror only reads and resets this thread's loader error state.
    unsafe { libc::dlerror() };
    f
}

/// The real function behind one CANN name.
pub(crate) struct Slot {
    ptr: AtomicPtr<c_void>,
    name: &'static CStr,
    /// The loader's count of added objects when [`Slot::resolve`] last found nothing (0: never):
    /// until another object is loaded, the search is not repeated.
    missed_at: AtomicU64,
}

impl Slot {
    pub(crate) const fn new(name: &'static CStr) -> Slot {
        Slot { ptr: AtomicPtr::new(null_mut()), name, missed_at: AtomicU64::new(0) }
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

    /// The real function: the remembered address, else the definition in the loaded libraries
    /// (whatever path or name the client opened them by; never our export of the same name, which
    /// a global-scope lookup finds first under LD_PRELOAD). NULL if no loaded object defines the
    /// name; the search is repeated only after the loader added an object.
    pub(crate) fn resolve(&self) -> *mut c_void {
        let p = self.ptr.load(Acquire);
        if !p.is_null() {
            return p;
        }
        let adds = loaded_objects(false).1;
        if adds != 0 && self.missed_at.load(Relaxed) == adds {
            return null_mut();
        }
        let f = find_real(self.name);
        if f.is_null() {
            self.missed_at.store(adds, Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_object_is_never_taken_for_the_real_function() {
        assert!(in_own_object(in_own_object as *mut c_void));
        // SAFETY: a plain RTLD_DEFAULT lookup through the real dlsym.
        let strlen = unsafe { real_dlsym()(libc::RTLD_DEFAULT, c"strlen".as_ptr()) };
        assert!(!strlen.is_null() && !in_own_object(strlen));
    }

    #[test]
    fn resolves_from_the_loaded_objects_and_remembers_a_miss() {
        static FOUND: Slot = Slot::new(c"strlen");
        // SAFETY: as above.
        let want = unsafe { real_dlsym()(libc::RTLD_DEFAULT, c"strlen".as_ptr()) };
        assert_eq!(FOUND.resolve(), want);
        static MISSING: Slot = Slot::new(c"msprobe_test_no_such_function");
        assert!(MISSING.resolve().is_null());
        let adds = loaded_objects(false).1;
        assert!(adds > 0 && MISSING.missed_at.load(Relaxed) == adds);
        assert!(MISSING.resolve().is_null() && MISSING.load().is_null());
        // Every loaded object with a name is listed (libc among them).
        let (names, adds_again) = loaded_objects(true);
        assert_eq!(adds_again, adds);
        assert!(names.iter().any(|n| n.to_bytes().windows(4).any(|w| w == b"libc")), "{names:?}");
    }

    #[test]
    fn a_noted_function_leads_to_its_object() {
        // SAFETY: as above.
        let strlen = unsafe { real_dlsym()(libc::RTLD_DEFAULT, c"strlen".as_ptr()) };
        // SAFETY: as above.
        let memcpy = unsafe { real_dlsym()(libc::RTLD_DEFAULT, c"memcpy".as_ptr()) };
        assert_eq!(in_object_of(strlen, c"memcpy"), memcpy);
        assert!(in_object_of(strlen, c"msprobe_test_no_such_function").is_null());
        assert!(in_object_of(std::ptr::null_mut(), c"memcpy").is_null());
    }
}
