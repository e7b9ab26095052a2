//! The one table of a CANN library's hooked entry points, shared by both ways a client reaches
//! them:
//! - **dlsym**: the client looks the name up; the dispatch hands out the wrapper and remembers
//!   the real address in the entry's [`Slot`];
//! - **linked**: the client calls the name itself (PLT); under `LD_PRELOAD` our export of the
//!   same name comes first in the global scope. The export resolves the real definition in the
//!   loaded CANN libraries (never our own) into the same slot and calls the same wrapper.
//!
//! So both paths run one implementation, and a launch is captured once whichever path (or both,
//! nested) it took. An export whose name no loaded library defines returns the entry's `missing`
//! value (an error status, or NULL) and logs one error naming it: without us the loader would
//! have refused the call (`undefined symbol`). While capture is off an export costs two relaxed
//! loads (the slot, the capture state) before the real call.
//!
//! ```ignore
//! cann_table! {
//!     /// Wraps an HCCL function.
//!     pub(crate) fn wrap {
//!         export fn HcclAllReduce(send: P, ...) -> i32 = ALL_REDUCE: all_reduce, missing HCCL_E_NOT_SUPPORT;
//!         lookup fn HcclCommInitRootInfo(n: u32, ...) -> i32 = INIT_ROOT_INFO: init_root_info, missing HCCL_E_NOT_SUPPORT;
//!     }
//! }
//! ```
//! `export` entries are also exported for linking; `lookup` entries only reach clients through
//! dlsym (names a client may test for NULL, such as HCCL's weak communicator functions).

use super::activation;
use crate::hook::Slot;
use std::ffi::{c_void, CStr};

/// A Rust identifier as the C name of a [`Slot`].
pub(crate) const fn c_name(with_nul: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(with_nul.as_bytes()) {
        Ok(c) => c,
        Err(_) => panic!("a C name without inner NUL"),
    }
}

/// The real function behind an export, resolved on its first call (and again after another
/// library was loaded, while missing). NULL when no loaded library defines the name: logged once.
#[cold]
#[inline(never)]
pub(crate) fn resolve_export(slot: &Slot) -> *mut c_void {
    activation::lookup_while_off(|| slot.name().to_bytes());
    let f = slot.resolve();
    if f.is_null() {
        missing(slot.name());
    }
    f
}

/// What a lookup that found our own export of `slot`'s name returns: the export when a loaded
/// library defines the name (the export calls it), NULL when none does (as without us).
pub(crate) fn own_export(slot: &Slot, export: *mut c_void) -> *mut c_void {
    if slot.resolve().is_null() {
        std::ptr::null_mut()
    } else {
        export
    }
}

fn missing(name: &CStr) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let _ = std::panic::catch_unwind(|| {
        ONCE.call_once(|| {
            msprobe_core::logging::init();
            log::error!(
                "{} is called through libmsprobe's export, but no loaded library defines it; the call fails with an \
                 error status (without libmsprobe the loader would have refused it)",
                name.to_string_lossy()
            );
        })
    });
}

/// Declares one library's hooked entry points in one table: a [`Slot`] per name, the dispatch
/// function `fn $wrap(name, found) -> Option<wrapper>` of the dlsym hook, and for `export`
/// entries an exported function of the same name and C signature. See the module docs.
macro_rules! cann_table {
    ($(#[$doc:meta])* $vis:vis fn $wrap:ident { $(
        $kind:ident fn $name:ident ( $($a:ident : $t:ty),* $(,)? ) -> $ret:ty = $slot:ident : $wrapper:ident, missing $miss:expr;
    )* }) => {
        $(
            static $slot: $crate::hook::Slot =
                $crate::hook::Slot::new($crate::interposer::table::c_name(concat!(stringify!($name), "\0")));
        )*

        $(#[$doc])*
        $vis fn $wrap(name: &[u8], found: *mut std::ffi::c_void) -> Option<*mut std::ffi::c_void> {
            $(
                if name == stringify!($name).as_bytes() {
                    if $crate::hook::is_own(found) {
                        // Our own export (a global-scope lookup): it does the work itself, but
                        // only when some loaded library defines the name; else the lookup fails
                        // as it would without us.
                        return Some($crate::interposer::table::own_export(&$slot, found));
                    }
                    return $slot.claim(found, $wrapper as *mut std::ffi::c_void);
                }
            )*
            None
        }

        $( $crate::interposer::table::cann_table!(@$kind $name ($($a: $t),*) -> $ret = $slot: $wrapper, $miss); )*
    };
    (@lookup $($rest:tt)*) => {};
    (@export $name:ident ($($a:ident : $t:ty),*) -> $ret:ty = $slot:ident : $wrapper:ident, $miss:expr) => {
        /// Exported for clients that link this CANN name directly: the real function when capture
        /// is off, else the wrapper the dlsym path hands out (`interposer::table`).
        ///
        /// # Safety
        /// The CANN C contract of this function.
        #[no_mangle]
        #[allow(non_snake_case, clippy::too_many_arguments, clippy::unused_unit)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $ret {
            type F = unsafe extern "C" fn($($t),*) -> $ret;
            let f = $slot.load();
            if !f.is_null() && $crate::interposer::activation::idle() {
                // SAFETY: f is the real definition of this name (never ours), with C signature F.
                let f: F = unsafe { std::mem::transmute::<*mut std::ffi::c_void, F>(f) };
                // SAFETY: the caller's arguments, unchanged.
                return unsafe { f($($a),*) };
            }
            /// Everything but the idle call, out of line so the idle path saves no register.
            #[cold]
            #[inline(never)]
            #[allow(non_snake_case, clippy::too_many_arguments, clippy::unused_unit)]
            unsafe fn slow($($a: $t),*) -> $ret {
                let mut f = $slot.load();
                if f.is_null() {
                    f = $crate::interposer::table::resolve_export(&$slot);
                    if f.is_null() {
                        return $miss;
                    }
                }
                if !$crate::interposer::activation::capturing() {
                    // SAFETY: as above.
                    let f: F = unsafe { std::mem::transmute::<*mut std::ffi::c_void, F>(f) };
                    // SAFETY: the caller's arguments, unchanged.
                    return unsafe { f($($a),*) };
                }
                // SAFETY: the slot is filled, as the wrapper requires; the caller's arguments, unchanged.
                $crate::interposer::activation::linked(|| unsafe { $wrapper($($a),*) })
            }
            // SAFETY: the caller's arguments, unchanged.
            unsafe { slow($($a),*) }
        }
    };
}
pub(crate) use cann_table;
