//! The exported C ABI. Every function is `extern "C"`, wrapped in `catch_unwind`, and only
//! translates between C arguments and the internal modules.
#![allow(non_snake_case)]
#![allow(clippy::missing_safety_doc)]
// The exported functions are C entry points: dereferencing the caller's pointers is their contract
// (exactly as in the real CANN libraries), so they cannot be `unsafe fn` in the Rust sense.
#![allow(clippy::not_unsafe_ptr_arg_deref)]
#![allow(clippy::too_many_arguments)]

pub mod aclnn;
pub mod aclnn_act;
pub mod aclnn_attn;
pub mod aclnn_dim;
pub mod aclnn_ext;
pub mod aclnn_fill;
pub mod aclnn_loss;
pub mod aclnn_misc;
pub mod aclnn_ms;
pub mod aclnn_norm;
pub mod aclnn_spatial;
pub mod aclop;
pub mod hccl;
pub mod nnopbase;
pub mod platform;
pub mod runtime;
pub mod tdt;

/// Run `f`, converting a panic into `default` (panics must not unwind into C).
pub(crate) fn guard<T>(default: T, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            eprintln!("[cannsim] internal panic caught at the C ABI boundary");
            default
        }
    }
}

/// Copy `n` elements from a C array (NULL with n>0 -> None).
pub(crate) fn slice_to_vec<T: Copy>(p: *const T, n: usize) -> Option<Vec<T>> {
    if n == 0 {
        return Some(Vec::new());
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: the C caller passes an array of at least `n` elements (ABI contract).
    Some(unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
}

/// Store `v` through an out-pointer; false if the pointer is NULL.
pub(crate) fn put<T>(p: *mut T, v: T) -> bool {
    if p.is_null() {
        return false;
    }
    // SAFETY: non-NULL out-pointer supplied by the C caller for exactly this purpose.
    unsafe { p.write(v) };
    true
}

/// Borrow a C string (NULL -> None).
pub(crate) fn cstr(p: *const std::os::raw::c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL NUL-terminated string supplied by the C caller.
    Some(unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned())
}
