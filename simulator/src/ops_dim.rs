//! aclnn operators that work along dimensions or mix a few tensors elementwise, as torch_npu's
//! op-plugin launches them for common torch calls (`sort`, `topk`, `max(dim)`, `argmax`, `cumsum`,
//! `flip`, `roll`, `scatter`/`scatter_add` (also gather's backward), `var`, `std`, `prod`,
//! `logsumexp`, `lerp` (Adam's moment update), `mse_loss`). Without them torch_npu falls back to
//! aclop kernels the simulator does not have, and every later op of the script computes nothing.
//!
//! Values are read as f64 and rounded once to the out dtype on store (int64 beyond 2^53 is
//! inexact); the orderings put NaN above every number, as torch does.
use crate::kernels::split_dim;
use crate::ops_ext::{axis, float, index_dtype, inv, red_axes, reduced_shape, reduced_slots, same_shape, t};
use crate::tensor::{bview, contiguous_strides, numel, TView, SV};
use std::cmp::Ordering;

/// A reduction of `DimOp::Reduce`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RKind {
    /// aclnnVarCorrection: sum (x - mean)^2 / max(0, N - correction) (N - correction <= 0 gives
    /// NaN or inf, as torch)
    Var { correction: i64 },
    /// aclnnStd: the square root of `Var`
    Std { correction: i64 },
    /// aclnnProd / aclnnProdDim
    Prod,
    /// aclnnLogSumExp: log(sum(exp(x - m))) + m with m the row's max (0 where m is ±inf)
    LogSumExp,
}

#[derive(Clone, Debug)]
pub enum DimOp {
    /// slots: self, out. aclnnCumsum along `dim`, accumulated in f64 (as torch's CPU kernel).
    Cumsum { dim: i64 },
    /// slots: self, out (values; absent for ArgMax/ArgMin), indices (int64; ArgMax's out). aclnnMaxDim/MinDim
    /// and aclnnArgMax/ArgMin: the first maximum (minimum) of each row along `dim`; a NaN wins.
    Extreme { dim: i64, keep: bool, min: bool, values: bool },
    /// slots: self, valuesOut, indicesOut (int64). aclnnSort (`k` None, stable) and aclnnTopk
    /// (the first `k` of the stable order; `largest` = descending).
    Sort { dim: i64, descending: bool, k: Option<i64> },
    /// slots: self, out. aclnnFlip: reversed along each of `dims`.
    Flip { dims: Vec<i64> },
    /// slots: x, out. aclnnRoll: shifted cyclically by `shifts[i]` along `dims[i]`; with no dims,
    /// over the flattened tensor by `shifts[0]`.
    Roll { shifts: Vec<i64>, dims: Vec<i64> },
    /// slots: self, index, src (absent with a scalar `value`), out (absent when `inplace`: self is written).
    /// aclnnScatter / ScatterValue / ScatterAdd and their in-place forms: out = self, then for
    /// each element of index, out[.., index, ..] = (or +=, *= for `reduce` 1, 2) src at the same
    /// position (torch.scatter / scatter_add).
    Scatter { dim: i64, reduce: i64, value: Option<f64>, inplace: bool },
    /// slots: self, out. The reductions of `RKind` over `dims` (all when empty).
    Reduce { kind: RKind, dims: Vec<i64>, keep: bool },
    /// slots: self, end, weight (a tensor; absent with a scalar `weight`), out (absent when `inplace`). aclnnLerp /
    /// aclnnLerps: self + w (end - self), computed in f32 as torch (w < 0.5 from self, else from end).
    Lerp { weight: Option<f64>, inplace: bool },
    /// slots: self, target, out. aclnnMseLoss: (self - target)^2, reduction 0 none, 1 mean, 2 sum.
    MseLoss { reduction: i64 },
    /// slots: gradOutput, self, target, gradInput. aclnnMseLossBackward: 2 (self - target) grad
    /// (/ N for mean).
    MseLossBackward { reduction: i64 },
}

/// NaN above every number (torch's sort and max order).
fn order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// (outer, size, inner) around `dim` (a 0-d tensor is one lane of one element).
fn lanes(shape: &[i64], dim: i64) -> Result<(usize, usize, usize), i32> {
    let d = axis(dim, shape.len())?;
    Ok(if shape.is_empty() { (1, 1, 1) } else { split_dim(shape, d) })
}

/// Apply `f` to each lane of `x` along the middle axis of `(outer, n, inner)`; `f` fills lanes of
/// length `m` of two outputs (the second may be ignored).
fn map_lanes(
    x: &[f64],
    (o, n, inn): (usize, usize, usize),
    m: usize,
    mut f: impl FnMut(&[f64], &mut [f64], &mut [f64]),
) -> (Vec<f64>, Vec<f64>) {
    let (mut y, mut z) = (vec![0.0; o * m * inn], vec![0.0; o * m * inn]);
    let (mut lane, mut a, mut b) = (vec![0.0; n], vec![0.0; m], vec![0.0; m]);
    for p in 0..o {
        for q in 0..inn {
            for (j, v) in lane.iter_mut().enumerate() {
                *v = x[(p * n + j) * inn + q];
            }
            f(&lane, &mut a, &mut b);
            for j in 0..m {
                y[(p * m + j) * inn + q] = a[j];
                z[(p * m + j) * inn + q] = b[j];
            }
        }
    }
    (y, z)
}

/// For each element of a contiguous `shape`, the contiguous index of the element `src` maps it
/// from (`src` edits the coordinates in place).
fn remap(shape: &[i64], mut src: impl FnMut(&mut [i64])) -> Vec<usize> {
    let st = contiguous_strides(shape);
    let mut c = vec![0i64; shape.len()];
    (0..numel(shape) as i64)
        .map(|k| {
            for d in 0..shape.len() {
                c[d] = k / st[d] % shape[d];
            }
            src(&mut c);
            c.iter().zip(&st).map(|(a, b)| a * b).sum::<i64>() as usize
        })
        .collect()
}

fn want_shape(o: &TView, want: &[i64], what: &str) -> Result<(), i32> {
    if o.shape == want {
        Ok(())
    } else {
        Err(inv(format!("{what}: shape {:?} must be {want:?}", o.shape)))
    }
}

/// The shape of `shape` with `dim` reduced (kept as 1 with `keep`).
fn dim_reduced(shape: &[i64], dim: i64, keep: bool) -> Result<Vec<i64>, i32> {
    let d = axis(dim, shape.len())?;
    let mut red = vec![false; shape.len()];
    if let Some(r) = red.get_mut(d) {
        *r = true;
    }
    Ok(reduced_shape(shape, &red, keep))
}

fn mse_shape(s: &[SV]) -> Result<Vec<i64>, i32> {
    let (a, b) = (t(s, 0)?, t(s, 1)?);
    crate::kernels::broadcast_shape(&a.shape, &b.shape)
        .ok_or_else(|| inv(format!("mse_loss: shapes {:?} and {:?} do not broadcast", a.shape, b.shape)))
}

/// torch's lerp in f32.
fn lerp(a: f32, b: f32, w: f32) -> f32 {
    if w.abs() < 0.5 {
        a + w * (b - a)
    } else {
        b - (b - a) * (1.0 - w)
    }
}

impl DimOp {
    /// Phase 1: shapes and dtypes; the workspace size.
    pub fn validate(&self, s: &[SV]) -> Result<u64, i32> {
        match self {
            DimOp::Cumsum { dim } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                axis(*dim, a.shape.len())?;
                same_shape(a, o, "out")?;
            }
            DimOp::Extreme { dim, keep, values, .. } => {
                let a = t(s, 0)?;
                if a.numel() == 0 {
                    return Err(inv("max/min/argmax over a dim: self is empty"));
                }
                let want = dim_reduced(&a.shape, *dim, *keep)?;
                let i = t(s, if *values { 2 } else { 1 })?;
                want_shape(i, &want, "indices")?;
                index_dtype(i)?;
                if *values {
                    want_shape(t(s, 1)?, &want, "out")?;
                }
            }
            DimOp::Sort { dim, k, .. } => {
                let (a, v, i) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let (_, n, _) = lanes(&a.shape, *dim)?;
                let mut want = a.shape.clone();
                if let Some(k) = *k {
                    if k < 0 || k as usize > n {
                        return Err(inv(format!("topk: k {k} out of range for a dim of size {n}")));
                    }
                    if let Some(w) = want.get_mut(axis(*dim, a.shape.len())?) {
                        *w = k;
                    }
                }
                want_shape(v, &want, "valuesOut")?;
                want_shape(i, &want, "indicesOut")?;
                index_dtype(i)?;
            }
            DimOp::Flip { dims } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                for &d in dims {
                    axis(d, a.shape.len())?;
                }
                same_shape(a, o, "out")?;
            }
            DimOp::Roll { shifts, dims } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                if shifts.is_empty()
                    || (!dims.is_empty() && dims.len() != shifts.len())
                    || (dims.is_empty() && shifts.len() != 1)
                {
                    return Err(inv(format!("roll: shifts {shifts:?} and dims {dims:?} do not pair")));
                }
                for &d in dims {
                    axis(d, a.shape.len())?;
                }
                same_shape(a, o, "out")?;
            }
            DimOp::Scatter { dim, value, inplace, .. } => {
                let (a, i) = (t(s, 0)?, t(s, 1)?);
                let d = axis(*dim, a.shape.len())?;
                index_dtype(i)?;
                let rank_ok = i.shape.len() == a.shape.len() || (a.shape.is_empty() && i.shape.len() <= 1);
                let fits = |other: &[i64], skip: Option<usize>| {
                    i.shape.iter().zip(other).enumerate().all(|(k, (&n, &m))| Some(k) == skip || n <= m)
                };
                if !rank_ok || !fits(&a.shape, Some(d)) {
                    return Err(inv(format!(
                        "scatter: index {:?} must have self's rank and fit {:?}",
                        i.shape, a.shape
                    )));
                }
                if value.is_none() {
                    let src = t(s, 2)?;
                    if src.shape.len() != i.shape.len() || !fits(&src.shape, None) {
                        return Err(inv(format!("scatter: index {:?} must fit src {:?}", i.shape, src.shape)));
                    }
                    if src.dtype != a.dtype {
                        return Err(inv(format!(
                            "scatter: src dtype {} differs from self's {}",
                            src.dtype.name(),
                            a.dtype.name()
                        )));
                    }
                }
                if !inplace {
                    same_shape(a, t(s, if value.is_some() { 2 } else { 3 })?, "out")?;
                }
            }
            DimOp::Reduce { kind, dims, keep } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                if *kind != RKind::Prod {
                    float(a, "self")?;
                    float(o, "out")?;
                }
                want_shape(o, &reduced_shape(&a.shape, &red_axes(&a.shape, dims)?, *keep), "out")?;
            }
            DimOp::Lerp { weight, inplace } => {
                let a = t(s, 0)?;
                let o = if *inplace { a } else { t(s, if weight.is_some() { 2 } else { 3 })? };
                float(o, "out")?;
                let mut parts = vec![a, t(s, 1)?];
                if weight.is_none() {
                    parts.push(t(s, 2)?);
                }
                for p in parts {
                    bview(p, &o.shape)?;
                }
            }
            DimOp::MseLoss { reduction } => {
                let shape = mse_shape(s)?;
                let o = t(s, 2)?;
                float(o, "out")?;
                want_shape(o, if *reduction == 0 { &shape } else { &[] }, "out")?;
            }
            DimOp::MseLossBackward { .. } => {
                let shape = mse_shape(&s[1..])?;
                let (g, o) = (t(s, 0)?, t(s, 3)?);
                bview(g, &shape)?;
                want_shape(o, &shape, "gradInput")?;
            }
        }
        Ok(0)
    }

    /// Phase 2, on the stream worker.
    pub fn exec(&self, s: &[SV]) -> Result<(), i32> {
        match self {
            DimOp::Cumsum { dim } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let l = lanes(&a.shape, *dim)?;
                let (y, _) = map_lanes(&a.read_f64()?, l, l.1, |x, y, _| {
                    let mut acc = 0.0;
                    for (v, out) in x.iter().zip(y.iter_mut()) {
                        acc += v;
                        *out = acc;
                    }
                });
                o.write_f64(&y)
            }
            DimOp::Extreme { dim, min, values, .. } => {
                let a = t(s, 0)?;
                let l = lanes(&a.shape, *dim)?;
                let (v, i) = map_lanes(&a.read_f64()?, l, 1, |x, v, i| {
                    let mut best = 0;
                    for (j, &c) in x.iter().enumerate().skip(1) {
                        let b = x[best];
                        let better = !b.is_nan() && (c.is_nan() || if *min { c < b } else { c > b });
                        if better {
                            best = j;
                        }
                    }
                    v[0] = x[best];
                    i[0] = best as f64;
                });
                if *values {
                    t(s, 1)?.write_f64(&v)?;
                }
                t(s, if *values { 2 } else { 1 })?.write_f64(&i)
            }
            DimOp::Sort { dim, descending, k } => {
                let a = t(s, 0)?;
                let l = lanes(&a.shape, *dim)?;
                let m = k.map_or(l.1, |k| k as usize);
                let (v, i) = map_lanes(&a.read_f64()?, l, m, |x, v, i| {
                    let mut idx: Vec<usize> = (0..x.len()).collect();
                    idx.sort_by(|&p, &q| if *descending { order(x[q], x[p]) } else { order(x[p], x[q]) });
                    for j in 0..m {
                        v[j] = x[idx[j]];
                        i[j] = idx[j] as f64;
                    }
                });
                t(s, 1)?.write_f64(&v)?;
                t(s, 2)?.write_f64(&i)
            }
            DimOp::Flip { dims } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let rank = a.shape.len();
                let ax = dims.iter().map(|&d| axis(d, rank)).collect::<Result<Vec<_>, _>>()?;
                let x = a.read_f64()?;
                let shape = &a.shape;
                let src = remap(shape, |c| {
                    for &d in &ax {
                        c[d] = shape[d] - 1 - c[d];
                    }
                });
                o.write_f64(&src.iter().map(|&k| x[k]).collect::<Vec<_>>())
            }
            DimOp::Roll { shifts, dims } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let x = a.read_f64()?;
                if dims.is_empty() {
                    let n = x.len() as i64;
                    let sh = if n == 0 { 0 } else { shifts[0].rem_euclid(n) } as usize;
                    let mut y = x[x.len() - sh..].to_vec();
                    y.extend_from_slice(&x[..x.len() - sh]);
                    return o.write_f64(&y);
                }
                let rank = a.shape.len();
                let ax = dims.iter().map(|&d| axis(d, rank)).collect::<Result<Vec<_>, _>>()?;
                let shape = &a.shape;
                let src = remap(shape, |c| {
                    for (&d, &sh) in ax.iter().zip(shifts) {
                        c[d] = (c[d] - sh).rem_euclid(shape[d].max(1));
                    }
                });
                o.write_f64(&src.iter().map(|&k| x[k]).collect::<Vec<_>>())
            }
            DimOp::Scatter { dim, reduce, value, inplace } => {
                let (a, i) = (t(s, 0)?, t(s, 1)?);
                let o = if *inplace { a } else { t(s, if value.is_some() { 2 } else { 3 })? };
                let mut y = a.read_f64()?;
                let idx = i.read_i64()?;
                let src = match value {
                    Some(_) => None,
                    None => {
                        let sv = t(s, 2)?;
                        Some((sv.read_f64()?, contiguous_strides(&sv.shape)))
                    }
                };
                let d = axis(*dim, a.shape.len())?;
                let (ast, ist) = (contiguous_strides(&a.shape), contiguous_strides(&i.shape));
                for (k, &j) in idx.iter().enumerate() {
                    let n = a.shape.get(d).copied().unwrap_or(1);
                    if j < 0 || j >= n {
                        return Err(inv(format!("scatter: index {j} out of range for dim {d} of size {n}")));
                    }
                    let (mut at, mut from) = (0i64, 0i64);
                    for q in 0..i.shape.len() {
                        let c = k as i64 / ist[q] % i.shape[q];
                        at += if q == d { j } else { c } * ast.get(q).copied().unwrap_or(0);
                        if let Some((_, sst)) = &src {
                            from += c * sst[q];
                        }
                    }
                    let v = match &src {
                        Some((sv, _)) => sv[from as usize],
                        None => value.unwrap_or(0.0),
                    };
                    let cell = &mut y[at as usize];
                    *cell = match reduce {
                        1 => *cell + v,
                        2 => *cell * v,
                        _ => v,
                    };
                }
                o.write_f64(&y)
            }
            DimOp::Reduce { kind, dims, .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let red = red_axes(&a.shape, dims)?;
                let slots = reduced_slots(&a.shape, &red);
                let mut groups = vec![Vec::new(); numel(&reduced_shape(&a.shape, &red, true))];
                for (&v, &g) in a.read_f64()?.iter().zip(&slots) {
                    groups[g].push(v);
                }
                let y: Vec<f64> = groups
                    .iter()
                    .map(|g| match kind {
                        RKind::Prod => g.iter().product(),
                        RKind::Var { correction } | RKind::Std { correction } => {
                            let n = g.len() as f64;
                            let mean = g.iter().sum::<f64>() / n;
                            let m2: f64 = g.iter().map(|v| (v - mean) * (v - mean)).sum();
                            let var = m2 / (n - *correction as f64).max(0.0);
                            if matches!(kind, RKind::Std { .. }) {
                                var.sqrt()
                            } else {
                                var
                            }
                        }
                        RKind::LogSumExp => {
                            let m = g.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                            let m = if m.is_infinite() { 0.0 } else { m };
                            g.iter().map(|v| (v - m).exp()).sum::<f64>().ln() + m
                        }
                    })
                    .collect();
                o.write_f64(&y)
            }
            DimOp::Lerp { weight, inplace } => {
                let a = t(s, 0)?;
                let o = if *inplace { a } else { t(s, if weight.is_some() { 2 } else { 3 })? };
                let x = bview(a, &o.shape)?.read_f32()?;
                let e = bview(t(s, 1)?, &o.shape)?.read_f32()?;
                let w = match weight {
                    Some(w) => vec![*w as f32; x.len()],
                    None => bview(t(s, 2)?, &o.shape)?.read_f32()?,
                };
                o.write_f32(&x.iter().zip(&e).zip(&w).map(|((&a, &b), &w)| lerp(a, b, w)).collect::<Vec<_>>())
            }
            DimOp::MseLoss { reduction } => {
                let shape = mse_shape(s)?;
                let a = bview(t(s, 0)?, &shape)?.read_f64()?;
                let b = bview(t(s, 1)?, &shape)?.read_f64()?;
                let sq: Vec<f64> = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).collect();
                let o = t(s, 2)?;
                match reduction {
                    0 => o.write_f64(&sq),
                    1 => o.write_f64(&[sq.iter().sum::<f64>() / sq.len() as f64]),
                    _ => o.write_f64(&[sq.iter().sum::<f64>()]),
                }
            }
            DimOp::MseLossBackward { reduction } => {
                let o = t(s, 3)?;
                let g = bview(t(s, 0)?, &o.shape)?.read_f64()?;
                let a = bview(t(s, 1)?, &o.shape)?.read_f64()?;
                let b = bview(t(s, 2)?, &o.shape)?.read_f64()?;
                let scale = if *reduction == 1 { 2.0 / o.numel().max(1) as f64 } else { 2.0 };
                o.write_f64(&g.iter().zip(a.iter().zip(&b)).map(|(g, (x, y))| scale * (x - y) * g).collect::<Vec<_>>())
            }
        }
    }
}
