//! aclop wrappers: `aclopExecute(V2)`, `aclopCompileAndExecute(V2)` and `aclopCast`, captured
//! from their descriptors and data buffers, plus the attribute setters (an `aclopAttr` has no
//! getters, cann-abi.md §4.4).
//!
//! torch_npu links `aclopCompileAndExecute`, `aclopCreateAttr`/`aclopDestroyAttr` and the
//! `aclopSetAttr*` setters directly (PLT), so the first three and the Int/Bool setters are also
//! exported from libmsprobe ([`exports`]); everything else arrives through the dlsym hook.

use super::activation::{self, capturing};
use super::capture::{kernel_launch, KArg};
use super::meta::{self, Obj, Role, TensorMeta};
use crate::hook::{hook_table, Slot};
use cann_abi::status::ACL_ERROR_INVALID_PARAM;
use msprobe_core::json::Json;
use msprobe_core::record::value_leaf;
use std::ffi::{c_char, c_int, c_void, CStr};

type P = *mut c_void;

static GET_DESC_TYPE: Slot = Slot::new(c"aclGetTensorDescType");
static GET_DESC_NUM_DIMS: Slot = Slot::new(c"aclGetTensorDescNumDims");
static GET_DESC_DIM_V2: Slot = Slot::new(c"aclGetTensorDescDimV2");
static GET_BUF_ADDR: Slot = Slot::new(c"aclGetDataBufferAddr");
static GET_BUF_SIZE: Slot = Slot::new(c"aclGetDataBufferSizeV2");

/// The getters the capture calls (remembered when clients look them up).
pub(crate) static OBSERVED: [&Slot; 5] =
    [&GET_DESC_TYPE, &GET_DESC_NUM_DIMS, &GET_DESC_DIM_V2, &GET_BUF_ADDR, &GET_BUF_SIZE];

/// A descriptor + buffer as a contiguous view (origin dims over the buffer).
fn desc_tensor(desc: P, buf: P, role: Role) -> KArg {
    if desc.is_null() || buf.is_null() {
        return KArg::Missing(role);
    }
    let (t, nd, dim, addr) =
        (GET_DESC_TYPE.resolve(), GET_DESC_NUM_DIMS.resolve(), GET_DESC_DIM_V2.resolve(), GET_BUF_ADDR.resolve());
    if t.is_null() || nd.is_null() || dim.is_null() || addr.is_null() {
        return KArg::Missing(role);
    }
    // SAFETY: the pointers are the real acl_base getters with these C signatures, called on the
    // caller's live descriptor and buffer.
    unsafe {
        let dtype = std::mem::transmute::<P, unsafe extern "C" fn(P) -> c_int>(t)(desc);
        let n = std::mem::transmute::<P, unsafe extern "C" fn(P) -> usize>(nd)(desc);
        if n > 64 {
            return KArg::Missing(role); // unknown rank
        }
        let get_dim = std::mem::transmute::<P, unsafe extern "C" fn(P, usize, *mut i64) -> c_int>(dim);
        let mut shape = Vec::with_capacity(n);
        for i in 0..n {
            let mut d = 0i64;
            if get_dim(desc, i, &mut d) != 0 {
                return KArg::Missing(role);
            }
            shape.push(d);
        }
        let a = std::mem::transmute::<P, unsafe extern "C" fn(P) -> P>(addr)(buf);
        // Never read past the data buffer: a descriptor larger than its buffer is recorded as null.
        let size_fn = GET_BUF_SIZE.resolve();
        if !size_fn.is_null() {
            let size = std::mem::transmute::<P, unsafe extern "C" fn(P) -> usize>(size_fn)(buf);
            let es = msprobe_core::dtype::DType::from_acl(dtype).map(|d| d.size()).unwrap_or(1) as u128;
            if msprobe_core::layout::numel(&shape) * es > size as u128 {
                return KArg::Missing(role);
            }
        }
        KArg::Tensor(TensorMeta { dtype, shape, strides: None, offset: 0, addr: a as usize }, role)
    }
}

fn attrs(attr: P) -> KArg {
    let kv = match meta::objects().get(&(attr as usize)) {
        Some(Obj::Value(Json::Object(kv))) => kv.clone(),
        _ => Vec::new(),
    };
    KArg::Value(Json::Object(kv))
}

/// # Safety
/// `descs`/`bufs` must hold `n` pointers (or be NULL with n = 0).
unsafe fn tensors(n: c_int, descs: *const P, bufs: *const P, role: Role) -> Vec<KArg> {
    (0..n.max(0) as usize)
        .map(|i| {
            if descs.is_null() || bufs.is_null() {
                return KArg::Missing(role);
            }
            // SAFETY: per the function contract, i < n.
            let (d, b) = unsafe { (*descs.add(i), *bufs.add(i)) };
            desc_tensor(d, b, role)
        })
        .collect()
}

/// Captures one aclop execution; the attribute values become the record's last input leaf.
#[allow(clippy::too_many_arguments)]
fn execute(
    op_type: *const c_char,
    n_in: c_int,
    in_desc: *const P,
    inputs: *const P,
    n_out: c_int,
    out_desc: *const P,
    outputs: *const P,
    attr: P,
    stream: P,
    real: impl FnOnce() -> i32,
) -> i32 {
    let Some(l2) = (if capturing() { activation::l2() } else { None }) else { return real() };
    let op = if op_type.is_null() {
        "unknown".to_string()
    } else {
        // SAFETY: opType is the caller's NUL-terminated op type name.
        unsafe { CStr::from_ptr(op_type) }.to_string_lossy().into_owned()
    };
    // SAFETY: the arrays hold n_in / n_out entries (aclop contract).
    let mut args = unsafe { tensors(n_in, in_desc, inputs, Role::In) };
    args.push(attrs(attr));
    // SAFETY: as above.
    args.extend(unsafe { tensors(n_out, out_desc, outputs, Role::Out) });
    kernel_launch(&l2, "Aclop", &op, args, stream, real)
}

type ExecFn = unsafe extern "C" fn(*const c_char, c_int, *const P, *const P, c_int, *const P, *const P, P, P) -> c_int;
type CompileExecFn = unsafe extern "C" fn(
    *const c_char,
    c_int,
    *const P,
    *const P,
    c_int,
    *const P,
    *const P,
    P,
    c_int,
    c_int,
    *const c_char,
    P,
) -> c_int;

macro_rules! exec_hook {
    ($fn:ident, $slot:ident) => {
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $fn(
            op: *const c_char,
            ni: c_int,
            id: *const P,
            i: *const P,
            no: c_int,
            od: *const P,
            o: *const P,
            attr: P,
            stream: P,
        ) -> c_int {
            // SAFETY: the slot holds the real function of this name (signature ExecFn).
            let f: ExecFn = unsafe { $slot.get::<ExecFn>() };
            // SAFETY: the caller's arguments, unchanged.
            execute(op, ni, id, i, no, od, o, attr, stream, || unsafe { f(op, ni, id, i, no, od, o, attr, stream) })
        }
    };
}
exec_hook!(execute_v1, EXECUTE);
exec_hook!(execute_v2, EXECUTE_V2);

macro_rules! compile_exec_hook {
    ($fn:ident, $slot:ident) => {
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $fn(
            op: *const c_char,
            ni: c_int,
            id: *const P,
            i: *const P,
            no: c_int,
            od: *const P,
            o: *const P,
            attr: P,
            engine: c_int,
            flag: c_int,
            path: *const c_char,
            stream: P,
        ) -> c_int {
            // SAFETY: the slot holds the real function of this name (signature CompileExecFn).
            let f: CompileExecFn = unsafe { $slot.get::<CompileExecFn>() };
            // SAFETY: the caller's arguments, unchanged.
            execute(op, ni, id, i, no, od, o, attr, stream, || unsafe {
                f(op, ni, id, i, no, od, o, attr, engine, flag, path, stream)
            })
        }
    };
}
compile_exec_hook!(compile_execute, COMPILE_EXECUTE);
compile_exec_hook!(compile_execute_v2, COMPILE_EXECUTE_V2);

unsafe extern "C" fn cast(src_desc: P, src: P, dst_desc: P, dst: P, truncate: u8, stream: P) -> c_int {
    type F = unsafe extern "C" fn(P, P, P, P, u8, P) -> c_int;
    // SAFETY: the slot holds the real aclopCast.
    let f: F = unsafe { CAST.get::<F>() };
    let Some(l2) = (if capturing() { activation::l2() } else { None }) else {
        // SAFETY: the caller's arguments, unchanged.
        return unsafe { f(src_desc, src, dst_desc, dst, truncate, stream) };
    };
    let args = vec![
        desc_tensor(src_desc, src, Role::In),
        KArg::Value(value_leaf("int", Json::Int(truncate as i128))),
        desc_tensor(dst_desc, dst, Role::Out),
    ];
    // SAFETY: as above.
    kernel_launch(&l2, "Aclop", "Cast", args, stream, || unsafe { f(src_desc, src, dst_desc, dst, truncate, stream) })
}

// ---- attributes ----

fn set_attr(attr: P, name: *const c_char, v: Json) {
    if attr.is_null() || name.is_null() || !capturing() {
        return;
    }
    // SAFETY: attrName is the caller's NUL-terminated attribute name.
    let k = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
    let mut objs = meta::objects();
    let e = objs.entry(attr as usize).or_insert_with(|| Obj::Value(Json::Object(Vec::new())));
    if let Obj::Value(Json::Object(kv)) = e {
        match kv.iter_mut().find(|(n, _)| *n == k) {
            Some(slot) => slot.1 = v,
            None => kv.push((k.into(), v)),
        }
    }
}

macro_rules! attr_hook {
    ($fn:ident, $slot:ident, $t:ty, $leaf:expr) => {
        unsafe extern "C" fn $fn(attr: P, name: *const c_char, v: $t) -> c_int {
            type F = unsafe extern "C" fn(P, *const c_char, $t) -> c_int;
            // SAFETY: the slot holds the real setter of this name.
            let f: F = unsafe { $slot.get::<F>() };
            // SAFETY: the caller's arguments, unchanged.
            let rc = unsafe { f(attr, name, v) };
            if rc == 0 {
                let _ = std::panic::catch_unwind(|| set_attr(attr, name, $leaf(v)));
            }
            rc
        }
    };
}
attr_hook!(set_attr_bool, SET_ATTR_BOOL, u8, |v: u8| value_leaf("bool", Json::Bool(v != 0)));
attr_hook!(set_attr_int, SET_ATTR_INT, i64, |v: i64| value_leaf("int", Json::Int(v as i128)));
attr_hook!(set_attr_float, SET_ATTR_FLOAT, f32, |v: f32| value_leaf("float", Json::Float(v as f64)));
attr_hook!(set_attr_dtype, SET_ATTR_DTYPE, c_int, |v: c_int| value_leaf("aclDataType", Json::Int(v as i128)));
attr_hook!(set_attr_string, SET_ATTR_STRING, *const c_char, |v: *const c_char| {
    if v.is_null() {
        Json::Null
    } else {
        // SAFETY: attrValue is the caller's NUL-terminated string.
        value_leaf("str", Json::str(unsafe { CStr::from_ptr(v) }.to_string_lossy().into_owned()))
    }
});

unsafe extern "C" fn set_attr_list_int(attr: P, name: *const c_char, n: c_int, v: *const i64) -> c_int {
    type F = unsafe extern "C" fn(P, *const c_char, c_int, *const i64) -> c_int;
    // SAFETY: the slot holds the real aclopSetAttrListInt.
    let f: F = unsafe { SET_ATTR_LIST_INT.get::<F>() };
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { f(attr, name, n, v) };
    if rc == 0 && !v.is_null() && n >= 0 {
        let _ = std::panic::catch_unwind(|| {
            // SAFETY: the setter accepted n values at v.
            let vals = unsafe { std::slice::from_raw_parts(v, n as usize) };
            set_attr(attr, name, Json::Array(vals.iter().map(|x| value_leaf("int", Json::Int(*x as i128))).collect()));
        });
    }
    rc
}

unsafe extern "C" fn create_attr() -> P {
    type F = unsafe extern "C" fn() -> P;
    // SAFETY: the slot holds the real aclopCreateAttr.
    let f: F = unsafe { CREATE_ATTR.get::<F>() };
    // SAFETY: no arguments.
    let a = unsafe { f() };
    if !a.is_null() && capturing() {
        // A recycled pointer must not carry the attributes of a destroyed object.
        let _ = std::panic::catch_unwind(|| meta::forget(a as usize));
    }
    a
}

unsafe extern "C" fn destroy_attr(attr: P) {
    if capturing() {
        let _ = std::panic::catch_unwind(|| meta::forget(attr as usize));
    }
    type F = unsafe extern "C" fn(P);
    // SAFETY: the slot holds the real aclopDestroyAttr.
    let f: F = unsafe { DESTROY_ATTR.get::<F>() };
    // SAFETY: the caller's argument, unchanged.
    unsafe { f(attr) }
}

hook_table! {
    /// Wraps an aclop function (the table of hooked names).
    fn wrap_table {
        c"aclopExecute" => EXECUTE: execute_v1,
        c"aclopExecuteV2" => EXECUTE_V2: execute_v2,
        c"aclopCompileAndExecute" => COMPILE_EXECUTE: compile_execute,
        c"aclopCompileAndExecuteV2" => COMPILE_EXECUTE_V2: compile_execute_v2,
        c"aclopCast" => CAST: cast,
        c"aclopSetAttrBool" => SET_ATTR_BOOL: set_attr_bool,
        c"aclopSetAttrInt" => SET_ATTR_INT: set_attr_int,
        c"aclopSetAttrFloat" => SET_ATTR_FLOAT: set_attr_float,
        c"aclopSetAttrDataType" => SET_ATTR_DTYPE: set_attr_dtype,
        c"aclopSetAttrString" => SET_ATTR_STRING: set_attr_string,
        c"aclopSetAttrListInt" => SET_ATTR_LIST_INT: set_attr_list_int,
        c"aclopCreateAttr" => CREATE_ATTR: create_attr,
        c"aclopDestroyAttr" => DESTROY_ATTR: destroy_attr,
    }
}

/// Wraps an aclop function; an address of our own export (a client that looked the name up in
/// the global scope, where the preloaded library comes first) is handed back unchanged.
pub(crate) fn wrap(name: &[u8], found: *mut c_void) -> Option<*mut c_void> {
    if exports::is_export(found) {
        return Some(found);
    }
    wrap_table(name, found)
}

/// The names torch_npu links directly, exported so PLT calls reach the wrappers.
pub(crate) mod exports {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    /// The real function behind an export: the address a client looked up through dlsym, else
    /// the loaded CANN libraries' definition (never our export itself).
    fn real_of(slot: &Slot) -> P {
        slot.resolve()
    }

    pub(crate) fn is_export(p: P) -> bool {
        [
            aclopCompileAndExecute as P,
            aclopSetAttrInt as P,
            aclopSetAttrBool as P,
            aclopCreateAttr as P,
            aclopDestroyAttr as P,
        ]
        .contains(&p)
    }

    /// Exported `aclopCreateAttr` (torch_npu links it directly).
    ///
    /// # Safety
    /// The aclop C contract.
    #[no_mangle]
    pub unsafe extern "C" fn aclopCreateAttr() -> P {
        if real_of(&CREATE_ATTR).is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: the slot now holds the real function.
        unsafe { create_attr() }
    }

    /// Exported `aclopDestroyAttr` (torch_npu links it directly).
    ///
    /// # Safety
    /// The aclop C contract.
    #[no_mangle]
    pub unsafe extern "C" fn aclopDestroyAttr(attr: P) {
        if real_of(&DESTROY_ATTR).is_null() {
            return;
        }
        // SAFETY: the slot now holds the real function.
        unsafe { destroy_attr(attr) }
    }

    /// Exported `aclopCompileAndExecute` (torch_npu links it directly).
    ///
    /// # Safety
    /// The aclop C contract.
    #[no_mangle]
    #[allow(clippy::too_many_arguments)]
    pub unsafe extern "C" fn aclopCompileAndExecute(
        op: *const c_char,
        ni: c_int,
        id: *const P,
        i: *const P,
        no: c_int,
        od: *const P,
        o: *const P,
        attr: P,
        engine: c_int,
        flag: c_int,
        path: *const c_char,
        stream: P,
    ) -> c_int {
        let real = real_of(&COMPILE_EXECUTE);
        if real.is_null() {
            return ACL_ERROR_INVALID_PARAM; // no CANN loaded
        }
        if activation::STATE.load(Relaxed) == activation::UNKNOWN {
            activation::capturing();
        }
        // SAFETY: real is the CANN function of this name.
        unsafe { compile_execute(op, ni, id, i, no, od, o, attr, engine, flag, path, stream) }
    }

    /// Exported `aclopSetAttrInt`.
    ///
    /// # Safety
    /// The aclop C contract.
    #[no_mangle]
    pub unsafe extern "C" fn aclopSetAttrInt(attr: P, name: *const c_char, v: i64) -> c_int {
        if real_of(&SET_ATTR_INT).is_null() {
            return ACL_ERROR_INVALID_PARAM;
        }
        // SAFETY: the slot now holds the real setter.
        unsafe { set_attr_int(attr, name, v) }
    }

    /// Exported `aclopSetAttrBool`.
    ///
    /// # Safety
    /// The aclop C contract.
    #[no_mangle]
    pub unsafe extern "C" fn aclopSetAttrBool(attr: P, name: *const c_char, v: u8) -> c_int {
        if real_of(&SET_ATTR_BOOL).is_null() {
            return ACL_ERROR_INVALID_PARAM;
        }
        // SAFETY: the slot now holds the real setter.
        unsafe { set_attr_bool(attr, name, v) }
    }
}
