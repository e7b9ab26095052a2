//! libmsprobe.so's C ABI (`include/msprobe.h`), reached through function pointers looked up in
//! the library the Python layer already loaded. Going through the C ABI (rather than linking the
//! recorder crate in) keeps one recorder per process, preloaded or not.
//!
//! All raw pointers of this crate live here: [`Abi`] turns them into safe methods on [`Rec`].
//! `tests/python/test_abi.py` checks every declaration below against the generated header.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::null;

/// `MsprobeTensor` of msprobe.h.
#[repr(C)]
pub struct Tensor {
    pub dtype: i32,
    pub ndim: i32,
    pub shape: *const i64,
    pub strides: *const i64,
    pub offset: i64,
    pub data: *const c_void,
    pub storage_bytes: u64,
    pub requires_grad: i32,
    pub type_name: *const c_char,
}

/// An open record handle (`MsprobeRecord *`), carried through Python as an int.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Rec(pub usize);

type Key = *const c_char;
type R = *mut c_void;

macro_rules! abi {
    ($($field:ident = $sym:literal : fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The C ABI functions this crate calls.
        pub struct Abi {
            $(pub $field: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        impl Abi {
            /// Looks every function up in `handle` (a `dlopen` handle of libmsprobe.so, or of the
            /// main program when the library is preloaded).
            pub fn load(handle: usize) -> Result<Abi, String> {
                Ok(Abi {
                    $($field: {
                        let name = concat!($sym, "\0");
                        // SAFETY: `handle` is a dlopen handle (ctypes' `CDLL._handle`) and `name`
                        // is NUL-terminated; dlsym only reads them.
                        let p = unsafe { libc::dlsym(handle as *mut c_void, name.as_ptr().cast()) };
                        if p.is_null() {
                            return Err(format!("libmsprobe.so has no symbol {}", $sym));
                        }
                        // SAFETY: the symbol is the msprobe.h function of this exact signature.
                        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) $(-> $ret)?>(p) }
                    },)*
                })
            }
        }
    };
}

abi! {
    is_enabled = "msprobe_is_enabled": fn() -> c_int;
    dtype_size = "msprobe_dtype_size": fn(i32) -> usize;
    next_index = "msprobe_next_index": fn(Key) -> i64;
    begin = "msprobe_record_begin": fn(Key) -> R;
    section = "msprobe_record_section": fn(R, Key) -> c_int;
    open = "msprobe_record_open": fn(R, Key, c_int) -> c_int;
    close = "msprobe_record_close": fn(R) -> c_int;
    add_tensor = "msprobe_record_add_tensor": fn(R, Key, *const Tensor) -> c_int;
    add_tensor_mean_norm = "msprobe_record_add_tensor_mean_norm": fn(R, Key, *const Tensor, f64, f64) -> c_int;
    add_null = "msprobe_record_add_null": fn(R, Key) -> c_int;
    add_bool = "msprobe_record_add_bool": fn(R, Key, Key, c_int) -> c_int;
    add_int = "msprobe_record_add_int": fn(R, Key, Key, i64) -> c_int;
    add_float = "msprobe_record_add_float": fn(R, Key, Key, f64) -> c_int;
    add_str = "msprobe_record_add_str": fn(R, Key, Key, Key, Key) -> c_int;
    set_stack = "msprobe_record_set_stack": fn(R, *const Key, usize) -> c_int;
    set_parent = "msprobe_record_set_parent": fn(R, Key) -> c_int;
    end = "msprobe_record_end": fn(R) -> c_int;
    abort = "msprobe_record_abort": fn(R);
    construct_set = "msprobe_construct_set": fn(Key, Key) -> c_int;
}

fn key(k: Option<&CStr>) -> Key {
    k.map_or(null(), CStr::as_ptr)
}

fn rp(r: Rec) -> R {
    r.0 as R
}

// SAFETY (every method below): `r` is a handle returned by `begin` and not yet ended or aborted
// (the Python layer hands back only what `begin` gave it, once); keys and strings are valid
// NUL-terminated strings for the duration of the call; the recorder copies what it keeps.
impl Abi {
    /// Bytes per element of each aclDataType number below 64 that the recorder reads (0: not
    /// read), asked once from the library: the sizes have one table, in the `cann-abi` crate.
    pub fn item_sizes(&self) -> [u8; 64] {
        std::array::from_fn(|code| {
            // SAFETY: takes and returns plain integers.
            let n = unsafe { (self.dtype_size)(code as i32) };
            u8::try_from(n).unwrap_or(0)
        })
    }

    pub fn enabled(&self) -> bool {
        // SAFETY: no arguments.
        unsafe { (self.is_enabled)() != 0 }
    }

    pub fn next(&self, counter: &CStr) -> i64 {
        // SAFETY: see the impl comment.
        unsafe { (self.next_index)(counter.as_ptr()) }
    }

    /// construct.json: `name`'s parent module (None: a top-level one).
    pub fn construct(&self, name: &CStr, parent: Option<&CStr>) {
        // SAFETY: see the impl comment.
        unsafe { (self.construct_set)(name.as_ptr(), key(parent)) };
    }

    /// `None` when capture is off or the name is filtered out.
    pub fn begin(&self, name: &CStr) -> Option<Rec> {
        // SAFETY: see the impl comment.
        let r = unsafe { (self.begin)(name.as_ptr()) };
        (!r.is_null()).then_some(Rec(r as usize))
    }

    /// true when data_mode keeps the section.
    pub fn section(&self, r: Rec, name: &CStr) -> bool {
        // SAFETY: see the impl comment.
        unsafe { (self.section)(rp(r), name.as_ptr()) != 0 }
    }

    pub fn open(&self, r: Rec, k: Option<&CStr>, dict: bool) {
        // SAFETY: see the impl comment.
        unsafe { (self.open)(rp(r), key(k), dict as c_int) };
    }

    pub fn close(&self, r: Rec) {
        // SAFETY: see the impl comment.
        unsafe { (self.close)(rp(r)) };
    }

    /// The recorder is done with `t` and the memory it points at when this returns.
    pub fn tensor(&self, r: Rec, k: Option<&CStr>, t: &Tensor) {
        // SAFETY: see the impl comment; `t` describes memory the caller keeps alive for the call.
        unsafe { (self.add_tensor)(rp(r), key(k), t) };
    }

    /// [`tensor`](Self::tensor) with the leaf's Mean and Norm given (the framework's own).
    pub fn tensor_mean_norm(&self, r: Rec, k: Option<&CStr>, t: &Tensor, mean: f64, norm: f64) {
        // SAFETY: see the impl comment; `t` describes memory the caller keeps alive for the call.
        unsafe { (self.add_tensor_mean_norm)(rp(r), key(k), t, mean, norm) };
    }

    pub fn null(&self, r: Rec, k: Option<&CStr>) {
        // SAFETY: see the impl comment.
        unsafe { (self.add_null)(rp(r), key(k)) };
    }

    pub fn bool(&self, r: Rec, k: Option<&CStr>, v: bool) {
        // SAFETY: see the impl comment.
        unsafe { (self.add_bool)(rp(r), key(k), null(), v as c_int) };
    }

    pub fn int(&self, r: Rec, k: Option<&CStr>, v: i64) {
        // SAFETY: see the impl comment.
        unsafe { (self.add_int)(rp(r), key(k), null(), v) };
    }

    pub fn float(&self, r: Rec, k: Option<&CStr>, v: f64) {
        // SAFETY: see the impl comment.
        unsafe { (self.add_float)(rp(r), key(k), null(), v) };
    }

    pub fn str(&self, r: Rec, k: Option<&CStr>, v: &CStr) {
        // SAFETY: see the impl comment.
        unsafe { (self.add_str)(rp(r), key(k), null(), v.as_ptr(), null()) };
    }

    /// `frames` point at strings that outlive the call (the frame cache never frees them).
    pub fn stack(&self, r: Rec, frames: &[&'static CStr]) {
        let ptrs: Vec<Key> = frames.iter().map(|s| s.as_ptr()).collect();
        // SAFETY: see the impl comment; `ptrs` holds `len` valid string pointers.
        unsafe { (self.set_stack)(rp(r), ptrs.as_ptr(), ptrs.len()) };
    }

    /// The record's own construct.json entry: its parent module (None: a top-level one).
    pub fn parent(&self, r: Rec, parent: Option<&CStr>) {
        // SAFETY: see the impl comment.
        unsafe { (self.set_parent)(rp(r), key(parent)) };
    }

    pub fn end(&self, r: Rec) {
        // SAFETY: see the impl comment; the handle is consumed here.
        unsafe { (self.end)(rp(r)) };
    }

    pub fn abort(&self, r: Rec) {
        // SAFETY: see the impl comment; the handle is consumed here.
        unsafe { (self.abort)(rp(r)) };
    }
}
