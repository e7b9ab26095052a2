//! Python values onto an open record (msprobe-format.md §5.7), the common cases natively:
//! tensors, None, bool, int, float, str and plain list/tuple/dict. Everything else (torch.Size,
//! dtype/device values, namedtuples, numpy scalars, slices, tensors not on the host, ...) goes to
//! the framework's pure-Python encoder, which produces the same leaves.

use std::ffi::{CStr, CString};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::abi::{Abi, Rec, Tensor};

const MAX_DEPTH: u32 = 10;
const MAX_DIMS: usize = 64;

/// Which attributes a tensor is read through.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// torch.Tensor: dtype, is_cpu, layout, shape, stride(), data_ptr(), requires_grad.
    Torch,
    /// A tensor with `asnumpy()` (MindSpore): the host array's `__array_interface__`, with
    /// `dtype_codes` keyed by numpy dtype name. No requires_grad key.
    AsNumpy,
}

/// What the value walk reads: the library, how tensors are recognised and read, and the
/// framework's pure-Python encoder for everything else. Owned by the encoder.
pub struct ValueCtx {
    pub abi: Abi,
    pub kind: Kind,
    pub tensor_types: Py<PyTuple>,
    pub dtype_codes: Py<PyDict>,
    /// Bytes per element by aclDataType number, from the library (0: not read natively).
    pub item_sizes: [u8; 64],
    pub strided: Option<Py<PyAny>>,
    pub fallback: Py<PyAny>,
    /// Keys whose values always go to `fallback` (torch: "device", "dtype").
    pub special_keys: Vec<String>,
    /// torch: `mean_norm(t)`, the framework's own Mean and Norm of a float tensor as msprobe
    /// computes them (a list of two floats, or None to keep ours); see tensors.py.
    pub mean_norm: Option<Py<PyAny>>,
    /// `defer(t)` true: the tensor goes to `fallback` unread (MindSpore: a device tensor whose
    /// statistics the layer reduces on the device, issue #21; set only while that is on).
    pub defer: Option<Py<PyAny>>,
}

/// aclDataType numbers of the dtypes whose Mean/Norm the framework computes (`mean_norm`):
/// float32, float16, bfloat16, and those 1.1.1 reduces as float32 (`data.float()`): the
/// integers (int8/16/32/64, uint8/16/32/64) and float64.
const MEAN_NORM_CODES: [i32; 12] = [0, 1, 27, 2, 3, 4, 6, 7, 8, 9, 10, 11];

pub struct Walker<'a, 'py> {
    pub ctx: &'a ValueCtx,
    pub py: Python<'py>,
    pub r: Rec,
}

impl<'py> Walker<'_, 'py> {
    /// One value under `key` (None inside lists).
    pub fn add(&self, key: Option<&Bound<'py, PyString>>, v: &Bound<'py, PyAny>, depth: u32) -> PyResult<()> {
        let ckey = match key {
            Some(k) => match CString::new(k.to_str()?) {
                Ok(c) => Some(c),
                Err(_) => return self.fallback(key, v, depth),
            },
            None => None,
        };
        let k = ckey.as_deref();
        let abi = &self.ctx.abi;
        if v.is_instance(self.ctx.tensor_types.bind(self.py))? {
            return self.tensor(key, k, v, depth);
        }
        if v.is_none() {
            abi.null(self.r, k);
            return Ok(());
        }
        if let Some(key) = key {
            // e.g. torch writes `device=` and `dtype=` values in their own form, whatever their type.
            let s = key.to_str()?;
            if self.ctx.special_keys.iter().any(|k| k == s) {
                return self.fallback(Some(key), v, depth);
            }
        }
        if v.is_exact_instance_of::<PyBool>() {
            abi.bool(self.r, k, v.is_truthy()?);
        } else if v.is_exact_instance_of::<PyInt>() {
            match v.extract::<i64>() {
                Ok(i) => abi.int(self.r, k, i),
                Err(_) => return self.fallback(key, v, depth),
            }
        } else if v.is_exact_instance_of::<PyFloat>() {
            abi.float(self.r, k, v.extract::<f64>()?);
        } else if v.is_exact_instance_of::<PyString>() {
            let s = v.extract::<&str>().ok().and_then(|s| CString::new(s).ok());
            match s {
                Some(s) => abi.str(self.r, k, &s),
                None => return self.fallback(key, v, depth),
            }
        } else if v.is_exact_instance_of::<PyTuple>() || v.is_exact_instance_of::<PyList>() {
            if depth >= MAX_DEPTH {
                return self.fallback(key, v, depth);
            }
            abi.open(self.r, k, false);
            for item in v.try_iter()? {
                self.add(None, &item?, depth + 1)?;
            }
            abi.close(self.r);
        } else if v.is_exact_instance_of::<PyDict>() {
            let d = v.cast::<PyDict>()?;
            // keys other than str (True, None, 1.5) are written as JSON writes them (values.py)
            if depth >= MAX_DEPTH || d.keys().iter().any(|k| !k.is_exact_instance_of::<PyString>()) {
                return self.fallback(key, v, depth);
            }
            abi.open(self.r, k, true);
            self.add_keyed(d, depth + 1)?;
            abi.close(self.r);
        } else {
            return self.fallback(key, v, depth);
        }
        Ok(())
    }

    /// Each item of `items` (a tuple, or any iterable) as an unkeyed leaf.
    pub fn add_all(&self, items: &Bound<'py, PyAny>) -> PyResult<()> {
        for item in items.try_iter()? {
            self.add(None, &item?, 0)?;
        }
        Ok(())
    }

    /// A dict's items (kwargs at depth 0), keyed by `str(key)`.
    pub fn add_keyed(&self, d: &Bound<'py, PyDict>, depth: u32) -> PyResult<()> {
        for (k, v) in d.iter() {
            let k = match k.cast_into::<PyString>() {
                Ok(s) => s,
                Err(e) => e.into_inner().str()?,
            };
            self.add(Some(&k), &v, depth)?;
        }
        Ok(())
    }

    fn fallback(&self, key: Option<&Bound<'py, PyString>>, v: &Bound<'py, PyAny>, depth: u32) -> PyResult<()> {
        self.ctx.fallback.bind(self.py).call1((self.r.0, key, v, depth))?;
        Ok(())
    }

    fn tensor(
        &self,
        key: Option<&Bound<'py, PyString>>,
        k: Option<&CStr>,
        t: &Bound<'py, PyAny>,
        depth: u32,
    ) -> PyResult<()> {
        if let Some(f) = &self.ctx.defer {
            if f.bind(self.py).call1((t,))?.is_truthy()? {
                return self.fallback(key, t, depth);
            }
        }
        // `keep` holds the host array (AsNumpy) until the recorder is done with its memory.
        let (view, keep) = match self.ctx.kind {
            Kind::Torch => (self.torch_view(t)?, None),
            Kind::AsNumpy => match self.numpy_view(t)? {
                Some((v, a)) => (Some(v), Some(a)),
                None => (None, None),
            },
        };
        let res = match view.as_ref().and_then(|v| Some((v, v.desc()?))) {
            Some((v, desc)) => {
                // `t` and `keep` are alive for the whole call.
                match self.mean_norm(v, t)? {
                    Some((mean, norm)) => self.ctx.abi.tensor_mean_norm(self.r, k, &desc, mean, norm),
                    None => self.ctx.abi.tensor(self.r, k, &desc),
                }
                Ok(())
            }
            None => self.fallback(key, t, depth),
        };
        drop(keep);
        res
    }

    /// The framework's Mean and Norm of a non-empty, non-0-d float tensor (`ValueCtx::mean_norm`).
    fn mean_norm(&self, v: &View, t: &Bound<'py, PyAny>) -> PyResult<Option<(f64, f64)>> {
        let Some(f) = &self.ctx.mean_norm else { return Ok(None) };
        if v.nd == 0 || v.is_empty() || !MEAN_NORM_CODES.contains(&v.code) {
            return Ok(None);
        }
        f.bind(self.py).call1((t,))?.extract()
    }

    /// A MindSpore tensor through its host array (`asnumpy()`; zero-copy on CPU), which is
    /// returned too: the view points into it.
    fn numpy_view(&self, t: &Bound<'py, PyAny>) -> PyResult<Option<(View, Bound<'py, PyAny>)>> {
        let py = self.py;
        let a = t.call_method0(intern!(py, "asnumpy"))?;
        let name = a.getattr(intern!(py, "dtype"))?.getattr(intern!(py, "name"))?;
        let Some((code, size)) = self.dtype(&name)? else { return Ok(None) };
        let ai = a.getattr(intern!(py, "__array_interface__"))?;
        let (data, _ro): (usize, bool) = ai.get_item(intern!(py, "data"))?.extract()?;
        let mut v = View::new(code, size, data, -1);
        let Some(nd) = read_dims(&ai.get_item(intern!(py, "shape"))?, &mut v.shape)? else { return Ok(None) };
        v.nd = nd;
        let strides = ai.get_item(intern!(py, "strides"))?;
        if strides.is_none() {
            let mut acc = 1i64;
            for i in (0..nd).rev() {
                v.strides[i] = acc;
                acc *= v.shape[i].max(1);
            }
        } else {
            // numpy strides are in bytes.
            if read_dims(&strides, &mut v.strides)? != Some(nd) {
                return Ok(None);
            }
            for st in &mut v.strides[..nd] {
                if *st % size as i64 != 0 {
                    return Ok(None);
                }
                *st /= size as i64;
            }
        }
        Ok(Some((v, a)))
    }

    /// A host view of a CPU strided tensor, or None when the Python path must handle it (other
    /// device, layout or dtype, conjugate/negative views, too many dimensions).
    fn torch_view(&self, t: &Bound<'py, PyAny>) -> PyResult<Option<View>> {
        let py = self.py;
        let Some((code, size)) = self.dtype(&t.getattr(intern!(py, "dtype"))?)? else { return Ok(None) };
        if !t.getattr(intern!(py, "is_cpu"))?.is_truthy()? {
            return Ok(None);
        }
        if let Some(strided) = &self.ctx.strided {
            if !t.getattr(intern!(py, "layout"))?.is(strided.bind(py)) {
                return Ok(None);
            }
        }
        // Conjugate and negative views (lazy bits; the conjugate bit exists on complex tensors
        // only, the negative one also on e.g. `x.conj().imag`) are resolved by the Python path.
        let complex = code == 16 || code == 17;
        if (complex && t.call_method0(intern!(py, "is_conj"))?.is_truthy()?)
            || t.call_method0(intern!(py, "is_neg"))?.is_truthy()?
        {
            return Ok(None);
        }
        let requires_grad = t.getattr(intern!(py, "requires_grad"))?.is_truthy()?;
        let mut v = View::new(code, size, 0, requires_grad as i32);
        let Some(nd) = read_dims(&t.getattr(intern!(py, "shape"))?, &mut v.shape)? else { return Ok(None) };
        v.nd = nd;
        if read_dims(&t.call_method0(intern!(py, "stride"))?, &mut v.strides)? != Some(nd) {
            return Ok(None);
        }
        if !v.is_empty() {
            v.data = t.call_method0(intern!(py, "data_ptr"))?.extract()?;
        }
        Ok(Some(v))
    }

    /// (aclDataType number, element size) of a framework dtype, or None when not recorded natively.
    fn dtype(&self, dtype: &Bound<'py, PyAny>) -> PyResult<Option<(i32, u64)>> {
        let Some(code) = self.ctx.dtype_codes.bind(self.py).get_item(dtype)? else { return Ok(None) };
        let code: i32 = code.extract()?;
        let size = usize::try_from(code).ok().and_then(|c| self.ctx.item_sizes.get(c)).copied().unwrap_or(0);
        Ok((size > 0).then_some((code, u64::from(size))))
    }
}

/// Reads a sequence of ints (a shape or strides) into `out`: its length, or None if longer.
fn read_dims(seq: &Bound<'_, PyAny>, out: &mut [i64; MAX_DIMS]) -> PyResult<Option<usize>> {
    let mut n = 0;
    for d in seq.try_iter()? {
        if n == MAX_DIMS {
            return Ok(None);
        }
        out[n] = d?.extract()?;
        n += 1;
    }
    Ok(Some(n))
}

/// A tensor view in host memory, from its first element at `data` (element strides).
struct View {
    code: i32,
    size: u64,
    nd: usize,
    shape: [i64; MAX_DIMS],
    strides: [i64; MAX_DIMS],
    data: usize,
    requires_grad: i32,
}

impl View {
    fn new(code: i32, size: u64, data: usize, requires_grad: i32) -> View {
        View { code, size, nd: 0, shape: [0; MAX_DIMS], strides: [0; MAX_DIMS], data, requires_grad }
    }

    fn is_empty(&self) -> bool {
        self.shape[..self.nd].contains(&0)
    }

    /// The C descriptor, borrowing the arrays: the bytes it may read run from `data` to one past
    /// the last element the strides reach. None for negative strides (never seen from torch or
    /// numpy views we read; the Python path copes).
    fn desc(&self) -> Option<Tensor> {
        let mut last = 0u64;
        for i in 0..self.nd {
            if self.strides[i] < 0 {
                return None;
            }
            last += (self.shape[i].max(1) as u64 - 1) * self.strides[i] as u64;
        }
        let empty = self.is_empty() || self.data == 0;
        Some(Tensor {
            dtype: self.code,
            ndim: self.nd as i32,
            shape: self.shape.as_ptr(),
            strides: self.strides.as_ptr(),
            offset: 0,
            data: self.data as *const std::ffi::c_void,
            storage_bytes: if empty { 0 } else { (last + 1) * self.size },
            requires_grad: self.requires_grad,
            type_name: std::ptr::null(),
        })
    }
}
