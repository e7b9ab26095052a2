//! aclop (libascendcl / libacl_op_compiler): descriptors, data buffers, attributes, execution.
use super::{cstr, guard, put, slice_to_vec};
use crate::aclop::{self as op, Attr, AttrVal, Desc, IoT};
use crate::consts::*;
use crate::errmsg::fail;
use std::collections::HashMap;
use std::ffi::CString;
use std::os::raw::{c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

type AclError = i32;
type H = *mut c_void;

#[derive(Default)]
struct Reg {
    descs: HashMap<usize, Desc>,
    bufs: HashMap<usize, (usize, usize)>,
    attrs: HashMap<usize, Attr>,
}

fn reg() -> MutexGuard<'static, Reg> {
    static R: OnceLock<Mutex<Reg>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Reg::default())).lock().unwrap_or_else(|e| e.into_inner())
}
static NEXT: AtomicUsize = AtomicUsize::new(0x7d00_0000_1000);
fn handle() -> usize {
    NEXT.fetch_add(0x40, Ordering::Relaxed)
}

// ---------------------------------------------------------------- data buffers

#[no_mangle]
pub extern "C" fn aclCreateDataBuffer(data: *mut c_void, size: usize) -> H {
    guard(std::ptr::null_mut(), || {
        let h = handle();
        reg().bufs.insert(h, (data as usize, size));
        h as H
    })
}
#[no_mangle]
pub extern "C" fn aclDestroyDataBuffer(buf: H) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if reg().bufs.remove(&(buf as usize)).is_some() {
            ACL_SUCCESS
        } else {
            fail(ACL_ERROR_INVALID_PARAM, "not a live aclDataBuffer")
        }
    })
}
#[no_mangle]
pub extern "C" fn aclUpdateDataBuffer(buf: H, data: *mut c_void, size: usize) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || match reg().bufs.get_mut(&(buf as usize)) {
        Some(b) => {
            *b = (data as usize, size);
            ACL_SUCCESS
        }
        None => fail(ACL_ERROR_INVALID_PARAM, "not a live aclDataBuffer"),
    })
}
#[no_mangle]
pub extern "C" fn aclGetDataBufferAddr(buf: H) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        reg().bufs.get(&(buf as usize)).map(|b| b.0 as *mut c_void).unwrap_or(std::ptr::null_mut())
    })
}
#[no_mangle]
pub extern "C" fn aclGetDataBufferSizeV2(buf: H) -> usize {
    guard(0, || reg().bufs.get(&(buf as usize)).map(|b| b.1).unwrap_or(0))
}
#[no_mangle]
pub extern "C" fn aclGetDataBufferSize(buf: H) -> u32 {
    aclGetDataBufferSizeV2(buf) as u32
}

// ---------------------------------------------------------------- tensor descriptors

#[no_mangle]
pub extern "C" fn aclCreateTensorDesc(data_type: i32, num_dims: i32, dims: *const i64, format: i32) -> H {
    guard(std::ptr::null_mut(), || {
        if num_dims < 0 {
            return std::ptr::null_mut();
        }
        let Some(d) = slice_to_vec(dims, num_dims as usize) else { return std::ptr::null_mut() };
        let h = handle();
        reg().descs.insert(
            h,
            Desc {
                dtype: data_type,
                format,
                dims: d,
                name: CString::default(),
                storage_format: format,
                storage_dims: None,
                const_data: None,
                placement: 0,
            },
        );
        h as H
    })
}
#[no_mangle]
pub extern "C" fn aclDestroyTensorDesc(desc: H) {
    guard((), || {
        crate::tensor::take_kernel_shape(desc as usize); // a handle reused later must not inherit it
        reg().descs.remove(&(desc as usize));
    })
}

/// A live descriptor, with the dims its kernel set (aclop NonZero through a V2 entry) applied: the
/// runtime updates a dynamic-shape op's output desc once the op has run.
fn live(r: &mut Reg, desc: usize) -> Option<&mut Desc> {
    let d = r.descs.get_mut(&desc)?;
    if let Some(shape) = crate::tensor::take_kernel_shape(desc) {
        d.dims = shape;
    }
    Some(d)
}

fn with_desc<T>(desc: H, default: T, f: impl FnOnce(&mut Desc) -> T) -> T {
    match live(&mut reg(), desc as usize) {
        Some(d) => f(d),
        None => default,
    }
}

/// Run a setter on a live descriptor; the failure (and its `aclGetRecentErrMsg` record) happens only
/// when the handle is not live.
fn with_live_desc(desc: H, f: impl FnOnce(&mut Desc) -> AclError) -> AclError {
    match live(&mut reg(), desc as usize) {
        Some(d) => f(d),
        None => fail(ACL_ERROR_INVALID_PARAM, "not a live aclTensorDesc"),
    }
}

#[no_mangle]
pub extern "C" fn aclGetTensorDescType(desc: H) -> i32 {
    guard(-1, || with_desc(desc, -1, |d| d.dtype))
}
#[no_mangle]
pub extern "C" fn aclGetTensorDescFormat(desc: H) -> i32 {
    guard(-1, || with_desc(desc, -1, |d| d.format))
}
#[no_mangle]
pub extern "C" fn aclGetTensorDescElementCount(desc: H) -> usize {
    guard(0, || with_desc(desc, 0, |d| crate::tensor::numel(&d.dims)))
}
#[no_mangle]
pub extern "C" fn aclGetTensorDescSize(desc: H) -> usize {
    guard(0, || with_desc(desc, 0, |d| crate::tensor::numel(&d.dims) * crate::dtype::acl_dtype_size(d.dtype)))
}
#[no_mangle]
pub extern "C" fn aclGetTensorDescNumDims(desc: H) -> usize {
    guard(0, || with_desc(desc, 0, |d| if d.dims.first() == Some(&-2) { 0xFFFF_FFFF_FFFF_FFFE } else { d.dims.len() }))
}
#[no_mangle]
pub extern "C" fn aclGetTensorDescDim(desc: H, index: usize) -> i64 {
    guard(-1, || with_desc(desc, -1, |d| d.dims.get(index).copied().unwrap_or(-1)))
}
#[no_mangle]
pub extern "C" fn aclGetTensorDescDimV2(desc: H, index: usize, dim_size: *mut i64) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if dim_size.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "dimSize is NULL");
        }
        match with_desc(desc, None, |d| Some(d.dims.get(index).copied())) {
            None => fail(ACL_ERROR_INVALID_PARAM, "not a live aclTensorDesc"),
            Some(None) => fail(ACL_ERROR_INVALID_PARAM, format!("index {index} out of range")),
            Some(Some(v)) => {
                put(dim_size, v);
                ACL_SUCCESS
            }
        }
    })
}
#[no_mangle]
pub extern "C" fn aclSetTensorDescName(desc: H, name: *const c_char) {
    guard((), || with_desc(desc, (), |d| d.name = CString::new(cstr(name).unwrap_or_default()).unwrap_or_default()))
}
#[no_mangle]
pub extern "C" fn aclGetTensorDescName(desc: H) -> *const c_char {
    guard(std::ptr::null(), || with_desc(desc, std::ptr::null(), |d| d.name.as_ptr()))
}
#[no_mangle]
pub extern "C" fn aclSetTensorFormat(desc: H, format: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        with_live_desc(desc, |d| {
            d.storage_format = format;
            ACL_SUCCESS
        })
    })
}
#[no_mangle]
pub extern "C" fn aclSetTensorShape(desc: H, num_dims: i32, dims: *const i64) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let Some(v) = slice_to_vec(dims, num_dims.max(0) as usize) else {
            return fail(ACL_ERROR_INVALID_PARAM, "dims is NULL");
        };
        with_live_desc(desc, |d| {
            d.storage_dims = Some(v);
            ACL_SUCCESS
        })
    })
}
#[no_mangle]
pub extern "C" fn aclSetTensorOriginFormat(desc: H, format: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        with_live_desc(desc, |d| {
            d.format = format;
            ACL_SUCCESS
        })
    })
}
#[no_mangle]
pub extern "C" fn aclSetTensorOriginShape(desc: H, num_dims: i32, dims: *const i64) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let Some(v) = slice_to_vec(dims, num_dims.max(0) as usize) else {
            return fail(ACL_ERROR_INVALID_PARAM, "dims is NULL");
        };
        with_live_desc(desc, |d| {
            d.dims = v;
            ACL_SUCCESS
        })
    })
}
#[no_mangle]
pub extern "C" fn aclSetTensorConst(desc: H, data: *mut c_void, length: usize) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let Some(v) = slice_to_vec(data as *const u8, length) else {
            return fail(ACL_ERROR_INVALID_PARAM, "dataBuffer is NULL");
        };
        with_live_desc(desc, |d| {
            d.const_data = Some(v);
            ACL_SUCCESS
        })
    })
}
#[no_mangle]
pub extern "C" fn aclSetTensorPlaceMent(desc: H, mem_type: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        with_live_desc(desc, |d| {
            d.placement = mem_type;
            ACL_SUCCESS
        })
    })
}

// ---------------------------------------------------------------- attributes

#[no_mangle]
pub extern "C" fn aclopCreateAttr() -> H {
    guard(std::ptr::null_mut(), || {
        let h = handle();
        reg().attrs.insert(h, Attr::new());
        h as H
    })
}
#[no_mangle]
pub extern "C" fn aclopDestroyAttr(attr: H) {
    guard((), || {
        reg().attrs.remove(&(attr as usize));
    })
}

fn set_attr(attr: H, name: *const c_char, v: Option<AttrVal>) -> AclError {
    let Some(n) = cstr(name) else { return fail(ACL_ERROR_INVALID_PARAM, "attrName is NULL") };
    let Some(v) = v else { return fail(ACL_ERROR_INVALID_PARAM, format!("attribute {n}: values are NULL")) };
    match reg().attrs.get_mut(&(attr as usize)) {
        Some(a) => {
            a.insert(n, v);
            ACL_SUCCESS
        }
        None => fail(ACL_ERROR_INVALID_PARAM, "not a live aclopAttr"),
    }
}

#[no_mangle]
pub extern "C" fn aclopSetAttrBool(attr: H, name: *const c_char, value: u8) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || set_attr(attr, name, Some(AttrVal::Bool(value != 0))))
}
#[no_mangle]
pub extern "C" fn aclopSetAttrInt(attr: H, name: *const c_char, value: i64) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || set_attr(attr, name, Some(AttrVal::Int(value))))
}
#[no_mangle]
pub extern "C" fn aclopSetAttrFloat(attr: H, name: *const c_char, value: f32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || set_attr(attr, name, Some(AttrVal::Float(value))))
}
#[no_mangle]
pub extern "C" fn aclopSetAttrString(attr: H, name: *const c_char, value: *const c_char) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || set_attr(attr, name, cstr(value).map(AttrVal::Str)))
}
#[no_mangle]
pub extern "C" fn aclopSetAttrDataType(attr: H, name: *const c_char, value: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || set_attr(attr, name, Some(AttrVal::DType(value))))
}
#[no_mangle]
pub extern "C" fn aclopSetAttrListDataType(attr: H, name: *const c_char, n: i32, values: *const i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        set_attr(attr, name, slice_to_vec(values, n.max(0) as usize).map(AttrVal::ListDType))
    })
}
#[no_mangle]
pub extern "C" fn aclopSetAttrListBool(attr: H, name: *const c_char, n: i32, values: *const u8) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        set_attr(
            attr,
            name,
            slice_to_vec(values, n.max(0) as usize).map(|v| AttrVal::ListBool(v.into_iter().map(|b| b != 0).collect())),
        )
    })
}
#[no_mangle]
pub extern "C" fn aclopSetAttrListInt(attr: H, name: *const c_char, n: i32, values: *const i64) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        set_attr(attr, name, slice_to_vec(values, n.max(0) as usize).map(AttrVal::ListInt))
    })
}
#[no_mangle]
pub extern "C" fn aclopSetAttrListFloat(attr: H, name: *const c_char, n: i32, values: *const f32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        set_attr(attr, name, slice_to_vec(values, n.max(0) as usize).map(AttrVal::ListFloat))
    })
}
#[no_mangle]
pub extern "C" fn aclopSetAttrListString(
    attr: H,
    name: *const c_char,
    n: i32,
    values: *const *const c_char,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let v =
            slice_to_vec(values, n.max(0) as usize).and_then(|ps| ps.into_iter().map(cstr).collect::<Option<Vec<_>>>());
        set_attr(attr, name, v.map(AttrVal::ListStr))
    })
}
#[no_mangle]
pub extern "C" fn aclopSetAttrListListInt(
    attr: H,
    name: *const c_char,
    n: i32,
    num_values: *const i32,
    values: *const *const i64,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let counts = slice_to_vec(num_values, n.max(0) as usize);
        let ptrs = slice_to_vec(values, n.max(0) as usize);
        let v = counts.zip(ptrs).and_then(|(c, p)| {
            c.into_iter().zip(p).map(|(c, p)| slice_to_vec(p, c.max(0) as usize)).collect::<Option<Vec<_>>>()
        });
        set_attr(attr, name, v.map(AttrVal::ListListInt))
    })
}

// ---------------------------------------------------------------- execution

fn collect(n: i32, descs: *const H, bufs: *const H, what: &str) -> Result<Vec<IoT>, i32> {
    if n < 0 {
        return Err(fail(ACL_ERROR_INVALID_PARAM, format!("negative number of {what}")));
    }
    let ds = slice_to_vec(descs, n as usize)
        .ok_or_else(|| fail(ACL_ERROR_INVALID_PARAM, format!("{what} descriptors are NULL")))?;
    let bs = slice_to_vec(bufs, n as usize)
        .ok_or_else(|| fail(ACL_ERROR_INVALID_PARAM, format!("{what} buffers are NULL")))?;
    let mut r = reg();
    ds.iter()
        .zip(&bs)
        .enumerate()
        .map(|(i, (d, b))| {
            let desc = live(&mut r, *d as usize)
                .map(|d| d.clone())
                .ok_or_else(|| fail(ACL_ERROR_INVALID_PARAM, format!("{what} {i}: not a live aclTensorDesc")))?;
            let &(addr, size) = r
                .bufs
                .get(&(*b as usize))
                .ok_or_else(|| fail(ACL_ERROR_INVALID_PARAM, format!("{what} {i}: not a live aclDataBuffer")))?;
            Ok(IoT { desc, handle: *d as usize, addr, size })
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn exec(
    entry: &str,
    op_type: *const c_char,
    nin: i32,
    in_desc: *const H,
    ins: *const H,
    nout: i32,
    out_desc: *const H,
    outs: *const H,
    attr: H,
    stream: H,
) -> AclError {
    let Some(t) = cstr(op_type) else { return fail(ACL_ERROR_INVALID_PARAM, "opType is NULL") };
    let i = match collect(nin, in_desc, ins, "input") {
        Ok(v) => v,
        Err(e) => return e,
    };
    let o = match collect(nout, out_desc, outs, "output") {
        Ok(v) => v,
        Err(e) => return e,
    };
    let a = if attr.is_null() {
        Attr::new()
    } else {
        match reg().attrs.get(&(attr as usize)) {
            Some(a) => a.clone(),
            None => return fail(ACL_ERROR_INVALID_PARAM, "not a live aclopAttr"),
        }
    };
    if crate::log_enabled() {
        let show = |v: &[IoT]| {
            v.iter()
                .map(|x| {
                    format!(
                        "{}{:?}@{}{}",
                        x.desc.dtype,
                        x.desc.dims,
                        if x.desc.placement == 1 { "host" } else { "dev" },
                        if x.desc.const_data.is_some() { "+const" } else { "" }
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        crate::simlog!("{entry} {t}: in [{}] out [{}] attrs {:?}", show(&i), show(&o), a);
    }
    op::execute(entry, &t, &i, &o, &a, stream as usize)
}

#[no_mangle]
pub extern "C" fn aclopExecuteV2(
    op_type: *const c_char,
    num_inputs: i32,
    input_desc: *const H,
    inputs: *const H,
    num_outputs: i32,
    output_desc: *const H,
    outputs: *const H,
    attr: H,
    stream: H,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        exec("aclopExecuteV2", op_type, num_inputs, input_desc, inputs, num_outputs, output_desc, outputs, attr, stream)
    })
}
#[no_mangle]
pub extern "C" fn aclopExecute(
    op_type: *const c_char,
    num_inputs: i32,
    input_desc: *const H,
    inputs: *const H,
    num_outputs: i32,
    output_desc: *const H,
    outputs: *const H,
    attr: H,
    stream: H,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        exec("aclopExecute", op_type, num_inputs, input_desc, inputs, num_outputs, output_desc, outputs, attr, stream)
    })
}
#[no_mangle]
pub extern "C" fn aclopCompileAndExecute(
    op_type: *const c_char,
    num_inputs: i32,
    input_desc: *const H,
    inputs: *const H,
    num_outputs: i32,
    output_desc: *const H,
    outputs: *const H,
    attr: H,
    engine_type: i32,
    compile_flag: i32,
    _op_path: *const c_char,
    stream: H,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if !(0..=2).contains(&engine_type) || !(0..=1).contains(&compile_flag) {
            return fail(ACL_ERROR_INVALID_PARAM, "invalid engineType/compileFlag");
        }
        exec(
            "aclopCompileAndExecute",
            op_type,
            num_inputs,
            input_desc,
            inputs,
            num_outputs,
            output_desc,
            outputs,
            attr,
            stream,
        )
    })
}
#[no_mangle]
pub extern "C" fn aclopCompileAndExecuteV2(
    op_type: *const c_char,
    num_inputs: i32,
    input_desc: *const H,
    inputs: *const H,
    num_outputs: i32,
    output_desc: *const H,
    outputs: *const H,
    attr: H,
    engine_type: i32,
    compile_flag: i32,
    _op_path: *const c_char,
    stream: H,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if !(0..=2).contains(&engine_type) || !(0..=1).contains(&compile_flag) {
            return fail(ACL_ERROR_INVALID_PARAM, "invalid engineType/compileFlag");
        }
        exec(
            "aclopCompileAndExecuteV2",
            op_type,
            num_inputs,
            input_desc,
            inputs,
            num_outputs,
            output_desc,
            outputs,
            attr,
            stream,
        )
    })
}
#[no_mangle]
pub extern "C" fn aclopCompile(
    op_type: *const c_char,
    _num_inputs: i32,
    _input_desc: *const H,
    _num_outputs: i32,
    _output_desc: *const H,
    _attr: H,
    _engine_type: i32,
    _compile_flag: i32,
    _op_path: *const c_char,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || match cstr(op_type) {
        None => fail(ACL_ERROR_INVALID_PARAM, "opType is NULL"),
        Some(t) if op::OP_TYPES.contains(&t.as_str()) => ACL_SUCCESS,
        Some(t) => fail(ACL_ERROR_OP_NOT_FOUND, format!("op type {t} is not supported")),
    })
}
#[no_mangle]
pub extern "C" fn aclopCast(src_desc: H, src_buf: H, dst_desc: H, dst_buf: H, _truncate: u8, stream: H) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let (i, o) = ([src_desc], [dst_desc]);
        let (ib, ob) = ([src_buf], [dst_buf]);
        exec(
            "aclopCast",
            c"Cast".as_ptr(),
            1,
            i.as_ptr(),
            ib.as_ptr(),
            1,
            o.as_ptr(),
            ob.as_ptr(),
            std::ptr::null_mut(),
            stream,
        )
    })
}
