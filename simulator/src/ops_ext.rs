//! The aclnn operators that unmodified torch_npu 2.14 training scripts launch beyond the core set of
//! `ops.rs` (issue #19): arange, tril/triu, logical not, masked fill, addcdiv/addcmul, the `Foreach`
//! family of the default foreach optimizers, convolution, batch norm and max pooling.
//!
//! Same conventions as `ops.rs`: phase 1 validates shapes and dtypes, phase 2 runs on the stream
//! worker; math in f64/f32, rounded to the output dtype on store.
use crate::errmsg::fail;
use crate::ops::{bview, SV};
use crate::tensor::{numel, TView};
use cann_abi::status::*;

/// Elementwise `Foreach` kinds. `s` is the scalar (or the i-th element of a scalar list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FKind {
    /// y = x + s
    AddScalar,
    /// y = x * s
    MulScalar,
    /// y = x / s
    DivScalar,
    /// y = x1 + s * x2
    AddList,
    /// y = x1 * x2
    MulList,
    /// y = x1 / x2
    DivList,
    /// y = x1 + s * (x2 - x1)
    LerpScalar,
    /// y = x1 + s * x2 * x3
    AddcmulScalar,
    /// y = x1 + s * x2 / x3
    AddcdivScalar,
    /// y = sqrt(x)
    Sqrt,
}

impl FKind {
    /// Number of input lists.
    pub fn inputs(self) -> usize {
        match self {
            FKind::AddScalar | FKind::MulScalar | FKind::DivScalar | FKind::Sqrt => 1,
            FKind::AddList | FKind::MulList | FKind::DivList | FKind::LerpScalar => 2,
            FKind::AddcmulScalar | FKind::AddcdivScalar => 3,
        }
    }
}

#[derive(Clone, Debug)]
pub enum ExtOp {
    /// slots: out. out[i] = start + i * step
    Arange { start: f64, end: f64, step: f64 },
    /// slots: self, out (in-place form: selfRef only). Keeps j - i <= diag (tril) / j - i >= diag (triu).
    Tri { diag: i64, upper: bool },
    /// slots: self, out (in-place form: selfRef only)
    LogicalNot,
    /// slots: self, out. Bool: logical not; integers: two's-complement bitwise not.
    BitwiseNot,
    /// slots: selfRef, mask
    MaskedFill { value: f64 },
    /// slots: self, tensor1, tensor2, out (in-place form: no out). out = self + value * t1 (/ or *) t2
    Addc { value: f64, div: bool },
    /// slots: the input lists, then the output list. `scalars` has one value per tensor (or one for all).
    Foreach { kind: FKind, scalars: Vec<f64> },
}

fn inv(msg: impl Into<String>) -> i32 {
    fail(ACLNN_ERR_PARAM_INVALID, msg)
}
fn t(s: &[SV], i: usize) -> Result<&TView, i32> {
    match s.get(i) {
        Some(SV::T(Some(v))) => Ok(v),
        _ => Err(fail(ACLNN_ERR_PARAM_NULLPTR, format!("tensor argument {i} is NULL"))),
    }
}
/// The output slot `i`, or (in-place form, no such slot) the tensor of slot `fallback`.
fn out_or(s: &[SV], i: usize, fallback: usize) -> Result<&TView, i32> {
    if s.len() > i {
        t(s, i)
    } else {
        t(s, fallback)
    }
}
fn l(s: &[SV], i: usize) -> Result<&Vec<TView>, i32> {
    match s.get(i) {
        Some(SV::L(v)) => Ok(v),
        _ => Err(fail(ACLNN_ERR_PARAM_NULLPTR, format!("tensor list argument {i} is NULL"))),
    }
}
fn float(v: &TView, what: &str) -> Result<(), i32> {
    if v.dtype.is_float() {
        Ok(())
    } else {
        Err(inv(format!("{what}: dtype {} is not supported (float32/float16/bfloat16 expected)", v.dtype.name())))
    }
}
fn same_shape(a: &TView, b: &TView, what: &str) -> Result<(), i32> {
    if a.shape == b.shape {
        Ok(())
    } else {
        Err(inv(format!("{what}: shape {:?} differs from {:?}", b.shape, a.shape)))
    }
}

/// Number of elements of `arange(start, end, step)` (torch semantics), or an error.
pub fn arange_len(start: f64, end: f64, step: f64) -> Result<usize, i32> {
    if step == 0.0 || !start.is_finite() || !end.is_finite() {
        return Err(inv("arange: step must be non-zero and bounds finite"));
    }
    if (step > 0.0 && end < start) || (step < 0.0 && end > start) {
        return Err(inv("arange: upper bound and step sign are inconsistent"));
    }
    Ok(((end - start) / step).ceil().max(0.0) as usize)
}

fn foreach_one(kind: FKind, s: f64, x: &[Vec<f64>], i: usize) -> f64 {
    match kind {
        FKind::AddScalar => x[0][i] + s,
        FKind::MulScalar => x[0][i] * s,
        FKind::DivScalar => x[0][i] / s,
        FKind::AddList => x[0][i] + s * x[1][i],
        FKind::MulList => x[0][i] * x[1][i],
        FKind::DivList => x[0][i] / x[1][i],
        FKind::LerpScalar => {
            // torch's lerp: the weight < 0.5 form from the start, else from the end (in f32).
            let (a, b, w) = (x[0][i] as f32, x[1][i] as f32, s as f32);
            (if w.abs() < 0.5 { a + w * (b - a) } else { b - (b - a) * (1.0 - w) }) as f64
        }
        FKind::AddcmulScalar => x[0][i] + s * x[1][i] * x[2][i],
        FKind::AddcdivScalar => x[0][i] + s * (x[1][i] / x[2][i]),
        FKind::Sqrt => x[0][i].sqrt(),
    }
}

impl ExtOp {
    /// Phase 1: validate; returns the workspace size.
    pub fn validate(&self, s: &[SV]) -> Result<u64, i32> {
        match self {
            ExtOp::Arange { start, end, step } => {
                let o = t(s, 0)?;
                let n = arange_len(*start, *end, *step)?;
                if o.numel() != n {
                    return Err(inv(format!("arange: out has {} elements, {n} expected", o.numel())));
                }
                Ok(0)
            }
            ExtOp::Tri { .. } => {
                let (a, o) = (t(s, 0)?, out_or(s, 1, 0)?);
                if a.shape.len() < 2 {
                    return Err(inv("tril/triu: self must be at least 2-D"));
                }
                same_shape(a, o, "out")?;
                Ok(0)
            }
            ExtOp::LogicalNot => {
                let (a, o) = (t(s, 0)?, out_or(s, 1, 0)?);
                same_shape(a, o, "out")?;
                Ok(0)
            }
            ExtOp::BitwiseNot => {
                let (a, o) = (t(s, 0)?, out_or(s, 1, 0)?);
                same_shape(a, o, "out")?;
                if a.dtype.is_float() || o.dtype != a.dtype {
                    return Err(inv(format!(
                        "bitwise_not: dtype {} -> {} not supported",
                        a.dtype.name(),
                        o.dtype.name()
                    )));
                }
                Ok(0)
            }
            ExtOp::MaskedFill { .. } => {
                let (a, m) = (t(s, 0)?, t(s, 1)?);
                if m.dtype != crate::dtype::DType::Bool {
                    return Err(inv(format!("mask dtype {} is not bool", m.dtype.name())));
                }
                bview(m, &a.shape)?;
                Ok(0)
            }
            ExtOp::Addc { .. } => {
                let o = out_or(s, 3, 0)?;
                float(o, "out")?;
                for (i, nm) in [(0, "self"), (1, "tensor1"), (2, "tensor2")] {
                    let v = t(s, i)?;
                    float(v, nm)?;
                    bview(v, &o.shape)?;
                }
                Ok(0)
            }
            ExtOp::Foreach { kind, scalars } => {
                let n = kind.inputs();
                let x0 = l(s, 0)?;
                let out = l(s, n)?;
                if x0.is_empty() {
                    return Err(inv("foreach: empty tensor list"));
                }
                if scalars.len() != 1 && scalars.len() != x0.len() {
                    return Err(inv(format!("foreach: {} scalars for {} tensors", scalars.len(), x0.len())));
                }
                for li in 0..=n {
                    let xi = l(s, li)?;
                    if xi.len() != x0.len() {
                        return Err(inv(format!("foreach: list {li} has {} tensors, {} expected", xi.len(), x0.len())));
                    }
                    for (a, b) in x0.iter().zip(xi) {
                        float(b, "foreach tensor")?;
                        same_shape(a, b, "foreach tensor")?;
                    }
                }
                let _ = out;
                Ok(0)
            }
        }
    }

    /// Phase 2 (stream worker).
    pub fn exec(&self, s: &[SV]) -> Result<(), i32> {
        match self {
            ExtOp::Arange { start, step, .. } => {
                let o = t(s, 0)?;
                let v: Vec<f64> = (0..o.numel()).map(|i| start + i as f64 * step).collect();
                o.write_f64(&v)
            }
            ExtOp::Tri { diag, upper } => {
                let (a, o) = (t(s, 0)?, out_or(s, 1, 0)?);
                let x = a.read_f64()?;
                let r = a.shape.len();
                let (rows, cols) = (a.shape[r - 2] as usize, a.shape[r - 1] as usize);
                let y: Vec<f64> = x
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| {
                        let (i, j) = (((k / cols) % rows) as i64, (k % cols) as i64);
                        let keep = if *upper { j - i >= *diag } else { j - i <= *diag };
                        if keep {
                            v
                        } else {
                            0.0
                        }
                    })
                    .collect();
                o.write_f64(&y)
            }
            ExtOp::LogicalNot => {
                let (a, o) = (t(s, 0)?, out_or(s, 1, 0)?);
                let x = a.read_f64()?;
                o.write_f64(&x.iter().map(|&v| if v == 0.0 { 1.0 } else { 0.0 }).collect::<Vec<_>>())
            }
            ExtOp::BitwiseNot => {
                let (a, o) = (t(s, 0)?, out_or(s, 1, 0)?);
                let y: Vec<f64> = if a.dtype == crate::dtype::DType::Bool {
                    a.read_f64()?.iter().map(|&v| if v == 0.0 { 1.0 } else { 0.0 }).collect()
                } else {
                    a.read_i64()?.iter().map(|&v| !v as f64).collect()
                };
                o.write_f64(&y)
            }
            ExtOp::MaskedFill { value } => {
                let a = t(s, 0)?;
                let m = bview(t(s, 1)?, &a.shape)?.read_f64()?;
                let x = a.read_f64()?;
                a.write_f64(&x.iter().zip(&m).map(|(&v, &k)| if k != 0.0 { *value } else { v }).collect::<Vec<_>>())
            }
            ExtOp::Addc { value, div } => {
                let o = out_or(s, 3, 0)?;
                let x = bview(t(s, 0)?, &o.shape)?.read_f64()?;
                let a = bview(t(s, 1)?, &o.shape)?.read_f64()?;
                let b = bview(t(s, 2)?, &o.shape)?.read_f64()?;
                let y: Vec<f64> = (0..x.len())
                    .map(|i| {
                        let q = if *div { a[i] / b[i] } else { a[i] * b[i] };
                        x[i] + value * q
                    })
                    .collect();
                o.write_f64(&y)
            }
            ExtOp::Foreach { kind, scalars } => {
                let n = kind.inputs();
                let out = l(s, n)?;
                for (ti, o) in out.iter().enumerate() {
                    let xs: Vec<Vec<f64>> =
                        (0..n).map(|li| l(s, li).and_then(|x| x[ti].read_f64())).collect::<Result<_, _>>()?;
                    let sc = if scalars.len() == 1 { scalars[0] } else { scalars[ti] };
                    let y: Vec<f64> = (0..numel(&o.shape)).map(|i| foreach_one(*kind, sc, &xs, i)).collect();
                    o.write_f64(&y)?;
                }
                Ok(())
            }
        }
    }
}
