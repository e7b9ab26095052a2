//! The aclop call's inputs as the runtime hands them over: tensor descriptors, attributes and
//! (descriptor, address, size) triples. Apart from `aclop` so that the op planners
//! (`aclop_nn_plan`) can read them without depending on the executor that calls them.
use crate::consts::*;
use crate::dtype::DType;
use crate::errmsg::fail;
use crate::tensor::TView;
use std::collections::HashMap;
use std::ffi::CString;

#[derive(Clone, Debug)]
pub struct Desc {
    pub dtype: i32,
    pub format: i32,
    pub dims: Vec<i64>,
    pub name: CString,
    pub storage_format: i32,
    pub storage_dims: Option<Vec<i64>>,
    pub const_data: Option<Vec<u8>>,
    pub placement: i32,
}

#[derive(Clone, Debug)]
pub enum AttrVal {
    Bool(bool),
    Int(i64),
    Float(f32),
    Str(String),
    DType(i32),
    ListBool(Vec<bool>),
    ListInt(Vec<i64>),
    ListFloat(Vec<f32>),
    ListStr(Vec<String>),
    ListDType(Vec<i32>),
    ListListInt(Vec<Vec<i64>>),
}

pub type Attr = HashMap<String, AttrVal>;

/// One input/output as passed to an aclop execution.
#[derive(Clone)]
pub struct IoT {
    pub desc: Desc,
    /// The aclTensorDesc handle `desc` was read from (an output's dims may be set by its kernel).
    pub handle: usize,
    pub addr: usize,
    pub size: usize,
}

impl IoT {
    pub(crate) fn view(&self) -> Result<TView, i32> {
        let dt = DType::from_acl(self.desc.dtype)
            .ok_or_else(|| fail(ACL_ERROR_UNSUPPORTED_DATA_TYPE, format!("unsupported dtype {}", self.desc.dtype)))?;
        let v = TView::contiguous(self.addr, dt, self.desc.dims.clone());
        if v.numel() * dt.size() > self.size {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!(
                    "data buffer of {} bytes is smaller than the tensor ({} bytes)",
                    self.size,
                    v.numel() * dt.size()
                ),
            ));
        }
        Ok(v)
    }
    /// Integer values of a small (axes-like) input: const data, host placement, or device memory.
    pub(crate) fn ints(&self) -> Result<Vec<i64>, i32> {
        let dt = DType::from_acl(self.desc.dtype)
            .filter(|d| d.is_int())
            .ok_or_else(|| fail(ACL_ERROR_INVALID_PARAM, "axes must be int32/int64"))?;
        let n = crate::tensor::numel(&self.desc.dims);
        let bytes = if let Some(c) = &self.desc.const_data {
            c.clone()
        } else if crate::mem::is_device(self.addr) {
            crate::mem::read(self.addr, n * dt.size())?
        } else if self.addr != 0 && self.size >= n * dt.size() {
            // SAFETY: a host-placed aclop input; the caller guarantees `size` readable bytes at `addr`.
            unsafe { std::slice::from_raw_parts(self.addr as *const u8, n * dt.size()).to_vec() }
        } else {
            return Err(fail(ACL_ERROR_INVALID_PARAM, "axes input has no data"));
        };
        if bytes.len() < n * dt.size() {
            return Err(fail(ACL_ERROR_INVALID_PARAM, "axes data too short"));
        }
        Ok((0..n).map(|i| dt.get_i64(&bytes[i * dt.size()..])).collect())
    }
}
