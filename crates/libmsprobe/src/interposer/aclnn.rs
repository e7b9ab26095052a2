//! aclnn wrappers: nnopbase object hooks, generated phase-1 wrappers, generic phase-2 wrappers.

use super::activation::{self, capturing, op_capturing, OP_OFF};
use super::meta::{self, Bound, ExecState, Obj, Role, TensorMeta};
use super::ops::{Phase, N_OPS, OPS};
use super::table::{cann_table, resolve_export};
use crate::hook::Slot;
use cann_abi::status::ACLNN_ERR_INNER_NULLPTR;
use msprobe_core::dtype::DType;
use msprobe_core::json::Json;
use msprobe_core::record::value_leaf;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::Ordering::Relaxed;

/// A phase-1 argument as the generated wrappers see it (every kind a CANN header can declare;
/// the bundled declarations use a subset).
#[allow(dead_code)]
pub enum Arg {
    Tensor(*const c_void, Role),
    TensorList(*const c_void, Role),
    Scalar(*const c_void),
    IntArray(*const c_void),
    FloatArray(*const c_void),
    BoolArray(*const c_void),
    Str(*const c_void),
    DType(i64),
    Bool(bool),
    Int(i64),
    Float(f64),
    Opaque,
}

// Generated code casts every argument uniformly. Its unsafe blocks carry their SAFETY notes in
// crates/aclnn-gen/src/emit.rs, where the code is written (token streams hold no comments).
#[allow(clippy::unnecessary_cast, clippy::undocumented_unsafe_blocks)]
mod generated {
    use super::*;
    include!(concat!(env!("OUT_DIR"), "/aclnn_wrappers.rs"));
}
pub use generated::*;

/// Binds phase-1 arguments to the executor (called by the generated wrappers).
fn bind_executor(k: usize, executor: *const c_void, args: &[Arg]) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let bound: Vec<Bound> = args.iter().map(bind_arg).collect();
        meta::executors().insert(executor as usize, ExecState { args: bound, repeatable: false });
    }));
    if r.is_err() {
        log::warn!("internal error binding aclnn{} arguments; this launch will not be captured", OPS[k].op);
    }
}

fn bind_arg(a: &Arg) -> Bound {
    let v = |p: *const c_void| meta::value(p as usize).unwrap_or(Json::Null);
    match *a {
        Arg::Tensor(p, role) => Bound::Tensor(p as usize, role),
        Arg::TensorList(p, role) => Bound::List(p as usize, role),
        Arg::Scalar(p) | Arg::IntArray(p) | Arg::FloatArray(p) | Arg::BoolArray(p) => Bound::Value(v(p)),
        Arg::Str(p) => Bound::Value(if p.is_null() {
            Json::Null
        } else {
            // SAFETY: a `char*` phase-1 argument is a NUL-terminated host string for the call.
            let s = unsafe { CStr::from_ptr(p as *const c_char) }.to_string_lossy().into_owned();
            value_leaf("str", Json::str(s))
        }),
        Arg::DType(d) => Bound::Value(value_leaf("aclDataType", Json::Int(d as i128))),
        Arg::Bool(b) => Bound::Value(value_leaf("bool", Json::Bool(b))),
        Arg::Int(i) => Bound::Value(value_leaf("int", Json::Int(i as i128))),
        Arg::Float(f) => Bound::Value(value_leaf("float", Json::Float(f))),
        Arg::Opaque => Bound::Value(Json::Null),
    }
}

type P2Fn = unsafe extern "C" fn(*mut c_void, u64, *mut c_void, *mut c_void) -> i32;

/// What an exported aclnn name returns when no loaded library defines it.
const ACLNN_MISSING: i32 = ACLNN_ERR_INNER_NULLPTR;

/// The real function of an exported aclnn name (resolved into `slot` on first use).
fn export_real(slot: &Slot) -> *mut c_void {
    resolve_export(slot)
}

/// Phase 2 of op `K`: `aclnnXxx(workspace, workspaceSize, executor, stream)`.
unsafe extern "C" fn phase2<const K: usize>(ws: *mut c_void, size: u64, ex: *mut c_void, stream: *mut c_void) -> i32 {
    // SAFETY: REAL_P2[K] holds the real phase-2 function (same signature for every op), claimed
    // before this wrapper was handed out.
    let real: P2Fn = unsafe { REAL_P2[K].get::<P2Fn>() };
    if !capturing() {
        // SAFETY: the caller's arguments, unchanged.
        return unsafe { real(ws, size, ex, stream) };
    }
    if OP_OFF[K].load(Relaxed) {
        activation::PREFILTERED[activation::Path::Dlsym as usize].fetch_add(1, Relaxed);
        // SAFETY: as above.
        return unsafe { real(ws, size, ex, stream) };
    }
    super::capture::aclnn_launch(OPS[K].op, ex as usize, stream, || {
        // SAFETY: as above.
        unsafe { real(ws, size, ex, stream) }
    })
}

/// Phase 2 of op `K` called through its exported name.
///
/// # Safety
/// The aclnn phase-2 C contract.
unsafe fn export_p2<const K: usize>(ws: *mut c_void, size: u64, ex: *mut c_void, stream: *mut c_void) -> i32 {
    let f = REAL_P2[K].load();
    if !f.is_null() {
        let idle = activation::idle();
        // The op filtered out by `list`: counted, passed through (still no register saved).
        let filtered = !idle && activation::on() && OP_OFF[K].load(Relaxed);
        if idle || filtered {
            if filtered {
                activation::PREFILTERED[activation::Path::Linked as usize].fetch_add(1, Relaxed);
            }
            // SAFETY: f is the real phase-2 function (never ours), signature P2Fn.
            let real: P2Fn = unsafe { std::mem::transmute::<*mut c_void, P2Fn>(f) };
            // SAFETY: the caller's arguments, unchanged.
            return unsafe { real(ws, size, ex, stream) };
        }
    }
    // SAFETY: as above.
    unsafe { export_p2_slow::<K>(ws, size, ex, stream) }
}

/// [`export_p2`] past its idle path: resolution, activation, the prefilter, capture.
///
/// # Safety
/// The aclnn phase-2 C contract.
#[cold]
#[inline(never)]
unsafe fn export_p2_slow<const K: usize>(ws: *mut c_void, size: u64, ex: *mut c_void, stream: *mut c_void) -> i32 {
    let mut f = REAL_P2[K].load();
    if f.is_null() {
        f = export_real(&REAL_P2[K]);
        if f.is_null() {
            return ACLNN_MISSING;
        }
    }
    // SAFETY: f is the real phase-2 function (never ours), signature P2Fn.
    let real: P2Fn = unsafe { std::mem::transmute::<*mut c_void, P2Fn>(f) };
    if !capturing() {
        // SAFETY: the caller's arguments, unchanged.
        return unsafe { real(ws, size, ex, stream) };
    }
    if OP_OFF[K].load(Relaxed) {
        activation::PREFILTERED[activation::Path::Linked as usize].fetch_add(1, Relaxed);
        // SAFETY: as above.
        return unsafe { real(ws, size, ex, stream) };
    }
    // SAFETY: the slot is filled, as the wrapper requires; the caller's arguments, unchanged.
    activation::linked(|| unsafe { phase2::<K>(ws, size, ex, stream) })
}

/// Wraps phase 1 or phase 2 of op `k` (found by [`super::ops::find`]).
pub(crate) fn wrap_op(k: usize, phase: Phase, found: *mut c_void) -> Option<*mut c_void> {
    let slot = match phase {
        Phase::One => &REAL_P1[k],
        Phase::Two => &REAL_P2[k],
    };
    if crate::hook::is_own(found) {
        // Our own export (a global-scope lookup): the export when a library defines the name.
        return Some(super::table::own_export(slot, found));
    }
    slot.claim(found, wrapper(k, phase))
}

// ---- nnopbase object hooks ----

/// Calls the real function in `$slot` with signature `$ty`.
macro_rules! call_real {
    ($slot:ident, $ty:ty, $($arg:expr),*) => {{
        // SAFETY: the slot was claimed with the real function of this name, whose C signature is
        // $ty, before this wrapper was handed out.
        let f: $ty = unsafe { $slot.get::<$ty>() };
        // SAFETY: the caller's arguments, unchanged.
        unsafe { f($($arg),*) }
    }};
}

fn guarded(what: &str, f: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        log::warn!("internal error in the {what} hook; capture of related launches may be incomplete");
    }
}

/// Reads `n` values of `T` from a host pointer.
///
/// # Safety
/// `p` must be NULL or point to `n` readable `T`s.
unsafe fn host_slice<T: Copy>(p: *const T, n: u64) -> Vec<T> {
    if p.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: per the function contract.
    unsafe { std::slice::from_raw_parts(p, n as usize) }.to_vec()
}

fn scalar_leaf(dtype: i32, bytes: &[u8]) -> Json {
    let Some(dt) = DType::from_acl(dtype) else {
        return value_leaf("aclScalar", Json::Null);
    };
    match msprobe_core::stats::tensor_stats(dt, true, &bytes[..dt.size().min(bytes.len())]).max {
        msprobe_core::stats::Stat::Float(f) => value_leaf("float", Json::Float(f)),
        msprobe_core::stats::Stat::Int(i) => value_leaf("int", Json::Int(i)),
        msprobe_core::stats::Stat::Bool(b) => value_leaf("bool", Json::Bool(b)),
        msprobe_core::stats::Stat::Null => value_leaf("complex", Json::Null),
    }
}

type CreateTensorFn =
    unsafe extern "C" fn(*const i64, u64, i32, *const i64, i64, i32, *const i64, u64, *mut c_void) -> *mut c_void;
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn create_tensor(
    view_dims: *const i64,
    n: u64,
    dtype: i32,
    stride: *const i64,
    offset: i64,
    format: i32,
    storage_dims: *const i64,
    m: u64,
    data: *mut c_void,
) -> *mut c_void {
    let t =
        call_real!(CREATE_TENSOR, CreateTensorFn, view_dims, n, dtype, stride, offset, format, storage_dims, m, data);
    if !t.is_null() {
        // SAFETY: the real call accepted these arrays of n dims.
        unsafe { remember_tensor("aclCreateTensor", t, view_dims, n, dtype, stride, offset, data) };
    }
    t
}

/// Records a tensor's view metadata after the real create/init succeeded.
///
/// # Safety
/// `view_dims` and `stride` (unless NULL) hold `n` values.
#[allow(clippy::too_many_arguments)]
unsafe fn remember_tensor(
    what: &str,
    t: *mut c_void,
    view_dims: *const i64,
    n: u64,
    dtype: i32,
    stride: *const i64,
    offset: i64,
    data: *mut c_void,
) {
    if !capturing() {
        return;
    }
    guarded(what, || {
        // SAFETY: per the function contract.
        let shape = unsafe { host_slice(view_dims, n) };
        // SAFETY: as above.
        let strides = (!stride.is_null()).then(|| unsafe { host_slice(stride, n) });
        let m = TensorMeta { dtype, shape, strides, offset, addr: data as usize };
        meta::objects().insert(t as usize, Obj::Tensor(m));
    });
}

type InitTensorFn =
    unsafe extern "C" fn(*mut c_void, *const i64, u64, i32, *const i64, i64, i32, *const i64, u64, *mut c_void) -> i32;
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn init_tensor(
    t: *mut c_void,
    view_dims: *const i64,
    n: u64,
    dtype: i32,
    stride: *const i64,
    offset: i64,
    format: i32,
    storage_dims: *const i64,
    m: u64,
    data: *mut c_void,
) -> i32 {
    let rc =
        call_real!(INIT_TENSOR, InitTensorFn, t, view_dims, n, dtype, stride, offset, format, storage_dims, m, data);
    if rc == 0 {
        // SAFETY: the real call accepted these arrays of n dims.
        unsafe { remember_tensor("aclInitTensor", t, view_dims, n, dtype, stride, offset, data) };
    }
    rc
}

unsafe extern "C" fn create_scalar(value: *mut c_void, dtype: i32) -> *mut c_void {
    let s = call_real!(CREATE_SCALAR, unsafe extern "C" fn(*mut c_void, i32) -> *mut c_void, value, dtype);
    if !s.is_null() && !value.is_null() && capturing() {
        guarded("aclCreateScalar", || {
            let size = DType::from_acl(dtype).map(|d| d.size()).unwrap_or(0) as u64;
            // SAFETY: the scalar's value points at one element of `dtype` (copied at creation).
            let bytes = unsafe { host_slice(value as *const u8, size) };
            meta::objects().insert(s as usize, Obj::Value(scalar_leaf(dtype, &bytes)));
        });
    }
    s
}

macro_rules! array_hook {
    ($fn:ident, $slot:ident, $t:ty, $leaf:expr) => {
        unsafe extern "C" fn $fn(value: *const $t, size: u64) -> *mut c_void {
            let a = call_real!($slot, unsafe extern "C" fn(*const $t, u64) -> *mut c_void, value, size);
            if !a.is_null() && capturing() {
                guarded(stringify!($fn), || {
                    // SAFETY: the array holds `size` elements (copied by nnopbase at creation).
                    let v = unsafe { host_slice(value, size) };
                    let items = v.into_iter().map($leaf).collect();
                    meta::objects().insert(a as usize, Obj::Value(Json::Array(items)));
                });
            }
            a
        }
    };
}
array_hook!(create_int_array, CREATE_INT_ARRAY, i64, |x: i64| value_leaf("int", Json::Int(x as i128)));
array_hook!(create_float_array, CREATE_FLOAT_ARRAY, f32, |x: f32| value_leaf("float", Json::Float(x as f64)));
// C `bool` is read as a byte: any non-zero byte is true (no invalid Rust `bool` is made).
array_hook!(create_bool_array, CREATE_BOOL_ARRAY, u8, |x: u8| value_leaf("bool", Json::Bool(x != 0)));

unsafe extern "C" fn create_tensor_list(value: *const *const c_void, size: u64) -> *mut c_void {
    let l = call_real!(CREATE_TENSOR_LIST, unsafe extern "C" fn(*const *const c_void, u64) -> *mut c_void, value, size);
    if !l.is_null() && capturing() {
        guarded("aclCreateTensorList", || {
            // SAFETY: the list holds `size` tensor pointers (copied by nnopbase at creation).
            let v = unsafe { host_slice(value, size) };
            meta::objects().insert(l as usize, Obj::List(v.into_iter().map(|p| p as usize).collect()));
        });
    }
    l
}

macro_rules! destroy_hook {
    ($fn:ident, $slot:ident) => {
        unsafe extern "C" fn $fn(obj: *const c_void) -> i32 {
            if capturing() {
                guarded(stringify!($fn), || meta::forget(obj as usize));
            }
            call_real!($slot, unsafe extern "C" fn(*const c_void) -> i32, obj)
        }
    };
}
destroy_hook!(destroy_tensor, DESTROY_TENSOR);
destroy_hook!(destroy_scalar, DESTROY_SCALAR);
destroy_hook!(destroy_int_array, DESTROY_INT_ARRAY);
destroy_hook!(destroy_float_array, DESTROY_FLOAT_ARRAY);
destroy_hook!(destroy_bool_array, DESTROY_BOOL_ARRAY);
destroy_hook!(destroy_tensor_list, DESTROY_TENSOR_LIST);

unsafe extern "C" fn set_repeatable(ex: *mut c_void) -> i32 {
    let rc = call_real!(SET_REPEATABLE, unsafe extern "C" fn(*mut c_void) -> i32, ex);
    if rc == 0 && capturing() {
        guarded("aclSetAclOpExecutorRepeatable", || {
            if let Some(s) = meta::executors().get_mut(&(ex as usize)) {
                s.repeatable = true;
            }
        });
    }
    rc
}

unsafe extern "C" fn destroy_executor(ex: *mut c_void) -> i32 {
    if capturing() {
        guarded("aclDestroyAclOpExecutor", || {
            meta::executors().remove(&(ex as usize));
        });
    }
    call_real!(DESTROY_EXECUTOR, unsafe extern "C" fn(*mut c_void) -> i32, ex)
}

macro_rules! set_addr_hook {
    ($fn:ident, $slot:ident) => {
        unsafe extern "C" fn $fn(ex: *mut c_void, index: usize, tensor: *mut c_void, addr: *mut c_void) -> i32 {
            let rc = call_real!(
                $slot,
                unsafe extern "C" fn(*mut c_void, usize, *mut c_void, *mut c_void) -> i32,
                ex,
                index,
                tensor,
                addr
            );
            if rc == 0 && capturing() {
                guarded(stringify!($fn), || meta::set_addr(tensor as usize, addr as usize));
            }
            rc
        }
    };
}
set_addr_hook!(set_input_addr, SET_INPUT_ADDR);
set_addr_hook!(set_output_addr, SET_OUTPUT_ADDR);
set_addr_hook!(set_tensor_addr, SET_TENSOR_ADDR);
set_addr_hook!(set_input_addr_cap, SET_INPUT_ADDR_CAP);
set_addr_hook!(set_output_addr_cap, SET_OUTPUT_ADDR_CAP);
set_addr_hook!(set_tensor_addr_cap, SET_TENSOR_ADDR_CAP);

macro_rules! set_dyn_addr_hook {
    ($fn:ident, $slot:ident) => {
        unsafe extern "C" fn $fn(ex: *mut c_void, ir: usize, rel: usize, list: *mut c_void, addr: *mut c_void) -> i32 {
            let rc = call_real!(
                $slot,
                unsafe extern "C" fn(*mut c_void, usize, usize, *mut c_void, *mut c_void) -> i32,
                ex,
                ir,
                rel,
                list,
                addr
            );
            if rc == 0 && capturing() {
                guarded(stringify!($fn), || meta::set_list_addr(list as usize, rel, addr as usize));
            }
            rc
        }
    };
}
set_dyn_addr_hook!(set_dyn_input_addr, SET_DYN_INPUT_ADDR);
set_dyn_addr_hook!(set_dyn_output_addr, SET_DYN_OUTPUT_ADDR);
set_dyn_addr_hook!(set_dyn_tensor_addr, SET_DYN_TENSOR_ADDR);
set_dyn_addr_hook!(set_dyn_input_addr_cap, SET_DYN_INPUT_ADDR_CAP);
set_dyn_addr_hook!(set_dyn_output_addr_cap, SET_DYN_OUTPUT_ADDR_CAP);
set_dyn_addr_hook!(set_dyn_tensor_addr_cap, SET_DYN_TENSOR_ADDR_CAP);

unsafe extern "C" fn set_raw_addr(tensor: *mut c_void, addr: *mut c_void) -> i32 {
    let rc = call_real!(SET_RAW_ADDR, unsafe extern "C" fn(*mut c_void, *mut c_void) -> i32, tensor, addr);
    if rc == 0 && capturing() {
        guarded("aclSetRawTensorAddr", || meta::set_addr(tensor as usize, addr as usize));
    }
    rc
}

// torch_npu's executor cache would skip phase 1 (no arguments to bind). While capture is on,
// the cache is reported unusable and every lookup misses (cann-abi.md §6.1); otherwise the real
// functions answer.
unsafe extern "C" fn can_use_pta_cache(api: *const c_char) -> bool {
    if capturing() {
        return false;
    }
    call_real!(CAN_USE_PTA_CACHE, unsafe extern "C" fn(*const c_char) -> bool, api)
}
unsafe extern "C" fn pta_get_exec_cache(hash: u64, ws: *mut u64) -> *mut c_void {
    if capturing() {
        return std::ptr::null_mut();
    }
    call_real!(PTA_GET_EXEC_CACHE, unsafe extern "C" fn(u64, *mut u64) -> *mut c_void, hash, ws)
}
unsafe extern "C" fn pta_find_exec_cache(buf: *const u8, len: usize, ws: *mut u64) -> *mut c_void {
    if capturing() {
        return std::ptr::null_mut();
    }
    call_real!(PTA_FIND_EXEC_CACHE, unsafe extern "C" fn(*const u8, usize, *mut u64) -> *mut c_void, buf, len, ws)
}

type P = *mut c_void;
type CP = *const c_void;

cann_table! {
    /// Wraps an nnopbase object or executor function (and torch_npu's executor-cache queries).
    pub(crate) fn wrap_nnopbase {
        export fn aclCreateTensor(view_dims: *const i64, n: u64, dtype: i32, stride: *const i64, offset: i64, format: i32, storage_dims: *const i64, m: u64, data: P) -> P = CREATE_TENSOR: create_tensor, missing std::ptr::null_mut();
        export fn aclInitTensor(t: P, view_dims: *const i64, n: u64, dtype: i32, stride: *const i64, offset: i64, format: i32, storage_dims: *const i64, m: u64, data: P) -> i32 = INIT_TENSOR: init_tensor, missing ACLNN_MISSING;
        export fn aclCreateScalar(value: P, dtype: i32) -> P = CREATE_SCALAR: create_scalar, missing std::ptr::null_mut();
        export fn aclCreateIntArray(value: *const i64, size: u64) -> P = CREATE_INT_ARRAY: create_int_array, missing std::ptr::null_mut();
        export fn aclCreateFloatArray(value: *const f32, size: u64) -> P = CREATE_FLOAT_ARRAY: create_float_array, missing std::ptr::null_mut();
        export fn aclCreateBoolArray(value: *const u8, size: u64) -> P = CREATE_BOOL_ARRAY: create_bool_array, missing std::ptr::null_mut();
        export fn aclCreateTensorList(value: *const CP, size: u64) -> P = CREATE_TENSOR_LIST: create_tensor_list, missing std::ptr::null_mut();
        export fn aclDestroyTensor(obj: CP) -> i32 = DESTROY_TENSOR: destroy_tensor, missing ACLNN_MISSING;
        export fn aclDestroyScalar(obj: CP) -> i32 = DESTROY_SCALAR: destroy_scalar, missing ACLNN_MISSING;
        export fn aclDestroyIntArray(obj: CP) -> i32 = DESTROY_INT_ARRAY: destroy_int_array, missing ACLNN_MISSING;
        export fn aclDestroyFloatArray(obj: CP) -> i32 = DESTROY_FLOAT_ARRAY: destroy_float_array, missing ACLNN_MISSING;
        export fn aclDestroyBoolArray(obj: CP) -> i32 = DESTROY_BOOL_ARRAY: destroy_bool_array, missing ACLNN_MISSING;
        export fn aclDestroyTensorList(obj: CP) -> i32 = DESTROY_TENSOR_LIST: destroy_tensor_list, missing ACLNN_MISSING;
        export fn aclSetAclOpExecutorRepeatable(ex: P) -> i32 = SET_REPEATABLE: set_repeatable, missing ACLNN_MISSING;
        export fn aclDestroyAclOpExecutor(ex: P) -> i32 = DESTROY_EXECUTOR: destroy_executor, missing ACLNN_MISSING;
        export fn aclSetInputTensorAddr(ex: P, index: usize, tensor: P, addr: P) -> i32 = SET_INPUT_ADDR: set_input_addr, missing ACLNN_MISSING;
        export fn aclSetOutputTensorAddr(ex: P, index: usize, tensor: P, addr: P) -> i32 = SET_OUTPUT_ADDR: set_output_addr, missing ACLNN_MISSING;
        export fn aclSetTensorAddr(ex: P, index: usize, tensor: P, addr: P) -> i32 = SET_TENSOR_ADDR: set_tensor_addr, missing ACLNN_MISSING;
        export fn AclSetInputTensorAddr(ex: P, index: usize, tensor: P, addr: P) -> i32 = SET_INPUT_ADDR_CAP: set_input_addr_cap, missing ACLNN_MISSING;
        export fn AclSetOutputTensorAddr(ex: P, index: usize, tensor: P, addr: P) -> i32 = SET_OUTPUT_ADDR_CAP: set_output_addr_cap, missing ACLNN_MISSING;
        export fn AclSetTensorAddr(ex: P, index: usize, tensor: P, addr: P) -> i32 = SET_TENSOR_ADDR_CAP: set_tensor_addr_cap, missing ACLNN_MISSING;
        export fn aclSetDynamicInputTensorAddr(ex: P, ir: usize, rel: usize, list: P, addr: P) -> i32 = SET_DYN_INPUT_ADDR: set_dyn_input_addr, missing ACLNN_MISSING;
        export fn aclSetDynamicOutputTensorAddr(ex: P, ir: usize, rel: usize, list: P, addr: P) -> i32 = SET_DYN_OUTPUT_ADDR: set_dyn_output_addr, missing ACLNN_MISSING;
        export fn aclSetDynamicTensorAddr(ex: P, ir: usize, rel: usize, list: P, addr: P) -> i32 = SET_DYN_TENSOR_ADDR: set_dyn_tensor_addr, missing ACLNN_MISSING;
        export fn AclSetDynamicInputTensorAddr(ex: P, ir: usize, rel: usize, list: P, addr: P) -> i32 = SET_DYN_INPUT_ADDR_CAP: set_dyn_input_addr_cap, missing ACLNN_MISSING;
        export fn AclSetDynamicOutputTensorAddr(ex: P, ir: usize, rel: usize, list: P, addr: P) -> i32 = SET_DYN_OUTPUT_ADDR_CAP: set_dyn_output_addr_cap, missing ACLNN_MISSING;
        export fn AclSetDynamicTensorAddr(ex: P, ir: usize, rel: usize, list: P, addr: P) -> i32 = SET_DYN_TENSOR_ADDR_CAP: set_dyn_tensor_addr_cap, missing ACLNN_MISSING;
        export fn aclSetRawTensorAddr(tensor: P, addr: P) -> i32 = SET_RAW_ADDR: set_raw_addr, missing ACLNN_MISSING;
        lookup fn CanUsePTACache(api: *const c_char) -> bool = CAN_USE_PTA_CACHE: can_use_pta_cache, missing false;
        lookup fn PTAGetExecCache(hash: u64, ws: *mut u64) -> P = PTA_GET_EXEC_CACHE: pta_get_exec_cache, missing std::ptr::null_mut();
        lookup fn PTAFindExecCache(buf: *const u8, len: usize, ws: *mut u64) -> P = PTA_FIND_EXEC_CACHE: pta_find_exec_cache, missing std::ptr::null_mut();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every op of the table has both wrappers, and each slot is named after its symbol.
    #[test]
    fn every_op_has_wrappers_and_named_slots() {
        for (k, info) in OPS.iter().enumerate() {
            assert!(!wrapper(k, Phase::One).is_null() && !wrapper(k, Phase::Two).is_null());
            assert_eq!(REAL_P1[k].name().to_str().unwrap(), format!("aclnn{}GetWorkspaceSize", info.op));
            assert_eq!(REAL_P2[k].name().to_str().unwrap(), format!("aclnn{}", info.op));
        }
    }
}
