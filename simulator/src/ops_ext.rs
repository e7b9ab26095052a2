//! The aclnn operators that unmodified torch_npu 2.14 training scripts launch beyond the core set of
//! `ops.rs` (issue #19): arange, tril/triu, logical not, masked fill, addcdiv/addcmul, the `Foreach`
//! family of the default foreach optimizers, convolution, batch norm and max pooling.
//!
//! Same conventions as `ops.rs`: phase 1 validates shapes and dtypes, phase 2 runs on the stream
//! worker; math in f64/f32, rounded to the output dtype on store.
use crate::errmsg::fail;
use crate::tensor::{bview, numel, TView, SV};
use cann_abi::status::*;

/// The comparison of aclnnEq/Ne/Gt/Ge/Lt/Le (Tensor and Scalar forms).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cmp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Cmp {
    /// The comparison, on floats as IEEE (with a NaN every one is false but `Ne`) and on integers
    /// exactly.
    pub fn apply<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
        }
    }
}

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
    /// y = max(x, s) (torch's `_foreach_clamp_min_`, `clip_grad_value_`); a NaN in x or s gives NaN
    MaxScalar,
    /// y = min(x, s) (`_foreach_clamp_max_`); NaN stays NaN
    MinScalar,
}

impl FKind {
    /// Number of input lists.
    pub fn inputs(self) -> usize {
        match self {
            FKind::AddScalar
            | FKind::MulScalar
            | FKind::DivScalar
            | FKind::Sqrt
            | FKind::MaxScalar
            | FKind::MinScalar => 1,
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
    /// slots: selfRef, value (a one-element tensor)
    FillTensor,
    /// slots: x, y, value? (one element; default 0). Constant padding with `before[d]` elements before dim d.
    PadConstant { before: Vec<i64> },
    /// slots: selfRef, mask
    MaskedFill { value: Option<f64> },
    /// slots: self, tensor1, tensor2, out (in-place form: no out). out = self + value * t1 (/ or *) t2
    Addc { value: f64, div: bool },
    /// slots: the input lists, then the output list. `scalars` has one value per tensor (or one for all); none
    /// for the V1 forms that take the scalar as a one-element tensor, the slot after the output list.
    Foreach { kind: FKind, scalars: Vec<f64> },
    /// slots: mask (uint8, ceil(numel/128)*16 bytes). Bit i (byte i/8, bit i%8) = keep element i, with
    /// probability 1 - p, from the simulator's counter-based generator over (seed, offset, i).
    DropoutGenMask { numel: usize, p: f64, seed: i64, offset: i64 },
    /// slots: self, mask, out. out = keep ? self / (1 - p) : 0
    DropoutDoMask { p: f64 },
    /// slots: scaledGrads (list, in place), foundInf (one element, in place), invScale (one element).
    /// aclnnForeachNonFiniteCheckAndUnscale (torch's GradScaler): every gradient times invScale; foundInf set
    /// to 1 when any element was NaN or ±inf, else left as it was.
    NonFiniteCheckAndUnscale,
    /// slots: currentScale, growthTracker (int32), foundInf, updatedScaleOut, updatedGrowthTrackerOut (one element
    /// each). aclnnAmpUpdateScale (GradScaler.update): after an inf, scale · backoff and tracker 0; else the
    /// tracker counts up and at `interval` the scale grows by `growth` (in float32; kept if that overflows) and
    /// the tracker restarts from 0.
    AmpUpdateScale { growth: f64, backoff: f64, interval: i64 },
    /// slots: input [N,C,H,W], weight [O,C/g,kH,kW], bias? [O], output. 2-D, not transposed.
    Conv2d(ConvGeom),
    /// slots: gradOutput, input, weight, gradInput?, gradWeight?, gradBias? (outputMask selects)
    Conv2dBackward { geom: ConvGeom, mask: [bool; 3] },
    /// slots: input [N,C,...], weight?, bias?, runningMean?, runningVar?, output, saveMean?, saveInvstd?
    BatchNorm { training: bool, momentum: f64, eps: f64 },
    /// slots: gradOut, input, weight?, runningMean?, runningVar?, saveMean?, saveInvstd?, gradInput?,
    /// gradWeight?, gradBias?
    BatchNormBackward { training: bool, eps: f64, mask: Vec<bool> },
    /// slots: self [N,C,H,W], out, indices. `mask`: indices is the int8 bit mask of
    /// aclnnMaxPool2dWithMask ([N,C,kH*kW,(ceil(Ho*Wo/16)+1)*32]); else int32 flat indices h*W+w.
    MaxPool2d { geom: PoolGeom, mask: bool },
    /// slots: gradOutput, self, indices, gradInput
    MaxPool2dBackward { geom: PoolGeom, mask: bool },
    /// The classic aclop kernels (aclop_nn.rs); shapes are checked when the aclop call is planned.
    Nn(crate::aclop_nn::Nn),
    /// slots: self, out (0-d, self's dtype). aclnnMax / aclnnMin over all elements, as `torch.max(x)`:
    /// a NaN anywhere gives NaN; an empty self is rejected (torch raises, CANN returns PARAM_INVALID).
    ReduceAll { min: bool },
    /// slots: self, minOut, maxOut (self's dtype). aclnnAminmaxAll (`dims` None: all elements into
    /// 0-d outs) and aclnnAminmax (over `dims`, `keep` = keepDim): min and max in one pass, a NaN
    /// in a reduced row gives NaN in both; an empty self is rejected as by aclnnMax/aclnnMin.
    Aminmax { dims: Option<Vec<i64>>, keep: bool },
    /// slots: self, out. aclnnNorm: (sum |x|^p)^(1/p) over `dims` (all when empty), computed in f64
    /// from the elements and rounded to out's float dtype; p = 0 counts non-zeros, p = inf is max |x|.
    Norm { p: f64, dims: Vec<i64>, keep: bool },
    /// slots: self, other (tensor form only), out. aclnnEq/Ne/Gt/Ge/Lt/LeTensor (`other` None:
    /// broadcast against the other tensor) and ...Scalar (`other` the aclScalar's value): the
    /// comparison of the values (NaN compares unequal to everything), 1 or 0 in out's dtype (bool
    /// for torch).
    Compare { cmp: Cmp, other: Option<f64> },
    /// slots: self, other, out. aclnnMaximum / aclnnMinimum (torch.maximum/minimum): elementwise,
    /// broadcast, a NaN in either gives NaN.
    MaxMin { min: bool },
    /// slots: self, other, out. aclnnLogicalAnd / aclnnLogicalOr / aclnnLogicalXor (`op` b'&', b'|',
    /// b'^'): on "non-zero", broadcast, 1/0 in out's dtype.
    Logical { op: u8 },
    /// slots: self, other, out. aclnnBitwiseAnd/Or/XorTensor (`op` b'&', b'|', b'^'), broadcast:
    /// integers bitwise, bool logically (torch's `&`, `|`, `^`); floats are refused.
    Bitwise { op: u8 },
    /// slots: self, out. aclnnAny / aclnnAll over `dims` (all when empty), `keep` = keepdim: whether
    /// any / every element is non-zero (NaN counts as non-zero); bool out.
    AnyAll { all: bool, dims: Vec<i64>, keep: bool },
    /// slots: self, out. aclnnIsFinite: 1 where the element is neither NaN nor ±inf (integers: all).
    IsFinite,
    /// slots: self, index (1-D or 0-d, int32/int64), out. aclnnIndexSelect along `dim`.
    IndexSelect { dim: i64 },
    /// slots: self, index (int32/int64, self's rank), out (index's shape). aclnnGather along `dim`
    /// (torch.gather): out[.., i, ..] = self[.., index[.., i, ..], ..].
    Gather { dim: i64 },
    /// slots: condition, self, other, out. aclnnSWhere (torch.where): self where condition is
    /// non-zero, else other; the three broadcast to out's shape.
    Where,
    /// slots: self, out. aclnnNanToNum: NaN, +inf and -inf replaced by the given values (float dtypes).
    NanToNum { nan: f32, posinf: f32, neginf: f32 },
    /// slots: tensors (list), out. aclnnStack: the tensors (all of one shape S) along a new axis
    /// `dim` of out (S with the count inserted at `dim`, negative counted from out's rank); values
    /// converted to out's dtype on store, as aclnnCat.
    Stack { dim: i64 },
}

/// Convolution parameters, 1-D or 2-D, direct or transposed.
///
/// A 1-D convolution (3-D input and weight) is computed as a 2-D one over a height of 1; a transposed
/// convolution as the data gradient of the direct convolution from its output back to its input,
/// which is what it is. `lens` keeps how many elements the caller gave for stride, padding and
/// dilation, so a 1-D call with 2-D parameters is refused as CANN refuses it.
#[derive(Clone, Debug)]
pub struct ConvGeom {
    pub stride: [i64; 2],
    pub pad: [i64; 2],
    pub dil: [i64; 2],
    pub groups: i64,
    /// Some(outputPadding) for a transposed convolution.
    pub transposed: Option<[i64; 2]>,
    lens: [usize; 3],
}

/// Pooling parameters (2-D).
#[derive(Clone, Debug)]
pub struct PoolGeom {
    pub k: [i64; 2],
    pub stride: [i64; 2],
    pub pad: [i64; 2],
    pub dil: [i64; 2],
    pub ceil: bool,
}

fn two(v: &[i64], what: &str, default: Option<[i64; 2]>) -> Result<[i64; 2], i32> {
    match v.len() {
        0 => default.ok_or_else(|| inv(format!("{what} is empty"))),
        1 => Ok([v[0], v[0]]),
        2 => Ok([v[0], v[1]]),
        _ => Err(inv(format!("{what} must have 1 or 2 elements, got {v:?}"))),
    }
}

/// A 3-D (1-D convolution) shape as 4-D, with a height of 1.
fn with_unit_height(s: &[i64]) -> Vec<i64> {
    let mut v = s.to_vec();
    v.insert(2, 1);
    v
}

impl ConvGeom {
    pub fn new(stride: &[i64], pad: &[i64], dil: &[i64], groups: i64) -> Result<ConvGeom, i32> {
        let g = ConvGeom {
            stride: two(stride, "stride", None)?,
            pad: two(pad, "padding", Some([0, 0]))?,
            dil: two(dil, "dilation", Some([1, 1]))?,
            groups,
            transposed: None,
            lens: [stride.len(), pad.len(), dil.len()],
        };
        if g.stride.iter().any(|&x| x < 1) || g.dil.iter().any(|&x| x < 1) || g.pad.iter().any(|&x| x < 0) || groups < 1
        {
            return Err(inv(format!("invalid convolution parameters {g:?}")));
        }
        Ok(g)
    }
    /// The same geometry as a transposed convolution with `outputPadding` (1 or 2 elements, or
    /// empty for zeros), each smaller than its stride or its dilation (torch's and CANN's rule).
    pub fn transposed(mut self, output_padding: &[i64]) -> Result<ConvGeom, i32> {
        let op = two(output_padding, "outputPadding", Some([0, 0]))?;
        for i in 0..2 {
            if op[i] < 0 || (op[i] >= self.stride[i] && op[i] >= self.dil[i]) {
                return Err(inv(format!("outputPadding {op:?} must be smaller than the stride or the dilation")));
            }
        }
        self.transposed = Some(op);
        Ok(self)
    }
    /// The 2-D geometry and 4-D input/weight shapes this call computes with (a 1-D call gains a
    /// height of 1).
    fn planar(&self, x: &[i64], w: &[i64]) -> Result<(ConvGeom, Vec<i64>, Vec<i64>), i32> {
        match (x.len(), w.len()) {
            (4, 4) => Ok((self.clone(), x.to_vec(), w.to_vec())),
            (3, 3) => {
                if self.lens.iter().any(|&n| n > 1) {
                    return Err(inv(format!("a 1-D convolution takes 1-element parameters: {self:?}")));
                }
                let g = ConvGeom {
                    stride: [1, self.stride[1]],
                    pad: [0, self.pad[1]],
                    dil: [1, self.dil[1]],
                    transposed: self.transposed.map(|op| [0, op[1]]),
                    ..self.clone()
                };
                Ok((g, with_unit_height(x), with_unit_height(w)))
            }
            _ => {
                Err(inv(format!("only 1-D and 2-D convolution of 3-D or 4-D input/weight is supported: {x:?}, {w:?}")))
            }
        }
    }
    /// Output shape for input `x` and weight `w` (same rank), checking the channel counts.
    pub fn out_shape(&self, x: &[i64], w: &[i64]) -> Result<Vec<i64>, i32> {
        let (g, x4, w4) = self.planar(x, w)?;
        let mut o = g.out_shape4(&x4, &w4)?;
        if x.len() == 3 {
            o.remove(2);
        }
        Ok(o)
    }
    fn out_shape4(&self, x: &[i64], w: &[i64]) -> Result<Vec<i64>, i32> {
        let groups = self.groups;
        let Some(op) = self.transposed else {
            if x[1] != w[1] * groups || w[0] % groups != 0 {
                return Err(inv(format!("channels do not match: input {x:?}, weight {w:?}, groups {groups}")));
            }
            let o = |i: usize| (x[2 + i] + 2 * self.pad[i] - self.dil[i] * (w[2 + i] - 1) - 1) / self.stride[i] + 1;
            let (oh, ow) = (o(0), o(1));
            if oh < 1 || ow < 1 {
                return Err(inv("convolution output would be empty"));
            }
            return Ok(vec![x[0], w[0], oh, ow]);
        };
        // Transposed: weight [Cin, Cout / groups, kh, kw].
        if x[1] != w[0] || w[0] % groups != 0 {
            return Err(inv(format!("channels do not match: input {x:?}, weight {w:?}, groups {groups}")));
        }
        let o = |i: usize| (x[2 + i] - 1) * self.stride[i] - 2 * self.pad[i] + self.dil[i] * (w[2 + i] - 1) + op[i] + 1;
        let (oh, ow) = (o(0), o(1));
        if oh < 1 || ow < 1 {
            return Err(inv("transposed convolution output would be empty"));
        }
        Ok(vec![x[0], w[1] * groups, oh, ow])
    }
    /// Call `f(out_index, in_index, weight_index)` for every multiply-accumulate term of the
    /// convolution of `x` by `w` into `o` (shapes as given to the op, 3-D or 4-D).
    pub fn each(&self, x: &[i64], w: &[i64], o: &[i64], mut f: impl FnMut(usize, usize, usize)) {
        let Ok((g, x4, w4)) = self.planar(x, w) else { return };
        let o4 = if o.len() == 3 { with_unit_height(o) } else { o.to_vec() };
        if g.transposed.is_some() {
            // The direct convolution from the transposed output back to its input has the same
            // terms with the roles of input and output swapped.
            g.each_direct(&o4, &w4, &x4, |oi, ii, wi| f(ii, oi, wi));
        } else {
            g.each_direct(&x4, &w4, &o4, f);
        }
    }
    fn each_direct(&self, x: &[i64], w: &[i64], o: &[i64], mut f: impl FnMut(usize, usize, usize)) {
        let (n, c, h, wd) = (x[0] as usize, x[1] as usize, x[2], x[3]);
        let (oc, icg, kh, kw) = (w[0] as usize, w[1] as usize, w[2] as usize, w[3] as usize);
        let (oh, ow) = (o[2] as usize, o[3] as usize);
        let ocg = oc / self.groups as usize;
        for b in 0..n {
            for co in 0..oc {
                let g = co / ocg;
                for y in 0..oh {
                    for xx in 0..ow {
                        let oi = ((b * oc + co) * oh + y) * ow + xx;
                        for ci in 0..icg {
                            let cin = g * icg + ci;
                            for i in 0..kh {
                                let ih = y as i64 * self.stride[0] - self.pad[0] + i as i64 * self.dil[0];
                                if ih < 0 || ih >= h {
                                    continue;
                                }
                                for j in 0..kw {
                                    let iw = xx as i64 * self.stride[1] - self.pad[1] + j as i64 * self.dil[1];
                                    if iw < 0 || iw >= wd {
                                        continue;
                                    }
                                    let ii = ((b * c + cin) * h as usize + ih as usize) * wd as usize + iw as usize;
                                    let wi = ((co * icg + ci) * kh + i) * kw + j;
                                    f(oi, ii, wi);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

impl PoolGeom {
    pub fn new(k: &[i64], stride: &[i64], pad: &[i64], dil: &[i64], ceil: bool) -> Result<PoolGeom, i32> {
        let k2 = two(k, "kernelSize", None)?;
        let g = PoolGeom {
            k: k2,
            stride: two(stride, "stride", Some(k2))?,
            pad: two(pad, "padding", Some([0, 0]))?,
            dil: two(dil, "dilation", Some([1, 1]))?,
            ceil,
        };
        if g.k.iter().any(|&x| x < 1) || g.stride.iter().any(|&x| x < 1) || g.dil.iter().any(|&x| x < 1) {
            return Err(inv(format!("invalid pooling parameters {g:?}")));
        }
        if g.pad[0] * 2 > g.k[0] || g.pad[1] * 2 > g.k[1] {
            return Err(inv("pad should be at most half of the kernel size"));
        }
        Ok(g)
    }
    /// torch's pooling_output_shape.
    pub(crate) fn out_len(&self, i: usize, len: i64) -> i64 {
        let num =
            len + 2 * self.pad[i] - self.dil[i] * (self.k[i] - 1) - 1 + if self.ceil { self.stride[i] - 1 } else { 0 };
        let mut o = num.div_euclid(self.stride[i]) + 1;
        if self.ceil && (o - 1) * self.stride[i] >= len + self.pad[i] {
            o -= 1;
        }
        o
    }
    fn out_shape(&self, x: &[i64]) -> Result<Vec<i64>, i32> {
        if x.len() != 4 {
            return Err(inv(format!("max_pool2d: 4-D input expected, got {x:?}")));
        }
        let (oh, ow) = (self.out_len(0, x[2]), self.out_len(1, x[3]));
        if oh < 1 || ow < 1 {
            return Err(inv("max_pool2d output would be empty"));
        }
        Ok(vec![x[0], x[1], oh, ow])
    }
    fn mask_shape(&self, o: &[i64]) -> Vec<i64> {
        vec![o[0], o[1], self.k[0] * self.k[1], ((o[2] * o[3] + 15) / 16 + 1) * 32]
    }
    /// For each output element: (flat input index in the plane, kernel position) of the first maximum.
    fn argmax(&self, x: &[f64], xs: &[i64], os: &[i64]) -> Vec<(usize, usize)> {
        let (h, w) = (xs[2], xs[3]);
        let (oh, ow) = (os[2] as usize, os[3] as usize);
        let planes = (xs[0] * xs[1]) as usize;
        let mut r = Vec::with_capacity(planes * oh * ow);
        for p in 0..planes {
            let base = p * (h * w) as usize;
            for y in 0..oh {
                for xx in 0..ow {
                    let mut best: Option<(f64, usize, usize)> = None;
                    for i in 0..self.k[0] {
                        let ih = y as i64 * self.stride[0] - self.pad[0] + i * self.dil[0];
                        if ih < 0 || ih >= h {
                            continue;
                        }
                        for j in 0..self.k[1] {
                            let iw = xx as i64 * self.stride[1] - self.pad[1] + j * self.dil[1];
                            if iw < 0 || iw >= w {
                                continue;
                            }
                            let idx = (ih * w + iw) as usize;
                            let v = x[base + idx];
                            let kpos = (i * self.k[1] + j) as usize;
                            if best.is_none_or(|(b, _, _)| v > b || v.is_nan()) {
                                best = Some((v, idx, kpos));
                            }
                        }
                    }
                    let (_, idx, kpos) = best.unwrap_or((0.0, 0, 0));
                    r.push((idx, kpos));
                }
            }
        }
        r
    }
}

pub(crate) fn inv(msg: impl Into<String>) -> i32 {
    fail(ACLNN_ERR_PARAM_INVALID, msg)
}
pub(crate) fn t(s: &[SV], i: usize) -> Result<&TView, i32> {
    match s.get(i) {
        Some(SV::T(Some(v))) => Ok(v),
        _ => Err(fail(ACLNN_ERR_PARAM_NULLPTR, format!("tensor argument {i} is NULL"))),
    }
}
/// The output slot `i`, or (in-place form, no such slot) the tensor of slot `fallback`.
pub(crate) fn out_or(s: &[SV], i: usize, fallback: usize) -> Result<&TView, i32> {
    if s.len() > i {
        t(s, i)
    } else {
        t(s, fallback)
    }
}
pub(crate) fn opt(s: &[SV], i: usize) -> Option<&TView> {
    match s.get(i) {
        Some(SV::T(Some(v))) => Some(v),
        _ => None,
    }
}
pub(crate) fn l(s: &[SV], i: usize) -> Result<&Vec<TView>, i32> {
    match s.get(i) {
        Some(SV::L(v)) => Ok(v),
        _ => Err(fail(ACLNN_ERR_PARAM_NULLPTR, format!("tensor list argument {i} is NULL"))),
    }
}
/// aclnnStack's `dim` as an index into out's shape (rank `out_rank`: the inputs' rank + 1).
fn stack_dim(d: i64, out_rank: usize) -> Result<usize, i32> {
    let r = out_rank as i64;
    let dd = if d < 0 { d + r } else { d };
    if dd < 0 || dd >= r.max(1) {
        Err(inv(format!("aclnnStack: dim {d} out of range for out rank {out_rank}")))
    } else {
        Ok(dd as usize)
    }
}
pub(crate) fn float(v: &TView, what: &str) -> Result<(), i32> {
    if v.dtype.is_float() {
        Ok(())
    } else {
        Err(inv(format!("{what}: dtype {} is not supported (float32/float16/bfloat16 expected)", v.dtype.name())))
    }
}
pub(crate) fn same_shape(a: &TView, b: &TView, what: &str) -> Result<(), i32> {
    if a.shape == b.shape {
        Ok(())
    } else {
        Err(inv(format!("{what}: shape {:?} differs from {:?}", b.shape, a.shape)))
    }
}

/// Bytes of a dropout bit mask for `numel` elements (128-bit aligned, as aclnnDropoutGenMaskV2).
pub fn dropout_mask_bytes(numel: usize) -> usize {
    numel.div_ceil(128) * 16
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
        FKind::MaxScalar | FKind::MinScalar if x[0][i].is_nan() || s.is_nan() => f64::NAN,
        FKind::MaxScalar => x[0][i].max(s),
        FKind::MinScalar => x[0][i].min(s),
    }
}

impl ExtOp {
    /// Phase 1: validate; returns the workspace size.
    pub fn validate(&self, s: &[SV]) -> Result<u64, i32> {
        match self {
            ExtOp::Nn(n) => n.validate(s),
            ExtOp::ReduceAll { min } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let what = if *min { "aclnnMin" } else { "aclnnMax" };
                if a.numel() == 0 {
                    return Err(inv(format!("{what}: self is empty (no identity for max/min)")));
                }
                if o.numel() != 1 || o.shape.len() > 1 {
                    return Err(inv(format!("{what}: out must be a 0-d (or one-element) tensor, got {:?}", o.shape)));
                }
                if o.dtype != a.dtype {
                    return Err(inv(format!(
                        "{what}: out dtype {} must equal self dtype {}",
                        o.dtype.name(),
                        a.dtype.name()
                    )));
                }
                // Per-core partial results of a multi-core reduction: small and size-independent.
                Ok(REDUCE_WS)
            }
            ExtOp::Aminmax { dims, keep } => {
                let (a, lo, hi) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let what = if dims.is_none() { "aclnnAminmaxAll" } else { "aclnnAminmax" };
                if a.numel() == 0 {
                    return Err(inv(format!("{what}: self is empty (no identity for max/min)")));
                }
                let os = match dims {
                    None => vec![],
                    Some(d) => {
                        let red = red_axes(&a.shape, d)?;
                        a.shape
                            .iter()
                            .zip(&red)
                            .filter_map(|(&d, &r)| if r { keep.then_some(1) } else { Some(d) })
                            .collect::<Vec<i64>>()
                    }
                };
                for (o, name) in [(lo, "minOut"), (hi, "maxOut")] {
                    if !(o.shape == os || (os.is_empty() && o.numel() == 1 && o.shape.len() <= 1)) {
                        return Err(inv(format!("{what}: {name} shape {:?} expected {os:?}", o.shape)));
                    }
                    if o.dtype != a.dtype {
                        return Err(inv(format!(
                            "{what}: {name} dtype {} must equal self dtype {}",
                            o.dtype.name(),
                            a.dtype.name()
                        )));
                    }
                }
                Ok(REDUCE_WS)
            }
            ExtOp::Norm { dims, keep, .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                if !a.dtype.is_float() || !o.dtype.is_float() {
                    return Err(inv(format!(
                        "aclnnNorm: dtype {} -> {} is not supported (float expected)",
                        a.dtype.name(),
                        o.dtype.name()
                    )));
                }
                let red = red_axes(&a.shape, dims)?;
                let os: Vec<i64> = a
                    .shape
                    .iter()
                    .zip(&red)
                    .filter_map(|(&d, &r)| if r { keep.then_some(1) } else { Some(d) })
                    .collect();
                if !(o.shape == os || (os.is_empty() && o.numel() == 1 && o.shape.len() <= 1)) {
                    return Err(inv(format!("aclnnNorm: out shape {:?} expected {:?}", o.shape, os)));
                }
                Ok(REDUCE_WS)
            }
            ExtOp::Stack { dim } => {
                let (ts, o) = (l(s, 0)?, t(s, 1)?);
                let d = stack_dim(*dim, o.shape.len())?;
                let Some(first) = ts.first() else { return Err(inv("aclnnStack: empty tensor list")) };
                if ts.iter().any(|v| v.shape != first.shape) {
                    return Err(inv("aclnnStack: tensors must all have the same shape"));
                }
                let mut os = first.shape.clone();
                if d > os.len() {
                    return Err(inv(format!("aclnnStack: dim {dim} out of range for rank {}", os.len())));
                }
                os.insert(d, ts.len() as i64);
                if o.shape != os {
                    return Err(inv(format!("aclnnStack: out shape {:?} expected {:?}", o.shape, os)));
                }
                Ok(0)
            }
            ExtOp::NanToNum { .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                same_shape(a, o, "out")?;
                if a.dtype != o.dtype {
                    return Err(inv("aclnnNanToNum: out dtype must equal self dtype"));
                }
                Ok(0)
            }
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
            ExtOp::MaxMin { .. } | ExtOp::Logical { .. } | ExtOp::Bitwise { .. } => {
                let (a, b, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                if matches!(self, ExtOp::Bitwise { .. }) {
                    if let Some(f) = [a, b, o].into_iter().find(|v| v.dtype.is_float()) {
                        return Err(inv(format!("bitwise: dtype {} not supported", f.dtype.name())));
                    }
                }
                let bs = crate::kernels::broadcast_shape(&a.shape, &b.shape)
                    .ok_or_else(|| inv(format!("shapes {:?} and {:?} do not broadcast", a.shape, b.shape)))?;
                if o.shape != bs {
                    return Err(inv(format!("out shape {:?} must be {bs:?}", o.shape)));
                }
                Ok(0)
            }
            ExtOp::AnyAll { dims, keep, .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let want = reduced_shape(&a.shape, &red_axes(&a.shape, dims)?, *keep);
                if o.shape != want {
                    return Err(inv(format!("any/all: out shape {:?} must be {want:?}", o.shape)));
                }
                Ok(0)
            }
            ExtOp::IsFinite => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                same_shape(a, o, "out")?;
                Ok(0)
            }
            ExtOp::IndexSelect { dim } => {
                let (a, i, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let d = axis(*dim, a.shape.len())?;
                index_dtype(i)?;
                if i.shape.len() > 1 {
                    return Err(inv(format!("index_select: index must be 1-D, got {:?}", i.shape)));
                }
                let mut want = a.shape.clone();
                if !want.is_empty() {
                    want[d] = i.numel() as i64;
                }
                if o.shape != want {
                    return Err(inv(format!("index_select: out shape {:?} must be {want:?}", o.shape)));
                }
                Ok(0)
            }
            ExtOp::Gather { dim } => {
                let (a, i, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let d = axis(*dim, a.shape.len())?;
                index_dtype(i)?;
                let fits = i.shape.len() == a.shape.len()
                    && i.shape.iter().zip(&a.shape).enumerate().all(|(k, (&n, &m))| k == d || n <= m);
                if !fits || o.shape != i.shape {
                    return Err(inv(format!(
                        "gather: index {:?} must have self's rank and fit {:?} outside dim {d}; out {:?} must be index's shape",
                        i.shape, a.shape, o.shape
                    )));
                }
                Ok(0)
            }
            ExtOp::Where => {
                let o = t(s, 3)?;
                let mut shape = Vec::new();
                for (i, what) in ["condition", "self", "other"].iter().enumerate() {
                    let x = t(s, i)?;
                    shape = crate::kernels::broadcast_shape(&shape, &x.shape)
                        .ok_or_else(|| inv(format!("where: {what} {:?} does not broadcast with {shape:?}", x.shape)))?;
                }
                if o.shape != shape {
                    return Err(inv(format!("where: out shape {:?} must be {shape:?}", o.shape)));
                }
                Ok(0)
            }
            ExtOp::Compare { other, .. } => {
                let a = t(s, 0)?;
                let (shape, o) = match other {
                    Some(_) => (a.shape.clone(), t(s, 1)?),
                    None => {
                        let b = t(s, 1)?;
                        let bs = crate::kernels::broadcast_shape(&a.shape, &b.shape).ok_or_else(|| {
                            inv(format!("compare: shapes {:?} and {:?} do not broadcast", a.shape, b.shape))
                        })?;
                        (bs, t(s, 2)?)
                    }
                };
                if o.shape != shape {
                    return Err(inv(format!("compare: out shape {:?} must be {shape:?}", o.shape)));
                }
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
            ExtOp::PadConstant { before } => {
                let (x, y) = (t(s, 0)?, t(s, 1)?);
                if opt(s, 2).is_some_and(|v| v.numel() != 1)
                    || before.len() != x.shape.len()
                    || y.shape.len() != x.shape.len()
                {
                    return Err(inv("pad: rank or value mismatch"));
                }
                for d in 0..x.shape.len() {
                    if before[d] < 0 || before[d] + x.shape[d] > y.shape[d] {
                        return Err(inv(format!("pad: {:?} padded by {before:?} does not fit {:?}", x.shape, y.shape)));
                    }
                }
                Ok(0)
            }
            ExtOp::FillTensor => {
                if t(s, 1)?.numel() != 1 {
                    return Err(inv("fill value must be a one-element tensor"));
                }
                t(s, 0).map(|_| 0)
            }
            ExtOp::MaskedFill { value } => {
                let (a, m) = (t(s, 0)?, t(s, 1)?);
                if m.dtype != crate::dtype::DType::Bool {
                    return Err(inv(format!("mask dtype {} is not bool", m.dtype.name())));
                }
                bview(m, &a.shape)?;
                if value.is_none() && t(s, 2)?.numel() != 1 {
                    return Err(inv(format!("value must hold one element, got {:?}", t(s, 2)?.shape)));
                }
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
                if scalars.is_empty() {
                    let st = t(s, n + 1)?;
                    if st.numel() != 1 {
                        return Err(inv(format!("foreach: the scalar tensor has {} elements, 1 expected", st.numel())));
                    }
                } else if scalars.len() != 1 && scalars.len() != x0.len() {
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
            ExtOp::DropoutGenMask { numel, p, .. } => {
                let m = t(s, 0)?;
                if !(0.0..=1.0).contains(p) {
                    return Err(inv(format!("dropout probability {p} is not in [0, 1]")));
                }
                if m.dtype != crate::dtype::DType::U8 || m.numel() != dropout_mask_bytes(*numel) {
                    return Err(inv(format!("mask must be uint8[{}]", dropout_mask_bytes(*numel))));
                }
                Ok(0)
            }
            ExtOp::NonFiniteCheckAndUnscale => {
                for g in l(s, 0)? {
                    float(g, "scaledGrads")?;
                }
                if l(s, 0)?.is_empty() {
                    return Err(inv("scaledGrads is empty"));
                }
                for (i, what) in [(1, "foundInf"), (2, "invScale")] {
                    let v = t(s, i)?;
                    if v.dtype != crate::dtype::DType::F32 || v.numel() != 1 {
                        return Err(inv(format!("{what} must be a one-element float32 tensor, got {:?}", v.shape)));
                    }
                }
                Ok(0)
            }
            ExtOp::AmpUpdateScale { .. } => {
                for (i, what) in [
                    (0, "currentScale"),
                    (1, "growthTracker"),
                    (2, "foundInf"),
                    (3, "updatedScaleOut"),
                    (4, "updatedGrowthTrackerOut"),
                ] {
                    if t(s, i)?.numel() != 1 {
                        return Err(inv(format!("{what} must have one element")));
                    }
                }
                if t(s, 1)?.dtype != crate::dtype::DType::I32 || t(s, 4)?.dtype != crate::dtype::DType::I32 {
                    return Err(inv("growthTracker and updatedGrowthTrackerOut must be int32"));
                }
                for (i, what) in [(0, "currentScale"), (2, "foundInf"), (3, "updatedScaleOut")] {
                    if t(s, i)?.dtype != crate::dtype::DType::F32 {
                        return Err(inv(format!("{what} must be float32")));
                    }
                }
                Ok(0)
            }
            ExtOp::DropoutDoMask { p } => {
                let (x, m, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                float(x, "self")?;
                same_shape(x, o, "out")?;
                if !(0.0..=1.0).contains(p) {
                    return Err(inv(format!("dropout probability {p} is not in [0, 1]")));
                }
                if m.dtype != crate::dtype::DType::U8 || m.numel() * 8 < x.numel() {
                    return Err(inv("mask must be uint8 with a bit per element"));
                }
                Ok(0)
            }
            ExtOp::Conv2d(g) => {
                let (x, w, o) = (t(s, 0)?, t(s, 1)?, t(s, 3)?);
                float(x, "input")?;
                let os = g.out_shape(&x.shape, &w.shape)?;
                if o.shape != os {
                    return Err(inv(format!("output shape {:?} differs from {os:?}", o.shape)));
                }
                if let Some(b) = opt(s, 2) {
                    if b.numel() != os[1] as usize {
                        return Err(inv("bias must have one element per output channel"));
                    }
                }
                Ok(0)
            }
            ExtOp::Conv2dBackward { geom, mask } => {
                let (go, x, w) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let os = geom.out_shape(&x.shape, &w.shape)?;
                if go.shape != os {
                    return Err(inv(format!("gradOutput shape {:?} differs from {os:?}", go.shape)));
                }
                for (k, (slot, shape)) in [(3, &x.shape), (4, &w.shape)].into_iter().enumerate() {
                    if mask[k] {
                        let v = t(s, slot)?;
                        if &v.shape != shape {
                            return Err(inv(format!("gradient {k} has shape {:?}, {shape:?} expected", v.shape)));
                        }
                    }
                }
                if mask[2] && t(s, 5)?.numel() != os[1] as usize {
                    return Err(inv("gradBias must have one element per output channel"));
                }
                Ok(0)
            }
            ExtOp::BatchNorm { training, .. } => {
                let (x, o) = (t(s, 0)?, t(s, 5)?);
                float(x, "input")?;
                if x.shape.len() < 2 {
                    return Err(inv("batch norm input must be at least 2-D"));
                }
                same_shape(x, o, "output")?;
                let c = x.shape[1] as usize;
                for i in [1, 2, 3, 4, 6, 7] {
                    if let Some(v) = opt(s, i) {
                        if v.numel() != c {
                            return Err(inv(format!(
                                "per-channel tensor {i} has {} elements, {c} expected",
                                v.numel()
                            )));
                        }
                    }
                }
                if !training && (opt(s, 3).is_none() || opt(s, 4).is_none()) {
                    return Err(inv("inference batch norm needs runningMean and runningVar"));
                }
                Ok(0)
            }
            ExtOp::BatchNormBackward { training, mask, .. } => {
                let (g, x) = (t(s, 0)?, t(s, 1)?);
                same_shape(x, g, "gradOut")?;
                if mask.len() != 3 {
                    return Err(inv("outputMask must have 3 elements"));
                }
                if *training && (opt(s, 5).is_none() || opt(s, 6).is_none()) {
                    return Err(inv("training batch norm backward needs saveMean and saveInvstd"));
                }
                if !*training && (opt(s, 3).is_none() || opt(s, 4).is_none()) {
                    return Err(inv("inference batch norm backward needs runningMean and runningVar"));
                }
                if mask[0] {
                    same_shape(x, t(s, 7)?, "gradInput")?;
                }
                Ok(0)
            }
            ExtOp::MaxPool2d { geom, mask } => {
                let (x, o, ix) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                float(x, "self")?;
                let os = geom.out_shape(&x.shape)?;
                if o.shape != os {
                    return Err(inv(format!("out shape {:?} differs from {os:?}", o.shape)));
                }
                let (want, dt) = if *mask {
                    (geom.mask_shape(&os), crate::dtype::DType::I8)
                } else {
                    (os.clone(), crate::dtype::DType::I32)
                };
                if ix.shape != want || ix.dtype != dt {
                    return Err(inv(format!("indices must be {} {want:?}", dt.name())));
                }
                Ok(0)
            }
            ExtOp::MaxPool2dBackward { geom, .. } => {
                let (g, x, gi) = (t(s, 0)?, t(s, 1)?, t(s, 3)?);
                let os = geom.out_shape(&x.shape)?;
                if g.shape != os {
                    return Err(inv(format!("gradOutput shape {:?} differs from {os:?}", g.shape)));
                }
                same_shape(x, gi, "gradInput")?;
                Ok(0)
            }
        }
    }

    /// Phase 2 (stream worker).
    pub fn exec(&self, s: &[SV]) -> Result<(), i32> {
        match self {
            ExtOp::Nn(n) => n.exec(s),
            ExtOp::ReduceAll { min } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                if crate::tensor::int_move(o, &[a]) && a.numel() > 0 {
                    let x = a.read_i64()?;
                    let r = if *min { x.iter().min() } else { x.iter().max() };
                    return o.write_i64(&[*r.unwrap_or(&0)]);
                }
                let x = a.read_f64()?;
                let r = if x.iter().any(|v| v.is_nan()) {
                    f64::NAN
                } else if *min {
                    x.iter().copied().fold(f64::INFINITY, f64::min)
                } else {
                    x.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                };
                // Integers keep their exact value (read_f64 is exact up to 2^53).
                o.write_f64(&[r])
            }
            ExtOp::Aminmax { dims, .. } => {
                let (a, lo, hi) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let x = a.read_f64()?;
                let red = red_axes(&a.shape, dims.as_deref().unwrap_or(&[]))?;
                let strides = crate::tensor::contiguous_strides(&a.shape);
                let out_shape: Vec<i64> = a.shape.iter().zip(&red).map(|(&d, &r)| if r { 1 } else { d }).collect();
                let ostr = crate::tensor::contiguous_strides(&out_shape);
                let m = numel(&out_shape);
                let (mut mn, mut mx) = (vec![f64::INFINITY; m], vec![f64::NEG_INFINITY; m]);
                for (k, &v) in x.iter().enumerate() {
                    let mut oi = 0i64;
                    for d in 0..a.shape.len() {
                        if !red[d] {
                            oi += (k as i64 / strides[d] % a.shape[d]) * ostr[d];
                        }
                    }
                    let i = oi as usize;
                    if v.is_nan() || mn[i].is_nan() {
                        (mn[i], mx[i]) = (f64::NAN, f64::NAN);
                    } else {
                        (mn[i], mx[i]) = (mn[i].min(v), mx[i].max(v));
                    }
                }
                lo.write_f64(&mn)?;
                hi.write_f64(&mx)
            }
            ExtOp::Norm { p, dims, .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let x = a.read_f64()?;
                let red = red_axes(&a.shape, dims)?;
                let strides = crate::tensor::contiguous_strides(&a.shape);
                let out_shape: Vec<i64> = a.shape.iter().zip(&red).map(|(&d, &r)| if r { 1 } else { d }).collect();
                let ostr = crate::tensor::contiguous_strides(&out_shape);
                let mut acc = vec![0f64; numel(&out_shape)];
                for (k, &v) in x.iter().enumerate() {
                    let mut oi = 0i64;
                    for d in 0..a.shape.len() {
                        if !red[d] {
                            oi += (k as i64 / strides[d] % a.shape[d]) * ostr[d];
                        }
                    }
                    let m = v.abs();
                    let e = &mut acc[oi as usize];
                    if *p == 0.0 {
                        *e += (v != 0.0) as u8 as f64;
                    } else if p.is_infinite() {
                        *e = if m.is_nan() || e.is_nan() { f64::NAN } else { e.max(m) };
                    } else {
                        *e += m.powf(*p);
                    }
                }
                let r: Vec<f64> = acc
                    .into_iter()
                    .map(|e| {
                        if *p == 0.0 || p.is_infinite() {
                            e
                        } else if *p == 2.0 {
                            e.sqrt()
                        } else {
                            e.powf(1.0 / p)
                        }
                    })
                    .collect();
                o.write_f64(&r)
            }
            ExtOp::Stack { dim } => {
                let (ts, o) = (l(s, 0)?, t(s, 1)?);
                let d = stack_dim(*dim, o.shape.len())?;
                // out = [outer, count, inner]: each input is one [outer, 1, inner] block.
                let outer: i64 = o.shape[..d].iter().product();
                let inner: i64 = o.shape[d + 1..].iter().product();
                let (outer, inner) = (outer as usize, inner as usize);
                let mut at = Vec::with_capacity(o.numel());
                for a in 0..outer {
                    for p in 0..ts.len() {
                        at.extend((a * inner..(a + 1) * inner).map(|e| (p, e)));
                    }
                }
                crate::tensor::move_elems(&ts.iter().collect::<Vec<_>>(), o, &at)
            }
            ExtOp::NanToNum { nan, posinf, neginf } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let y: Vec<f64> = a
                    .read_f64()?
                    .into_iter()
                    .map(|v| {
                        if v.is_nan() {
                            *nan as f64
                        } else if v == f64::INFINITY {
                            *posinf as f64
                        } else if v == f64::NEG_INFINITY {
                            *neginf as f64
                        } else {
                            v
                        }
                    })
                    .collect();
                o.write_f64(&y)
            }
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
            ExtOp::MaxMin { min } => {
                let o = t(s, 2)?;
                let (av, bv) = (bview(t(s, 0)?, &o.shape)?, bview(t(s, 1)?, &o.shape)?);
                if crate::tensor::int_move(o, &[&av, &bv]) {
                    let (a, b) = (av.read_i64()?, bv.read_i64()?);
                    let r = a.iter().zip(&b).map(|(&x, &y)| if *min { x.min(y) } else { x.max(y) });
                    return o.write_i64(&r.collect::<Vec<_>>());
                }
                let a = av.read_f64()?;
                let b = bv.read_f64()?;
                let f = |x: f64, y: f64| {
                    if x.is_nan() || y.is_nan() {
                        f64::NAN
                    } else if *min {
                        x.min(y)
                    } else {
                        x.max(y)
                    }
                };
                o.write_f64(&a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect::<Vec<_>>())
            }
            ExtOp::Logical { op } => {
                let o = t(s, 2)?;
                let a = bview(t(s, 0)?, &o.shape)?.read_f64()?;
                let b = bview(t(s, 1)?, &o.shape)?.read_f64()?;
                let f = |x: f64, y: f64| match op {
                    b'|' => x != 0.0 || y != 0.0,
                    b'^' => (x != 0.0) != (y != 0.0),
                    _ => x != 0.0 && y != 0.0,
                };
                o.write_f64(&a.iter().zip(&b).map(|(&x, &y)| if f(x, y) { 1.0 } else { 0.0 }).collect::<Vec<_>>())
            }
            ExtOp::Bitwise { op } => {
                let o = t(s, 2)?;
                let a = bview(t(s, 0)?, &o.shape)?.read_i64()?;
                let b = bview(t(s, 1)?, &o.shape)?.read_i64()?;
                let f = |x: i64, y: i64| match op {
                    b'&' => x & y,
                    b'|' => x | y,
                    _ => x ^ y,
                };
                // bool is stored as 0/1, so the bitwise result is the logical one
                o.write_f64(&a.iter().zip(&b).map(|(&x, &y)| f(x, y) as f64).collect::<Vec<_>>())
            }
            ExtOp::AnyAll { all, dims, .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let x = a.read_f64()?;
                let red = red_axes(&a.shape, dims)?;
                let slots = reduced_slots(&a.shape, &red);
                let mut acc = vec![*all; numel(&reduced_shape(&a.shape, &red, true))];
                for (&v, &i) in x.iter().zip(&slots) {
                    acc[i] = if *all { acc[i] && v != 0.0 } else { acc[i] || v != 0.0 };
                }
                o.write_f64(&acc.iter().map(|&b| if b { 1.0 } else { 0.0 }).collect::<Vec<_>>())
            }
            ExtOp::IsFinite => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let x = a.read_f64()?;
                o.write_f64(&x.iter().map(|v| if v.is_finite() { 1.0 } else { 0.0 }).collect::<Vec<_>>())
            }
            ExtOp::IndexSelect { dim } => {
                let (a, i, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let idx = i.read_i64()?;
                if a.shape.is_empty() {
                    return crate::tensor::move_elems(&[a], o, &[(0, 0)]);
                }
                let d = axis(*dim, a.shape.len())?;
                let n = a.shape[d];
                if let Some(bad) = idx.iter().find(|&&k| k < 0 || k >= n) {
                    return Err(inv(format!("index_select: index {bad} out of range for dim {d} of size {n}")));
                }
                let outer: usize = a.shape[..d].iter().map(|&v| v as usize).product();
                let inner: usize = a.shape[d + 1..].iter().map(|&v| v as usize).product();
                let mut at = Vec::with_capacity(outer * idx.len() * inner);
                for p in 0..outer {
                    for &k in &idx {
                        let base = (p * n as usize + k as usize) * inner;
                        at.extend((base..base + inner).map(|e| (0, e)));
                    }
                }
                crate::tensor::move_elems(&[a], o, &at)
            }
            ExtOp::Gather { dim } => {
                let (a, i, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let idx = i.read_i64()?;
                let d = axis(*dim, a.shape.len())?;
                if a.shape.is_empty() {
                    return crate::tensor::move_elems(&[a], o, &[(0, 0)]);
                }
                let astr = crate::tensor::contiguous_strides(&a.shape);
                let istr = crate::tensor::contiguous_strides(&i.shape);
                let mut y = Vec::with_capacity(idx.len());
                for (k, &j) in idx.iter().enumerate() {
                    if j < 0 || j >= a.shape[d] {
                        return Err(inv(format!("gather: index {j} out of range for dim {d} of size {}", a.shape[d])));
                    }
                    let mut off = 0i64;
                    for q in 0..i.shape.len() {
                        let c = if q == d { j } else { k as i64 / istr[q] % i.shape[q] };
                        off += c * astr[q];
                    }
                    y.push((0, off as usize));
                }
                crate::tensor::move_elems(&[a], o, &y)
            }
            ExtOp::Where => {
                let o = t(s, 3)?;
                let c = bview(t(s, 0)?, &o.shape)?.read_f64()?;
                let (av, bv) = (bview(t(s, 1)?, &o.shape)?, bview(t(s, 2)?, &o.shape)?);
                if crate::tensor::int_move(o, &[&av, &bv]) {
                    let (a, b) = (av.read_i64()?, bv.read_i64()?);
                    let r: Vec<i64> =
                        c.iter().zip(a.iter().zip(&b)).map(|(&c, (&a, &b))| if c != 0.0 { a } else { b }).collect();
                    return o.write_i64(&r);
                }
                let (a, b) = (av.read_f64()?, bv.read_f64()?);
                o.write_f64(
                    &c.iter()
                        .zip(a.iter().zip(&b))
                        .map(|(&c, (&a, &b))| if c != 0.0 { a } else { b })
                        .collect::<Vec<_>>(),
                )
            }
            ExtOp::Compare { cmp, other } => {
                let bit = |v: bool| if v { 1.0 } else { 0.0 };
                let y: Vec<f64> = match other {
                    Some(b) => {
                        let a = t(s, 0)?;
                        // A float self compares with the scalar converted to its dtype (torch and
                        // CANN: `x == 0.1` on float32 is true where x holds 0.1f); an integer self
                        // with the exact value (promoted, so `i > 0.5` stays exact).
                        let b = if a.dtype.is_float() {
                            let mut buf = [0u8; 8];
                            a.dtype.put(&mut buf, *b);
                            a.dtype.get(&buf)
                        } else {
                            *b
                        };
                        if crate::tensor::int_move(a, &[a]) {
                            // exact: an integral scalar as i64 (phase 1 refused one f64 cannot hold);
                            // a fractional one is below 2^52, where rounding x cannot cross it
                            let x = a.read_i64()?;
                            if b.fract() == 0.0 && b.abs() <= 2f64.powi(63) {
                                x.iter().map(|&x| bit(cmp.apply(x, b as i64))).collect()
                            } else {
                                x.iter().map(|&x| bit(cmp.apply(x as f64, b))).collect()
                            }
                        } else {
                            a.read_f64()?.iter().map(|&x| bit(cmp.apply(x, b))).collect()
                        }
                    }
                    None => {
                        let o = t(s, 2)?;
                        let (av, bv) = (bview(t(s, 0)?, &o.shape)?, bview(t(s, 1)?, &o.shape)?);
                        let int_like = |d: crate::dtype::DType| d.is_int() || d == crate::dtype::DType::Bool;
                        if int_like(av.dtype) && int_like(bv.dtype) {
                            let (a, b) = (av.read_i64()?, bv.read_i64()?);
                            a.iter().zip(&b).map(|(&x, &y)| bit(cmp.apply(x, y))).collect()
                        } else {
                            let a = av.read_f64()?;
                            let b = bv.read_f64()?;
                            a.iter().zip(&b).map(|(&x, &y)| bit(cmp.apply(x, y))).collect()
                        }
                    }
                };
                t(s, if other.is_some() { 1 } else { 2 })?.write_f64(&y)
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
            ExtOp::PadConstant { before } => {
                let (x, y) = (t(s, 0)?, t(s, 1)?);
                let v = match opt(s, 2) {
                    Some(v) => v.read_f64()?[0],
                    None => 0.0,
                };
                let xv = x.read_f64()?;
                let mut out = vec![v; y.numel()];
                let ys = crate::tensor::contiguous_strides(&y.shape);
                let mut idx = vec![0i64; x.shape.len()];
                for &val in &xv {
                    let o: i64 = (0..idx.len()).map(|d| (idx[d] + before[d]) * ys[d]).sum();
                    out[o as usize] = val;
                    for d in (0..idx.len()).rev() {
                        idx[d] += 1;
                        if idx[d] < x.shape[d] {
                            break;
                        }
                        idx[d] = 0;
                    }
                }
                y.write_f64(&out)
            }
            ExtOp::FillTensor => {
                let (a, v) = (t(s, 0)?, t(s, 1)?.read_f64()?[0]);
                a.write_f64(&vec![v; a.numel()])
            }
            ExtOp::MaskedFill { value } => {
                let a = t(s, 0)?;
                let value = match value {
                    Some(v) => *v,
                    None => t(s, 2)?.read_f64()?[0], // a one-element device tensor, read when the kernel runs
                };
                let m = bview(t(s, 1)?, &a.shape)?.read_f64()?;
                let x = a.read_f64()?;
                a.write_f64(&x.iter().zip(&m).map(|(&v, &k)| if k != 0.0 { value } else { v }).collect::<Vec<_>>())
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
                let from_tensor = if scalars.is_empty() { t(s, n + 1)?.read_f64()? } else { Vec::new() };
                let scalars = if scalars.is_empty() { &from_tensor } else { scalars };
                for (ti, o) in out.iter().enumerate() {
                    let xs: Vec<Vec<f64>> =
                        (0..n).map(|li| l(s, li).and_then(|x| x[ti].read_f64())).collect::<Result<_, _>>()?;
                    let sc = if scalars.len() == 1 { scalars[0] } else { scalars[ti] };
                    let y: Vec<f64> = (0..numel(&o.shape)).map(|i| foreach_one(*kind, sc, &xs, i)).collect();
                    o.write_f64(&y)?;
                }
                Ok(())
            }
            ExtOp::DropoutGenMask { numel, p, seed, offset } => {
                let m = t(s, 0)?;
                let mut bytes = vec![0f64; m.numel()];
                for i in 0..*numel {
                    if crate::rng::uniform(*seed, *offset, i) >= *p {
                        let b = bytes[i / 8] as u8 | (1u8 << (i % 8));
                        bytes[i / 8] = b as f64;
                    }
                }
                m.write_f64(&bytes)
            }
            ExtOp::NonFiniteCheckAndUnscale => {
                // in float32 (as torch), then rounded to each gradient's dtype
                let inv_scale = t(s, 2)?.read_f32()?[0];
                let mut found = false;
                for g in l(s, 0)? {
                    let v = g.read_f32()?;
                    found |= v.iter().any(|x| !x.is_finite());
                    g.write_f32(&v.iter().map(|x| x * inv_scale).collect::<Vec<_>>())?;
                }
                if found {
                    t(s, 1)?.write_f64(&[1.0])?;
                }
                Ok(())
            }
            ExtOp::AmpUpdateScale { growth, backoff, interval } => {
                let (scale, tracker, found) =
                    (t(s, 0)?.read_f64()?[0], t(s, 1)?.read_i64()?[0], t(s, 2)?.read_f64()?[0]);
                // torch multiplies the float scale by the double factor and rounds once to float (so the growth
                // is checked for overflow in float32: a product finite in f64 may not be)
                let (scale, tracker) = if found != 0.0 {
                    (f64::from((scale * backoff) as f32), 0)
                } else if tracker + 1 == *interval {
                    let grown = (scale * growth) as f32;
                    (if grown.is_finite() { f64::from(grown) } else { scale }, 0)
                } else {
                    (scale, tracker + 1)
                };
                t(s, 3)?.write_f64(&[scale])?;
                t(s, 4)?.write_i64(&[tracker])
            }
            ExtOp::DropoutDoMask { p } => {
                let (x, m, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let (xv, mv) = (x.read_f64()?, m.read_f64()?);
                let scale = if *p < 1.0 { 1.0 / (1.0 - p) } else { 0.0 };
                let y: Vec<f64> = xv
                    .iter()
                    .enumerate()
                    .map(|(i, v)| if (mv[i / 8] as u8) & (1u8 << (i % 8)) != 0 { v * scale } else { 0.0 })
                    .collect();
                o.write_f64(&y)
            }
            ExtOp::Conv2d(g) => {
                let (x, w, o) = (t(s, 0)?, t(s, 1)?, t(s, 3)?);
                let (xv, wv) = (x.read_f64()?, w.read_f64()?);
                let mut y = vec![0f64; o.numel()];
                g.each(&x.shape, &w.shape, &o.shape, |oi, ii, wi| y[oi] += xv[ii] * wv[wi]);
                if let Some(b) = opt(s, 2) {
                    let bv = b.read_f64()?;
                    let hw = numel(&o.shape[2..]);
                    let oc = o.shape[1] as usize;
                    for (i, v) in y.iter_mut().enumerate() {
                        *v += bv[(i / hw) % oc];
                    }
                }
                o.write_f64(&y)
            }
            ExtOp::Conv2dBackward { geom, mask } => {
                let (go, x, w) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let (gv, xv, wv) = (go.read_f64()?, x.read_f64()?, w.read_f64()?);
                let mut gx = vec![0f64; if mask[0] { xv.len() } else { 0 }];
                let mut gw = vec![0f64; if mask[1] { wv.len() } else { 0 }];
                geom.each(&x.shape, &w.shape, &go.shape, |oi, ii, wi| {
                    if mask[0] {
                        gx[ii] += gv[oi] * wv[wi];
                    }
                    if mask[1] {
                        gw[wi] += gv[oi] * xv[ii];
                    }
                });
                if mask[0] {
                    t(s, 3)?.write_f64(&gx)?;
                }
                if mask[1] {
                    t(s, 4)?.write_f64(&gw)?;
                }
                if mask[2] {
                    let (oc, hw) = (go.shape[1] as usize, numel(&go.shape[2..]));
                    let mut gb = vec![0f64; oc];
                    for (i, v) in gv.iter().enumerate() {
                        gb[(i / hw) % oc] += v;
                    }
                    t(s, 5)?.write_f64(&gb)?;
                }
                Ok(())
            }
            ExtOp::BatchNorm { training, momentum, eps } => {
                let x = t(s, 0)?;
                let xv = x.read_f64()?;
                let (c, inner) = (x.shape[1] as usize, numel(&x.shape[2..]));
                let n = xv.len() / c.max(1);
                let ch = |i: usize| (i / inner) % c;
                let per = |i: usize, d: f64| -> Result<Vec<f64>, i32> {
                    Ok(match opt(s, i) {
                        Some(v) => v.read_f64()?,
                        None => vec![d; c],
                    })
                };
                let (w, b) = (per(1, 1.0)?, per(2, 0.0)?);
                let (mean, var) = if *training {
                    let mut m = vec![0f64; c];
                    for (i, v) in xv.iter().enumerate() {
                        m[ch(i)] += v;
                    }
                    m.iter_mut().for_each(|v| *v /= n as f64);
                    let mut q = vec![0f64; c];
                    for (i, v) in xv.iter().enumerate() {
                        q[ch(i)] += (v - m[ch(i)]).powi(2);
                    }
                    q.iter_mut().for_each(|v| *v /= n as f64);
                    (m, q)
                } else {
                    (t(s, 3)?.read_f64()?, t(s, 4)?.read_f64()?)
                };
                let invstd: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
                let y: Vec<f64> = xv
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (v - mean[ch(i)]) * invstd[ch(i)] * w[ch(i)] + b[ch(i)])
                    .collect();
                t(s, 5)?.write_f64(&y)?;
                if *training {
                    if let (Some(rm), Some(rv)) = (opt(s, 3), opt(s, 4)) {
                        let (rmv, rvv) = (rm.read_f64()?, rv.read_f64()?);
                        let unb = if n > 1 { n as f64 / (n as f64 - 1.0) } else { 1.0 };
                        rm.write_f64(
                            &(0..c).map(|k| (1.0 - momentum) * rmv[k] + momentum * mean[k]).collect::<Vec<_>>(),
                        )?;
                        rv.write_f64(
                            &(0..c).map(|k| (1.0 - momentum) * rvv[k] + momentum * var[k] * unb).collect::<Vec<_>>(),
                        )?;
                    }
                    if let Some(sm) = opt(s, 6) {
                        sm.write_f64(&mean)?;
                    }
                    if let Some(si) = opt(s, 7) {
                        si.write_f64(&invstd)?;
                    }
                }
                Ok(())
            }
            ExtOp::BatchNormBackward { training, eps, mask } => {
                let (g, x) = (t(s, 0)?, t(s, 1)?);
                let (gv, xv) = (g.read_f64()?, x.read_f64()?);
                let (c, inner) = (x.shape[1] as usize, numel(&x.shape[2..]));
                let n = xv.len() / c.max(1);
                let ch = |i: usize| (i / inner) % c;
                let w = match opt(s, 2) {
                    Some(v) => v.read_f64()?,
                    None => vec![1.0; c],
                };
                let (mean, invstd) = if *training {
                    (t(s, 5)?.read_f64()?, t(s, 6)?.read_f64()?)
                } else {
                    let rv = t(s, 4)?.read_f64()?;
                    (t(s, 3)?.read_f64()?, rv.iter().map(|v| 1.0 / (v + eps).sqrt()).collect())
                };
                let mut sg = vec![0f64; c];
                let mut sgx = vec![0f64; c];
                for i in 0..xv.len() {
                    let k = ch(i);
                    sg[k] += gv[i];
                    sgx[k] += gv[i] * (xv[i] - mean[k]) * invstd[k];
                }
                if mask[0] {
                    let gi: Vec<f64> = (0..xv.len())
                        .map(|i| {
                            let k = ch(i);
                            if *training {
                                let xh = (xv[i] - mean[k]) * invstd[k];
                                w[k] * invstd[k] * (gv[i] - sg[k] / n as f64 - xh * sgx[k] / n as f64)
                            } else {
                                w[k] * invstd[k] * gv[i]
                            }
                        })
                        .collect();
                    t(s, 7)?.write_f64(&gi)?;
                }
                if mask[1] {
                    if let Some(v) = opt(s, 8) {
                        v.write_f64(&sgx)?;
                    }
                }
                if mask[2] {
                    if let Some(v) = opt(s, 9) {
                        v.write_f64(&sg)?;
                    }
                }
                Ok(())
            }
            ExtOp::MaxPool2d { geom, mask } => {
                let (x, o, ix) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let xv = x.read_f64()?;
                let am = geom.argmax(&xv, &x.shape, &o.shape);
                let hw = (x.shape[2] * x.shape[3]) as usize;
                let ohw = (o.shape[2] * o.shape[3]) as usize;
                o.write_f64(&am.iter().enumerate().map(|(i, (idx, _))| xv[(i / ohw) * hw + idx]).collect::<Vec<_>>())?;
                if *mask {
                    let ms = geom.mask_shape(&o.shape);
                    let (kk, row) = (ms[2] as usize, ms[3] as usize);
                    let mut m = vec![0f64; ix.numel()];
                    for (i, (_, kpos)) in am.iter().enumerate() {
                        let (plane, p) = (i / ohw, i % ohw);
                        let byte = (plane * kk + kpos) * row + p / 8;
                        let bits = m[byte] as i64 as u8 | (1u8 << (p % 8));
                        m[byte] = bits as i8 as f64;
                    }
                    ix.write_f64(&m)
                } else {
                    ix.write_f64(&am.iter().map(|(idx, _)| *idx as f64).collect::<Vec<_>>())
                }
            }
            ExtOp::MaxPool2dBackward { geom, mask } => {
                let (g, x, ix, gi) = (t(s, 0)?, t(s, 1)?, t(s, 2)?, t(s, 3)?);
                let gv = g.read_f64()?;
                let (h, w) = (x.shape[2], x.shape[3]);
                let hw = (h * w) as usize;
                let (oh, ow) = (g.shape[2] as usize, g.shape[3] as usize);
                let ohw = oh * ow;
                let mut out = vec![0f64; x.numel()];
                if *mask {
                    let iv = ix.read_f64()?;
                    let ms = geom.mask_shape(&g.shape);
                    let (kk, row) = (ms[2] as usize, ms[3] as usize);
                    for (i, gval) in gv.iter().enumerate() {
                        let (plane, p) = (i / ohw, i % ohw);
                        let (y, xx) = ((p / ow) as i64, (p % ow) as i64);
                        for kpos in 0..kk {
                            let byte = iv[(plane * kk + kpos) * row + p / 8] as i64 as u8;
                            if byte & (1u8 << (p % 8)) != 0 {
                                let (ki, kj) = ((kpos as i64) / geom.k[1], (kpos as i64) % geom.k[1]);
                                let ih = y * geom.stride[0] - geom.pad[0] + ki * geom.dil[0];
                                let iw = xx * geom.stride[1] - geom.pad[1] + kj * geom.dil[1];
                                if (0..h).contains(&ih) && (0..w).contains(&iw) {
                                    out[plane * hw + (ih * w + iw) as usize] += gval;
                                }
                            }
                        }
                    }
                } else {
                    let iv = ix.read_i64()?;
                    for (i, gval) in gv.iter().enumerate() {
                        let idx = iv[i];
                        if idx < 0 || idx as usize >= hw {
                            return Err(inv(format!("max_pool2d index {idx} out of range")));
                        }
                        out[(i / ohw) * hw + idx as usize] += gval;
                    }
                }
                gi.write_f64(&out)
            }
        }
    }
}

/// Workspace of the all-reduce kernels (aclnnMax/Min/Norm): one 32-byte partial per AI core
/// (a 910B has up to 48 vector-capable cores), rounded to the 512-byte allocation granule.
const REDUCE_WS: u64 = 2048;

/// The shape of a reduction over the axes marked in `red` (kept as 1 with `keep`).
pub(crate) fn reduced_shape(shape: &[i64], red: &[bool], keep: bool) -> Vec<i64> {
    shape
        .iter()
        .zip(red)
        .filter_map(|(&d, &r)| {
            if !r {
                Some(d)
            } else if keep {
                Some(1)
            } else {
                None
            }
        })
        .collect()
}

/// For each element of a contiguous `shape` (in order), its slot in the reduction over `red`.
pub(crate) fn reduced_slots(shape: &[i64], red: &[bool]) -> Vec<usize> {
    let strides = crate::tensor::contiguous_strides(shape);
    let ostr = crate::tensor::contiguous_strides(&reduced_shape(shape, red, true));
    (0..numel(shape) as i64)
        .map(|k| {
            (0..shape.len()).filter(|&d| !red[d]).map(|d| (k / strides[d] % shape[d]) * ostr[d]).sum::<i64>() as usize
        })
        .collect()
}

/// A dimension argument in `-rank .. rank` (0-d tensors accept 0 and -1).
pub(crate) fn axis(dim: i64, rank: usize) -> Result<usize, i32> {
    let r = rank.max(1) as i64;
    let k = if dim < 0 { dim + r } else { dim };
    if k < 0 || k >= r {
        return Err(inv(format!("dim {dim} out of range for rank {rank}")));
    }
    Ok(k as usize)
}

/// Index tensors are int32 or int64.
pub(crate) fn index_dtype(i: &TView) -> Result<(), i32> {
    use crate::dtype::DType;
    if matches!(i.dtype, DType::I32 | DType::I64) {
        Ok(())
    } else {
        Err(inv(format!("index dtype {} must be int32 or int64", i.dtype.name())))
    }
}

/// Reduced axes of `shape` for a dim list (empty = all), negative dims counted from the end.
pub(crate) fn red_axes(shape: &[i64], dims: &[i64]) -> Result<Vec<bool>, i32> {
    let mut red = vec![dims.is_empty(); shape.len()];
    for &d in dims {
        let r = shape.len() as i64;
        let k = if d < 0 { d + r } else { d };
        if k < 0 || k >= r.max(1) {
            return Err(inv(format!("dim {d} out of range for rank {r}")));
        }
        if (k as usize) < red.len() {
            red[k as usize] = true;
        }
    }
    Ok(red)
}
