//! aclop wrappers: `aclopExecute(V2)`, `aclopCompileAndExecute(V2)` and `aclopCast`, captured
//! from their descriptors and data buffers; the attribute setters (an `aclopAttr` has no
//! getters, cann-abi.md §4.4); and the descriptor calls that say where an input lives
//! (`aclSetTensorPlaceMent`, `aclSetTensorConst`: no getters either), so host-placed and const
//! inputs are read from host memory.
//!
//! Every name of the table is also exported for clients that link it directly (torch_npu links
//! `aclopCompileAndExecute`, the attribute calls and the descriptor setters, cann-abi.md §10).

use super::activation::capturing;
use super::capture::{launch, KArg};
use super::meta::{self, DescInfo, Obj, Role, TensorMeta};
use super::table::cann_table;
use crate::hook::Slot;
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
    // caller's live descriptor and buffer; a host-placed buffer holds `size` readable bytes at its
    // address (the aclop contract, which the library itself relies on during this call).
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
        let es = msprobe_core::dtype::DType::from_acl(dtype).map(|d| d.size()).unwrap_or(1) as u128;
        let need = msprobe_core::layout::numel(&shape) * es;
        let t = TensorMeta { dtype, shape, strides: None, offset: 0, addr: a as usize };
        // Where the input lives (no getter: learned from our hooks of the descriptor's setters).
        let info = match meta::objects().get(&(desc as usize)) {
            Some(Obj::Desc(d)) => Some(d.clone()),
            _ => None,
        };
        if let Some(DescInfo { const_data: Some(bytes), .. }) = &info {
            // Const data: the library uses the copy made at aclSetTensorConst.
            return KArg::HostTensor(t, bytes.clone(), role);
        }
        // Never read past the data buffer: a descriptor larger than its buffer is recorded as null.
        let size_fn = GET_BUF_SIZE.resolve();
        let size = if size_fn.is_null() {
            None
        } else {
            Some(std::mem::transmute::<P, unsafe extern "C" fn(P) -> usize>(size_fn)(buf) as u128)
        };
        if size.is_some_and(|size| need > size) {
            return KArg::Missing(role);
        }
        if info.is_some_and(|d| d.host()) {
            // A host-placed input: the library reads it from host memory during this call.
            let Some(size) = size else { return KArg::Missing(role) };
            if a.is_null() || need > size || need > isize::MAX as u128 {
                return KArg::Missing(role);
            }
            let bytes = std::slice::from_raw_parts(a as *const u8, need as usize).to_vec();
            return KArg::HostTensor(t, bytes, role);
        }
        KArg::Tensor(t, role)
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

/// Captures one aclop execution; the attribute values become the record's input leaf after the
/// inputs.
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
    v2: bool,
    real: impl FnOnce() -> i32,
) -> i32 {
    if !capturing() {
        return real();
    }
    let describe = || {
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
        (op, args)
    };
    // SAFETY: as above; the V2 entries' output descs are the caller's, live for the call (and
    // updated by it with the real output shapes).
    let refresh = || unsafe { tensors(n_out, out_desc, outputs, Role::Out) };
    launch("Aclop", describe, stream, real, if v2 { Some(&refresh) } else { None })
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
    ($fn:ident, $slot:ident, $v2:expr) => {
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
            execute(op, ni, id, i, no, od, o, attr, stream, $v2, || unsafe {
                f(op, ni, id, i, no, od, o, attr, stream)
            })
        }
    };
}
exec_hook!(execute_v1, EXECUTE, false);
exec_hook!(execute_v2, EXECUTE_V2, true);

macro_rules! compile_exec_hook {
    ($fn:ident, $slot:ident, $v2:expr) => {
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
            execute(op, ni, id, i, no, od, o, attr, stream, $v2, || unsafe {
                f(op, ni, id, i, no, od, o, attr, engine, flag, path, stream)
            })
        }
    };
}
compile_exec_hook!(compile_execute, COMPILE_EXECUTE, false);
compile_exec_hook!(compile_execute_v2, COMPILE_EXECUTE_V2, true);

unsafe extern "C" fn cast(src_desc: P, src: P, dst_desc: P, dst: P, truncate: u8, stream: P) -> c_int {
    type F = unsafe extern "C" fn(P, P, P, P, u8, P) -> c_int;
    // SAFETY: the slot holds the real aclopCast.
    let f: F = unsafe { CAST.get::<F>() };
    if !capturing() {
        // SAFETY: the caller's arguments, unchanged.
        return unsafe { f(src_desc, src, dst_desc, dst, truncate, stream) };
    }
    let describe = || {
        let args = vec![
            desc_tensor(src_desc, src, Role::In),
            KArg::Value(value_leaf("int", Json::Int(truncate as i128))),
            desc_tensor(dst_desc, dst, Role::Out),
        ];
        ("Cast".to_string(), args)
    };
    // SAFETY: as above.
    launch("Aclop", describe, stream, || unsafe { f(src_desc, src, dst_desc, dst, truncate, stream) }, None)
}

// ---- attributes ----

fn set_attr(attr: P, name: *const c_char, v: Json) {
    if attr.is_null() || name.is_null() {
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
            if rc == 0 && capturing() {
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
attr_hook!(set_attr_string, SET_ATTR_STRING, *const c_char, str_leaf);

/// Reads `n` values of `T` at `v` (none when NULL or n < 0).
///
/// # Safety
/// `v` must be NULL or hold `n` readable values (the setter accepted them).
unsafe fn host_values<T: Copy>(n: c_int, v: *const T) -> Vec<T> {
    if v.is_null() || n <= 0 {
        return Vec::new();
    }
    // SAFETY: per the function contract.
    unsafe { std::slice::from_raw_parts(v, n as usize) }.to_vec()
}

fn str_leaf(v: *const c_char) -> Json {
    if v.is_null() {
        return Json::Null;
    }
    // SAFETY: a setter's string value is the caller's NUL-terminated string.
    value_leaf("str", Json::str(unsafe { CStr::from_ptr(v) }.to_string_lossy().into_owned()))
}

macro_rules! list_attr_hook {
    ($fn:ident, $slot:ident, $t:ty, $leaf:expr) => {
        unsafe extern "C" fn $fn(attr: P, name: *const c_char, n: c_int, v: *const $t) -> c_int {
            type F = unsafe extern "C" fn(P, *const c_char, c_int, *const $t) -> c_int;
            // SAFETY: the slot holds the real setter of this name.
            let f: F = unsafe { $slot.get::<F>() };
            // SAFETY: the caller's arguments, unchanged.
            let rc = unsafe { f(attr, name, n, v) };
            if rc == 0 && capturing() {
                let _ = std::panic::catch_unwind(|| {
                    // SAFETY: the setter accepted n values at v.
                    let vals = unsafe { host_values(n, v) };
                    set_attr(attr, name, Json::Array(vals.into_iter().map($leaf).collect()));
                });
            }
            rc
        }
    };
}
list_attr_hook!(set_attr_list_int, SET_ATTR_LIST_INT, i64, |x: i64| value_leaf("int", Json::Int(x as i128)));
list_attr_hook!(set_attr_list_bool, SET_ATTR_LIST_BOOL, u8, |x: u8| value_leaf("bool", Json::Bool(x != 0)));
list_attr_hook!(set_attr_list_float, SET_ATTR_LIST_FLOAT, f32, |x: f32| value_leaf("float", Json::Float(x as f64)));
list_attr_hook!(set_attr_list_dtype, SET_ATTR_LIST_DTYPE, c_int, |x: c_int| value_leaf(
    "aclDataType",
    Json::Int(x as i128)
));
list_attr_hook!(set_attr_list_string, SET_ATTR_LIST_STRING, *const c_char, str_leaf);

unsafe extern "C" fn set_attr_list_list_int(
    attr: P,
    name: *const c_char,
    n: c_int,
    counts: *const c_int,
    values: *const *const i64,
) -> c_int {
    type F = unsafe extern "C" fn(P, *const c_char, c_int, *const c_int, *const *const i64) -> c_int;
    // SAFETY: the slot holds the real aclopSetAttrListListInt.
    let f: F = unsafe { SET_ATTR_LIST_LIST_INT.get::<F>() };
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { f(attr, name, n, counts, values) };
    if rc == 0 && capturing() {
        let _ = std::panic::catch_unwind(|| {
            // SAFETY: the setter accepted n lists: counts[i] values at values[i].
            let (counts, lists) = unsafe { (host_values(n, counts), host_values(n, values)) };
            let v = counts
                .into_iter()
                .zip(lists)
                .map(|(c, l)| {
                    // SAFETY: as above.
                    let vals = unsafe { host_values(c, l) };
                    Json::Array(vals.into_iter().map(|x| value_leaf("int", Json::Int(x as i128))).collect())
                })
                .collect();
            set_attr(attr, name, Json::Array(v));
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

// ---- descriptors: where an input lives ----

/// Forgets what was known of a descriptor pointer (created anew or destroyed: pointers recycle).
fn forget_desc(desc: P) {
    if !desc.is_null() && capturing() {
        let _ = std::panic::catch_unwind(|| meta::forget(desc as usize));
    }
}

unsafe extern "C" fn create_tensor_desc(dtype: c_int, n: c_int, dims: *const i64, format: c_int) -> P {
    type F = unsafe extern "C" fn(c_int, c_int, *const i64, c_int) -> P;
    // SAFETY: the slot holds the real aclCreateTensorDesc.
    let f: F = unsafe { CREATE_TENSOR_DESC.get::<F>() };
    // SAFETY: the caller's arguments, unchanged.
    let d = unsafe { f(dtype, n, dims, format) };
    forget_desc(d);
    d
}

unsafe extern "C" fn destroy_tensor_desc(desc: P) {
    forget_desc(desc);
    type F = unsafe extern "C" fn(P);
    // SAFETY: the slot holds the real aclDestroyTensorDesc.
    let f: F = unsafe { DESTROY_TENSOR_DESC.get::<F>() };
    // SAFETY: the caller's argument, unchanged.
    unsafe { f(desc) }
}

fn update_desc(desc: P, f: impl FnOnce(&mut DescInfo)) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut objs = meta::objects();
        let e = objs.entry(desc as usize).or_insert_with(|| Obj::Desc(DescInfo::default()));
        if !matches!(e, Obj::Desc(_)) {
            *e = Obj::Desc(DescInfo::default());
        }
        if let Obj::Desc(d) = e {
            f(d);
        }
    }));
}

unsafe extern "C" fn set_placement(desc: P, mem_type: c_int) -> c_int {
    type F = unsafe extern "C" fn(P, c_int) -> c_int;
    // SAFETY: the slot holds the real aclSetTensorPlaceMent.
    let f: F = unsafe { SET_PLACEMENT.get::<F>() };
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { f(desc, mem_type) };
    if rc == 0 && !desc.is_null() && capturing() {
        update_desc(desc, |d| d.placement = mem_type);
    }
    rc
}

unsafe extern "C" fn set_const(desc: P, data: P, len: usize) -> c_int {
    type F = unsafe extern "C" fn(P, P, usize) -> c_int;
    // SAFETY: the slot holds the real aclSetTensorConst.
    let f: F = unsafe { SET_CONST.get::<F>() };
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { f(desc, data, len) };
    if rc == 0 && !desc.is_null() && !data.is_null() && capturing() {
        // SAFETY: the library accepted (and copied) `len` bytes at `data`; so do we.
        let bytes = unsafe { std::slice::from_raw_parts(data as *const u8, len) }.to_vec();
        update_desc(desc, |d| d.const_data = Some(bytes));
    }
    rc
}

type CP = *const P;

cann_table! {
    /// Wraps an aclop function or a descriptor call (the table of hooked names; all exported).
    fn wrap_table {
        export fn aclopExecute(op: *const c_char, ni: c_int, id: CP, i: CP, no: c_int, od: CP, o: CP, attr: P, stream: P) -> c_int = EXECUTE: execute_v1, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopExecuteV2(op: *const c_char, ni: c_int, id: CP, i: CP, no: c_int, od: CP, o: CP, attr: P, stream: P) -> c_int = EXECUTE_V2: execute_v2, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopCompileAndExecute(op: *const c_char, ni: c_int, id: CP, i: CP, no: c_int, od: CP, o: CP, attr: P, engine: c_int, flag: c_int, path: *const c_char, stream: P) -> c_int = COMPILE_EXECUTE: compile_execute, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopCompileAndExecuteV2(op: *const c_char, ni: c_int, id: CP, i: CP, no: c_int, od: CP, o: CP, attr: P, engine: c_int, flag: c_int, path: *const c_char, stream: P) -> c_int = COMPILE_EXECUTE_V2: compile_execute_v2, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopCast(src_desc: P, src: P, dst_desc: P, dst: P, truncate: u8, stream: P) -> c_int = CAST: cast, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopSetAttrBool(attr: P, name: *const c_char, v: u8) -> c_int = SET_ATTR_BOOL: set_attr_bool, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopSetAttrInt(attr: P, name: *const c_char, v: i64) -> c_int = SET_ATTR_INT: set_attr_int, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopSetAttrFloat(attr: P, name: *const c_char, v: f32) -> c_int = SET_ATTR_FLOAT: set_attr_float, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopSetAttrDataType(attr: P, name: *const c_char, v: c_int) -> c_int = SET_ATTR_DTYPE: set_attr_dtype, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopSetAttrString(attr: P, name: *const c_char, v: *const c_char) -> c_int = SET_ATTR_STRING: set_attr_string, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopSetAttrListBool(attr: P, name: *const c_char, n: c_int, v: *const u8) -> c_int = SET_ATTR_LIST_BOOL: set_attr_list_bool, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopSetAttrListInt(attr: P, name: *const c_char, n: c_int, v: *const i64) -> c_int = SET_ATTR_LIST_INT: set_attr_list_int, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopSetAttrListFloat(attr: P, name: *const c_char, n: c_int, v: *const f32) -> c_int = SET_ATTR_LIST_FLOAT: set_attr_list_float, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopSetAttrListDataType(attr: P, name: *const c_char, n: c_int, v: *const c_int) -> c_int = SET_ATTR_LIST_DTYPE: set_attr_list_dtype, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopSetAttrListString(attr: P, name: *const c_char, n: c_int, v: *const *const c_char) -> c_int = SET_ATTR_LIST_STRING: set_attr_list_string, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopSetAttrListListInt(attr: P, name: *const c_char, n: c_int, counts: *const c_int, values: *const *const i64) -> c_int = SET_ATTR_LIST_LIST_INT: set_attr_list_list_int, missing ACL_ERROR_INVALID_PARAM;
        export fn aclopCreateAttr() -> P = CREATE_ATTR: create_attr, missing std::ptr::null_mut();
        export fn aclopDestroyAttr(attr: P) -> () = DESTROY_ATTR: destroy_attr, missing ();
        export fn aclCreateTensorDesc(dtype: c_int, n: c_int, dims: *const i64, format: c_int) -> P = CREATE_TENSOR_DESC: create_tensor_desc, missing std::ptr::null_mut();
        export fn aclDestroyTensorDesc(desc: P) -> () = DESTROY_TENSOR_DESC: destroy_tensor_desc, missing ();
        export fn aclSetTensorPlaceMent(desc: P, mem_type: c_int) -> c_int = SET_PLACEMENT: set_placement, missing ACL_ERROR_INVALID_PARAM;
        export fn aclSetTensorConst(desc: P, data: P, len: usize) -> c_int = SET_CONST: set_const, missing ACL_ERROR_INVALID_PARAM;
    }
}

/// Wraps an aclop function or a descriptor call.
pub(crate) fn wrap(name: &[u8], found: *mut c_void) -> Option<*mut c_void> {
    wrap_table(name, found)
}
