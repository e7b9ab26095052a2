//! Indexing and activation kernels torch_npu reaches for ordinary torch code, each as torch's CPU
//! kernel defines it: aclnnRepeatInterleave(*), aclnnIndexAdd, aclnnBincount, aclnnPrelu(+Backward),
//! aclnnGlu(+Backward) and aclnnIsClose. Signatures from CANN's ops-nn / ops-math headers.
//!
//! Slots are listed on each variant. Integer values move exactly (i64); floats in f64, rounded to
//! the output dtype once, except where torch rounds at each step (IndexAdd, Bincount's weights).
use crate::dtype::DType;
use crate::kernels::broadcast_shape;
use crate::ops_ext::{float, inv, opt, t};
use crate::tensor::{bview, numel, TView, SV};

#[derive(Clone, Debug)]
pub enum MiscOp {
    /// slots: self, repeats? (1-D int64 tensor, one element per index along the axis or a single
    /// one), out. Each index along `dim` (of the flattened self when None) repeated; `count` is the
    /// per-index count of the Int forms, `output_size` the result's length along the axis.
    RepeatInterleave { count: Option<i64>, dim: Option<i64>, output_size: i64 },
    /// slots: repeats (1-D int64), out. aclnnRepeatInterleaveTensor: index i repeated repeats[i] times.
    RepeatIndices { output_size: i64 },
    /// slots: self, index (1-D int32/int64, in [0, size)), source, out. out = self, then out[.., index[k], ..] +=
    /// alpha · source[.., k, ..] along `dim`, in order (rounded to the dtype at each step, as torch).
    IndexAdd { dim: i64, alpha: f64 },
    /// slots: self (1-D non-negative integers), weights? (self's shape), out (1-D). Counts (or sums
    /// of weights, accumulated in out's dtype as torch) per value; out's length is chosen by the caller.
    Bincount,
    /// slots: self, weight (1 or C elements, C = dim 1), out: x > 0 ? x : w · x.
    Prelu,
    /// slots: gradOutput, self, weight, gradInput, gradWeight (weight's shape).
    PreluBackward,
    /// slots: self, out: a · sigmoid(b), (a, b) the halves of self along `dim`; with `swi`
    /// (aclnnSwiGlu, torch_npu.npu_swiglu) silu(a) · b.
    Glu { dim: i64, swi: bool },
    /// slots: gradOut, self, gradInput (self's shape).
    GluBackward { dim: i64, swi: bool },
    /// slots: x, gamma (x's trailing dims), yOut (x's shape), rstdOut (x's leading dims, 1 for each of
    /// gamma's). aclnnRmsNorm: rstd = 1 / sqrt(mean(x²) + eps) over gamma's dims, y = x · rstd · gamma.
    RmsNorm { eps: f64 },
    /// slots: x1, x2, gamma, yOut, rstdOut, xOut. aclnnAddRmsNorm: x = x1 + x2 (xOut), then as RmsNorm.
    AddRmsNorm { eps: f64 },
    /// slots: self, out. aclnnFastGelu (ops-nn activation/fast_gelu):
    /// x / (1 + exp(-1.702 |x|)) · exp(0.851 (x - |x|)).
    FastGelu,
    /// slots: gradOutput, self, gradInput. aclnnFastGeluBackward (its documented formula):
    /// dy · (e + 1.702 x e + exp(1.702 (x - |x|))) / (e + 1)², e = exp(-1.702 |x|).
    FastGeluBackward,
    /// slots: x, mask (bool, broadcast to x), y. aclnnScaledMaskedSoftmax (torch_npu.npu_scaled_masked_softmax):
    /// softmax over the last dim of x · scale with masked (true) elements set to -10000 (msprobe's and
    /// op-plugin's reference); `triu`: the mask is the strict upper triangle instead.
    ScaledMaskedSoftmax { scale: f64, triu: bool },
    /// slots: gradOutput, y, mask, out: (dy − Σ dy·y)·y·scale, 0 where masked.
    ScaledMaskedSoftmaxBackward { scale: f64, triu: bool },
    /// slots: dy, x, rstd, gamma, dxOut, dgammaOut. aclnnRmsNormGrad (ops-nn's formula):
    /// dx = (dy·g − x·rstd·mean(dy·g·x·rstd))·rstd, dgamma = Σ over rows of x·rstd·dy.
    RmsNormGrad,
    /// slots: self, other, out (bool, broadcast): a == b, or |a - b| <= atol + |rtol · b| (finite),
    /// or both NaN when `equal_nan`; in float32 for float inputs (CANN casts rtol/atol to float32).
    IsClose { rtol: f64, atol: f64, equal_nan: bool },
    /// slots: self, out (or selfRef alone, in place). aclnnIndexFillTensor: out = self with the slices
    /// at `index` (a host array, negative counted from the end) along `dim` set to `value`.
    IndexFill { dim: i64, index: Vec<i64>, value: f64, in_place: bool },
    /// slots: self, stdOut, meanOut. aclnnStdMeanCorrection over `dims` (all when empty): the mean and
    /// sqrt(Σ (x - mean)² / (N - correction)), in f64.
    StdMean { dims: Vec<i64>, correction: i64, keep: bool },
    /// slots: self, tensor, out (0-d). aclnnDot: Σ a·b of two 1-D tensors.
    Dot,
    /// slots: self, valuesOut, indicesOut (int64). aclnnKthvalue: the k-th smallest (1-based) along
    /// `dim`, NaN above every number, ties by position.
    Kthvalue { k: i64, dim: i64, keep: bool },
    /// slots: self, valuesOut, indicesOut (int64). aclnnCummax along `dim`: the running maximum and
    /// where it was last reached (torch's `>=`); a NaN stays from where it appears.
    Cummax { dim: i64 },
    /// slots: self [.., H, W], outputOut, indicesOut (int64, h·W + w in the plane). aclnnAdaptiveMaxPool2d:
    /// the maximum of each adaptive window ([floor(o·in/out), ceil((o+1)·in/out))), the first one, a NaN
    /// winning (torch's `val > max || isnan(val)`).
    AdaptiveMaxPool2d { out: [i64; 2] },
    /// slots: gradOutput, self, indices, gradInput: each gradient added at its index.
    AdaptiveMaxPool2dBackward,
    /// slots: x1 [.., P, M], x2 [.., R, M], out [.., P, R]. aclnnCdist: the p-norm distance of every
    /// pair of rows (p = 0: the count of differing coordinates, p = inf: the largest), in f64.
    Cdist { p: f64 },
    /// slots: self, shiftBits? (tensor, broadcast), out. aclnnLeftShift(s) / aclnnRightShift on integers,
    /// as torch: a shift outside [0, bits) gives 0 (left) or the sign fill (right); `scalar` is the
    /// aclScalar of aclnnLeftShifts.
    Shift { left: bool, scalar: Option<i64> },
    /// slots: self, other, out. aclnnLinalgCross: the cross product along `dim` (of size 3), broadcast.
    Cross { dim: i64 },
}

/// The shape after reducing `red` axes (kept as 1 when `keep`).
fn reduced(shape: &[i64], red: &[bool], keep: bool) -> Vec<i64> {
    shape.iter().zip(red).filter_map(|(&d, &r)| if r { keep.then_some(1) } else { Some(d) }).collect()
}

/// Which axes `dims` reduces (all when empty).
fn red_axes(shape: &[i64], dims: &[i64]) -> Result<Vec<bool>, i32> {
    let mut red = vec![dims.is_empty(); shape.len()];
    for &d in dims {
        let a = axis(d, shape.len())?;
        if a < red.len() {
            red[a] = true;
        }
    }
    Ok(red)
}

/// The flat indices of `shape` grouped by their position in the kept axes (row-major).
fn groups(shape: &[i64], red: &[bool]) -> Vec<Vec<usize>> {
    let kept: Vec<i64> = shape.iter().zip(red).map(|(&d, &r)| if r { 1 } else { d }).collect();
    let strides = crate::tensor::contiguous_strides(&kept);
    let mut g = vec![Vec::new(); numel(&kept).max(1)];
    let total = numel(shape);
    let mut idx = vec![0i64; shape.len()];
    for flat in 0..total {
        let key: i64 = idx.iter().zip(red).zip(&strides).map(|((&i, &r), &s)| if r { 0 } else { i * s }).sum();
        g[key as usize].push(flat);
        for a in (0..shape.len()).rev() {
            idx[a] += 1;
            if idx[a] < shape[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    g
}

/// `v` rounded to `dt` (so a sum rounds at each step where torch's does).
fn round_to(dt: DType, v: f64) -> f64 {
    let mut b = [0u8; 8];
    dt.put(&mut b, v);
    dt.get(&b)
}

fn axis(dim: i64, rank: usize) -> Result<usize, i32> {
    let r = rank.max(1) as i64;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r {
        return Err(inv(format!("dim {dim} out of range for rank {rank}")));
    }
    Ok(d as usize)
}

/// (outer, len, inner) of `shape` around axis `d`.
/// (outer, len, inner) of `shape` around axis `d`; a 0-d tensor is one lane of one element.
fn lanes(shape: &[i64], d: usize) -> (usize, usize, usize) {
    let outer = numel(&shape[..d.min(shape.len())]);
    let inner = shape.get(d + 1..).map_or(1, numel);
    (outer, shape.get(d).copied().unwrap_or(1) as usize, inner)
}

/// Values of `v` as f64, or as i64 when `int` (so integers move exactly).
enum Vals {
    F(Vec<f64>),
    I(Vec<i64>),
}

fn read(v: &TView) -> Result<Vals, i32> {
    Ok(if v.dtype.is_int() { Vals::I(v.read_i64()?) } else { Vals::F(v.read_f64()?) })
}

fn gather(v: &Vals, idx: &[usize]) -> Vals {
    match v {
        Vals::F(x) => Vals::F(idx.iter().map(|&i| x[i]).collect()),
        Vals::I(x) => Vals::I(idx.iter().map(|&i| x[i]).collect()),
    }
}

fn write(o: &TView, v: Vals) -> Result<(), i32> {
    match v {
        Vals::F(x) => o.write_f64(&x),
        Vals::I(x) => o.write_i64(&x),
    }
}

/// An element compared as torch's sort kernels compare: integers exactly, floats with NaN above every
/// number.
#[derive(Clone, Copy, Debug)]
enum Key {
    F(f64),
    I(i64),
}

impl Key {
    fn is_nan(self) -> bool {
        matches!(self, Key::F(v) if v.is_nan())
    }
    /// torch's `gt_or_nan`: `(isnan(x) && !isnan(y)) || x > y`.
    fn gt_or_nan(self, o: Key) -> bool {
        match (self, o) {
            (Key::I(a), Key::I(b)) => a > b,
            (a, b) => (a.is_nan() && !b.is_nan()) || a.as_f64() > b.as_f64(),
        }
    }
    fn as_f64(self) -> f64 {
        match self {
            Key::F(v) => v,
            Key::I(v) => v as f64,
        }
    }
    fn as_i64(self) -> i64 {
        match self {
            Key::F(v) => v as i64,
            Key::I(v) => v,
        }
    }
}

/// torch's `quick_select_template` (aten/src/ATen/native/SortingUtils.h): median-of-three quickselect
/// leaving the k-th smallest (0-based) at `k`, with the same swaps, so that among equal values the same
/// index is chosen as torch's CPU kthvalue.
fn quick_select(a: &mut [(Key, usize)], k: usize) {
    let gt = |x: Key, y: Key| x.gt_or_nan(y);
    let (mut l, mut r) = (0usize, a.len() - 1);
    loop {
        if r <= l {
            return;
        }
        if r == l + 1 {
            if gt(a[l].0, a[r].0) {
                a.swap(l, r);
            }
            return;
        }
        let p = l + (r - l) / 2;
        a.swap(p, l + 1);
        if gt(a[l + 1].0, a[r].0) {
            a.swap(l + 1, r);
        }
        if gt(a[l].0, a[r].0) {
            a.swap(l, r);
        }
        if gt(a[l + 1].0, a[l].0) {
            a.swap(l + 1, l);
        }
        let (mut i, mut j) = (l + 1, r);
        let piv = a[l].0;
        loop {
            i += 1;
            while gt(piv, a[i].0) {
                i += 1;
            }
            j -= 1;
            while gt(a[j].0, piv) {
                j -= 1;
            }
            if j < i {
                break;
            }
            a.swap(i, j);
        }
        a.swap(l, j);
        if j <= k {
            l = i;
        }
        if j >= k {
            r = j - 1;
        }
    }
}

/// RmsNorm of `rows` rows of `x` (each as long as gamma): y = x · rstd · gamma and rstd per row (NaN for
/// an empty row: the mean of nothing, as torch's).
fn rms_norm(x: &[f64], g: &[f64], rows: usize, eps: f64) -> (Vec<f64>, Vec<f64>) {
    let n = g.len();
    let (mut y, mut rstd) = (vec![0f64; x.len()], vec![0f64; rows]);
    for (r, rs) in rstd.iter_mut().enumerate() {
        let row = &x[r * n..(r + 1) * n];
        let ms = row.iter().map(|v| v * v).sum::<f64>() / n as f64;
        *rs = 1.0 / (ms + eps).sqrt();
        for (j, v) in row.iter().enumerate() {
            y[r * n + j] = v * *rs * g[j];
        }
    }
    (y, rstd)
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Kthvalue's (`kth` = (k, keepdim)) or Cummax's valuesOut and indicesOut (int64).
fn check_values_indices(s: &[SV], dim: i64, kth: Option<(i64, bool)>) -> Result<(), i32> {
    let x = t(s, 0)?;
    let d = axis(dim, x.shape.len())?;
    let n = x.shape.get(d).copied().unwrap_or(1);
    let want = match kth {
        Some((k, keep)) => {
            if k < 1 || k > n {
                return Err(inv(format!("k {k} out of range for size {n}")));
            }
            let red: Vec<bool> = (0..x.shape.len()).map(|a| a == d).collect();
            reduced(&x.shape, &red, keep)
        }
        None => x.shape.clone(),
    };
    let (v, i) = (t(s, 1)?, t(s, 2)?);
    if v.shape != want || i.shape != want || i.dtype != DType::I64 || v.dtype != x.dtype {
        return Err(inv(format!("valuesOut/indicesOut (int64) must be {want:?}")));
    }
    Ok(())
}

impl MiscOp {
    /// The shape of self (after flattening for a dim-less repeat_interleave) and the axis.
    fn repeat_geom(&self, x: &TView) -> Result<(Vec<i64>, usize), i32> {
        let MiscOp::RepeatInterleave { dim, .. } = self else { unreachable!() };
        Ok(match dim {
            None => (vec![x.numel() as i64], 0),
            Some(d) => (x.shape.clone(), axis(*d, x.shape.len())?),
        })
    }

    pub fn validate(&self, s: &[SV]) -> Result<u64, i32> {
        match self {
            MiscOp::RepeatInterleave { count, output_size, .. } => {
                let x = t(s, 0)?;
                let (mut shape, d) = self.repeat_geom(x)?;
                if count.is_some_and(|c| c < 0) || *output_size < 0 {
                    return Err(inv(format!("repeats {count:?} / outputSize {output_size} must not be negative")));
                }
                if let Some(r) = opt(s, 1) {
                    if r.dtype.is_float() || r.shape.len() > 1 || (r.numel() != 1 && r.numel() as i64 != shape[d]) {
                        return Err(inv(format!("repeats {:?} must be integers, one per index or one", r.shape)));
                    }
                }
                if shape.is_empty() {
                    shape.push(1);
                }
                shape[d] = *output_size;
                let o = t(s, 2)?;
                if o.shape != shape || o.dtype != x.dtype {
                    return Err(inv(format!(
                        "out {:?} {} must be {shape:?} {}",
                        o.shape,
                        o.dtype.name(),
                        x.dtype.name()
                    )));
                }
            }
            MiscOp::RepeatIndices { output_size } => {
                let (r, o) = (t(s, 0)?, t(s, 1)?);
                if r.dtype.is_float() || r.shape.len() != 1 || o.shape != [*output_size] {
                    return Err(inv(format!(
                        "repeats {:?} (1-D integers) / out {:?} of {output_size}",
                        r.shape, o.shape
                    )));
                }
            }
            MiscOp::IndexAdd { dim, .. } => {
                let (x, i, src, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?, t(s, 3)?);
                let d = axis(*dim, x.shape.len())?;
                if !matches!(i.dtype, DType::I32 | DType::I64) || i.shape.len() > 1 {
                    return Err(inv("index must be a 1-D int32/int64 tensor"));
                }
                let mut want = x.shape.clone();
                if !want.is_empty() {
                    want[d] = i.numel() as i64;
                }
                if src.shape != want && !(want.is_empty() && src.numel() == 1) {
                    return Err(inv(format!("source {:?} must be {want:?}", src.shape)));
                }
                if o.shape != x.shape || o.dtype != x.dtype {
                    return Err(inv("out must have self's shape and dtype"));
                }
            }
            MiscOp::Bincount => {
                let (x, o) = (t(s, 0)?, t(s, 2)?);
                if !x.dtype.is_int() || x.shape.len() > 1 || o.shape.len() != 1 {
                    return Err(inv("self must be 1-D integers and out 1-D"));
                }
                if let Some(w) = opt(s, 1) {
                    if w.shape != x.shape {
                        return Err(inv(format!("weights {:?} must have self's shape {:?}", w.shape, x.shape)));
                    }
                }
            }
            MiscOp::Prelu | MiscOp::PreluBackward => {
                let back = matches!(self, MiscOp::PreluBackward);
                let (x, w) = if back { (t(s, 1)?, t(s, 2)?) } else { (t(s, 0)?, t(s, 1)?) };
                float(x, "self")?;
                let c = if x.shape.len() >= 2 { x.shape[1] } else { 1 };
                if w.numel() != 1 && w.numel() as i64 != c {
                    return Err(inv(format!("weight of {} elements for {c} channels", w.numel())));
                }
                let outs: &[(usize, &[i64])] =
                    if back { &[(0, &x.shape), (3, &x.shape), (4, &w.shape)] } else { &[(2, &x.shape)] };
                for &(i, shape) in outs {
                    if t(s, i)?.shape != shape {
                        return Err(inv(format!("tensor {i}: shape {:?}, {shape:?} expected", t(s, i)?.shape)));
                    }
                }
            }
            MiscOp::Glu { dim, .. } | MiscOp::GluBackward { dim, .. } => {
                let back = matches!(self, MiscOp::GluBackward { .. });
                let x = t(s, usize::from(back))?;
                float(x, "self")?;
                let d = axis(*dim, x.shape.len())?;
                if x.shape.is_empty() || x.shape[d] % 2 != 0 {
                    return Err(inv(format!("glu: dim {dim} of {:?} must have an even size", x.shape)));
                }
                let mut half = x.shape.clone();
                half[d] /= 2;
                let (g, o) = if back { (Some(t(s, 0)?), t(s, 2)?) } else { (None, t(s, 1)?) };
                let (gs, os) = if back { (half.clone(), x.shape.clone()) } else { (vec![], half) };
                if o.shape != os || g.is_some_and(|g| g.shape != gs) {
                    return Err(inv(format!("glu: shapes {:?} / {:?} expected", gs, os)));
                }
            }
            MiscOp::FastGelu | MiscOp::FastGeluBackward => {
                let n = if matches!(self, MiscOp::FastGelu) { 2 } else { 3 };
                let x = t(s, 0)?;
                let names: &[&str] = if n == 2 { &["self", "out"] } else { &["gradOutput", "self", "gradInput"] };
                for (i, what) in names.iter().enumerate() {
                    float(t(s, i)?, what)?;
                    if t(s, i)?.shape != x.shape {
                        return Err(inv(format!("{what}: shape {:?}, {:?} expected", t(s, i)?.shape, x.shape)));
                    }
                }
            }
            MiscOp::ScaledMaskedSoftmax { .. } | MiscOp::ScaledMaskedSoftmaxBackward { .. } => {
                let back = matches!(self, MiscOp::ScaledMaskedSoftmaxBackward { .. });
                let x = t(s, 0)?;
                let (m, o) = if back { (t(s, 2)?, t(s, 3)?) } else { (t(s, 1)?, t(s, 2)?) };
                if x.shape.is_empty() {
                    return Err(inv("x must have at least one dimension"));
                }
                let mut named = vec![(x, "x"), (o, "out")];
                if back {
                    named.push((t(s, 1)?, "y"));
                }
                for (v, what) in named {
                    float(v, what)?;
                    if v.shape != x.shape {
                        return Err(inv(format!("{what}: shape {:?}, {:?} expected", v.shape, x.shape)));
                    }
                }
                if m.dtype != DType::Bool {
                    return Err(inv(format!("mask: dtype {} (bool expected)", m.dtype.name())));
                }
                bview(m, &x.shape)?;
            }
            MiscOp::AddRmsNorm { .. } => {
                let x1 = t(s, 0)?;
                for (i, what) in [(1, "x2"), (5, "xOut")] {
                    float(t(s, i)?, what)?;
                    if t(s, i)?.shape != x1.shape {
                        return Err(inv(format!("{what}: shape {:?}, x1's {:?} expected", t(s, i)?.shape, x1.shape)));
                    }
                }
                // the rest as RmsNorm's (x1, gamma, yOut, rstdOut)
                MiscOp::RmsNorm { eps: 0.0 }.validate(&[s[0].clone(), s[2].clone(), s[3].clone(), s[4].clone()])?;
            }
            MiscOp::RmsNorm { .. } | MiscOp::RmsNormGrad => {
                let back = matches!(self, MiscOp::RmsNormGrad);
                let (x, g) = if back { (t(s, 1)?, t(s, 3)?) } else { (t(s, 0)?, t(s, 1)?) };
                float(x, "x")?;
                float(g, "gamma")?;
                let k = g.shape.len();
                if k == 0 || k > x.shape.len() || x.shape[x.shape.len() - k..] != g.shape[..] {
                    return Err(inv(format!("gamma {:?} must be x's {:?} trailing dims", g.shape, x.shape)));
                }
                let mut rs = x.shape[..x.shape.len() - k].to_vec();
                rs.extend(std::iter::repeat_n(1, k));
                let r = t(s, if back { 2 } else { 3 })?;
                float(r, "rstd")?;
                if r.shape != rs {
                    return Err(inv(format!("rstd: shape {:?}, {rs:?} expected", r.shape)));
                }
                // (slot, name, shape): yOut; or dy, dxOut, dgammaOut
                let outs: &[(usize, &str, &[i64])] = if back {
                    &[(0, "dy", &x.shape), (4, "dxOut", &x.shape), (5, "dgammaOut", &g.shape)]
                } else {
                    &[(2, "yOut", &x.shape)]
                };
                for &(i, what, shape) in outs {
                    float(t(s, i)?, what)?;
                    if t(s, i)?.shape != shape {
                        return Err(inv(format!("{what}: shape {:?}, {shape:?} expected", t(s, i)?.shape)));
                    }
                }
            }
            MiscOp::IsClose { .. } => {
                let (a, b, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                if a.dtype != b.dtype {
                    return Err(inv(format!(
                        "self {} and other {} must have one dtype",
                        a.dtype.name(),
                        b.dtype.name()
                    )));
                }
                let bs = broadcast_shape(&a.shape, &b.shape)
                    .ok_or_else(|| inv(format!("shapes {:?} and {:?} do not broadcast", a.shape, b.shape)))?;
                if o.shape != bs || o.dtype != DType::Bool {
                    return Err(inv(format!("out must be bool {bs:?}")));
                }
            }
            MiscOp::StdMean { dims, keep, .. } => {
                let x = t(s, 0)?;
                float(x, "self")?;
                let want = reduced(&x.shape, &red_axes(&x.shape, dims)?, *keep);
                for (i, what) in [(1, "stdOut"), (2, "meanOut")] {
                    if t(s, i)?.shape != want {
                        return Err(inv(format!("{what}: shape {:?}, {want:?} expected", t(s, i)?.shape)));
                    }
                }
            }
            MiscOp::Dot => {
                let (a, b, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                if a.shape.len() != 1
                    || a.shape != b.shape
                    || a.dtype != b.dtype
                    || o.numel() != 1
                    || !o.shape.is_empty()
                {
                    return Err(inv(format!(
                        "dot: two 1-D tensors of one size and dtype and a 0-d out, got {:?} {:?} {:?}",
                        a.shape, b.shape, o.shape
                    )));
                }
            }
            MiscOp::AdaptiveMaxPool2d { out } => {
                let x = t(s, 0)?;
                float(x, "self")?;
                if !(3..=4).contains(&x.shape.len())
                    || out.iter().any(|&o| o < 1)
                    || x.shape[x.shape.len() - 3..].iter().any(|&d| d < 1)
                {
                    return Err(inv(format!("self {:?} must be 3-D or 4-D and outputSize {out:?} positive", x.shape)));
                }
                let mut want = x.shape[..x.shape.len() - 2].to_vec();
                want.extend(out);
                let (o, i) = (t(s, 1)?, t(s, 2)?);
                if o.shape != want || i.shape != want || i.dtype != DType::I64 || o.dtype != x.dtype {
                    return Err(inv(format!("outputOut/indicesOut (int64) must be {want:?}")));
                }
            }
            MiscOp::AdaptiveMaxPool2dBackward => {
                let (g, x, i, gx) = (t(s, 0)?, t(s, 1)?, t(s, 2)?, t(s, 3)?);
                if g.shape != i.shape || gx.shape != x.shape || g.shape.len() != x.shape.len() || g.shape.len() < 3 {
                    return Err(inv("gradOutput/indices and gradInput/self must pair up"));
                }
            }
            MiscOp::Cdist { p } => {
                let (a, b, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                float(a, "x1")?;
                let (ra, rb) = (a.shape.len(), b.shape.len());
                if ra < 2
                    || ra != rb
                    || a.shape[..ra - 2] != b.shape[..rb - 2]
                    || a.shape[ra - 1] != b.shape[rb - 1]
                    || *p < 0.0
                {
                    return Err(inv(format!(
                        "cdist: x1 {:?} and x2 {:?} must be [.., P, M] and [.., R, M], p {p} >= 0",
                        a.shape, b.shape
                    )));
                }
                let mut want = a.shape[..ra - 1].to_vec();
                want.push(b.shape[rb - 2]);
                if o.shape != want || o.dtype != a.dtype {
                    return Err(inv(format!("out must be {want:?} of x1's dtype")));
                }
            }
            MiscOp::Shift { scalar, .. } => {
                let (x, o) = (t(s, 0)?, t(s, if scalar.is_some() { 1 } else { 2 })?);
                if !x.dtype.is_int() || !o.dtype.is_int() || x.dtype == DType::Bool {
                    return Err(inv(format!("shifts take integers, got {} / {}", x.dtype.name(), o.dtype.name())));
                }
                let want = match scalar {
                    Some(_) => x.shape.clone(),
                    None => broadcast_shape(&x.shape, &t(s, 1)?.shape).ok_or_else(|| inv("shapes do not broadcast"))?,
                };
                if o.shape != want {
                    return Err(inv(format!("out shape {:?}, {want:?} expected", o.shape)));
                }
            }
            MiscOp::Kthvalue { k, dim, keep } => check_values_indices(s, *dim, Some((*k, *keep)))?,
            MiscOp::Cummax { dim } => check_values_indices(s, *dim, None)?,
            MiscOp::Cross { dim } => {
                let (a, b, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let bs = broadcast_shape(&a.shape, &b.shape)
                    .ok_or_else(|| inv(format!("shapes {:?} and {:?} do not broadcast", a.shape, b.shape)))?;
                let d = axis(*dim, bs.len())?;
                if bs.get(d) != Some(&3) || o.shape != bs {
                    return Err(inv(format!("cross: dim {dim} of {bs:?} must have size 3, out {:?}", o.shape)));
                }
            }
            MiscOp::IndexFill { dim, index, in_place, .. } => {
                let x = t(s, 0)?;
                let d = axis(*dim, x.shape.len())?;
                let n = x.shape.get(d).copied().unwrap_or(1);
                if let Some(&k) = index.iter().find(|&&k| k < -n || k >= n) {
                    return Err(inv(format!("index {k} out of range for size {n}")));
                }
                if !*in_place && (t(s, 1)?.shape != x.shape || t(s, 1)?.dtype != x.dtype) {
                    return Err(inv("out must have self's shape and dtype"));
                }
            }
        }
        Ok(0)
    }

    pub fn exec(&self, s: &[SV]) -> Result<(), i32> {
        match self {
            MiscOp::RepeatInterleave { count, output_size, .. } => {
                let x = t(s, 0)?;
                let (shape, d) = self.repeat_geom(x)?;
                let (outer, n, inner) = lanes(&shape, d);
                let reps: Vec<i64> = match (count, opt(s, 1)) {
                    (Some(c), _) => vec![*c; n],
                    (None, Some(r)) => {
                        let v = r.read_i64()?;
                        if v.len() == 1 {
                            vec![v[0]; n]
                        } else {
                            v
                        }
                    }
                    (None, None) => return Err(inv("repeats is NULL")),
                };
                if reps.iter().any(|&r| r < 0) || reps.iter().sum::<i64>() != *output_size {
                    return Err(inv(format!(
                        "repeats sum to {}, outputSize is {output_size}",
                        reps.iter().sum::<i64>()
                    )));
                }
                let mut idx = Vec::with_capacity(outer * *output_size as usize * inner);
                for p in 0..outer {
                    for (j, &r) in reps.iter().enumerate() {
                        for _ in 0..r {
                            idx.extend((0..inner).map(|q| (p * n + j) * inner + q));
                        }
                    }
                }
                write(t(s, 2)?, gather(&read(x)?, &idx))
            }
            MiscOp::RepeatIndices { output_size } => {
                let r = t(s, 0)?.read_i64()?;
                if r.iter().any(|&v| v < 0) || r.iter().sum::<i64>() != *output_size {
                    return Err(inv(format!("repeats sum to {}, outputSize is {output_size}", r.iter().sum::<i64>())));
                }
                let v: Vec<i64> =
                    r.iter().enumerate().flat_map(|(i, &k)| std::iter::repeat_n(i as i64, k as usize)).collect();
                t(s, 1)?.write_i64(&v)
            }
            MiscOp::IndexAdd { dim, alpha } => {
                let (x, i, src, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?, t(s, 3)?);
                let d = axis(*dim, x.shape.len())?;
                let (outer, n, inner) = lanes(&x.shape, d);
                let idx = i.read_i64()?;
                let m = idx.len();
                for &k in &idx {
                    // torch's index_add refuses negative indices too ("index out of range in self")
                    if k < 0 || k >= n as i64 {
                        return Err(inv(format!("index {k} out of range for size {n}")));
                    }
                }
                let at = |p: usize, j: usize, q: usize, len: usize| (p * len + j) * inner + q;
                let pos = |k: i64| if k < 0 { (k + n as i64) as usize } else { k as usize };
                if x.dtype.is_int() {
                    let (mut v, sv, a) = (x.read_i64()?, src.read_i64()?, *alpha as i64);
                    for p in 0..outer {
                        for (j, &k) in idx.iter().enumerate() {
                            for q in 0..inner {
                                let e = &mut v[at(p, pos(k), q, n)];
                                *e = e.wrapping_add(a.wrapping_mul(sv[at(p, j, q, m)]));
                            }
                        }
                    }
                    return o.write_i64(&v);
                }
                let (mut v, sv) = (x.read_f64()?, src.read_f64()?);
                let wide = x.dtype == DType::F64;
                for p in 0..outer {
                    for (j, &k) in idx.iter().enumerate() {
                        for q in 0..inner {
                            let e = &mut v[at(p, pos(k), q, n)];
                            let b = sv[at(p, j, q, m)];
                            *e = if wide {
                                *e + alpha * b
                            } else {
                                round_to(x.dtype, f64::from(*e as f32 + *alpha as f32 * b as f32))
                            };
                        }
                    }
                }
                o.write_f64(&v)
            }
            MiscOp::Bincount => {
                let (x, o) = (t(s, 0)?, t(s, 2)?);
                let v = x.read_i64()?;
                let bins = o.numel();
                if let Some(&bad) = v.iter().find(|&&k| k < 0 || k as usize >= bins) {
                    return Err(inv(format!("bincount: value {bad} outside [0, {bins})")));
                }
                match opt(s, 1) {
                    None => {
                        let mut c = vec![0i64; bins];
                        v.iter().for_each(|&k| c[k as usize] += 1);
                        if o.dtype.is_int() {
                            o.write_i64(&c)
                        } else {
                            o.write_f64(&c.iter().map(|&k| k as f64).collect::<Vec<_>>())
                        }
                    }
                    Some(w) => {
                        let wv = w.read_f64()?;
                        let mut c = vec![0f64; bins];
                        for (&k, &x) in v.iter().zip(&wv) {
                            c[k as usize] = round_to(o.dtype, c[k as usize] + x);
                        }
                        o.write_f64(&c)
                    }
                }
            }
            MiscOp::Prelu | MiscOp::PreluBackward => {
                let back = matches!(self, MiscOp::PreluBackward);
                let (x, w) = if back { (t(s, 1)?, t(s, 2)?) } else { (t(s, 0)?, t(s, 1)?) };
                let (xv, wv) = (x.read_f64()?, w.read_f64()?);
                let plane = if x.shape.len() >= 2 { numel(&x.shape[2..]) } else { 1 };
                let ch = |i: usize| if wv.len() == 1 { 0 } else { (i / plane) % wv.len() };
                if !back {
                    let y: Vec<f64> =
                        xv.iter().enumerate().map(|(i, &v)| if v > 0.0 { v } else { wv[ch(i)] * v }).collect();
                    return t(s, 2)?.write_f64(&y);
                }
                let g = t(s, 0)?.read_f64()?;
                let mut gw = vec![0f64; wv.len()];
                let gx: Vec<f64> = xv
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        if v > 0.0 {
                            g[i]
                        } else {
                            gw[ch(i)] += v * g[i];
                            wv[ch(i)] * g[i]
                        }
                    })
                    .collect();
                t(s, 3)?.write_f64(&gx)?;
                t(s, 4)?.write_f64(&gw)
            }
            MiscOp::Glu { dim, .. } | MiscOp::GluBackward { dim, .. } => {
                let back = matches!(self, MiscOp::GluBackward { .. });
                let swi = matches!(self, MiscOp::Glu { swi: true, .. } | MiscOp::GluBackward { swi: true, .. });
                let x = t(s, usize::from(back))?;
                let d = axis(*dim, x.shape.len())?;
                let (outer, n, inner) = lanes(&x.shape, d);
                let h = n / 2;
                let xv = x.read_f64()?;
                let g = if back { t(s, 0)?.read_f64()? } else { Vec::new() };
                let mut y = vec![0f64; if back { xv.len() } else { xv.len() / 2 }];
                for p in 0..outer {
                    for j in 0..h {
                        for q in 0..inner {
                            let (ia, ib) = ((p * n + j) * inner + q, (p * n + j + h) * inner + q);
                            let o = (p * h + j) * inner + q;
                            let (a, b) = (xv[ia], xv[ib]);
                            if swi {
                                let sa = sigmoid(a);
                                if back {
                                    y[ia] = g[o] * b * sa * (1.0 + a * (1.0 - sa));
                                    y[ib] = g[o] * a * sa;
                                } else {
                                    y[o] = a * sa * b;
                                }
                            } else {
                                let sb = sigmoid(b);
                                if back {
                                    y[ia] = g[o] * sb;
                                    y[ib] = g[o] * a * sb * (1.0 - sb);
                                } else {
                                    y[o] = a * sb;
                                }
                            }
                        }
                    }
                }
                t(s, if back { 2 } else { 1 })?.write_f64(&y)
            }
            MiscOp::ScaledMaskedSoftmax { scale, triu } | MiscOp::ScaledMaskedSoftmaxBackward { scale, triu } => {
                let back = matches!(self, MiscOp::ScaledMaskedSoftmaxBackward { .. });
                let x = t(s, 0)?;
                let shape = x.shape.clone();
                let n = *shape.last().unwrap() as usize;
                let rows_n = if shape.len() >= 2 { shape[shape.len() - 2] as usize } else { 1 };
                let mv = bview(t(s, if back { 2 } else { 1 })?, &shape)?.read_i64()?;
                // masked: the mask's element, or (triu) the column past the row within the last two dims
                let masked = |i: usize| if *triu { i % n > (i / n) % rows_n } else { mv[i] != 0 };
                let xv = x.read_f64()?;
                let mut out = vec![0f64; xv.len()];
                if back {
                    let y = t(s, 1)?.read_f64()?;
                    for r in 0..xv.len() / n.max(1) {
                        let row = r * n..(r + 1) * n;
                        let dot: f64 = row.clone().map(|i| xv[i] * y[i]).sum();
                        for i in row {
                            out[i] = if masked(i) { 0.0 } else { (xv[i] - dot) * y[i] * scale };
                        }
                    }
                } else {
                    for r in 0..xv.len() / n.max(1) {
                        let row = r * n..(r + 1) * n;
                        let z: Vec<f64> =
                            row.clone().map(|i| if masked(i) { -10000.0 } else { xv[i] * scale }).collect();
                        let mx = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                        let e: Vec<f64> = z.iter().map(|v| (v - mx).exp()).collect();
                        let sum: f64 = e.iter().sum();
                        for (k, i) in row.enumerate() {
                            out[i] = e[k] / sum;
                        }
                    }
                }
                t(s, if back { 3 } else { 2 })?.write_f64(&out)
            }
            MiscOp::FastGelu => {
                let x = t(s, 0)?.read_f64()?;
                let y: Vec<f64> =
                    x.iter().map(|&v| v / (1.0 + (-1.702 * v.abs()).exp()) * (0.851 * (v - v.abs())).exp()).collect();
                t(s, 1)?.write_f64(&y)
            }
            MiscOp::FastGeluBackward => {
                let (g, x) = (t(s, 0)?.read_f64()?, t(s, 1)?.read_f64()?);
                let dx: Vec<f64> = g
                    .iter()
                    .zip(&x)
                    .map(|(&g, &v)| {
                        let e = (-1.702 * v.abs()).exp();
                        g * (e + 1.702 * v * e + (1.702 * (v - v.abs())).exp()) / ((e + 1.0) * (e + 1.0))
                    })
                    .collect();
                t(s, 2)?.write_f64(&dx)
            }
            MiscOp::AddRmsNorm { eps } => {
                let (a, b) = (t(s, 0)?.read_f64()?, t(s, 1)?.read_f64()?);
                let x: Vec<f64> = a.iter().zip(&b).map(|(a, b)| a + b).collect();
                t(s, 5)?.write_f64(&x)?;
                let g = t(s, 2)?.read_f64()?;
                let (y, rstd) = rms_norm(&x, &g, t(s, 4)?.numel(), *eps);
                t(s, 3)?.write_f64(&y)?;
                t(s, 4)?.write_f64(&rstd)
            }
            MiscOp::RmsNorm { eps } => {
                let (x, g) = (t(s, 0)?.read_f64()?, t(s, 1)?.read_f64()?);
                let (y, rstd) = rms_norm(&x, &g, t(s, 3)?.numel(), *eps);
                t(s, 2)?.write_f64(&y)?;
                t(s, 3)?.write_f64(&rstd)
            }
            MiscOp::RmsNormGrad => {
                let (dy, x) = (t(s, 0)?.read_f64()?, t(s, 1)?.read_f64()?);
                let (rstd, g) = (t(s, 2)?.read_f64()?, t(s, 3)?.read_f64()?);
                let n = g.len();
                let (mut dx, mut dg) = (vec![0f64; x.len()], vec![0f64; n]);
                for (r, &rs) in rstd.iter().enumerate() {
                    let row = r * n..(r + 1) * n;
                    let mean = row.clone().map(|i| dy[i] * g[i - r * n] * x[i] * rs).sum::<f64>() / n as f64;
                    for i in row {
                        dx[i] = (dy[i] * g[i - r * n] - x[i] * rs * mean) * rs;
                        dg[i - r * n] += x[i] * rs * dy[i];
                    }
                }
                t(s, 4)?.write_f64(&dx)?;
                t(s, 5)?.write_f64(&dg)
            }
            MiscOp::IndexFill { dim, index, value, in_place } => {
                let x = t(s, 0)?;
                let (_, n, inner) = lanes(&x.shape, axis(*dim, x.shape.len())?);
                let o = t(s, if *in_place { 0 } else { 1 })?;
                let mut hit = vec![false; n];
                index.iter().for_each(|&k| hit[if k < 0 { (k + n as i64) as usize } else { k as usize }] = true);
                let fill = |i: usize| hit[(i / inner) % n];
                match read(x)? {
                    Vals::I(mut v) => {
                        v.iter_mut().enumerate().filter(|(i, _)| fill(*i)).for_each(|(_, e)| *e = *value as i64);
                        o.write_i64(&v)
                    }
                    Vals::F(mut v) => {
                        v.iter_mut().enumerate().filter(|(i, _)| fill(*i)).for_each(|(_, e)| *e = *value);
                        o.write_f64(&v)
                    }
                }
            }
            MiscOp::StdMean { dims, correction, .. } => {
                let x = t(s, 0)?;
                let xv = x.read_f64()?;
                let (mut sd, mut mean) = (Vec::new(), Vec::new());
                for g in groups(&x.shape, &red_axes(&x.shape, dims)?) {
                    let n = g.len() as f64;
                    let m = g.iter().map(|&i| xv[i]).sum::<f64>() / n;
                    let ss: f64 = g.iter().map(|&i| (xv[i] - m) * (xv[i] - m)).sum();
                    sd.push((ss / (n - *correction as f64).max(0.0)).sqrt());
                    mean.push(m);
                }
                t(s, 1)?.write_f64(&sd)?;
                t(s, 2)?.write_f64(&mean)
            }
            MiscOp::Dot => {
                if let (Vals::I(a), Vals::I(b)) = (read(t(s, 0)?)?, read(t(s, 1)?)?) {
                    let d = a.iter().zip(&b).fold(0i64, |acc, (x, y)| acc.wrapping_add(x.wrapping_mul(*y)));
                    return t(s, 2)?.write_i64(&[d]);
                }
                let (a, b) = (t(s, 0)?.read_f64()?, t(s, 1)?.read_f64()?);
                t(s, 2)?.write_f64(&[a.iter().zip(&b).map(|(x, y)| x * y).sum()])
            }
            MiscOp::Kthvalue { dim, .. } | MiscOp::Cummax { dim } => {
                let x = t(s, 0)?;
                let (outer, n, inner) = lanes(&x.shape, axis(*dim, x.shape.len())?);
                // integers compare exactly in i64 (int64 beyond 2^53), floats in f64 with NaN above all
                let keys: Vec<Key> = match read(x)? {
                    Vals::I(v) => v.into_iter().map(Key::I).collect(),
                    Vals::F(v) => v.into_iter().map(Key::F).collect(),
                };
                let (mut vals, mut idx) = (Vec::new(), Vec::new());
                let kth = if let MiscOp::Kthvalue { k, .. } = self { Some(*k as usize) } else { None };
                for p in 0..outer {
                    for q in 0..inner {
                        let at = |j: usize| (p * n + j) * inner + q;
                        if let Some(k) = kth {
                            let mut lane: Vec<(Key, usize)> = (0..n).map(|j| (keys[at(j)], j)).collect();
                            quick_select(&mut lane, k - 1);
                            vals.push((p * inner + q, lane[k - 1].0));
                            idx.push((p * inner + q, lane[k - 1].1 as i64));
                        } else {
                            let (mut best, mut bi) = (keys[at(0)], 0usize);
                            for j in 0..n {
                                let v = keys[at(j)];
                                // torch's cummax: a NaN takes over and stays; else the later of equal maxima
                                if j == 0 || v.is_nan() || (!best.is_nan() && !best.gt_or_nan(v)) {
                                    (best, bi) = (v, j);
                                }
                                vals.push((at(j), best));
                                idx.push((at(j), bi as i64));
                            }
                        }
                    }
                }
                vals.sort_by_key(|e| e.0);
                idx.sort_by_key(|e| e.0);
                let vo = t(s, 1)?;
                if vo.dtype.is_int() {
                    vo.write_i64(&vals.iter().map(|e| e.1.as_i64()).collect::<Vec<_>>())?;
                } else {
                    vo.write_f64(&vals.iter().map(|e| e.1.as_f64()).collect::<Vec<_>>())?;
                }
                t(s, 2)?.write_i64(&idx.iter().map(|e| e.1).collect::<Vec<_>>())
            }
            MiscOp::AdaptiveMaxPool2d { out } => {
                let x = t(s, 0)?;
                let r = x.shape.len();
                let (h, w) = (x.shape[r - 2] as usize, x.shape[r - 1] as usize);
                let (oh, ow) = (out[0] as usize, out[1] as usize);
                let xv = x.read_f64()?;
                let (mut vals, mut idx) = (Vec::new(), Vec::new());
                for p in 0..xv.len() / (h * w) {
                    let plane = &xv[p * h * w..(p + 1) * h * w];
                    for oy in 0..oh {
                        let (y0, y1) = (oy * h / oh, ((oy + 1) * h).div_ceil(oh));
                        for ox in 0..ow {
                            let (x0, x1) = (ox * w / ow, ((ox + 1) * w).div_ceil(ow));
                            let (mut best, mut bi) = (f64::NEG_INFINITY, y0 * w + x0);
                            for y in y0..y1 {
                                for xx in x0..x1 {
                                    let v = plane[y * w + xx];
                                    if v > best || v.is_nan() {
                                        (best, bi) = (v, y * w + xx);
                                    }
                                }
                            }
                            vals.push(plane[bi]);
                            idx.push(bi as i64);
                        }
                    }
                }
                t(s, 1)?.write_f64(&vals)?;
                t(s, 2)?.write_i64(&idx)
            }
            MiscOp::AdaptiveMaxPool2dBackward => {
                let (g, x, i, gx) = (t(s, 0)?, t(s, 1)?, t(s, 2)?, t(s, 3)?);
                let r = x.shape.len();
                let plane_in = (x.shape[r - 2] * x.shape[r - 1]) as usize;
                let plane_out = (g.shape[r - 2] * g.shape[r - 1]) as usize;
                let (gv, iv) = (g.read_f64()?, i.read_i64()?);
                let mut out = vec![0f64; x.numel()];
                for (k, (&gk, &ik)) in gv.iter().zip(&iv).enumerate() {
                    if ik < 0 || ik as usize >= plane_in {
                        return Err(inv(format!("index {ik} outside the plane of {plane_in}")));
                    }
                    out[(k / plane_out) * plane_in + ik as usize] += gk;
                }
                gx.write_f64(&out)
            }
            MiscOp::Cdist { p } => {
                let (a, b, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let r = a.shape.len();
                let (np, m, nr) = (a.shape[r - 2] as usize, a.shape[r - 1] as usize, b.shape[r - 2] as usize);
                let (av, bv) = (a.read_f64()?, b.read_f64()?);
                let batches = o.numel().checked_div(np * nr).unwrap_or(0);
                let mut y = Vec::with_capacity(o.numel());
                for bi in 0..batches {
                    for i in 0..np {
                        for j in 0..nr {
                            let d = (0..m).map(|k| (av[(bi * np + i) * m + k] - bv[(bi * nr + j) * m + k]).abs());
                            y.push(if *p == 0.0 {
                                d.filter(|&v| v != 0.0).count() as f64
                            } else if p.is_infinite() {
                                d.fold(0.0, f64::max)
                            } else {
                                d.map(|v| v.powf(*p)).sum::<f64>().powf(1.0 / p)
                            });
                        }
                    }
                }
                o.write_f64(&y)
            }
            MiscOp::Shift { left, scalar } => {
                let x = t(s, 0)?;
                let o = t(s, if scalar.is_some() { 1 } else { 2 })?;
                let xv = bview(x, &o.shape)?.read_i64()?;
                let sv = match scalar {
                    Some(k) => vec![*k; xv.len()],
                    None => bview(t(s, 1)?, &o.shape)?.read_i64()?,
                };
                let bits = (o.dtype.size() * 8) as i64;
                let unsigned = matches!(o.dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64);
                let f = |a: i64, k: i64| {
                    if *left {
                        if (0..bits).contains(&k) {
                            a.wrapping_shl(k as u32)
                        } else {
                            0
                        }
                    } else if (0..bits).contains(&k) {
                        if unsigned {
                            ((a as u64) >> k) as i64
                        } else {
                            a >> k
                        }
                    } else if unsigned || a >= 0 {
                        0
                    } else {
                        -1
                    }
                };
                o.write_i64(&xv.iter().zip(&sv).map(|(&a, &k)| f(a, k)).collect::<Vec<_>>())
            }
            MiscOp::Cross { dim } => {
                let o = t(s, 2)?;
                let (av, bv) = (bview(t(s, 0)?, &o.shape)?, bview(t(s, 1)?, &o.shape)?);
                let (outer, _, inner) = lanes(&o.shape, axis(*dim, o.shape.len())?);
                let each = |f: &mut dyn FnMut(usize, usize, usize)| {
                    for p in 0..outer {
                        for q in 0..inner {
                            let at = |j: usize| (p * 3 + j) * inner + q;
                            for j in 0..3 {
                                f(at(j), at((j + 1) % 3), at((j + 2) % 3));
                            }
                        }
                    }
                };
                if o.dtype.is_int() {
                    // integers exactly, wrapping as torch's CPU kernel
                    let (a, b) = (av.read_i64()?, bv.read_i64()?);
                    let mut y = vec![0i64; a.len()];
                    each(&mut |k, u, v| y[k] = a[u].wrapping_mul(b[v]).wrapping_sub(a[v].wrapping_mul(b[u])));
                    return o.write_i64(&y);
                }
                let (a, b) = (av.read_f64()?, bv.read_f64()?);
                let mut y = vec![0f64; a.len()];
                each(&mut |k, u, v| y[k] = a[u] * b[v] - a[v] * b[u]);
                o.write_f64(&y)
            }
            MiscOp::IsClose { rtol, atol, equal_nan } => {
                let o = t(s, 2)?;
                let a = bview(t(s, 0)?, &o.shape)?.read_f64()?;
                let b = bview(t(s, 1)?, &o.shape)?.read_f64()?;
                let f32_math = t(s, 0)?.dtype != DType::F64;
                let close = |x: f64, y: f64| {
                    if x == y || (*equal_nan && x.is_nan() && y.is_nan()) {
                        return true;
                    }
                    let (err, allowed) = if f32_math {
                        let (x, y) = (x as f32, y as f32);
                        (f64::from((x - y).abs()), f64::from(*atol as f32 + (*rtol as f32 * y).abs()))
                    } else {
                        ((x - y).abs(), atol + (rtol * y).abs())
                    };
                    err.is_finite() && err <= allowed
                };
                o.write_f64(&a.iter().zip(&b).map(|(&x, &y)| if close(x, y) { 1.0 } else { 0.0 }).collect::<Vec<_>>())
            }
        }
    }
}
