//! Kernels of the classic-net aclop op types (the GE IR of CANN's op_proto; MindSpore 2.10 sends these down
//! the aclop path): batch-norm training in CANN's split form (BNTrainingReduce / Update / UpdateGrad /
//! ReduceGrad), max pooling (TF `padding` SAME/VALID), softmax cross-entropy, one-hot, the TF-style optimizer
//! updates (ApplyAdamD, ApplyMomentum), AddN, BiasAddGrad and dropout with a keep-probability input.
//! 4-D ops take NCHW views: an NHWC tensor is passed as a stride-permuted NCHW view (aclop.rs), so each kernel
//! is written once. Math is in f64, stored with the output dtype's rounding.
use crate::ops::SV;
use crate::tensor::TView;

#[derive(Clone, Debug)]
pub enum Nn {
    /// slots: x, y. Sum over every dim but `axis` (the channel dim: 1 for NCHW, last for NHWC).
    BiasAddGrad { axis: usize },
    /// slots: x [N,C,H,W], y. k/stride/pad_before as (h, w); padded cells never win.
    MaxPool { k: [usize; 2], s: [usize; 2], p: [usize; 2] },
    /// slots: x1 (forward input), grad, y. Each window's gradient goes to its first maximum.
    MaxPoolGrad { k: [usize; 2], s: [usize; 2], p: [usize; 2] },
    /// slots: x [N,C,H,W], y. TF AvgPool: the mean over the window's cells inside the input (SAME padding
    /// cells are not counted).
    AvgPool { k: [usize; 2], s: [usize; 2], p: [usize; 2] },
    /// slots: grad [N,C,Ho,Wo], y [N,C,H,W]. Each window's gradient is spread evenly over its counted cells.
    AvgPoolGrad { k: [usize; 2], s: [usize; 2], p: [usize; 2] },
    /// slots: x [N,C,H,W], sum [C], square_sum [C]
    BnReduce,
    /// slots: x, sum, square_sum, scale, offset, mean, variance, y, mean_out, variance_out, batch_mean,
    /// batch_variance
    BnUpdate { factor: f64, eps: f64 },
    /// slots: grads, x, batch_mean, batch_variance, diff_scale, diff_offset
    BnUpdateGrad { eps: f64 },
    /// slots: grads, x, diff_scale, diff_offset, scale, batch_mean, batch_variance, y
    BnReduceGrad { eps: f64 },
    /// slots: features [B,K], labels [B,K], loss [B], backprop [B,K]
    SoftmaxXent,
    /// slots: x (indices), on_value, off_value, y. The one-hot dim is `axis` of y.
    OneHot { axis: usize },
    /// slots: var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, var_out, m_out, v_out
    ApplyAdam { nesterov: bool },
    /// slots: var, accum, lr, grad, momentum, var_out, accum_out?
    ApplyMomentum { nesterov: bool },
    /// slots: x0..x{n-1}, y
    AddN { n: usize },
    /// slots: prob (keep probability, one element), y (uint8 bit mask)
    GenMask { numel: usize, seed: i64, offset: i64 },
    /// slots: x, mask, keep_prob, y
    DoMask,
    /// slots: x, gamma, beta, y, mean, variance. Normalises each row of `row` elements (the dims from
    /// begin_norm_axis); mean / variance (biased) per row; gamma / beta repeat over the row.
    LayerNorm { row: usize, eps: f64 },
    /// slots: dy, x, variance, mean, gamma, pd_x, pd_gamma, pd_beta. CANN's kernel has no epsilon attribute
    /// and uses 1e-12 (TBE layer_norm_grad).
    LayerNormGrad { row: usize },
    /// slots: self, out. aclnnClamp: min(max(x, min), max) with either bound optional.
    Clamp { min: Option<f64>, max: Option<f64> },
    /// slots: self, then a min tensor (`min` Some(None)) and a max tensor (`max` Some(None)), broadcast
    /// with self to out's shape, then out (absent when `inplace`: self is written). aclnnClampMin/Max (scalar bounds, Some(Some)),
    /// aclnnClampTensor / ClampMinTensor / ClampMaxTensor and their in-place forms (torch's `clamp` with
    /// tensor bounds, `clamp_min` in F.normalize). A NaN in self or in a bound gives NaN (as torch).
    ClampBy { min: Option<Option<f64>>, max: Option<Option<f64>>, inplace: bool },
    /// slots: self, out. aclnnPermute: out = self with its dims reordered (out.shape[i] = self.shape[dims[i]]).
    Permute { dims: Vec<usize> },
    /// slots: varRef, mRef, vRef, maxGradNormOptionalRef?, grad, step. aclnnApplyAdamWV2 (torch AdamW with
    /// the step count as a tensor): var *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
    /// [amsgrad: vmax = max(vmax, v)]; var -= lr * (m / (1-b1^step)) / (sqrt(v' / (1-b2^step)) + eps).
    AdamWV2 { lr: f64, b1: f64, b2: f64, wd: f64, eps: f64, amsgrad: bool, maximize: bool },
    /// slots: self, out list. aclnnSplitWithSize: consecutive pieces of `sizes[i]` along `dim`.
    SplitWithSize { sizes: Vec<i64>, dim: i64 },
}

fn tv(s: &[SV], i: usize) -> Result<&TView, i32> {
    match s.get(i) {
        Some(SV::T(Some(v))) => Ok(v),
        _ => Err(crate::errmsg::fail(crate::consts::ACL_ERROR_INVALID_PARAM, format!("tensor {i} is missing"))),
    }
}
fn rd(s: &[SV], i: usize) -> Result<Vec<f64>, i32> {
    tv(s, i)?.read_f64()
}
fn wr(s: &[SV], i: usize, v: &[f64]) -> Result<(), i32> {
    tv(s, i)?.write_f64(v)
}
fn scalar(s: &[SV], i: usize) -> Result<f64, i32> {
    Ok(rd(s, i)?.first().copied().unwrap_or(0.0))
}
fn nchw(v: &TView) -> (usize, usize, usize) {
    let d = |k: usize| v.shape.get(k).copied().unwrap_or(1) as usize;
    (d(0), d(1), d(2) * d(3))
}

/// Per-channel statistics helpers over an NCHW tensor (n, c, hw) in flat order.
fn per_channel(x: &[f64], (n, c, hw): (usize, usize, usize), mut f: impl FnMut(usize, usize)) {
    for b in 0..n {
        for ch in 0..c {
            for k in 0..hw {
                f(ch, (b * c + ch) * hw + k);
            }
        }
    }
    let _ = x;
}

impl Nn {
    /// Phase-1 checks of the forms reachable through aclnn (the aclop forms are checked when planned).
    pub fn validate(&self, s: &[SV]) -> Result<u64, i32> {
        let same = |a: &TView, b: &TView, what: &str| {
            if a.shape == b.shape {
                Ok(())
            } else {
                Err(crate::errmsg::fail(
                    crate::consts::ACLNN_ERR_PARAM_INVALID,
                    format!("{what}: shape {:?} differs from {:?}", b.shape, a.shape),
                ))
            }
        };
        match self {
            Nn::Clamp { .. } => same(tv(s, 0)?, tv(s, 1)?, "out")?,
            Nn::ClampBy { min, max, inplace } => {
                // self and the tensor bounds broadcast together to out's shape (self's, in place)
                let x = tv(s, 0)?;
                let tensors = usize::from(matches!(min, Some(None))) + usize::from(matches!(max, Some(None)));
                let o = if *inplace { x } else { tv(s, tensors + 1)? };
                crate::tensor::bview(x, &o.shape)?;
                for k in 1..=tensors {
                    crate::tensor::bview(tv(s, k)?, &o.shape)?;
                }
            }
            Nn::Permute { dims } => {
                let (x, o) = (tv(s, 0)?, tv(s, 1)?);
                if dims.len() != x.shape.len() || dims.iter().map(|&d| x.shape[d]).collect::<Vec<_>>() != o.shape {
                    return Err(crate::errmsg::fail(
                        crate::consts::ACLNN_ERR_PARAM_INVALID,
                        format!("permute {dims:?} of {:?} does not give out {:?}", x.shape, o.shape),
                    ));
                }
            }
            Nn::SplitWithSize { sizes, dim } => {
                let x = tv(s, 0)?;
                let r = x.shape.len() as i64;
                let d = if *dim < 0 { dim + r } else { *dim };
                let outs = match s.get(1) {
                    Some(SV::L(v)) => v,
                    _ => return Err(crate::errmsg::fail(crate::consts::ACLNN_ERR_PARAM_NULLPTR, "out list is NULL")),
                };
                let bad = |m: String| crate::errmsg::fail(crate::consts::ACLNN_ERR_PARAM_INVALID, m);
                if !(0..r).contains(&d) || sizes.iter().sum::<i64>() != x.shape[d as usize] || outs.len() != sizes.len()
                {
                    return Err(bad(format!(
                        "split sizes {sizes:?} along dim {dim} of {:?} into {} outputs",
                        x.shape,
                        outs.len()
                    )));
                }
                for (o, &n) in outs.iter().zip(sizes) {
                    let mut want = x.shape.clone();
                    want[d as usize] = n;
                    if o.shape != want {
                        return Err(bad(format!("split output {:?}, {want:?} expected", o.shape)));
                    }
                }
            }
            Nn::AdamWV2 { amsgrad, .. } => {
                let var = tv(s, 0)?;
                for (i, what) in [(1, "mRef"), (2, "vRef"), (4, "grad")] {
                    same(var, tv(s, i)?, what)?;
                }
                if *amsgrad {
                    same(var, tv(s, 3)?, "maxGradNormOptionalRef")?;
                }
                tv(s, 5)?;
            }
            _ => {}
        }
        Ok(0)
    }

    pub fn exec(&self, s: &[SV]) -> Result<(), i32> {
        match self {
            Nn::BiasAddGrad { axis } => {
                let x = tv(s, 0)?;
                let xv = x.read_f64()?;
                let c = x.shape[*axis] as usize;
                let inner: usize = x.shape[axis + 1..].iter().product::<i64>() as usize;
                let mut y = vec![0f64; c];
                for (i, v) in xv.iter().enumerate() {
                    y[(i / inner) % c] += v;
                }
                wr(s, 1, &y)
            }
            Nn::MaxPool { k, s: st, p } | Nn::MaxPoolGrad { k, s: st, p } => {
                let x = tv(s, 0)?;
                let (n, c) = (x.shape[0] as usize, x.shape[1] as usize);
                let (h, w) = (x.shape[2] as usize, x.shape[3] as usize);
                let yv = tv(s, if matches!(self, Nn::MaxPool { .. }) { 1 } else { 2 })?;
                let (ho, wo) = if matches!(self, Nn::MaxPool { .. }) {
                    (yv.shape[2] as usize, yv.shape[3] as usize)
                } else {
                    let g = tv(s, 1)?;
                    (g.shape[2] as usize, g.shape[3] as usize)
                };
                let xv = x.read_f64()?;
                let grad = if matches!(self, Nn::MaxPoolGrad { .. }) { Some(rd(s, 1)?) } else { None };
                let mut out = vec![0f64; if grad.is_some() { xv.len() } else { n * c * ho * wo }];
                for plane in 0..n * c {
                    for oh in 0..ho {
                        for ow in 0..wo {
                            let mut best: Option<(usize, f64)> = None;
                            for i in 0..k[0] {
                                for j in 0..k[1] {
                                    let (ih, iw) =
                                        ((oh * st[0] + i) as i64 - p[0] as i64, (ow * st[1] + j) as i64 - p[1] as i64);
                                    if ih < 0 || iw < 0 || ih as usize >= h || iw as usize >= w {
                                        continue;
                                    }
                                    let idx = plane * h * w + ih as usize * w + iw as usize;
                                    let v = xv[idx];
                                    if best.is_none_or(|(_, b)| v > b || (v.is_nan() && !b.is_nan())) {
                                        best = Some((idx, v));
                                    }
                                }
                            }
                            let o = plane * ho * wo + oh * wo + ow;
                            match (&grad, best) {
                                (None, Some((_, v))) => out[o] = v,
                                (Some(g), Some((idx, _))) => out[idx] += g[o],
                                _ => {}
                            }
                        }
                    }
                }
                wr(s, if grad.is_some() { 2 } else { 1 }, &out)
            }
            Nn::AvgPool { k, s: st, p } | Nn::AvgPoolGrad { k, s: st, p } => {
                let fwd = matches!(self, Nn::AvgPool { .. });
                let (small, big) = if fwd { (tv(s, 1)?, tv(s, 0)?) } else { (tv(s, 0)?, tv(s, 1)?) };
                let (h, w) = (big.shape[2] as usize, big.shape[3] as usize);
                let (ho, wo) = (small.shape[2] as usize, small.shape[3] as usize);
                let planes = (big.shape[0] * big.shape[1]) as usize;
                let (bv, sv) = if fwd { (big.read_f64()?, vec![]) } else { (vec![], small.read_f64()?) };
                let mut out = vec![0f64; if fwd { planes * ho * wo } else { planes * h * w }];
                for plane in 0..planes {
                    for oh in 0..ho {
                        for ow in 0..wo {
                            let mut cells = Vec::new();
                            for i in 0..k[0] {
                                for j in 0..k[1] {
                                    let (ih, iw) =
                                        ((oh * st[0] + i) as i64 - p[0] as i64, (ow * st[1] + j) as i64 - p[1] as i64);
                                    if ih >= 0 && iw >= 0 && (ih as usize) < h && (iw as usize) < w {
                                        cells.push(plane * h * w + ih as usize * w + iw as usize);
                                    }
                                }
                            }
                            let o = plane * ho * wo + oh * wo + ow;
                            let n = cells.len().max(1) as f64;
                            if fwd {
                                out[o] = cells.iter().map(|&c| bv[c]).sum::<f64>() / n;
                            } else {
                                for &c in &cells {
                                    out[c] += sv[o] / n;
                                }
                            }
                        }
                    }
                }
                wr(s, 1, &out)
            }
            Nn::BnReduce => {
                let x = tv(s, 0)?;
                let dims = nchw(x);
                let xv = x.read_f64()?;
                let (mut sum, mut sq) = (vec![0f64; dims.1], vec![0f64; dims.1]);
                per_channel(&xv, dims, |c, i| {
                    sum[c] += xv[i];
                    sq[c] += xv[i] * xv[i];
                });
                wr(s, 1, &sum)?;
                wr(s, 2, &sq)
            }
            Nn::BnUpdate { factor, eps } => {
                // CANN BNTrainingUpdate: batch statistics from the reduce sums (biased variance for y and
                // batch_variance; the running variance takes the unbiased one), moving averages with `factor`.
                let x = tv(s, 0)?;
                let dims = nchw(x);
                let num = (dims.0 * dims.2) as f64;
                let xv = x.read_f64()?;
                let (sum, sq, scale, off, mean, var) =
                    (rd(s, 1)?, rd(s, 2)?, rd(s, 3)?, rd(s, 4)?, rd(s, 5)?, rd(s, 6)?);
                let bm: Vec<f64> = sum.iter().map(|v| v / num).collect();
                let bv: Vec<f64> = sq.iter().zip(&bm).map(|(q, m)| q / num - m * m).collect();
                let unb = if num > 1.0 { num / (num - 1.0) } else { 1.0 };
                let mut y = vec![0f64; xv.len()];
                per_channel(&xv, dims, |c, i| {
                    y[i] = (xv[i] - bm[c]) / (bv[c] + eps).sqrt() * scale[c] + off[c];
                });
                let mo: Vec<f64> = (0..dims.1).map(|c| factor * bm[c] + (1.0 - factor) * mean[c]).collect();
                let vo: Vec<f64> = (0..dims.1).map(|c| factor * bv[c] * unb + (1.0 - factor) * var[c]).collect();
                wr(s, 7, &y)?;
                wr(s, 8, &mo)?;
                wr(s, 9, &vo)?;
                wr(s, 10, &bm)?;
                wr(s, 11, &bv)
            }
            Nn::BnUpdateGrad { eps } => {
                let x = tv(s, 1)?;
                let dims = nchw(x);
                let (g, xv, bm, bv) = (rd(s, 0)?, x.read_f64()?, rd(s, 2)?, rd(s, 3)?);
                let (mut ds, mut dof) = (vec![0f64; dims.1], vec![0f64; dims.1]);
                per_channel(&xv, dims, |c, i| {
                    ds[c] += g[i] * (xv[i] - bm[c]) / (bv[c] + eps).sqrt();
                    dof[c] += g[i];
                });
                wr(s, 4, &ds)?;
                wr(s, 5, &dof)
            }
            Nn::BnReduceGrad { eps } => {
                let x = tv(s, 1)?;
                let dims = nchw(x);
                let num = (dims.0 * dims.2) as f64;
                let (g, xv, ds, dof, scale, bm, bv) =
                    (rd(s, 0)?, x.read_f64()?, rd(s, 2)?, rd(s, 3)?, rd(s, 4)?, rd(s, 5)?, rd(s, 6)?);
                let mut y = vec![0f64; xv.len()];
                per_channel(&xv, dims, |c, i| {
                    let inv = 1.0 / (bv[c] + eps).sqrt();
                    let xhat = (xv[i] - bm[c]) * inv;
                    y[i] = scale[c] * inv * (g[i] - (dof[c] + xhat * ds[c]) / num);
                });
                wr(s, 7, &y)
            }
            Nn::SoftmaxXent => {
                let f = tv(s, 0)?;
                let k = *f.shape.last().unwrap_or(&1) as usize;
                let (fv, lv) = (f.read_f64()?, rd(s, 1)?);
                let rows = fv.len() / k.max(1);
                let (mut loss, mut bp) = (vec![0f64; rows], vec![0f64; fv.len()]);
                for r in 0..rows {
                    let row = &fv[r * k..(r + 1) * k];
                    let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let lse = row.iter().map(|v| (v - mx).exp()).sum::<f64>().ln() + mx;
                    for j in 0..k {
                        let logp = row[j] - lse;
                        loss[r] -= lv[r * k + j] * logp;
                        bp[r * k + j] = logp.exp() - lv[r * k + j];
                    }
                }
                wr(s, 2, &loss)?;
                wr(s, 3, &bp)
            }
            Nn::OneHot { axis } => {
                let idx = tv(s, 0)?.read_i64()?;
                let (on, off) = (scalar(s, 1)?, scalar(s, 2)?);
                let y = tv(s, 3)?;
                let depth = y.shape[*axis];
                let inner: usize = y.shape[axis + 1..].iter().product::<i64>() as usize;
                let mut out = vec![off; y.numel()];
                for (i, &v) in idx.iter().enumerate() {
                    if (0..depth).contains(&v) {
                        let (outer, inn) = (i / inner, i % inner);
                        out[(outer * depth as usize + v as usize) * inner + inn] = on;
                    }
                }
                y.write_f64(&out)
            }
            Nn::ApplyAdam { nesterov } => {
                // TF ApplyAdam: lr_t = lr*sqrt(1-b2^t)/(1-b1^t); m += (g-m)(1-b1); v += (g²-v)(1-b2);
                // var -= lr_t*m/(sqrt(v)+eps) (nesterov: (m*b1 + (1-b1)*g) instead of m).
                let (mut var, mut m, mut v) = (rd(s, 0)?, rd(s, 1)?, rd(s, 2)?);
                let (b1p, b2p, lr, b1, b2, eps) =
                    (scalar(s, 3)?, scalar(s, 4)?, scalar(s, 5)?, scalar(s, 6)?, scalar(s, 7)?, scalar(s, 8)?);
                let g = rd(s, 9)?;
                let lr_t = lr * (1.0 - b2p).sqrt() / (1.0 - b1p);
                for i in 0..var.len() {
                    m[i] += (g[i] - m[i]) * (1.0 - b1);
                    v[i] += (g[i] * g[i] - v[i]) * (1.0 - b2);
                    let mm = if *nesterov { m[i] * b1 + (1.0 - b1) * g[i] } else { m[i] };
                    var[i] -= lr_t * mm / (v[i].sqrt() + eps);
                }
                wr(s, 10, &var)?;
                wr(s, 11, &m)?;
                wr(s, 12, &v)
            }
            Nn::ApplyMomentum { nesterov } => {
                // accum = accum*momentum + grad; var -= lr*accum (nesterov: lr*grad + lr*momentum*accum).
                let (mut var, mut acc, lr, g, mom) = (rd(s, 0)?, rd(s, 1)?, scalar(s, 2)?, rd(s, 3)?, scalar(s, 4)?);
                for i in 0..var.len() {
                    acc[i] = acc[i] * mom + g[i];
                    var[i] -= if *nesterov { lr * g[i] + lr * mom * acc[i] } else { lr * acc[i] };
                }
                wr(s, 5, &var)?;
                if s.len() > 6 {
                    wr(s, 6, &acc)
                } else {
                    tv(s, 1)?.write_f64(&acc)
                }
            }
            Nn::AddN { n } => {
                let mut y = rd(s, 0)?;
                for i in 1..*n {
                    for (a, b) in y.iter_mut().zip(rd(s, i)?) {
                        *a += b;
                    }
                }
                wr(s, *n, &y)
            }
            Nn::GenMask { numel, seed, offset } => {
                let keep = scalar(s, 0)?;
                let m = tv(s, 1)?;
                let mut bytes = vec![0u8; m.numel()];
                for i in 0..*numel {
                    if crate::rng::uniform(*seed, *offset, i) < keep {
                        bytes[i / 8] |= 1u8 << (i % 8);
                    }
                }
                m.write_f64(&bytes.iter().map(|&b| b as f64).collect::<Vec<_>>())
            }
            Nn::LayerNorm { row, eps } => {
                let (x, g, b) = (rd(s, 0)?, rd(s, 1)?, rd(s, 2)?);
                let rows = x.len() / (*row).max(1);
                let (mut y, mut mean, mut var) = (vec![0f64; x.len()], vec![0f64; rows], vec![0f64; rows]);
                for r in 0..rows {
                    let xs = &x[r * row..(r + 1) * row];
                    let m = xs.iter().sum::<f64>() / *row as f64;
                    let v = xs.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / *row as f64;
                    for (j, a) in xs.iter().enumerate() {
                        let k = r * row + j;
                        y[k] = (a - m) / (v + eps).sqrt() * g[k % g.len()] + b[k % b.len()];
                    }
                    (mean[r], var[r]) = (m, v);
                }
                wr(s, 3, &y)?;
                wr(s, 4, &mean)?;
                wr(s, 5, &var)
            }
            Nn::LayerNormGrad { row } => {
                let (dy, x, var, mean, g) = (rd(s, 0)?, rd(s, 1)?, rd(s, 2)?, rd(s, 3)?, rd(s, 4)?);
                let n = *row as f64;
                let rows = x.len() / (*row).max(1);
                let (mut dx, mut dg, mut db) = (vec![0f64; x.len()], vec![0f64; g.len()], vec![0f64; g.len()]);
                for r in 0..rows {
                    let rstd = 1.0 / (var[r] + 1e-12).sqrt();
                    let idx = r * row..(r + 1) * row;
                    let xhat: Vec<f64> = idx.clone().map(|k| (x[k] - mean[r]) * rstd).collect();
                    let gdy: Vec<f64> = idx.clone().map(|k| dy[k] * g[k % g.len()]).collect();
                    let m1 = gdy.iter().sum::<f64>() / n;
                    let m2 = gdy.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / n;
                    for (j, k) in idx.enumerate() {
                        dx[k] = rstd * (gdy[j] - m1 - xhat[j] * m2);
                        dg[k % g.len()] += dy[k] * xhat[j];
                        db[k % g.len()] += dy[k];
                    }
                }
                wr(s, 5, &dx)?;
                wr(s, 6, &dg)?;
                wr(s, 7, &db)
            }
            Nn::Clamp { min, max } => {
                let y: Vec<f64> = rd(s, 0)?
                    .into_iter()
                    .map(|mut v| {
                        if let Some(lo) = min {
                            v = if v.is_nan() { v } else { v.max(*lo) };
                        }
                        if let Some(hi) = max {
                            v = if v.is_nan() { v } else { v.min(*hi) };
                        }
                        v
                    })
                    .collect();
                wr(s, 1, &y)
            }
            Nn::ClampBy { min, max, inplace } => {
                let tensors = usize::from(matches!(min, Some(None))) + usize::from(matches!(max, Some(None)));
                let shape = tv(s, if *inplace { 0 } else { tensors + 1 })?.shape.clone();
                let x = &crate::tensor::bview(tv(s, 0)?, &shape)?;
                let mut slot = 0;
                let mut bound = |b: &Option<Option<f64>>| -> Result<Option<Vec<f64>>, i32> {
                    Ok(match b {
                        None => None,
                        Some(Some(v)) => Some(vec![*v; x.numel()]),
                        Some(None) => {
                            slot += 1;
                            Some(crate::tensor::bview(tv(s, slot)?, &shape)?.read_f64()?)
                        }
                    })
                };
                let (lo, hi) = (bound(min)?, bound(max)?);
                let y: Vec<f64> = x
                    .read_f64()?
                    .into_iter()
                    .enumerate()
                    .map(|(k, mut v)| {
                        for (b, upper) in [(&lo, false), (&hi, true)] {
                            if let Some(b) = b {
                                let b = b[k];
                                v = if v.is_nan() || b.is_nan() {
                                    f64::NAN
                                } else if upper {
                                    v.min(b)
                                } else {
                                    v.max(b)
                                };
                            }
                        }
                        v
                    })
                    .collect();
                wr(s, if *inplace { 0 } else { slot + 1 }, &y)
            }
            Nn::Permute { dims } => {
                let x = tv(s, 0)?;
                let v = TView {
                    addr: x.addr,
                    dtype: x.dtype,
                    shape: dims.iter().map(|&d| x.shape[d]).collect(),
                    strides: dims.iter().map(|&d| x.strides[d]).collect(),
                    offset: x.offset,
                };
                wr(s, 1, &v.read_f64()?)
            }
            Nn::AdamWV2 { lr, b1, b2, wd, eps, amsgrad, maximize } => {
                let (mut var, mut m, mut v) = (rd(s, 0)?, rd(s, 1)?, rd(s, 2)?);
                let mut vmax = if *amsgrad { Some(rd(s, 3)?) } else { None };
                let g = rd(s, 4)?;
                let step = scalar(s, 5)?;
                let (bc1, bc2) = (1.0 - b1.powf(step), 1.0 - b2.powf(step));
                for i in 0..var.len() {
                    let gi = if *maximize { -g[i] } else { g[i] };
                    var[i] *= 1.0 - lr * wd;
                    m[i] = b1 * m[i] + (1.0 - b1) * gi;
                    v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
                    let vv = match vmax.as_mut() {
                        Some(vm) => {
                            vm[i] = vm[i].max(v[i]);
                            vm[i]
                        }
                        None => v[i],
                    };
                    var[i] -= lr * (m[i] / bc1) / ((vv / bc2).sqrt() + eps);
                }
                wr(s, 0, &var)?;
                wr(s, 1, &m)?;
                wr(s, 2, &v)?;
                if let Some(vm) = vmax {
                    wr(s, 3, &vm)?;
                }
                Ok(())
            }
            Nn::SplitWithSize { sizes, dim } => {
                let x = tv(s, 0)?;
                let d = if *dim < 0 { dim + x.shape.len() as i64 } else { *dim } as usize;
                let outs = match s.get(1) {
                    Some(SV::L(v)) => v,
                    _ => return Err(crate::errmsg::fail(crate::consts::ACLNN_ERR_PARAM_NULLPTR, "out list is NULL")),
                };
                let mut start = 0i64;
                for (o, &n) in outs.iter().zip(sizes) {
                    // the piece as a view of self: same strides, offset moved along dim
                    let mut v = x.clone();
                    v.shape[d] = n;
                    v.offset += start * x.strides[d];
                    o.write_f64(&v.read_f64()?)?;
                    start += n;
                }
                Ok(())
            }
            Nn::DoMask => {
                let (x, mv, keep) = (rd(s, 0)?, rd(s, 1)?, scalar(s, 2)?);
                let scale = if keep > 0.0 { 1.0 / keep } else { 0.0 };
                let y: Vec<f64> = x
                    .iter()
                    .enumerate()
                    .map(|(i, v)| if (mv[i / 8] as u8) & (1u8 << (i % 8)) != 0 { v * scale } else { 0.0 })
                    .collect();
                wr(s, 3, &y)
            }
        }
    }
}
