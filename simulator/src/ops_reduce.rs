//! aclop reductions that torch_npu launches for whole-tensor statistics (`x.max()`, `x.min()`,
//! `x.norm()`, `torch.stack`): ReduceMax / ReduceMin, LpNormReduceV2 + LpNormUpdateV2, and Pack (a
//! concatenation of unsqueezed inputs, planned in `aclop.rs` on `Op::Cat`).
//!
//! Same conventions as `ops.rs`: phase 1 validates shapes and dtypes, phase 2 runs on the stream.
//! Values are computed in f64 and rounded once to the output dtype, as the device's f32
//! accumulation would give within the rounding of that dtype.
use crate::consts::*;
use crate::errmsg::fail;
use crate::tensor::{TView, SV};

#[derive(Clone, Debug)]
pub enum RedOp {
    /// slots: x, y. ReduceMax / ReduceMin over `dims` (all when empty). A NaN anywhere in a
    /// reduced group gives NaN (as the device kernel and `torch.max` do).
    MaxMin { min: bool, dims: Vec<i64>, keep: bool },
    /// slots: x, y. LpNormReduceV2, the first half of torch_npu's `norm`: sum |x|^p over `dims`
    /// (all when empty); p = inf/-inf give max/min |x|, p = 0 the count of non-zeros.
    LpNorm { p: f64, dims: Vec<i64>, keep: bool },
    /// slots: x, y. LpNormUpdateV2, the second half: y = x^(1/p) elementwise for a finite non-zero
    /// p, a copy otherwise.
    LpUpdate { p: f64 },
}

fn inv(msg: impl Into<String>) -> i32 {
    fail(ACLNN_ERR_PARAM_INVALID, msg)
}

fn tv(s: &[SV], i: usize) -> Result<&TView, i32> {
    match s.get(i) {
        Some(SV::T(Some(v))) => Ok(v),
        _ => Err(fail(ACLNN_ERR_PARAM_NULLPTR, format!("tensor argument {i} is NULL"))),
    }
}

/// Which axes are reduced (all when `dims` is empty), checking each.
fn axes(shape: &[i64], dims: &[i64]) -> Result<Vec<bool>, i32> {
    let r = shape.len() as i64;
    let mut red = vec![dims.is_empty(); shape.len()];
    for &d in dims {
        let n = if d < 0 { d + r } else { d };
        if n < 0 || n >= r.max(1) {
            return Err(inv(format!("axis {d} out of range for rank {r}")));
        }
        if (n as usize) < red.len() {
            red[n as usize] = true;
        }
    }
    Ok(red)
}

fn out_shape(shape: &[i64], red: &[bool], keep: bool) -> Vec<i64> {
    shape.iter().zip(red).filter_map(|(&d, &r)| if r { keep.then_some(1) } else { Some(d) }).collect()
}

/// Reduces `v` (row-major over `shape`) group by group with `f` over each group's values.
fn reduce(v: &[f64], shape: &[i64], red: &[bool], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let kept: Vec<usize> = (0..shape.len()).filter(|&i| !red[i]).collect();
    let nout: usize = kept.iter().map(|&i| shape[i] as usize).product();
    let mut groups: Vec<Vec<f64>> = vec![Vec::new(); nout.max(1)];
    let mut idx = vec![0i64; shape.len()];
    for &x in v {
        let mut o = 0usize;
        for &i in &kept {
            o = o * shape[i] as usize + idx[i] as usize;
        }
        groups[o].push(x);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    groups.iter().map(|g| f(g)).collect()
}

impl RedOp {
    /// Phase 1: validate; returns the workspace size.
    pub fn validate(&self, s: &[SV]) -> Result<u64, i32> {
        let (x, y) = (tv(s, 0)?, tv(s, 1)?);
        let (dims, keep) = match self {
            RedOp::MaxMin { dims, keep, .. } | RedOp::LpNorm { dims, keep, .. } => (dims, *keep),
            RedOp::LpUpdate { .. } => {
                if !x.dtype.is_float() || !y.dtype.is_float() || x.shape != y.shape {
                    return Err(inv("LpNormUpdateV2: float x and y of one shape expected"));
                }
                return Ok(0);
            }
        };
        let red = axes(&x.shape, dims)?;
        let os = out_shape(&x.shape, &red, keep);
        if !(y.shape == os || (os.is_empty() && y.numel() == 1 && y.shape.len() <= 1)) {
            return Err(inv(format!("y shape {:?}, {os:?} expected", y.shape)));
        }
        match self {
            RedOp::MaxMin { min, .. } => {
                if y.dtype != x.dtype {
                    return Err(inv("y dtype differs from x"));
                }
                if x.shape.iter().zip(&red).any(|(&d, &r)| r && d == 0) {
                    let what = if *min { "ReduceMin" } else { "ReduceMax" };
                    return Err(inv(format!("{what}: a reduced axis is empty")));
                }
            }
            RedOp::LpUpdate { .. } => {}
            RedOp::LpNorm { .. } => {
                if !x.dtype.is_float() || !y.dtype.is_float() {
                    return Err(inv("LpNormReduceV2: float x and y expected"));
                }
            }
        }
        Ok(0)
    }

    /// Phase 2: run.
    pub fn exec(&self, s: &[SV]) -> Result<(), i32> {
        let (x, y) = (tv(s, 0)?, tv(s, 1)?);
        let v = x.read_f64()?;
        let out = match self {
            RedOp::MaxMin { min, dims, .. } => {
                let red = axes(&x.shape, dims)?;
                let min = *min;
                reduce(&v, &x.shape, &red, |g| {
                    if g.iter().any(|a| a.is_nan()) {
                        f64::NAN
                    } else if min {
                        g.iter().copied().fold(f64::INFINITY, f64::min)
                    } else {
                        g.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                    }
                })
            }
            RedOp::LpNorm { p, dims, .. } => {
                let red = axes(&x.shape, dims)?;
                let p = *p;
                reduce(&v, &x.shape, &red, |g| {
                    if p == f64::INFINITY {
                        g.iter().map(|a| a.abs()).fold(0.0, f64::max)
                    } else if p == f64::NEG_INFINITY {
                        g.iter().map(|a| a.abs()).fold(f64::INFINITY, f64::min)
                    } else if p == 0.0 {
                        g.iter().filter(|a| **a != 0.0).count() as f64
                    } else {
                        g.iter().map(|a| a.abs().powf(p)).sum::<f64>()
                    }
                })
            }
            RedOp::LpUpdate { p } => {
                if p.is_finite() && *p != 0.0 {
                    v.iter().map(|a| a.powf(1.0 / p)).collect()
                } else {
                    v
                }
            }
        };
        y.write_f64(&out)
    }
}
