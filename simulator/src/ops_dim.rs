//! aclnn operators that work along dimensions or mix a few tensors elementwise, as torch_npu's
//! op-plugin launches them for common torch calls (`sort`, `topk`, `max(dim)`, `argmax`, `cumsum`,
//! `flip`, `roll`, `scatter`/`scatter_add` (also gather's backward), `var`, `std`, `prod`,
//! `logsumexp`, `lerp` (Adam's moment update), `mse_loss`, and advanced indexing `x[idx]` /
//! `x[idx] = v`). Without them torch_npu falls back to
//! aclop kernels the simulator does not have, and every later op of the script computes nothing.
//!
//! Values that only move (flip, roll, sort/topk/max values, scatter and index) move as raw
//! elements; integer sums and products are computed in i64 (wrapping); float arithmetic reads f64
//! and rounds once to the out dtype on store. The orderings put NaN above every number, as torch.
use crate::kernels::split_dim;
use crate::ops_ext::{axis, float, index_dtype, inv, l, red_axes, reduced_shape, reduced_slots, same_shape, t};
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
    /// slots: self, out. aclnnCumsum (aclnnCumprod when `prod`) along `dim`, accumulated in f64 (as
    /// torch's CPU kernel); integers exactly, wrapping.
    Cumsum { dim: i64, prod: bool },
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
    /// aclnnLerps: self + w (end - self), computed in f32 (f64 for a float64 out) as torch (|w| < 0.5
    /// from self, else from end).
    Lerp { weight: Option<f64>, inplace: bool },
    /// slots: self, target, out. aclnnMseLoss: (self - target)^2, reduction 0 none, 1 mean, 2 sum.
    MseLoss { reduction: i64 },
    /// slots: gradOutput, self, target, gradInput. aclnnMseLossBackward: 2 (self - target) grad
    /// (/ N for mean).
    MseLossBackward { reduction: i64 },
    /// slots: self, indices (list), out. aclnnIndex: numpy/torch advanced indexing of self's
    /// leading dims by int32/int64 tensors (broadcast together; negative counts from the end); an
    /// empty index tensor, of any dtype, stands for a full slice (torch_npu's encoding of `:`). The broadcast
    /// dims replace the indexed ones in place when those are adjacent, else come first.
    Index,
    /// slots: selfRef, indices (list), values. aclnnIndexPutImpl: `self[indices] = values` (values
    /// broadcast to the indexed shape; with `accumulate`, +=, repeated positions adding up).
    IndexPut { accumulate: bool },
    /// slots: self, out (integer, [numel, rank]: the most there can be). aclnnNonzero: the coordinates
    /// of the non-zero elements (NaN counts) in row-major order, in out's first rows; then the
    /// aclTensor `out_handle`'s view shape becomes [count, rank], which the client reads with
    /// aclGetViewShape after syncing the stream (torch_npu's nonzero, and `x[mask] = v`).
    /// With `transpose` (aclop NonZero's attr, torch_npu's `x[mask]`), out is [rank, numel] and the
    /// coordinates are written as a contiguous [rank, count]; `out_handle` is then the output
    /// aclTensorDesc, whose dims the client reads after the sync (aclopExecuteV2's contract).
    Nonzero { out_handle: usize, transpose: bool },
    /// slots: self, mask (bool), out (self's dtype, 1-D, as long as self and mask broadcast). aclop
    /// MaskedSelect (torch_npu's masked_select): the elements of self where the broadcast mask is
    /// true, in row-major order, in out's head; then `out_handle`'s shape becomes [count] (as Nonzero).
    MaskedSelect { out_handle: usize },
    /// slots: self, valueOut (self's dtype, 1-D, at least self's numel), inverseOut (int64, self's
    /// numel; written with `inverse`, or with `counts` when it has self's numel), countsOut (int64, 1-D like valueOut; only aclnnUnique2, written
    /// with `counts`). aclnnUnique / aclnnUnique2 (torch's `unique`, MindSpore's `unique`): the
    /// distinct elements of self in ascending order (also when `sorted` is false, which lets the
    /// kernel choose the order), each NaN distinct and above every number, as torch's CPU kernel;
    /// inverse maps each element of self to its value's position, counts how often each value occurs.
    /// Then valueOut's view shape (and countsOut's, with `counts`) becomes [distinct], read by the
    /// client with aclGetViewShape after its sync (as Nonzero). With `consecutive`
    /// (aclnnUniqueConsecutive over the flattened self), the values are the runs of equal elements
    /// in self's order instead.
    Unique { inverse: bool, counts: bool, consecutive: bool, value_handle: usize, counts_handle: usize },
}

impl DimOp {
    /// The outputs whose shape the kernel sets: (slot, aclTensor or aclTensorDesc handle).
    pub fn shaped_slots(&self) -> Vec<(usize, usize)> {
        match self {
            DimOp::Nonzero { out_handle, .. } => vec![(1, *out_handle)],
            DimOp::MaskedSelect { out_handle } => vec![(2, *out_handle)],
            DimOp::Unique { counts, value_handle, counts_handle, .. } => {
                let mut v = vec![(1, *value_handle)];
                if *counts {
                    v.push((3, *counts_handle));
                }
                v
            }
            _ => Vec::new(),
        }
    }
}

/// An index tensor's values and shape.
type IndexT = (Vec<i64>, Vec<i64>);

/// For advanced indexing of `shape` by `idx` (per leading dim: None = full slice, else the index
/// values and their shape): the result's shape and, per result element, the flat offset of the
/// element of a contiguous `shape` it selects.
fn index_plan(shape: &[i64], idx: &[Option<IndexT>]) -> Result<(Vec<i64>, Vec<usize>), i32> {
    if idx.len() > shape.len() {
        return Err(inv(format!("index: {} index tensors for a rank-{} self", idx.len(), shape.len())));
    }
    let defined: Vec<usize> = (0..idx.len()).filter(|&d| idx[d].is_some()).collect();
    let mut b: Vec<i64> = Vec::new();
    for (_, sh) in idx.iter().flatten() {
        b = crate::kernels::broadcast_shape(&b, sh)
            .ok_or_else(|| inv(format!("index: index shapes {b:?} and {sh:?} do not broadcast")))?;
    }
    let views: Vec<Vec<i64>> = idx
        .iter()
        .flatten()
        .map(|(v, sh)| {
            let st = contiguous_strides(sh);
            let lead = b.len() - sh.len();
            // each broadcast position's value
            (0..numel(&b) as i64)
                .map(|k| {
                    let bst = contiguous_strides(&b);
                    let off: i64 = (0..sh.len())
                        .map(|q| if sh[q] == 1 { 0 } else { k / bst[lead + q] % b[lead + q] * st[q] })
                        .sum();
                    v[off as usize]
                })
                .collect()
        })
        .collect();
    let adjacent = defined.windows(2).all(|w| w[1] == w[0] + 1);
    let rest: Vec<usize> = (0..shape.len()).filter(|d| !defined.contains(d)).collect();
    // result layout: (before, B, after) in dims of self, B a block
    let split = if adjacent && !defined.is_empty() { rest.iter().take_while(|&&d| d < defined[0]).count() } else { 0 };
    let mut out_shape: Vec<i64> = rest[..split].iter().map(|&d| shape[d]).collect();
    out_shape.extend_from_slice(&b);
    out_shape.extend(rest[split..].iter().map(|&d| shape[d]));
    let ost = contiguous_strides(&out_shape);
    let sst = contiguous_strides(shape);
    let mut src = Vec::with_capacity(numel(&out_shape));
    for k in 0..numel(&out_shape) as i64 {
        let c: Vec<i64> = (0..out_shape.len()).map(|q| k / ost[q] % out_shape[q]).collect();
        let bpos = {
            let bst = contiguous_strides(&b);
            (0..b.len()).map(|q| c[split + q] * bst[q]).sum::<i64>() as usize
        };
        let mut off = 0i64;
        for (j, &d) in defined.iter().enumerate() {
            let n = shape[d];
            let v = views[j][bpos];
            if v < -n || v >= n {
                return Err(inv(format!("index: {v} out of range for dim {d} of size {n}")));
            }
            off += v.rem_euclid(n.max(1)) * sst[d];
        }
        for (j, &d) in rest.iter().enumerate() {
            let q = if j < split { j } else { j + b.len() };
            off += c[q] * sst[d];
        }
        src.push(off as usize);
    }
    Ok((out_shape, src))
}

/// The index tensors of slot `i` for `index_plan` (empty ones: full slices).
fn index_list(s: &[SV], i: usize, read: bool) -> Result<Vec<Option<IndexT>>, i32> {
    l(s, i)?
        .iter()
        .map(|v| {
            if v.numel() == 0 {
                return Ok(None); // a slice, whatever its dtype (torch_npu passes self's)
            }
            index_dtype(v)?;
            Ok(Some((if read { v.read_i64()? } else { vec![0; v.numel()] }, v.shape.clone())))
        })
        .collect()
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

/// The distinct values of `a` in ascending order (NaN above every number), or with `consecutive`
/// its runs of equal elements in order, each as the flat (row-major) positions holding it, first
/// occurrence first. Integers compare exactly (as i64), floats as f64; every NaN is its own value
/// and -0.0 equals 0.0, as torch's CPU unique.
fn unique_groups(a: &TView, consecutive: bool) -> Result<Vec<Vec<usize>>, i32> {
    let mut ix: Vec<usize> = (0..a.numel()).collect();
    let same: Box<dyn Fn(usize, usize) -> bool> = if a.dtype.is_float() {
        let x = a.read_f64()?;
        if !consecutive {
            ix.sort_by(|&p, &q| order(x[p], x[q])); // stable: first occurrence first
        }
        Box::new(move |p, q| x[p] == x[q])
    } else {
        let x = a.read_i64()?;
        if !consecutive {
            if a.dtype == crate::dtype::DType::U64 {
                ix.sort_by_key(|&p| x[p] as u64); // the bits of a uint64 (read as i64) in unsigned order
            } else {
                ix.sort_by_key(|&p| x[p]);
            }
        }
        Box::new(move |p, q| x[p] == x[q])
    };
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for p in ix {
        match groups.last_mut() {
            Some(g) if same(g[0], p) => g.push(p),
            _ => groups.push(vec![p]),
        }
    }
    Ok(groups)
}

/// Keys that order `a`'s elements as their values do, for the comparison kernels (sort, topk, max/min
/// with a dim): floats as f64 (NaN handled by the callers), integers by their exact rank among the
/// tensor's distinct values (int64 beyond 2^53 would collide as f64; uint64 in unsigned order).
fn order_keys(a: &TView) -> Result<Vec<f64>, i32> {
    if a.dtype.is_float() {
        return a.read_f64();
    }
    let x = a.read_i64()?;
    let key = |v: i64| if a.dtype == crate::dtype::DType::U64 { i128::from(v as u64) } else { i128::from(v) };
    let mut distinct: Vec<i128> = x.iter().map(|&v| key(v)).collect();
    distinct.sort_unstable();
    distinct.dedup();
    Ok(x.iter().map(|&v| distinct.partition_point(|&d| d < key(v)) as f64).collect())
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

fn reduction_ok(r: i64) -> Result<(), i32> {
    if (0..=2).contains(&r) {
        Ok(())
    } else {
        Err(inv(format!("reduction {r} must be 0 (none), 1 (mean) or 2 (sum)")))
    }
}

/// `dst[k] = src[idx[k]]`: raw elements when the dtypes agree (exact for int64 and every float),
/// else converted through f64.
fn take(src: &TView, dst: &TView, idx: &[usize]) -> Result<(), i32> {
    if src.dtype == dst.dtype {
        let es = src.dtype.size();
        let x = src.read_raw()?;
        let mut y = Vec::with_capacity(idx.len() * es);
        for &k in idx {
            y.extend_from_slice(&x[k * es..k * es + es]);
        }
        dst.write_raw(&y)
    } else {
        let x = src.read_f64()?;
        dst.write_f64(&idx.iter().map(|&k| x[k]).collect::<Vec<_>>())
    }
}

/// The flat source index of each element of lanes of length `m` whose lane-local indices are `idx`.
fn lane_src(idx: &[f64], (_, n, inn): (usize, usize, usize), m: usize) -> Vec<usize> {
    (0..idx.len())
        .map(|k| {
            let (p, q) = (k / (m * inn), k % inn);
            (p * n + idx[k] as usize) * inn + q
        })
        .collect()
}

/// Applies `(position, source)` updates to `a`'s values, written to `o`: integers in i64 (wrapping,
/// exact), floats in f64. `source` None takes `value`; `reduce` 1 adds, 2 multiplies, else replaces.
fn update(
    a: &TView,
    o: &TView,
    src: Option<&TView>,
    value: f64,
    plan: &[(usize, usize)],
    reduce: i64,
) -> Result<(), i32> {
    if a.dtype.is_int() {
        let mut y = a.read_i64()?;
        let sv = src.map(|t| t.read_i64()).transpose()?;
        for &(at, from) in plan {
            let v = sv.as_ref().map_or(value as i64, |sv| sv[from]);
            y[at] = match reduce {
                1 => y[at].wrapping_add(v),
                2 => y[at].wrapping_mul(v),
                _ => v,
            };
        }
        o.write_i64(&y)
    } else {
        let mut y = a.read_f64()?;
        let sv = src.map(|t| t.read_f64()).transpose()?;
        for &(at, from) in plan {
            let v = sv.as_ref().map_or(value, |sv| sv[from]);
            y[at] = match reduce {
                1 => y[at] + v,
                2 => y[at] * v,
                _ => v,
            };
        }
        o.write_f64(&y)
    }
}

/// torch's lerp for float64 outs.
fn lerp64(a: f64, b: f64, w: f64) -> f64 {
    if w.abs() < 0.5 {
        a + w * (b - a)
    } else {
        b - (b - a) * (1.0 - w)
    }
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
            DimOp::Cumsum { dim, .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                axis(*dim, a.shape.len())?;
                same_shape(a, o, "out")?;
            }
            DimOp::Extreme { dim, keep, values, .. } => {
                let a = t(s, 0)?;
                if lanes(&a.shape, *dim)?.1 == 0 {
                    return Err(inv(format!("max/min/argmax: dim {dim} of {:?} is empty", a.shape)));
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
                let mut seen = Vec::new();
                for &d in dims {
                    let k = axis(d, a.shape.len())?;
                    if seen.contains(&k) {
                        return Err(inv(format!("flip: dim {d} appears more than once in {dims:?}")));
                    }
                    seen.push(k);
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
                if a.shape.is_empty() && !dims.is_empty() {
                    return Err(inv("roll: a 0-d tensor takes no dims"));
                }
                for &d in dims {
                    axis(d, a.shape.len())?;
                }
                same_shape(a, o, "out")?;
            }
            DimOp::Scatter { dim, value, inplace, reduce } => {
                if !(0..=2).contains(reduce) {
                    return Err(inv(format!("scatter: reduce {reduce} must be 0 (none), 1 (add) or 2 (multiply)")));
                }
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
                reduction_ok(*reduction)?;
                let shape = mse_shape(s)?;
                let o = t(s, 2)?;
                float(o, "out")?;
                want_shape(o, if *reduction == 0 { &shape } else { &[] }, "out")?;
            }
            DimOp::Index | DimOp::IndexPut { .. } => {
                let (a, b) = (t(s, 0)?, t(s, 2)?);
                let (shape, _) = index_plan(&a.shape, &index_list(s, 1, false)?)?;
                if matches!(self, DimOp::Index) {
                    want_shape(b, &shape, "out")?;
                } else {
                    bview(b, &shape)?;
                }
            }
            DimOp::MaskedSelect { .. } => {
                let (a, m, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let Some(shape) = crate::kernels::broadcast_shape(&a.shape, &m.shape) else {
                    return Err(inv(format!(
                        "masked_select: self {:?} and mask {:?} do not broadcast",
                        a.shape, m.shape
                    )));
                };
                if m.dtype != crate::dtype::DType::Bool {
                    return Err(inv(format!("masked_select: mask must be bool, got {:?}", m.dtype)));
                }
                let n = numel(&shape) as i64;
                if o.dtype != a.dtype || o.shape.len() != 1 || o.shape[0] < n || o.strides != [1] {
                    return Err(inv(format!(
                        "masked_select: out must be a contiguous 1-D {:?} of at least {n} elements, got {:?} {:?}",
                        a.dtype, o.dtype, o.shape
                    )));
                }
            }
            DimOp::Unique { inverse, counts, .. } => {
                let (a, v, i) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let n = a.numel() as i64;
                let flat = |o: &TView, dtype: crate::dtype::DType| {
                    o.dtype == dtype && o.shape.len() == 1 && o.shape[0] >= n && o.strides == [1]
                };
                if !flat(v, a.dtype) {
                    return Err(inv(format!(
                        "unique: valueOut must be a contiguous 1-D {:?} of at least {n} elements, got {:?} {:?}",
                        a.dtype, v.dtype, v.shape
                    )));
                }
                let writes_inverse = *inverse || (*counts && i.numel() as i64 == n);
                if writes_inverse && (i.dtype != crate::dtype::DType::I64 || i.numel() as i64 != n) {
                    return Err(inv(format!(
                        "unique: inverseOut must be int64 with self's {n} elements, got {:?} {:?}",
                        i.dtype, i.shape
                    )));
                }
                if *counts {
                    let c = t(s, 3)?;
                    if !flat(c, crate::dtype::DType::I64) {
                        return Err(inv(format!(
                            "unique: countsOut must be a contiguous 1-D int64 of at least {n} elements, got {:?} {:?} strides {:?}",
                            c.dtype, c.shape, c.strides
                        )));
                    }
                }
            }
            DimOp::Nonzero { transpose, .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                // [numel, rank] rows at most; a 0-d self's one row has no columns (no bytes)
                let (n, rank) = (a.numel() as i64, a.shape.len() as i64);
                let (rows, cols) = if *transpose { (1, 0) } else { (0, 1) };
                let fits = o.shape.len() == 2 && o.shape[cols] == rank && (rank == 0 || o.shape[rows] >= n);
                if !fits || !o.dtype.is_int() || o.strides != contiguous_strides(&o.shape) {
                    let want = if *transpose { format!("[{rank}, {n}]") } else { format!("[{n}, {rank}]") };
                    return Err(inv(format!("nonzero: out must be a contiguous integer {want}, got {:?}", o.shape)));
                }
            }
            DimOp::MseLossBackward { reduction } => {
                reduction_ok(*reduction)?;
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
            DimOp::Cumsum { dim, prod } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let l = lanes(&a.shape, *dim)?;
                if o.dtype.is_int() {
                    // integers exactly (wrapping, as the device's int64 adds)
                    let v = a.read_i64()?;
                    let mut y = vec![0i64; v.len()];
                    let (outer, n, inn) = l;
                    for p in 0..outer {
                        for q in 0..inn {
                            let mut acc = i64::from(*prod);
                            for j in 0..n {
                                let k = (p * n + j) * inn + q;
                                acc = if *prod { acc.wrapping_mul(v[k]) } else { acc.wrapping_add(v[k]) };
                                y[k] = acc;
                            }
                        }
                    }
                    return o.write_i64(&y);
                }
                let (y, _) = map_lanes(&a.read_f64()?, l, l.1, |x, y, _| {
                    let mut acc = if *prod { 1.0 } else { 0.0 };
                    for (v, out) in x.iter().zip(y.iter_mut()) {
                        acc = if *prod { acc * v } else { acc + v };
                        *out = acc;
                    }
                });
                o.write_f64(&y)
            }
            DimOp::Extreme { dim, min, values, .. } => {
                let a = t(s, 0)?;
                let l = lanes(&a.shape, *dim)?;
                let (_, i) = map_lanes(&order_keys(a)?, l, 1, |x, _, i| {
                    let mut best = 0;
                    for (j, &c) in x.iter().enumerate().skip(1) {
                        let b = x[best];
                        let better = !b.is_nan() && (c.is_nan() || if *min { c < b } else { c > b });
                        if better {
                            best = j;
                        }
                    }
                    i[0] = best as f64;
                });
                if *values {
                    take(a, t(s, 1)?, &lane_src(&i, l, 1))?;
                }
                t(s, if *values { 2 } else { 1 })?.write_f64(&i)
            }
            DimOp::Sort { dim, descending, k } => {
                let a = t(s, 0)?;
                let l = lanes(&a.shape, *dim)?;
                let m = k.map_or(l.1, |k| k as usize);
                let (_, i) = map_lanes(&order_keys(a)?, l, m, |x, _, i| {
                    let mut idx: Vec<usize> = (0..x.len()).collect();
                    idx.sort_by(|&p, &q| if *descending { order(x[q], x[p]) } else { order(x[p], x[q]) });
                    for j in 0..m {
                        i[j] = idx[j] as f64;
                    }
                });
                take(a, t(s, 1)?, &lane_src(&i, l, m))?;
                t(s, 2)?.write_f64(&i)
            }
            DimOp::Flip { dims } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                if a.shape.is_empty() {
                    return take(a, o, &[0]);
                }
                let rank = a.shape.len();
                let ax = dims.iter().map(|&d| axis(d, rank)).collect::<Result<Vec<_>, _>>()?;
                let shape = &a.shape;
                let src = remap(shape, |c| {
                    for &d in &ax {
                        c[d] = shape[d] - 1 - c[d];
                    }
                });
                take(a, o, &src)
            }
            DimOp::Roll { shifts, dims } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let n = a.numel();
                if dims.is_empty() {
                    let sh = if n == 0 { 0 } else { shifts[0].rem_euclid(n as i64) as usize };
                    let src: Vec<usize> = (0..n).map(|k| (k + n - sh) % n).collect();
                    return take(a, o, &src);
                }
                let rank = a.shape.len();
                let ax = dims.iter().map(|&d| axis(d, rank)).collect::<Result<Vec<_>, _>>()?;
                let shape = &a.shape;
                let src = remap(shape, |c| {
                    for (&d, &sh) in ax.iter().zip(shifts) {
                        c[d] = (c[d] - sh).rem_euclid(shape[d].max(1));
                    }
                });
                take(a, o, &src)
            }
            DimOp::Scatter { dim, reduce, value, inplace } => {
                let (a, i) = (t(s, 0)?, t(s, 1)?);
                let o = if *inplace { a } else { t(s, if value.is_some() { 2 } else { 3 })? };
                let idx = i.read_i64()?;
                let src = if value.is_some() { None } else { Some(t(s, 2)?) };
                let sst = src.map(|v| contiguous_strides(&v.shape));
                let d = axis(*dim, a.shape.len())?;
                let (ast, ist) = (contiguous_strides(&a.shape), contiguous_strides(&i.shape));
                let n = a.shape.get(d).copied().unwrap_or(1);
                let mut plan = Vec::with_capacity(idx.len());
                for (k, &j) in idx.iter().enumerate() {
                    if j < 0 || j >= n {
                        return Err(inv(format!("scatter: index {j} out of range for dim {d} of size {n}")));
                    }
                    let (mut at, mut from) = (0i64, 0i64);
                    for q in 0..i.shape.len() {
                        let c = k as i64 / ist[q] % i.shape[q];
                        at += if q == d { j } else { c } * ast.get(q).copied().unwrap_or(0);
                        if let Some(sst) = &sst {
                            from += c * sst[q];
                        }
                    }
                    plan.push((at as usize, from as usize));
                }
                update(a, o, src, value.unwrap_or(0.0), &plan, *reduce)
            }
            DimOp::Reduce { kind, dims, .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let red = red_axes(&a.shape, dims)?;
                let slots = reduced_slots(&a.shape, &red);
                let mut groups = vec![Vec::new(); numel(&reduced_shape(&a.shape, &red, true))];
                for (&v, &g) in a.read_f64()?.iter().zip(&slots) {
                    groups[g].push(v);
                }
                if *kind == RKind::Prod && o.dtype.is_int() {
                    // integers exactly (wrapping)
                    let mut acc = vec![1i64; groups.len()];
                    for (&v, &g) in a.read_i64()?.iter().zip(&slots) {
                        acc[g] = acc[g].wrapping_mul(v);
                    }
                    return o.write_i64(&acc);
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
                let x = bview(a, &o.shape)?.read_f64()?;
                let e = bview(t(s, 1)?, &o.shape)?.read_f64()?;
                let w = match weight {
                    Some(w) => vec![*w; x.len()],
                    None => bview(t(s, 2)?, &o.shape)?.read_f64()?,
                };
                let wide = o.dtype == crate::dtype::DType::F64;
                let y = x.iter().zip(&e).zip(&w).map(|((&a, &b), &w)| {
                    if wide {
                        lerp64(a, b, w)
                    } else {
                        lerp(a as f32, b as f32, w as f32) as f64
                    }
                });
                o.write_f64(&y.collect::<Vec<_>>())
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
            DimOp::Index => {
                let (a, o) = (t(s, 0)?, t(s, 2)?);
                let (_, src) = index_plan(&a.shape, &index_list(s, 1, true)?)?;
                take(a, o, &src)
            }
            DimOp::IndexPut { accumulate } => {
                let a = t(s, 0)?;
                let (shape, dst) = index_plan(&a.shape, &index_list(s, 1, true)?)?;
                let v = bview(t(s, 2)?, &shape)?;
                let plan: Vec<(usize, usize)> = dst.into_iter().enumerate().map(|(k, at)| (at, k)).collect();
                update(a, a, Some(&v), 0.0, &plan, i64::from(*accumulate))
            }
            DimOp::MaskedSelect { out_handle } => {
                let (a, m, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let shape = crate::kernels::broadcast_shape(&a.shape, &m.shape).unwrap_or_default();
                let keep = bview(m, &shape)?.read_f64()?;
                let idx: Vec<usize> = (0..keep.len()).filter(|&k| keep[k] != 0.0).collect();
                let head = TView { shape: vec![idx.len() as i64], strides: vec![1], ..o.clone() };
                take(&bview(a, &shape)?, &head, &idx)?;
                if *out_handle != 0 {
                    crate::tensor::set_kernel_shape(*out_handle, head.shape.clone());
                }
                Ok(())
            }
            DimOp::Unique { inverse, counts, consecutive, value_handle, counts_handle } => {
                let a = t(s, 0)?;
                let groups = unique_groups(a, *consecutive)?;
                let len = vec![groups.len() as i64];
                let head = |o: &TView| TView { shape: len.clone(), strides: vec![1], ..o.clone() };
                take(a, &head(t(s, 1)?), &groups.iter().map(|g| g[0]).collect::<Vec<_>>())?;
                // torch_npu gives a full inverseOut for returnCounts alone too: written then as well
                let i = t(s, 2)?;
                if *inverse || (*counts && i.numel() == a.numel()) {
                    let mut at = vec![0i64; a.numel()];
                    for (k, g) in groups.iter().enumerate() {
                        g.iter().for_each(|&e| at[e] = k as i64);
                    }
                    i.write_i64(&at)?;
                }
                let mut shaped = vec![*value_handle];
                if *counts {
                    head(t(s, 3)?).write_i64(&groups.iter().map(|g| g.len() as i64).collect::<Vec<_>>())?;
                    shaped.push(*counts_handle);
                }
                for h in shaped.into_iter().filter(|&h| h != 0) {
                    crate::tensor::set_kernel_shape(h, len.clone());
                }
                Ok(())
            }
            DimOp::Nonzero { out_handle, transpose } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let rank = a.shape.len();
                let st = contiguous_strides(&a.shape);
                let (mut coords, mut count) = (Vec::new(), 0i64);
                for (k, v) in a.read_f64()?.iter().enumerate() {
                    if *v != 0.0 {
                        coords.extend((0..rank).map(|d| k as i64 / st[d] % a.shape[d]));
                        count += 1;
                    }
                }
                let shape = if *transpose {
                    let c = count as usize;
                    coords = (0..rank * c).map(|j| coords[(j % c) * rank + j / c]).collect();
                    vec![rank as i64, count]
                } else {
                    vec![count, rank as i64]
                };
                let head = TView { strides: contiguous_strides(&shape), shape, ..o.clone() };
                head.write_i64(&coords)?;
                if *out_handle != 0 {
                    crate::tensor::set_kernel_shape(*out_handle, head.shape.clone());
                }
                Ok(())
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
