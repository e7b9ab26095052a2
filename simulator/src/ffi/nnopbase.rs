//! nnopbase meta API (libnnopbase): tensors, scalars, arrays, lists, executors.
use super::{guard, put, slice_to_vec};
use crate::consts::*;
use crate::dtype::DType;
use crate::errmsg::fail;
use crate::nnop::{self, Obj, ScalarObj, TensorObj, Which};
use crate::tensor::{contiguous_strides, TView};
use std::os::raw::c_void;

type Status = i32;
pub type H = *mut c_void;

fn make_tensor(
    view_dims: *const i64,
    ndim: u64,
    dtype: i32,
    stride: *const i64,
    offset: i64,
    format: i32,
    storage: *const i64,
    nst: u64,
    data: *mut c_void,
) -> Result<TensorObj, i32> {
    let shape =
        slice_to_vec(view_dims, ndim as usize).ok_or_else(|| fail(ACLNN_ERR_PARAM_NULLPTR, "viewDims is NULL"))?;
    let dt =
        DType::from_acl(dtype).ok_or_else(|| fail(ACLNN_ERR_PARAM_INVALID, format!("unsupported dataType {dtype}")))?;
    let strides = if stride.is_null() {
        contiguous_strides(&shape)
    } else {
        slice_to_vec(stride, ndim as usize).unwrap_or_default()
    };
    let storage =
        slice_to_vec(storage, nst as usize).ok_or_else(|| fail(ACLNN_ERR_PARAM_NULLPTR, "storageDims is NULL"))?;
    if shape.iter().any(|&d| d < 0) || offset < 0 {
        return Err(fail(ACLNN_ERR_PARAM_INVALID, "negative dimension or offset"));
    }
    Ok(TensorObj { view: TView { addr: data as usize, dtype: dt, shape, strides, offset }, format, storage })
}

#[no_mangle]
pub extern "C" fn aclCreateTensor(
    view_dims: *const i64,
    view_dims_num: u64,
    data_type: i32,
    stride: *const i64,
    offset: i64,
    format: i32,
    storage_dims: *const i64,
    storage_dims_num: u64,
    tensor_data: *mut c_void,
) -> H {
    guard(std::ptr::null_mut(), || {
        match make_tensor(
            view_dims,
            view_dims_num,
            data_type,
            stride,
            offset,
            format,
            storage_dims,
            storage_dims_num,
            tensor_data,
        ) {
            Ok(t) => nnop::add(Obj::Tensor(t)) as H,
            Err(_) => std::ptr::null_mut(),
        }
    })
}

#[no_mangle]
pub extern "C" fn aclInitTensor(
    tensor: H,
    view_dims: *const i64,
    view_dims_num: u64,
    data_type: i32,
    stride: *const i64,
    offset: i64,
    format: i32,
    storage_dims: *const i64,
    storage_dims_num: u64,
    tensor_data: *mut c_void,
) -> Status {
    guard(ACLNN_ERR_INNER, || {
        if tensor.is_null() {
            return fail(ACLNN_ERR_PARAM_NULLPTR, "tensor is NULL");
        }
        let t = match make_tensor(
            view_dims,
            view_dims_num,
            data_type,
            stride,
            offset,
            format,
            storage_dims,
            storage_dims_num,
            tensor_data,
        ) {
            Ok(t) => t,
            Err(e) => return e,
        };
        let mut s = nnop::store();
        match s.objs.get_mut(&(tensor as usize)) {
            Some(o @ Obj::Tensor(_)) => {
                *o = Obj::Tensor(t);
                ACLNN_SUCCESS
            }
            _ => fail(ACLNN_ERR_PARAM_INVALID, "not a live aclTensor"),
        }
    })
}

#[no_mangle]
pub extern "C" fn aclCreateScalar(value: *mut c_void, data_type: i32) -> H {
    guard(std::ptr::null_mut(), || {
        let Some(dt) = DType::from_acl(data_type) else {
            fail(ACLNN_ERR_PARAM_INVALID, format!("unsupported scalar dtype {data_type}"));
            return std::ptr::null_mut();
        };
        let Some(b) = slice_to_vec(value as *const u8, dt.size()) else { return std::ptr::null_mut() };
        // the value is copied now (callers pass stack variables)
        let int = dt.is_int().then(|| dt.get_i64(&b));
        nnop::add(Obj::Scalar(ScalarObj { dtype: dt, value: dt.get(&b), int })) as H
    })
}

#[no_mangle]
pub extern "C" fn aclCreateIntArray(value: *const i64, size: u64) -> H {
    guard(std::ptr::null_mut(), || match slice_to_vec(value, size as usize) {
        Some(v) => nnop::add(Obj::IntArray(v)) as H,
        None => std::ptr::null_mut(),
    })
}
#[no_mangle]
pub extern "C" fn aclCreateFloatArray(value: *const f32, size: u64) -> H {
    guard(std::ptr::null_mut(), || match slice_to_vec(value, size as usize) {
        Some(v) => nnop::add(Obj::FloatArray(v)) as H,
        None => std::ptr::null_mut(),
    })
}
#[no_mangle]
pub extern "C" fn aclCreateBoolArray(value: *const bool, size: u64) -> H {
    guard(std::ptr::null_mut(), || match slice_to_vec(value as *const u8, size as usize) {
        Some(v) => nnop::add(Obj::BoolArray(v.into_iter().map(|b| b != 0).collect())) as H,
        None => std::ptr::null_mut(),
    })
}

#[no_mangle]
pub extern "C" fn aclCreateTensorList(value: *const H, size: u64) -> H {
    guard(std::ptr::null_mut(), || {
        let Some(v) = slice_to_vec(value, size as usize) else { return std::ptr::null_mut() };
        let hs: Vec<usize> = v.into_iter().map(|p| p as usize).collect();
        if hs.iter().any(|&h| nnop::tensor(h).is_none()) {
            fail(ACLNN_ERR_PARAM_INVALID, "tensor list element is not a live aclTensor");
            return std::ptr::null_mut();
        }
        nnop::add(Obj::TensorList(hs)) as H
    })
}
#[no_mangle]
pub extern "C" fn aclCreateScalarList(value: *const H, size: u64) -> H {
    guard(std::ptr::null_mut(), || {
        let Some(v) = slice_to_vec(value, size as usize) else { return std::ptr::null_mut() };
        let hs: Vec<usize> = v.into_iter().map(|p| p as usize).collect();
        if hs.iter().any(|&h| !matches!(nnop::get(h), Some(Obj::Scalar(_)))) {
            return std::ptr::null_mut();
        }
        nnop::add(Obj::ScalarList(hs)) as H
    })
}

macro_rules! destroyer {
    ($name:ident, $pat:pat) => {
        #[no_mangle]
        pub extern "C" fn $name(obj: H) -> Status {
            guard(ACLNN_ERR_INNER, || nnop::destroy(obj as usize, |o| matches!(o, $pat)))
        }
    };
}
destroyer!(aclDestroyTensor, Obj::Tensor(_));
destroyer!(aclDestroyScalar, Obj::Scalar(_));
destroyer!(aclDestroyIntArray, Obj::IntArray(_));
destroyer!(aclDestroyFloatArray, Obj::FloatArray(_));
destroyer!(aclDestroyBoolArray, Obj::BoolArray(_));
destroyer!(aclDestroyTensorList, Obj::TensorList(_));
destroyer!(aclDestroyScalarList, Obj::ScalarList(_));

/// Allocate an int64 array compatible with C++ `delete[]` (libstdc++ `operator new[]` when loaded).
fn new_i64_array(v: &[i64]) -> *mut i64 {
    type NewArr = unsafe extern "C" fn(usize) -> *mut c_void;
    let n = v.len().max(1) * 8;
    // SAFETY: dlsym on RTLD_DEFAULT with a valid symbol name; the result, if any, is `operator new[](size_t)`.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_Znam".as_ptr()) };
    // SAFETY: calling operator new[] (or malloc, which libstdc++'s operator delete[] pairs with via free).
    let p = unsafe {
        if f.is_null() {
            libc::malloc(n)
        } else {
            std::mem::transmute::<*mut c_void, NewArr>(f)(n)
        }
    } as *mut i64;
    if !p.is_null() {
        // SAFETY: p points to at least v.len() int64 slots.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
    }
    p
}

fn with_tensor(t: H, f: impl FnOnce(&TensorObj) -> Status) -> Status {
    match nnop::tensor(t as usize) {
        Some(x) => f(&x),
        None => {
            fail(if t.is_null() { ACLNN_ERR_PARAM_NULLPTR } else { ACLNN_ERR_PARAM_INVALID }, "not a live aclTensor")
        }
    }
}

fn give_array(v: &[i64], out: *mut *mut i64, num: *mut u64) -> Status {
    if out.is_null() || num.is_null() {
        return fail(ACLNN_ERR_PARAM_NULLPTR, "output pointer is NULL");
    }
    put(out, new_i64_array(v));
    put(num, v.len() as u64);
    ACLNN_SUCCESS
}

#[no_mangle]
pub extern "C" fn aclGetViewShape(tensor: H, view_dims: *mut *mut i64, view_dims_num: *mut u64) -> Status {
    guard(ACLNN_ERR_INNER, || with_tensor(tensor, |t| give_array(&t.view.shape, view_dims, view_dims_num)))
}
#[no_mangle]
pub extern "C" fn aclGetStorageShape(tensor: H, dims: *mut *mut i64, num: *mut u64) -> Status {
    guard(ACLNN_ERR_INNER, || with_tensor(tensor, |t| give_array(&t.storage, dims, num)))
}
#[no_mangle]
pub extern "C" fn aclGetViewStrides(tensor: H, strides: *mut *mut i64, num: *mut u64) -> Status {
    guard(ACLNN_ERR_INNER, || with_tensor(tensor, |t| give_array(&t.view.strides, strides, num)))
}
#[no_mangle]
pub extern "C" fn aclGetViewOffset(tensor: H, offset: *mut i64) -> Status {
    guard(ACLNN_ERR_INNER, || {
        with_tensor(tensor, |t| {
            if put(offset, t.view.offset) {
                ACLNN_SUCCESS
            } else {
                fail(ACLNN_ERR_PARAM_NULLPTR, "offset is NULL")
            }
        })
    })
}
#[no_mangle]
pub extern "C" fn aclGetFormat(tensor: H, format: *mut i32) -> Status {
    guard(ACLNN_ERR_INNER, || {
        with_tensor(tensor, |t| {
            if put(format, t.format) {
                ACLNN_SUCCESS
            } else {
                fail(ACLNN_ERR_PARAM_NULLPTR, "format is NULL")
            }
        })
    })
}
#[no_mangle]
pub extern "C" fn aclGetDataType(tensor: H, dtype: *mut i32) -> Status {
    guard(ACLNN_ERR_INNER, || {
        with_tensor(tensor, |t| {
            if put(dtype, t.view.dtype.acl()) {
                ACLNN_SUCCESS
            } else {
                fail(ACLNN_ERR_PARAM_NULLPTR, "dataType is NULL")
            }
        })
    })
}
#[no_mangle]
pub extern "C" fn aclGetRawTensorAddr(tensor: H, addr: *mut *mut c_void) -> Status {
    guard(ACLNN_ERR_INNER, || {
        with_tensor(tensor, |t| {
            if put(addr, t.view.addr as *mut c_void) {
                ACLNN_SUCCESS
            } else {
                fail(ACLNN_ERR_PARAM_NULLPTR, "addr is NULL")
            }
        })
    })
}
#[no_mangle]
pub extern "C" fn aclSetRawTensorAddr(tensor: H, addr: *mut c_void) -> Status {
    guard(ACLNN_ERR_INNER, || {
        let mut s = nnop::store();
        let h = tensor as usize;
        match s.objs.get_mut(&h) {
            Some(Obj::Tensor(t)) => t.view.addr = addr as usize,
            _ => return fail(ACLNN_ERR_PARAM_INVALID, "not a live aclTensor"),
        }
        // Executors referencing this tensor see the new address.
        for e in s.execs.values_mut() {
            for sl in e.slots.iter_mut() {
                if let nnop::SlotVal::T(th, Some(v)) = &mut sl.val {
                    if *th == h {
                        v.addr = addr as usize;
                    }
                }
            }
        }
        ACLNN_SUCCESS
    })
}

fn size_of(obj: H, size: *mut u64) -> Status {
    if size.is_null() {
        return fail(ACLNN_ERR_PARAM_NULLPTR, "size is NULL");
    }
    let n = match nnop::get(obj as usize) {
        Some(Obj::IntArray(v)) => v.len(),
        Some(Obj::FloatArray(v)) => v.len(),
        Some(Obj::BoolArray(v)) => v.len(),
        Some(Obj::TensorList(v)) | Some(Obj::ScalarList(v)) => v.len(),
        _ => {
            return fail(
                if obj.is_null() { ACLNN_ERR_PARAM_NULLPTR } else { ACLNN_ERR_PARAM_INVALID },
                "not a live array/list",
            )
        }
    };
    put(size, n as u64);
    ACLNN_SUCCESS
}
#[no_mangle]
pub extern "C" fn aclGetIntArraySize(a: H, size: *mut u64) -> Status {
    guard(ACLNN_ERR_INNER, || size_of(a, size))
}
#[no_mangle]
pub extern "C" fn aclGetFloatArraySize(a: H, size: *mut u64) -> Status {
    guard(ACLNN_ERR_INNER, || size_of(a, size))
}
#[no_mangle]
pub extern "C" fn aclGetBoolArraySize(a: H, size: *mut u64) -> Status {
    guard(ACLNN_ERR_INNER, || size_of(a, size))
}
#[no_mangle]
pub extern "C" fn aclGetTensorListSize(a: H, size: *mut u64) -> Status {
    guard(ACLNN_ERR_INNER, || size_of(a, size))
}
#[no_mangle]
pub extern "C" fn aclGetScalarListSize(a: H, size: *mut u64) -> Status {
    guard(ACLNN_ERR_INNER, || size_of(a, size))
}

// ------------------------------------------------------------------ executors

#[no_mangle]
pub extern "C" fn aclSetAclOpExecutorRepeatable(executor: H) -> Status {
    guard(ACLNN_ERR_INNER, || {
        if executor.is_null() {
            fail(ACLNN_ERR_PARAM_NULLPTR, "executor is NULL")
        } else {
            nnop::set_repeatable(executor as usize)
        }
    })
}
#[no_mangle]
pub extern "C" fn aclDestroyAclOpExecutor(executor: H) -> Status {
    guard(ACLNN_ERR_INNER, || {
        if executor.is_null() {
            fail(ACLNN_ERR_PARAM_NULLPTR, "executor is NULL")
        } else {
            nnop::destroy_executor(executor as usize)
        }
    })
}

macro_rules! set_addr {
    ($name:ident, $alias:ident, $which:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(executor: H, index: usize, tensor: H, addr: *mut c_void) -> Status {
            guard(ACLNN_ERR_INNER, || {
                if executor.is_null() {
                    fail(ACLNN_ERR_PARAM_NULLPTR, "executor is NULL")
                } else {
                    nnop::set_tensor_addr(executor as usize, $which, index, tensor as usize, addr as usize)
                }
            })
        }
        #[no_mangle]
        pub extern "C" fn $alias(executor: H, index: usize, tensor: H, addr: *mut c_void) -> Status {
            $name(executor, index, tensor, addr)
        }
    };
}
set_addr!(aclSetTensorAddr, AclSetTensorAddr, Which::All);
set_addr!(aclSetInputTensorAddr, AclSetInputTensorAddr, Which::Input);
set_addr!(aclSetOutputTensorAddr, AclSetOutputTensorAddr, Which::Output);

macro_rules! set_dyn {
    ($name:ident, $alias:ident, $which:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(
            executor: H,
            ir_index: usize,
            relative_index: usize,
            tensors: H,
            addr: *mut c_void,
        ) -> Status {
            guard(ACLNN_ERR_INNER, || {
                if executor.is_null() {
                    fail(ACLNN_ERR_PARAM_NULLPTR, "executor is NULL")
                } else {
                    nnop::set_dynamic_addr(
                        executor as usize,
                        $which,
                        ir_index,
                        relative_index,
                        tensors as usize,
                        addr as usize,
                    )
                }
            })
        }
        #[no_mangle]
        pub extern "C" fn $alias(
            executor: H,
            ir_index: usize,
            relative_index: usize,
            tensors: H,
            addr: *mut c_void,
        ) -> Status {
            $name(executor, ir_index, relative_index, tensors, addr)
        }
    };
}
set_dyn!(aclSetDynamicTensorAddr, AclSetDynamicTensorAddr, Which::All);
set_dyn!(aclSetDynamicInputTensorAddr, AclSetDynamicInputTensorAddr, Which::Input);
set_dyn!(aclSetDynamicOutputTensorAddr, AclSetDynamicOutputTensorAddr, Which::Output);

#[no_mangle]
pub extern "C" fn aclnnInit(_config_path: *const std::os::raw::c_char) -> Status {
    ACLNN_SUCCESS
}
#[no_mangle]
pub extern "C" fn aclnnFinalize() -> Status {
    ACLNN_SUCCESS
}

/// Simulator-only introspection: number of live executors (used by the tests).
#[no_mangle]
pub extern "C" fn cannsimLiveExecutorCount() -> u64 {
    guard(0, || nnop::live_executor_count() as u64)
}
/// Simulator-only introspection: 1 if `executor` is live.
#[no_mangle]
pub extern "C" fn cannsimExecutorIsLive(executor: H) -> i32 {
    guard(0, || nnop::executor_live(executor as usize) as i32)
}
