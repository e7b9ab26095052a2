//! aclnn operators: argument validation (phase 1) and execution (on the stream worker).
use crate::consts::*;
use crate::dtype::DType;
use crate::errmsg::fail;
use crate::kernels as k;
pub use crate::tensor::{bview, SV};
use crate::tensor::{int_move, numel, TView};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    /// aclnnPowTensorTensor: self ** exponent
    Pow,
    /// aclnnRemainder*: the remainder with the sign of other (Python's %, torch.remainder)
    Rem,
    /// aclnnFmod*: the remainder with the sign of self (C fmod, torch.fmod)
    Fmod,
    /// aclnnFloorDivide* and aclnnDivMod* mode 2: the quotient rounded down (torch.floor_divide, `//`,
    /// `div(rounding_mode="floor")`), by torch's formula (exact for floats: from fmod, not floor(a / b))
    FloorDiv,
    /// aclnnDivMod* mode 1: the quotient rounded toward zero (`div(rounding_mode="trunc")`)
    TruncDiv,
    /// aclnnAtan2: the angle of (other, self), in (-pi, pi], signs of zeros honoured (C atan2)
    Atan2,
}

impl Bin {
    /// The rounding divisions, computed by [`rounding_div`] (exact integers, float32 for the narrow floats).
    fn rounds(self) -> bool {
        matches!(self, Bin::FloorDiv | Bin::TruncDiv)
    }
    /// The operator on integers, exactly as torch's integer kernels (wrapping), where it has one; `None`
    /// leaves the f64 path (true division gives a float tensor).
    fn apply_int(self, a: i64, b: i64, alpha: i64) -> Option<i64> {
        match self {
            Bin::Add => Some(a.wrapping_add(alpha.wrapping_mul(b))),
            Bin::Sub => Some(a.wrapping_sub(alpha.wrapping_mul(b))),
            Bin::Mul => Some(a.wrapping_mul(b)),
            // by zero: 0 (torch's CPU kernel raises; the f64 path's NaN converted to 0 before)
            Bin::Fmod | Bin::Rem if b == 0 => Some(0),
            Bin::Fmod => Some(a.wrapping_rem(b)),
            Bin::Rem => {
                let r = a.wrapping_rem(b);
                Some(if r != 0 && (r < 0) != (b < 0) { r + b } else { r })
            }
            _ => None,
        }
    }
    fn apply(self, a: f64, b: f64, alpha: f64) -> f64 {
        match self {
            Bin::Add => a + alpha * b,
            Bin::Sub => a - alpha * b,
            Bin::Mul => a * b,
            Bin::Div => a / b,
            Bin::Pow => a.powf(b),
            Bin::Fmod => a % b,
            Bin::TruncDiv => (a / b).trunc(),
            Bin::Atan2 => a.atan2(b),
            Bin::FloorDiv => floor_div64(a, b),
            Bin::Rem => {
                let r = a % b;
                if r != 0.0 && (r < 0.0) != (b < 0.0) {
                    r + b
                } else {
                    r
                }
            }
        }
    }
}

/// An integer result of an integer operation computed exactly in i64 (the f64 path rounds beyond 2^53):
/// `Some` when the output and both operands are integers, `alpha` is integral and the operator has an
/// integer form. `b` is the other tensor (viewed at `o`'s shape) or the (integral) scalar.
fn int_binary(op: Bin, o: &TView, a: &TView, b: Result<&TView, f64>, alpha: f64) -> Result<Option<()>, i32> {
    // bool operands are integers 0 / 1 here (int64 + bool is int64 in torch)
    let int_like = |d: DType| d.is_int() || d == DType::Bool;
    // up to 2^63: i64::MAX arrives as 2^63 and converts back to itself (`as` saturates)
    let int_scalar = |v: f64| v.fract() == 0.0 && v.abs() <= 2f64.powi(63);
    let b_int = match b {
        Ok(v) => int_like(v.dtype),
        Err(v) => int_scalar(v),
    };
    if !(o.dtype.is_int() && int_like(a.dtype) && b_int && int_scalar(alpha)) || op.apply_int(0, 1, 1).is_none() {
        return Ok(None);
    }
    let x = a.read_i64()?;
    let y = match b {
        Ok(v) => v.read_i64()?,
        Err(v) => vec![v as i64; x.len()],
    };
    let mut r = Vec::with_capacity(x.len());
    for (p, q) in x.iter().zip(&y) {
        r.push(op.apply_int(*p, *q, alpha as i64).unwrap_or(0)); // every operator passed above has a form
    }
    o.write_i64(&r).map(Some)
}

/// FloorDiv / TruncDiv into `o` as torch computes them: integers exactly in i64 (wrapping: INT_MIN // -1
/// is INT_MIN; by 0 gives 0, where torch's CPU kernel raises), floats in float32 for the f32/f16/bf16
/// dtypes (torch's compute type; a scalar `other` is rounded to it too) and in f64 for float64.
/// `b` is the other tensor (viewed at `o`'s shape) or the scalar.
fn rounding_div(op: Bin, o: &TView, a: &TView, b: Result<&TView, f64>) -> Result<(), i32> {
    if o.dtype.is_int() {
        let x = a.read_i64()?;
        let y = match b {
            Ok(v) => v.read_i64()?,
            Err(c) => vec![c as i64; x.len()],
        };
        let q = |p: i64, q: i64| {
            if q == 0 {
                return 0;
            }
            let d = p.wrapping_div(q);
            let down = op == Bin::FloorDiv && p.wrapping_rem(q) != 0 && (p < 0) != (q < 0);
            d - i64::from(down)
        };
        return o.write_i64(&x.iter().zip(&y).map(|(&p, &r)| q(p, r)).collect::<Vec<_>>());
    }
    let x = a.read_f64()?;
    let y = match b {
        Ok(v) => v.read_f64()?,
        Err(c) => vec![c; x.len()],
    };
    let wide = o.dtype == DType::F64;
    let f = |p: f64, q: f64| match (wide, op) {
        (true, _) => op.apply(p, q, 1.0),
        (false, Bin::TruncDiv) => ((p as f32) / (q as f32)).trunc() as f64,
        (false, _) => floor_div32(p as f32, q as f32) as f64,
    };
    o.write_f64(&x.iter().zip(&y).map(|(&p, &q)| f(p, q)).collect::<Vec<_>>())
}

/// torch's floor division of floats (`div_floor_floating`), in the type computed in: the quotient from fmod,
/// one less when the remainder's sign differs from the divisor's, then rounded to the nearest integer (so
/// 1 // 0.1 is 9, where floor(1 / 0.1) is 10); a zero divisor gives a / b, a zero quotient keeps its sign.
macro_rules! floor_div {
    ($name:ident, $t:ty) => {
        fn $name(a: $t, b: $t) -> $t {
            if b == 0.0 {
                return a / b;
            }
            let m = a % b;
            let mut d = (a - m) / b;
            if m != 0.0 && (b < 0.0) != (m < 0.0) {
                d -= 1.0;
            }
            if d == 0.0 {
                return (0.0 as $t).copysign(a / b);
            }
            let f = d.floor();
            if d - f > 0.5 {
                f + 1.0
            } else {
                f
            }
        }
    };
}
floor_div!(floor_div64, f64);
floor_div!(floor_div32, f32);

/// The distributions of [`Op::InplaceRandom`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RandKind {
    Normal,
    Uniform,
    Integer,
}

/// Elementwise unary math functions (aclnnLog, aclnnExp, aclnnNeg, aclnnSqrt, aclnnAbs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UFn {
    Log,
    Exp,
    Neg,
    Sqrt,
    Abs,
    /// aclnnTanh
    Tanh,
    /// aclnnSigmoid: 1 / (1 + e^-x)
    Sigmoid,
    /// aclnnGeluV2 with approximate = 1 ("tanh"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    GeluTanh,
    /// aclnnErf
    Erf,
    /// aclnnSin
    Sin,
    /// aclnnCos
    Cos,
    /// aclnnFloor
    Floor,
    /// aclnnRound: to the nearest integer, halves to even (as torch.round)
    Round,
    /// aclnnReciprocal: 1 / x
    Reciprocal,
    /// aclnnSign: -1, 0 or 1 (0 for ±0 and NaN, as torch.sign)
    Sign,
    /// aclnnSilu: x * sigmoid(x)
    Silu,
    /// aclnnRsqrt: 1 / sqrt(x) (hand-written RMSNorm)
    Rsqrt,
    /// aclnnTrunc: rounded toward zero
    Trunc,
    /// aclnnExpm1: e^x - 1
    Expm1,
    /// aclnnErfinv: the inverse of erf on (-1, 1); ±inf at ±1, NaN outside
    Erfinv,
    /// aclnnLog1p: ln(1 + x)
    Log1p,
    /// aclnnLog2
    Log2,
    /// aclnnLog10
    Log10,
    /// aclnnCeil
    Ceil,
    /// aclnnTan
    Tan,
    /// aclnnAtan
    Atan,
    /// aclnnAsin
    Asin,
    /// aclnnAcos
    Acos,
    /// aclnnSinh
    Sinh,
    /// aclnnCosh
    Cosh,
    /// aclnnHardswish: x · min(max(x + 3, 0), 6) / 6; the gradient as aclnnHardswishBackward (V1)
    Hardswish,
    /// aclnnMish: x · tanh(ln(1 + e^x))
    Mish,
    /// aclnnLogSigmoid: min(x, 0) - ln(1 + e^-|x|), as torch computes it
    LogSigmoid,
    /// aclnnLeakyRelu(negativeSlope): x where x > 0, else slope · x; the gradient as torch's
    /// `leaky_relu_backward` (slope where x <= 0 or NaN)
    LeakyRelu(f32),
    /// aclnnHardtanh(min, max) (torch's relu6 is hardtanh(0, 6)): x clamped, NaN kept; the gradient 0 where
    /// x < min or x > max, else 1: CANN's aclnnHardtanhBackward formula, where the bounds themselves pass (torch's
    /// CPU kernel gives 0 there)
    Hardtanh(f32, f32),
    /// aclnnSoftplus(beta, threshold): x where beta · x > threshold, else ln(1 + e^(beta · x)) / beta
    Softplus(f32, f32),
    /// aclnnElu(alpha, scale, inputScale): scale · x where x > 0, else alpha · scale · (e^(inputScale · x) - 1);
    /// `from_result` (aclnnEluBackward's isResult) takes the gradient from the output instead of the input
    Elu {
        alpha: f32,
        scale: f32,
        input_scale: f32,
        from_result: bool,
    },
}

const GELU_C: f32 = 0.797_884_6; // sqrt(2/pi)

impl UFn {
    /// d f / d x expressed through `v`: the output y for Tanh (1 - y²) and Sigmoid (y (1 - y)); the input x
    /// for GeluTanh (as aclnnGeluBackwardV2, which takes self) and the others.
    pub fn grad(self, v: f32) -> f32 {
        match self {
            UFn::Tanh => 1.0 - v * v,
            UFn::Sigmoid => v * (1.0 - v),
            UFn::GeluTanh => {
                let inner = GELU_C * (v + 0.044715 * v * v * v);
                let th = inner.tanh();
                0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * GELU_C * (1.0 + 3.0 * 0.044715 * v * v)
            }
            UFn::Log => 1.0 / v,
            UFn::Exp => v.exp(),
            UFn::Neg => -1.0,
            UFn::Sqrt => 0.5 / v.sqrt(),
            UFn::Abs => v.signum(),
            UFn::Erf => 2.0 / std::f32::consts::PI.sqrt() * (-v * v).exp(),
            UFn::Sin => v.cos(),
            UFn::Cos => -v.sin(),
            UFn::Reciprocal => -1.0 / (v * v),
            UFn::Floor | UFn::Round | UFn::Sign | UFn::Trunc | UFn::Ceil => 0.0,
            UFn::Rsqrt => -0.5 / (v * v.sqrt()),
            // no aclnn backward kernel takes these: autograd composes their gradients from other kernels
            UFn::Expm1
            | UFn::Erfinv
            | UFn::Log1p
            | UFn::Log2
            | UFn::Log10
            | UFn::Tan
            | UFn::Atan
            | UFn::Asin
            | UFn::Acos
            | UFn::Sinh
            | UFn::Cosh => f32::NAN,
            // aclnnHardswishBackward (V1) as CANN documents it: 0 below -3, x / 3 + 0.5 on [-3, 3], else 1; torch
            // (>= 2.8) gives 0 and 1 at ±3, and torch_npu patches those two points after V1
            UFn::Hardswish if v < -3.0 => 0.0,
            UFn::Hardswish if v <= 3.0 => v / 3.0 + 0.5,
            UFn::Hardswish => 1.0,
            UFn::Mish => {
                let (sg, th) = (1.0 / (1.0 + (-v).exp()), v.exp().ln_1p().tanh());
                th + v * sg * (1.0 - th * th)
            }
            // torch's log_sigmoid_backward: (x < 0) - sign · z / (1 + z) with z = e^-|x|
            UFn::LogSigmoid => {
                let z = (-v.abs()).exp();
                if v < 0.0 {
                    1.0 - z / (1.0 + z)
                } else {
                    z / (1.0 + z)
                }
            }
            UFn::LeakyRelu(slope) => {
                if v > 0.0 {
                    1.0
                } else {
                    slope
                }
            }
            UFn::Hardtanh(lo, hi) => {
                if v < lo || v > hi {
                    0.0
                } else {
                    1.0
                }
            }
            UFn::Softplus(beta, threshold) => {
                let z = (v * beta).exp();
                if v * beta > threshold {
                    1.0
                } else {
                    z / (z + 1.0)
                }
            }
            // torch tests x <= 0 (so NaN takes the positive branch: the gradient is scale, not NaN)
            UFn::Elu { alpha, scale, input_scale, from_result: true } if v <= 0.0 => input_scale * (v + alpha * scale),
            UFn::Elu { alpha, scale, input_scale, .. } if v <= 0.0 => {
                input_scale * alpha * scale * (v * input_scale).exp()
            }
            UFn::Elu { scale, .. } => scale,
            UFn::Silu => {
                let sg = 1.0 / (1.0 + (-v).exp());
                sg * (1.0 + v * (1.0 - sg))
            }
        }
    }
    /// gradInput = gradOutput · f'(v), except where the backward kernel selects a literal 0 (hardtanh outside its
    /// bounds, hardswish below -3, as torch's CPU kernels): an inf or NaN gradient there gives 0, not NaN.
    fn backward(self, g: f32, v: f32) -> f32 {
        match self {
            UFn::Hardtanh(lo, hi) if v < lo || v > hi => 0.0,
            UFn::Hardswish if v < -3.0 => 0.0,
            _ => g * self.grad(v),
        }
    }
    /// The functions added from the torch op probe check dtypes as CANN documents: self, out (and gradOutput)
    /// of one float dtype; float64, which the simulator would compute in float32, is refused. (The older
    /// variants accept mixed float dtypes and compute float64 in float32.)
    fn strict_dtypes(self) -> bool {
        !matches!(
            self,
            UFn::Log
                | UFn::Exp
                | UFn::Neg
                | UFn::Sqrt
                | UFn::Abs
                | UFn::Tanh
                | UFn::Sigmoid
                | UFn::GeluTanh
                | UFn::Erf
                | UFn::Sin
                | UFn::Cos
                | UFn::Floor
                | UFn::Round
                | UFn::Reciprocal
                | UFn::Sign
                | UFn::Silu
                | UFn::Rsqrt
                | UFn::Trunc
        )
    }
    /// aclnnNeg, aclnnAbs and aclnnSign also take integer tensors (computed exactly, wrapping as the
    /// integer type: -INT_MIN stays INT_MIN).
    fn takes_ints(self) -> bool {
        matches!(self, UFn::Neg | UFn::Abs | UFn::Sign)
    }
    fn apply_int(self, x: i64) -> i64 {
        match self {
            UFn::Neg => x.wrapping_neg(),
            UFn::Abs => x.wrapping_abs(),
            _ => x.signum(),
        }
    }
    fn apply(self, x: f32) -> f32 {
        match self {
            UFn::Log => x.ln(),
            UFn::Exp => x.exp(),
            UFn::Neg => -x,
            UFn::Sqrt => x.sqrt(),
            UFn::Abs => x.abs(),
            UFn::Tanh => x.tanh(),
            UFn::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            UFn::Erf => crate::kernels::erf_f(x),
            UFn::GeluTanh => 0.5 * x * (1.0 + (GELU_C * (x + 0.044715 * x * x * x)).tanh()),
            UFn::Sin => x.sin(),
            UFn::Cos => x.cos(),
            UFn::Floor => x.floor(),
            UFn::Trunc => x.trunc(),
            UFn::Rsqrt => 1.0 / x.sqrt(),
            UFn::Round => x.round_ties_even(),
            UFn::Reciprocal => 1.0 / x,
            UFn::Sign => f32::from(u8::from(x > 0.0)) - f32::from(u8::from(x < 0.0)),
            UFn::Silu => x / (1.0 + (-x).exp()),
            UFn::Expm1 => x.exp_m1(),
            UFn::Erfinv => crate::kernels::erfinv_f(x),
            UFn::Log1p => x.ln_1p(),
            UFn::Log2 => x.log2(),
            UFn::Log10 => x.log10(),
            UFn::Ceil => x.ceil(),
            UFn::Tan => x.tan(),
            UFn::Atan => x.atan(),
            UFn::Asin => x.asin(),
            UFn::Acos => x.acos(),
            UFn::Sinh => x.sinh(),
            UFn::Cosh => x.cosh(),
            UFn::Hardswish => x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
            UFn::Mish => x * x.exp().ln_1p().tanh(),
            UFn::LogSigmoid => x.min(0.0) - (-x.abs()).exp().ln_1p(),
            UFn::LeakyRelu(slope) => {
                if x > 0.0 {
                    x
                } else {
                    x * slope
                }
            }
            UFn::Hardtanh(lo, hi) => {
                if x.is_nan() {
                    x
                } else {
                    x.max(lo).min(hi)
                }
            }
            UFn::Softplus(beta, threshold) => {
                if x * beta > threshold {
                    x
                } else {
                    (x * beta).exp().ln_1p() / beta
                }
            }
            UFn::Elu { alpha, scale, input_scale, .. } if x <= 0.0 => (x * input_scale).exp_m1() * alpha * scale,
            UFn::Elu { scale, .. } => x * scale,
        }
    }
}

#[derive(Clone, Debug)]
pub enum Op {
    /// slots: self, out
    Unary(UFn),
    /// slots: self, out (torch.Tensor.repeat semantics: self is left-padded with 1s to len(repeats))
    Repeat {
        reps: Vec<i64>,
    },
    /// slots: self, other, out
    Binary {
        op: Bin,
        alpha: f64,
    },
    /// slots: self, out
    BinaryScalar {
        op: Bin,
        other: f64,
        alpha: f64,
    },
    /// slots: other, out: `scalar op other` (aclnnPowScalarTensor, aclnnRemainderScalarTensor: `2 ** t`, `5 % t`)
    ScalarBinary {
        op: Bin,
        scalar: f64,
    },
    /// slots: selfRef, other
    InplaceBinary {
        op: Bin,
        alpha: f64,
    },
    /// slots: selfRef
    InplaceBinaryScalar {
        op: Bin,
        other: f64,
        alpha: f64,
    },
    /// slots: self, mat2, out
    Mm,
    Matmul,
    BatchMatMul,
    /// slots: self, mat1, mat2, out
    Addmm {
        beta: f64,
        alpha: f64,
    },
    /// slots: selfRef, mat1, mat2
    InplaceAddmm {
        beta: f64,
        alpha: f64,
    },
    /// slots: self, out
    Relu,
    /// slots: selfRef
    InplaceRelu,
    /// slots: selfRef: the in-place forms of the probe's activations (aclnnInplaceLeakyRelu, …)
    InplaceUnary(UFn),
    /// slots: selfRef. aclnnInplaceNormal (mean `a`, std `b`), aclnnInplaceUniform ([a, b)) and
    /// aclnnInplaceRandom (integers in [a, b)): the simulator's counter-based generator (rng.rs) at
    /// (seed, offset), Box-Muller for the normal; the same (seed, offset) gives the same values, not
    /// those of any other generator.
    InplaceRandom {
        kind: RandKind,
        a: f64,
        b: f64,
        seed: i64,
        offset: i64,
    },
    /// slots: out (1-D, `steps` elements). aclnnLinspace: start + i·step for the first half, end - (steps - 1
    /// - i)·step for the rest (torch's symmetric formula), step = (end - start) / (steps - 1), in f64.
    Linspace {
        start: f64,
        end: f64,
        steps: i64,
    },
    /// slots: out [n, m]. aclnnEye: ones on the diagonal, zeros elsewhere.
    Eye {
        n: i64,
        m: i64,
    },
    /// slots: self, other, out (bool, one element). aclnnEqual (torch.equal): true when the shapes are
    /// the same and every element is equal (NaN is not equal to itself).
    Equal,
    /// slots: gradOutput, self, out
    ThresholdBackward {
        threshold: f64,
    },
    /// slots: self, out. `tanh`: the form CANN's aclnnGelu and the aclop Gelu kernel compute,
    /// `x / (1 + exp(-sqrt(8/pi) (x + 0.044715 x^3)))` (ops-nn `activation/gelu`); else the exact erf form
    /// (aclnnGeluV2 with approximate 0). torch_npu sends F.gelu of either mode to aclnnGelu.
    Gelu {
        tanh: bool,
    },
    /// slots: gradOutput, output (Tanh, Sigmoid) or self (GeluTanh), gradInput: gradOutput * f'
    UnaryBackward(UFn),
    /// slots: gradOutput, self, gradInput; `tanh` as in [`Op::Gelu`] (aclnnGeluBackward, aclop GeluGrad)
    GeluBackward {
        tanh: bool,
    },
    /// slots: self, out
    Softmax {
        dim: i64,
        log: bool,
    },
    /// slots: gradOutput, output, out
    SoftmaxBackward {
        dim: i64,
        log: bool,
    },
    /// slots: self, target, weight?, out, totalWeightOut
    NllLoss {
        reduction: i64,
        ignore: i64,
    },
    /// slots: gradOutput, self, target, weight?, totalWeight, out
    NllLossBackward {
        reduction: i64,
        ignore: i64,
    },
    /// slots: input, weight?, bias?, out, mean?, rstd?
    LayerNorm {
        nshape: Vec<i64>,
        eps: f64,
    },
    /// slots: gradOut, input, mean, rstd, weight?, bias?, gradInput?, gradWeight?, gradBias?
    LayerNormBackward {
        nshape: Vec<i64>,
        mask: Vec<bool>,
    },
    /// slots: weight, indices, out
    Embedding,
    /// slots: grad, indices, out
    EmbeddingDenseBackward {
        num_weights: u64,
        padding_idx: i64,
        scale: bool,
    },
    /// slots: self, out
    Cast {
        dtype: i32,
    },
    /// slots: self, out
    ReduceSum {
        dims: Vec<i64>,
        keep: bool,
        dtype: i32,
        mean: bool,
        /// aclnnReduceNansum: NaN counted as 0
        nan_zero: bool,
    },
    /// slots: selfRef, src
    InplaceCopy,
    /// slots: selfRef
    InplaceZero,
    /// slots: selfRef, set to `value`, or exactly to `int` (an integer aclScalar, any size).
    InplaceFill {
        value: f64,
        int: Option<i64>,
    },
    /// slots: varRef, mRef, vRef, beta1Power, beta2Power, lr, weightDecay, beta1, beta2, eps, grad, maxGradNorm?
    ApplyAdamW {
        amsgrad: bool,
        maximize: bool,
    },
    /// slots: tensors (list), out
    Cat {
        dim: i64,
    },
    /// The operators of `ops_ext.rs`.
    Ext(Box<crate::ops_ext::ExtOp>),
    /// The aclop reductions of `ops_reduce.rs`.
    Red(Box<crate::ops_reduce::RedOp>),
    /// The along-a-dimension operators of `ops_dim.rs`.
    Dim(Box<crate::ops_dim::DimOp>),
    /// aclnnFlashAttentionScore (`grad` false) and aclnnFlashAttentionScoreGrad: slots in attention.rs.
    Attention {
        p: Box<crate::attention::FaParams>,
        grad: bool,
    },
    /// The pointwise losses and their backward (losses.rs, which lists the slots).
    Loss(Box<crate::losses::Loss>),
    /// aclnnGroupNorm / aclnnGroupNormBackward (slots in group_norm.rs).
    GroupNorm(Box<crate::group_norm::GroupNorm>),
    /// Indexing and activation kernels of ops_misc.rs (slots there).
    Misc(Box<crate::ops_misc::MiscOp>),
    /// Pooling, resizing and padding over the last axes (slots in spatial.rs).
    Spatial(Box<crate::spatial::Spatial>),
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
fn ot(s: &[SV], i: usize) -> Option<&TView> {
    match s.get(i) {
        Some(SV::T(Some(v))) => Some(v),
        _ => None,
    }
}
fn float(v: &TView, what: &str) -> Result<(), i32> {
    if v.dtype.is_float() {
        Ok(())
    } else {
        Err(inv(format!("{what}: dtype {} is not supported (float32/float16/bfloat16 expected)", v.dtype.name())))
    }
}
/// All of `ts` of one dtype, float32, float16 or bfloat16.
fn one_f32_family_dtype(ts: &[(&TView, &str)]) -> Result<(), i32> {
    let d = ts[0].0.dtype;
    for (v, what) in ts {
        if v.dtype == DType::F64 {
            return Err(inv(format!("{what}: float64 is not simulated for this operator")));
        }
        if v.dtype != d {
            return Err(inv(format!("{what}: dtype {} must be {}'s {}", v.dtype.name(), ts[0].1, d.name())));
        }
    }
    Ok(())
}
fn shape_eq(v: &TView, shape: &[i64], what: &str) -> Result<(), i32> {
    if v.shape == shape {
        Ok(())
    } else {
        Err(inv(format!("{what}: shape {:?} does not match expected {:?}", v.shape, shape)))
    }
}
fn norm_dim(d: i64, rank: usize) -> Result<usize, i32> {
    let r = rank.max(1) as i64;
    let dd = if d < 0 { d + r } else { d };
    if dd < 0 || dd >= r {
        Err(inv(format!("dim {d} out of range for rank {rank}")))
    } else {
        Ok(dd as usize)
    }
}

/// Shapes of a (batched) matmul; returns (batch, m, k, n, out_shape).
type MatmulShapes = (Vec<i64>, i64, i64, i64, Vec<i64>);

fn matmul_shapes(a: &[i64], b: &[i64], strict: Option<usize>) -> Result<MatmulShapes, i32> {
    if let Some(r) = strict {
        if a.len() != r || b.len() != r {
            return Err(inv(format!("expected {r}-D operands, got {a:?} and {b:?}")));
        }
        if r == 3 && a[0] != b[0] {
            return Err(inv(format!("batch sizes differ: {a:?} vs {b:?}")));
        }
    }
    if a.is_empty() || b.is_empty() {
        return Err(inv("matmul operands must be at least 1-D"));
    }
    let a2: Vec<i64> = if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() };
    let b2: Vec<i64> = if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() };
    let (m, ka) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (kb, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if ka != kb {
        return Err(inv(format!("matmul inner dimensions differ: {a:?} @ {b:?}")));
    }
    let batch = k::broadcast_shape(&a2[..a2.len() - 2], &b2[..b2.len() - 2])
        .ok_or_else(|| inv(format!("matmul batch dims do not broadcast: {a:?} @ {b:?}")))?;
    let mut out = batch.clone();
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok((batch, m, ka, n, out))
}

fn matmul_exec(a: &TView, b: &TView) -> Result<Vec<f32>, i32> {
    let (batch, m, kk, n, _) = matmul_shapes(&a.shape, &b.shape, None)?;
    let mut av = a.clone();
    if av.shape.len() == 1 {
        av.shape.insert(0, 1);
        av.strides.insert(0, 0);
    }
    let mut bv = b.clone();
    if bv.shape.len() == 1 {
        bv.shape.push(1);
        bv.strides.push(0);
    }
    let mut sa = batch.clone();
    sa.extend([m, kk]);
    let mut sb = batch.clone();
    sb.extend([kk, n]);
    let ad = bview(&av, &sa)?.read_f32()?;
    let bd = bview(&bv, &sb)?.read_f32()?;
    let nb = numel(&batch);
    let (m, kk, n) = (m as usize, kk as usize, n as usize);
    let mut out = Vec::with_capacity(nb * m * n);
    for i in 0..nb {
        out.extend(k::mm(&ad[i * m * kk..(i + 1) * m * kk], &bd[i * kk * n..(i + 1) * kk * n], m, kk, n));
    }
    Ok(out)
}

fn reduce_axes(shape: &[i64], dims: &[i64]) -> Result<Vec<bool>, i32> {
    let mut red = vec![dims.is_empty(); shape.len()];
    for &d in dims {
        red[norm_dim(d, shape.len())?] = true;
    }
    Ok(red)
}

fn reduced_shape(shape: &[i64], red: &[bool], keep: bool) -> Vec<i64> {
    shape
        .iter()
        .zip(red)
        .filter_map(|(&d, &r)| {
            if r {
                if keep {
                    Some(1)
                } else {
                    None
                }
            } else {
                Some(d)
            }
        })
        .collect()
}

fn ws_for(v: &TView) -> u64 {
    ((v.numel() as u64 * 4).div_ceil(512) * 512).max(512)
}

/// Split of a layer-norm input into (rows, row length).
fn ln_split(x: &TView, nshape: &[i64]) -> Result<(usize, usize), i32> {
    let r = nshape.len();
    if r == 0 || r > x.shape.len() || x.shape[x.shape.len() - r..] != *nshape {
        return Err(inv(format!("normalizedShape {nshape:?} does not match input shape {:?}", x.shape)));
    }
    let n = numel(nshape);
    Ok((x.numel() / n.max(1), n))
}

impl Op {
    /// Phase 1: validate the arguments; returns the workspace size.
    pub fn validate(&self, s: &[SV]) -> Result<u64, i32> {
        match self {
            Op::Ext(e) => e.validate(s),
            Op::Red(e) => e.validate(s),
            Op::Dim(e) => e.validate(s),
            Op::Attention { p, grad: false } => p.validate_fwd(s),
            Op::Attention { p, grad: true } => p.validate_bwd(s),
            Op::Loss(l) => l.validate(s),
            Op::GroupNorm(g) => g.validate(s),
            Op::Spatial(g) => g.validate(s),
            Op::Misc(m) => m.validate(s),
            Op::Binary { .. } => {
                let (a, b, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let bs = k::broadcast_shape(&a.shape, &b.shape)
                    .ok_or_else(|| inv(format!("shapes {:?} and {:?} do not broadcast", a.shape, b.shape)))?;
                shape_eq(o, &bs, "out")?;
                if o.dtype == DType::Bool {
                    return Err(inv("out: bool is not supported"));
                }
                Ok(0)
            }
            Op::BinaryScalar { .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                shape_eq(o, &a.shape, "out")?;
                Ok(0)
            }
            Op::ScalarBinary { .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                shape_eq(o, &a.shape, "out")?;
                if o.dtype == DType::Bool {
                    return Err(inv("out: bool is not supported"));
                }
                Ok(0)
            }
            Op::InplaceBinary { .. } => {
                let (a, b) = (t(s, 0)?, t(s, 1)?);
                bview(b, &a.shape)?;
                Ok(0)
            }
            Op::InplaceBinaryScalar { .. } | Op::InplaceZero | Op::InplaceFill { .. } => {
                t(s, 0)?;
                Ok(0)
            }
            Op::Mm | Op::BatchMatMul | Op::Matmul => {
                let (a, b, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                float(a, "self")?;
                float(b, "mat2")?;
                float(o, "out")?;
                let strict = match self {
                    Op::Mm => Some(2),
                    Op::BatchMatMul => Some(3),
                    _ => None,
                };
                let (_, _, _, _, os) = matmul_shapes(&a.shape, &b.shape, strict)?;
                shape_eq(o, &os, "out")?;
                Ok(ws_for(o))
            }
            Op::Addmm { .. } | Op::InplaceAddmm { .. } => {
                let (c, a, b) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                let (_, _, _, _, os) = matmul_shapes(&a.shape, &b.shape, Some(2))?;
                float(a, "mat1")?;
                float(b, "mat2")?;
                float(c, "self")?;
                bview(c, &os)?;
                if let Op::Addmm { .. } = self {
                    shape_eq(t(s, 3)?, &os, "out")?;
                } else {
                    shape_eq(c, &os, "selfRef")?;
                }
                Ok(ws_for(c))
            }
            Op::Unary(f) if f.takes_ints() && t(s, 0)?.dtype.is_int() => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                if o.dtype != a.dtype {
                    return Err(inv(format!("out: dtype {} must be self's {}", o.dtype.name(), a.dtype.name())));
                }
                shape_eq(o, &a.shape, "out")?;
                Ok(0)
            }
            Op::Relu | Op::Gelu { .. } | Op::Unary(_) => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                float(a, "self")?;
                float(o, "out")?;
                shape_eq(o, &a.shape, "out")?;
                if let Op::Unary(f) = self {
                    if f.strict_dtypes() {
                        one_f32_family_dtype(&[(a, "self"), (o, "out")])?;
                    }
                }
                Ok(0)
            }
            Op::InplaceRelu => float(t(s, 0)?, "selfRef").map(|_| 0),
            Op::InplaceUnary(_) => one_f32_family_dtype(&[(t(s, 0)?, "selfRef")]).map(|_| 0),
            Op::Linspace { steps, .. } => {
                let o = t(s, 0)?;
                if *steps < 0 {
                    return Err(inv(format!("steps {steps} must not be negative")));
                }
                shape_eq(o, &[*steps], "out")?;
                Ok(0)
            }
            Op::Eye { n, m } => {
                if *n < 0 || *m < 0 {
                    return Err(inv(format!("n {n} and m {m} must not be negative")));
                }
                shape_eq(t(s, 0)?, &[*n, *m], "out")?;
                Ok(0)
            }
            Op::Equal => {
                let o = t(s, 2)?;
                if o.dtype != DType::Bool || o.numel() != 1 {
                    return Err(inv(format!(
                        "out: a one-element bool tensor expected, got {} {:?}",
                        o.dtype.name(),
                        o.shape
                    )));
                }
                Ok(0)
            }
            Op::InplaceRandom { kind, a, b, .. } => {
                let o = t(s, 0)?;
                if !o.dtype.is_float() && *kind != RandKind::Integer {
                    return Err(inv(format!(
                        "selfRef: dtype {} is not supported (a float dtype expected)",
                        o.dtype.name()
                    )));
                }
                let ok = match kind {
                    RandKind::Normal => *b >= 0.0,
                    RandKind::Uniform => a <= b,
                    RandKind::Integer => a < b,
                };
                if !ok || !a.is_finite() || !b.is_finite() {
                    let what = if *kind == RandKind::Normal { "mean/std" } else { "from/to" };
                    return Err(inv(format!("{what} {a} / {b} are not valid")));
                }
                Ok(0)
            }
            Op::ThresholdBackward { .. } | Op::GeluBackward { .. } | Op::UnaryBackward(_) => {
                let (g, x, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                float(g, "gradOutput")?;
                float(x, "self")?;
                float(o, "out")?;
                shape_eq(x, &g.shape, "self")?;
                shape_eq(o, &g.shape, "out")?;
                if let Op::UnaryBackward(f) = self {
                    if f.strict_dtypes() {
                        one_f32_family_dtype(&[(g, "gradOutput"), (x, "self"), (o, "out")])?;
                    }
                }
                Ok(0)
            }
            Op::Softmax { dim, .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                float(a, "self")?;
                float(o, "out")?;
                norm_dim(*dim, a.shape.len())?;
                shape_eq(o, &a.shape, "out")?;
                Ok(ws_for(a))
            }
            Op::SoftmaxBackward { dim, .. } => {
                let (g, y, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                float(g, "gradOutput")?;
                float(y, "output")?;
                float(o, "out")?;
                norm_dim(*dim, g.shape.len())?;
                shape_eq(y, &g.shape, "output")?;
                shape_eq(o, &g.shape, "out")?;
                Ok(ws_for(g))
            }
            Op::NllLoss { reduction, .. } => {
                let (x, tg, o, tw) = (t(s, 0)?, t(s, 1)?, t(s, 3)?, t(s, 4)?);
                float(x, "self")?;
                if !tg.dtype.is_int() {
                    return Err(inv("target must be an integer tensor"));
                }
                let (n, c) = match x.shape.len() {
                    1 => (1, x.shape[0]),
                    2 => (x.shape[0], x.shape[1]),
                    _ => return Err(inv("self must be 1-D or 2-D")),
                };
                if tg.numel() as i64 != n {
                    return Err(inv("target size does not match self"));
                }
                if let Some(w) = ot(s, 2) {
                    if w.numel() as i64 != c {
                        return Err(inv("weight size must equal the class count"));
                    }
                }
                if !(0..=2).contains(reduction) {
                    return Err(inv(format!("reduction {reduction} must be 0, 1 or 2")));
                }
                let on = if *reduction == 0 { n as usize } else { 1 };
                if o.numel() != on || tw.numel() != 1 {
                    return Err(inv("out / totalWeightOut have the wrong size"));
                }
                Ok(ws_for(x))
            }
            Op::NllLossBackward { reduction, .. } => {
                let (g, x, tg, tw, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?, t(s, 4)?, t(s, 5)?);
                float(x, "self")?;
                float(g, "gradOutput")?;
                if !tg.dtype.is_int() {
                    return Err(inv("target must be an integer tensor"));
                }
                if x.shape.len() > 2 || x.shape.is_empty() {
                    return Err(inv("self must be 1-D or 2-D"));
                }
                let n = if x.shape.len() == 2 { x.shape[0] } else { 1 };
                if tg.numel() as i64 != n || tw.numel() != 1 {
                    return Err(inv("target/totalWeight size mismatch"));
                }
                if !(0..=2).contains(reduction) {
                    return Err(inv("reduction must be 0, 1 or 2"));
                }
                if g.numel() != if *reduction == 0 { n as usize } else { 1 } {
                    return Err(inv("gradOutput has the wrong size"));
                }
                shape_eq(o, &x.shape, "out")?;
                Ok(ws_for(x))
            }
            Op::LayerNorm { nshape, eps } => {
                let (x, o) = (t(s, 0)?, t(s, 3)?);
                float(x, "input")?;
                float(o, "out")?;
                let (m, n) = ln_split(x, nshape)?;
                if *eps < 0.0 {
                    return Err(inv("eps must be >= 0"));
                }
                for (i, nm) in [(1, "weight"), (2, "bias")] {
                    if let Some(w) = ot(s, i) {
                        if w.numel() != n {
                            return Err(inv(format!("{nm} size must be {n}")));
                        }
                    }
                }
                shape_eq(o, &x.shape, "out")?;
                for (i, nm) in [(4, "meanOut"), (5, "rstdOut")] {
                    if let Some(v) = ot(s, i) {
                        if v.numel() != m {
                            return Err(inv(format!("{nm} must have {m} elements")));
                        }
                    }
                }
                Ok(ws_for(x))
            }
            Op::LayerNormBackward { nshape, mask } => {
                let (g, x, mu, rs) = (t(s, 0)?, t(s, 1)?, t(s, 2)?, t(s, 3)?);
                float(g, "gradOut")?;
                float(x, "input")?;
                let (m, n) = ln_split(x, nshape)?;
                shape_eq(g, &x.shape, "gradOut")?;
                if mu.numel() != m || rs.numel() != m {
                    return Err(inv("mean/rstd size mismatch"));
                }
                if mask.len() != 3 {
                    return Err(inv("outputMask must have 3 elements"));
                }
                if mask[0] {
                    shape_eq(t(s, 6)?, &x.shape, "gradInputOut")?;
                }
                if mask[1] && t(s, 7)?.numel() != n {
                    return Err(inv("gradWeightOut size mismatch"));
                }
                if mask[2] && t(s, 8)?.numel() != n {
                    return Err(inv("gradBiasOut size mismatch"));
                }
                Ok(ws_for(x))
            }
            Op::Embedding => {
                let (w, i, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                if w.shape.len() != 2 || !i.dtype.is_int() {
                    return Err(inv("weight must be 2-D and indices integer"));
                }
                let mut os = i.shape.clone();
                os.push(w.shape[1]);
                shape_eq(o, &os, "out")?;
                Ok(0)
            }
            Op::EmbeddingDenseBackward { num_weights, .. } => {
                let (g, i, o) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
                if !i.dtype.is_int() || g.shape.is_empty() {
                    return Err(inv("bad grad/indices"));
                }
                let d = *g.shape.last().unwrap();
                if g.numel() != i.numel() * d as usize {
                    return Err(inv("grad does not match indices"));
                }
                shape_eq(o, &[*num_weights as i64, d], "out")?;
                Ok(ws_for(o))
            }
            Op::Cast { dtype } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                if DType::from_acl(*dtype) != Some(o.dtype) {
                    return Err(inv(format!("out dtype {} does not match requested dtype {dtype}", o.dtype.acl())));
                }
                shape_eq(o, &a.shape, "out")?;
                Ok(0)
            }
            Op::ReduceSum { dims, keep, dtype, mean, .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                if *mean {
                    float(a, "self")?;
                }
                let red = reduce_axes(&a.shape, dims)?;
                let os = reduced_shape(&a.shape, &red, *keep);
                if DType::from_acl(*dtype) != Some(o.dtype) {
                    return Err(inv("out dtype does not match dtype"));
                }
                if !(o.shape == os || (os.is_empty() && o.numel() == 1 && o.shape.len() <= 1)) {
                    return Err(inv(format!("out shape {:?} expected {:?}", o.shape, os)));
                }
                Ok(ws_for(a))
            }
            Op::InplaceCopy => {
                let (a, b) = (t(s, 0)?, t(s, 1)?);
                bview(b, &a.shape)?;
                Ok(0)
            }
            Op::ApplyAdamW { amsgrad, .. } => {
                let var = t(s, 0)?;
                float(var, "varRef")?;
                for (i, nm) in [(1, "mRef"), (2, "vRef"), (10, "grad")] {
                    shape_eq(t(s, i)?, &var.shape, nm)?;
                }
                for i in 3..10 {
                    if t(s, i)?.numel() != 1 {
                        return Err(inv(format!("hyper-parameter tensor {i} must have one element")));
                    }
                }
                if *amsgrad {
                    shape_eq(t(s, 11)?, &var.shape, "maxGradNorm")?;
                }
                Ok(0)
            }
            Op::Repeat { reps } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                if reps.len() < a.shape.len() || reps.iter().any(|&r| r < 0) {
                    return Err(inv(format!("repeats {reps:?} invalid for shape {:?}", a.shape)));
                }
                let pad = reps.len() - a.shape.len();
                let os: Vec<i64> =
                    reps.iter().enumerate().map(|(i, &r)| r * if i < pad { 1 } else { a.shape[i - pad] }).collect();
                shape_eq(o, &os, "out")?;
                if o.dtype != a.dtype {
                    return Err(inv("out dtype differs from self"));
                }
                Ok(0)
            }
            Op::Cat { dim } => {
                let SV::L(ts) = &s[0] else { return Err(inv("tensors must be a tensor list")) };
                let o = t(s, 1)?;
                if ts.is_empty() {
                    return Err(inv("empty tensor list"));
                }
                let d = norm_dim(*dim, ts[0].shape.len())?;
                let mut os = ts[0].shape.clone();
                os[d] = 0;
                for v in ts {
                    if v.shape.len() != os.len() || v.shape.iter().enumerate().any(|(i, &x)| i != d && x != os[i]) {
                        return Err(inv("cat: shapes differ outside dim"));
                    }
                    os[d] += v.shape[d];
                }
                shape_eq(o, &os, "out")?;
                Ok(0)
            }
        }
    }

    /// Run the kernel (called on the stream worker, after `validate`).
    pub fn exec(&self, s: &[SV]) -> Result<(), i32> {
        match self {
            Op::Ext(e) => e.exec(s),
            Op::Red(e) => e.exec(s),
            Op::Dim(e) => e.exec(s),
            Op::Attention { p, grad: false } => p.exec_fwd(s),
            Op::Attention { p, grad: true } => p.exec_bwd(s),
            Op::Loss(l) => l.exec(s),
            Op::GroupNorm(g) => g.exec(s),
            Op::Spatial(g) => g.exec(s),
            Op::Misc(m) => m.exec(s),
            Op::Binary { op, .. } if op.rounds() => {
                let o = t(s, 2)?;
                rounding_div(*op, o, &bview(t(s, 0)?, &o.shape)?, Ok(&bview(t(s, 1)?, &o.shape)?))
            }
            Op::BinaryScalar { op, other, .. } if op.rounds() => rounding_div(*op, t(s, 1)?, t(s, 0)?, Err(*other)),
            Op::InplaceBinary { op, .. } if op.rounds() => {
                let o = t(s, 0)?;
                rounding_div(*op, o, o, Ok(&bview(t(s, 1)?, &o.shape)?))
            }
            Op::InplaceBinaryScalar { op, other, .. } if op.rounds() => {
                rounding_div(*op, t(s, 0)?, t(s, 0)?, Err(*other))
            }
            Op::Binary { op, alpha } => {
                let o = t(s, 2)?;
                let (av, bv) = (bview(t(s, 0)?, &o.shape)?, bview(t(s, 1)?, &o.shape)?);
                if int_binary(*op, o, &av, Ok(&bv), *alpha)?.is_some() {
                    return Ok(());
                }
                let (a, b) = (av.read_f64()?, bv.read_f64()?);
                o.write_f64(&a.iter().zip(&b).map(|(x, y)| op.apply(*x, *y, *alpha)).collect::<Vec<_>>())
            }
            Op::BinaryScalar { op, other, alpha } => {
                if int_binary(*op, t(s, 1)?, t(s, 0)?, Err(*other), *alpha)?.is_some() {
                    return Ok(());
                }
                let a = t(s, 0)?.read_f64()?;
                t(s, 1)?.write_f64(&a.iter().map(|x| op.apply(*x, *other, *alpha)).collect::<Vec<_>>())
            }
            Op::ScalarBinary { op, scalar } => {
                let b = t(s, 0)?.read_f64()?;
                t(s, 1)?.write_f64(&b.iter().map(|y| op.apply(*scalar, *y, 1.0)).collect::<Vec<_>>())
            }
            Op::InplaceBinary { op, alpha } => {
                let o = t(s, 0)?;
                let bv = bview(t(s, 1)?, &o.shape)?;
                if int_binary(*op, o, o, Ok(&bv), *alpha)?.is_some() {
                    return Ok(());
                }
                let b = bv.read_f64()?;
                let a = o.read_f64()?;
                o.write_f64(&a.iter().zip(&b).map(|(x, y)| op.apply(*x, *y, *alpha)).collect::<Vec<_>>())
            }
            Op::InplaceBinaryScalar { op, other, alpha } => {
                let o = t(s, 0)?;
                if int_binary(*op, o, o, Err(*other), *alpha)?.is_some() {
                    return Ok(());
                }
                let a = o.read_f64()?;
                o.write_f64(&a.iter().map(|x| op.apply(*x, *other, *alpha)).collect::<Vec<_>>())
            }
            Op::Mm | Op::Matmul | Op::BatchMatMul => {
                let r = matmul_exec(t(s, 0)?, t(s, 1)?)?;
                t(s, 2)?.write_f32(&r)
            }
            Op::Addmm { beta, alpha } | Op::InplaceAddmm { beta, alpha } => {
                let p = matmul_exec(t(s, 1)?, t(s, 2)?)?;
                let o = if let Op::Addmm { .. } = self { t(s, 3)? } else { t(s, 0)? };
                let c = bview(t(s, 0)?, &o.shape)?.read_f32()?;
                let (be, al) = (*beta as f32, *alpha as f32);
                o.write_f32(
                    &c.iter()
                        .zip(&p)
                        .map(|(c, p)| if be == 0.0 { al * p } else { be * c + al * p })
                        .collect::<Vec<_>>(),
                )
            }
            Op::Relu | Op::InplaceRelu => {
                let a = t(s, 0)?.read_f32()?;
                let o = if let Op::Relu = self { t(s, 1)? } else { t(s, 0)? };
                o.write_f32(&a.iter().map(|&x| if x > 0.0 { x } else { 0.0 }).collect::<Vec<_>>())
            }
            Op::ThresholdBackward { threshold } => {
                let g = t(s, 0)?.read_f32()?;
                let x = t(s, 1)?.read_f32()?;
                let th = *threshold as f32;
                t(s, 2)?.write_f32(&g.iter().zip(&x).map(|(&g, &x)| if x > th { g } else { 0.0 }).collect::<Vec<_>>())
            }
            Op::Linspace { start, end, steps } => {
                // torch's linspace kernel: start and end converted to out's dtype first; the step and each
                // term computed in that dtype (each operation rounded, as c10::Half / BFloat16 arithmetic
                // is), in double for integers (then truncated)
                let (n, o) = (*steps, t(s, 0)?);
                let half = n / 2;
                if o.dtype.is_int() {
                    let (a, b) = (start.trunc(), end.trunc());
                    let step = if n > 1 { (b - a) / (n - 1) as f64 } else { 0.0 };
                    let v: Vec<i64> = (0..n)
                        .map(|i| if i < half { a + step * i as f64 } else { b - step * (n - 1 - i) as f64 } as i64)
                        .collect();
                    return o.write_i64(&v);
                }
                let rd = |x: f64| {
                    let mut b = [0u8; 8];
                    o.dtype.put(&mut b, x);
                    o.dtype.get(&b)
                };
                let (a, b) = (rd(*start), rd(*end));
                let step = if n > 1 { rd(rd(b - a) / rd((n - 1) as f64)) } else { 0.0 };
                let v: Vec<f64> = (0..n)
                    .map(|i| {
                        if i < half {
                            rd(a + rd(step * rd(i as f64)))
                        } else {
                            rd(b - rd(step * rd((n - 1 - i) as f64)))
                        }
                    })
                    .collect();
                o.write_f64(&v)
            }
            Op::Eye { n, m } => {
                let (n, m) = (*n as usize, *m as usize);
                let v: Vec<f64> = (0..n * m).map(|k| if k / m.max(1) == k % m.max(1) { 1.0 } else { 0.0 }).collect();
                t(s, 0)?.write_f64(&v)
            }
            Op::Equal => {
                let (a, b) = (t(s, 0)?, t(s, 1)?);
                let same = a.shape == b.shape && {
                    if a.dtype.is_float() || b.dtype.is_float() {
                        a.read_f64()? == b.read_f64()?
                    } else {
                        a.read_i64()? == b.read_i64()?
                    }
                };
                t(s, 2)?.write_f64(&[if same { 1.0 } else { 0.0 }])
            }
            Op::InplaceRandom { kind, a, b, seed, offset } => {
                let o = t(s, 0)?;
                let u = |i: usize| crate::rng::uniform(*seed, *offset, i);
                if *kind == RandKind::Integer {
                    let (lo, span) = (*a as i64, (*b as i64).wrapping_sub(*a as i64) as u64);
                    let v: Vec<i64> =
                        (0..o.numel()).map(|i| lo + ((u(i) * span as f64) as u64).min(span - 1) as i64).collect();
                    return o.write_i64(&v);
                }
                let v: Vec<f64> = (0..o.numel())
                    .map(|i| {
                        if *kind == RandKind::Normal {
                            let (u1, u2) = (1.0 - u(2 * i), u(2 * i + 1));
                            a + b * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
                        } else {
                            // rounded to the dtype a value may reach `to`: it becomes `from`, as torch's
                            // CUDA kernel does, so the range stays [from, to)
                            let x = a + (b - a) * u(i);
                            let mut buf = [0u8; 8];
                            o.dtype.put(&mut buf, x);
                            if o.dtype.get(&buf) >= *b && b > a {
                                *a
                            } else {
                                x
                            }
                        }
                    })
                    .collect();
                o.write_f64(&v)
            }
            Op::InplaceUnary(f) => {
                let o = t(s, 0)?;
                let a = o.read_f32()?;
                o.write_f32(&a.iter().map(|&x| f.apply(x)).collect::<Vec<_>>())
            }
            Op::Unary(f) if t(s, 0)?.dtype.is_int() => {
                let a = t(s, 0)?.read_i64()?;
                t(s, 1)?.write_i64(&a.iter().map(|&x| f.apply_int(x)).collect::<Vec<_>>())
            }
            Op::Unary(f) => {
                let a = t(s, 0)?.read_f32()?;
                t(s, 1)?.write_f32(&a.iter().map(|&x| f.apply(x)).collect::<Vec<_>>())
            }
            Op::Gelu { tanh } => {
                let a = t(s, 0)?.read_f32()?;
                let f = if *tanh { k::gelu_sigmoid_form } else { k::gelu };
                t(s, 1)?.write_f32(&a.iter().map(|&x| f(x)).collect::<Vec<_>>())
            }
            Op::UnaryBackward(f) => {
                let g = t(s, 0)?.read_f32()?;
                let v = t(s, 1)?.read_f32()?;
                t(s, 2)?.write_f32(&g.iter().zip(&v).map(|(&g, &v)| f.backward(g, v)).collect::<Vec<_>>())
            }
            Op::GeluBackward { tanh } => {
                let g = t(s, 0)?.read_f32()?;
                let x = t(s, 1)?.read_f32()?;
                let f = if *tanh { k::gelu_sigmoid_form_grad } else { |g: f32, x: f32| g * k::gelu_grad(x) };
                t(s, 2)?.write_f32(&g.iter().zip(&x).map(|(&g, &x)| f(g, x)).collect::<Vec<_>>())
            }
            Op::Softmax { dim, log } => {
                let a = t(s, 0)?;
                let d = norm_dim(*dim, a.shape.len())?;
                let sp = if a.shape.is_empty() { (1, 1, 1) } else { k::split_dim(&a.shape, d) };
                t(s, 1)?.write_f32(&k::softmax(&a.read_f32()?, sp, *log))
            }
            Op::SoftmaxBackward { dim, log } => {
                let g = t(s, 0)?;
                let d = norm_dim(*dim, g.shape.len())?;
                let sp = if g.shape.is_empty() { (1, 1, 1) } else { k::split_dim(&g.shape, d) };
                let r = k::softmax_backward(&g.read_f32()?, &t(s, 1)?.read_f32()?, sp, *log);
                t(s, 2)?.write_f32(&r)
            }
            Op::NllLoss { reduction, ignore } => {
                let x = t(s, 0)?;
                let c = *x.shape.last().unwrap() as usize;
                let xv = x.read_f32()?;
                let tg = t(s, 1)?.read_i64()?;
                let w = match ot(s, 2) {
                    Some(w) => w.read_f32()?,
                    None => vec![1.0; c],
                };
                let mut per = vec![0f32; tg.len()];
                let mut tw = 0f64;
                for (n, &ti) in tg.iter().enumerate() {
                    if ti == *ignore {
                        continue;
                    }
                    if ti < 0 || ti as usize >= c {
                        return Err(inv(format!("target {ti} out of range [0,{c})")));
                    }
                    let wt = w[ti as usize];
                    per[n] = -wt * xv[n * c + ti as usize];
                    tw += wt as f64;
                }
                t(s, 4)?.write_f64(&[tw])?;
                let o = t(s, 3)?;
                match reduction {
                    0 => o.write_f32(&per),
                    1 => o.write_f64(&[per.iter().map(|&v| v as f64).sum::<f64>() / tw]),
                    _ => o.write_f64(&[per.iter().map(|&v| v as f64).sum::<f64>()]),
                }
            }
            Op::NllLossBackward { reduction, ignore } => {
                let x = t(s, 1)?;
                let c = *x.shape.last().unwrap() as usize;
                let tg = t(s, 2)?.read_i64()?;
                let g = t(s, 0)?.read_f32()?;
                let w = match ot(s, 3) {
                    Some(w) => w.read_f32()?,
                    None => vec![1.0; c],
                };
                let tw = t(s, 4)?.read_f32()?[0];
                let mut out = vec![0f32; tg.len() * c];
                for (n, &ti) in tg.iter().enumerate() {
                    if ti == *ignore {
                        continue;
                    }
                    if ti < 0 || ti as usize >= c {
                        return Err(inv(format!("target {ti} out of range")));
                    }
                    let gv = if *reduction == 0 { g[n] } else { g[0] };
                    let mut v = -w[ti as usize] * gv;
                    if *reduction == 1 {
                        v /= tw;
                    }
                    out[n * c + ti as usize] = v;
                }
                t(s, 5)?.write_f32(&out)
            }
            Op::LayerNorm { nshape, eps } => {
                let x = t(s, 0)?;
                let (m, n) = ln_split(x, nshape)?;
                let w = ot(s, 1).map(|v| v.read_f32()).transpose()?;
                let b = ot(s, 2).map(|v| v.read_f32()).transpose()?;
                let (y, mu, rs) = k::layer_norm(&x.read_f32()?, m, n, w.as_deref(), b.as_deref(), *eps);
                t(s, 3)?.write_f32(&y)?;
                if let Some(v) = ot(s, 4) {
                    v.write_f32(&mu)?;
                }
                if let Some(v) = ot(s, 5) {
                    v.write_f32(&rs)?;
                }
                Ok(())
            }
            Op::LayerNormBackward { nshape, mask } => {
                let x = t(s, 1)?;
                let (m, n) = ln_split(x, nshape)?;
                let w = ot(s, 4).map(|v| v.read_f32()).transpose()?;
                let (dx, dw, db) = k::layer_norm_backward(
                    &t(s, 0)?.read_f32()?,
                    &x.read_f32()?,
                    &t(s, 2)?.read_f32()?,
                    &t(s, 3)?.read_f32()?,
                    w.as_deref(),
                    m,
                    n,
                );
                if mask[0] {
                    t(s, 6)?.write_f32(&dx)?;
                }
                if mask[1] {
                    t(s, 7)?.write_f32(&dw)?;
                }
                if mask[2] {
                    t(s, 8)?.write_f32(&db)?;
                }
                Ok(())
            }
            Op::Embedding => {
                let w = t(s, 0)?;
                let (v, d) = (w.shape[0], w.shape[1] as usize);
                let wv = w.read_f64()?;
                let idx = t(s, 1)?.read_i64()?;
                let mut out = Vec::with_capacity(idx.len() * d);
                for &i in &idx {
                    if i < 0 || i >= v {
                        return Err(inv(format!("embedding index {i} out of range [0,{v})")));
                    }
                    out.extend_from_slice(&wv[i as usize * d..(i as usize + 1) * d]);
                }
                t(s, 2)?.write_f64(&out)
            }
            Op::EmbeddingDenseBackward { num_weights, padding_idx, scale } => {
                let g = t(s, 0)?;
                let d = *g.shape.last().unwrap() as usize;
                let gv = g.read_f32()?;
                let idx = t(s, 1)?.read_i64()?;
                let nw = *num_weights as usize;
                let mut cnt = vec![0usize; nw];
                for &i in &idx {
                    if i >= 0 && (i as usize) < nw {
                        cnt[i as usize] += 1;
                    }
                }
                let mut out = vec![0f32; nw * d];
                for (r, &i) in idx.iter().enumerate() {
                    if i == *padding_idx {
                        continue;
                    }
                    if i < 0 || i as usize >= nw {
                        return Err(inv(format!("index {i} out of range")));
                    }
                    let sc = if *scale { 1.0 / cnt[i as usize] as f32 } else { 1.0 };
                    for j in 0..d {
                        out[i as usize * d + j] += gv[r * d + j] * sc;
                    }
                }
                t(s, 2)?.write_f32(&out)
            }
            Op::Cast { .. } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                if int_move(o, &[a]) {
                    return o.write_i64(&a.read_i64()?); // narrower integers wrap, as torch's casts
                }
                o.write_f64(&a.read_f64()?)
            }
            Op::ReduceSum { dims, mean, nan_zero, .. } => {
                let a = t(s, 0)?;
                let red = reduce_axes(&a.shape, dims)?;
                let mut r = if a.dtype.is_int() || a.dtype == DType::F64 {
                    let mut v = a.read_f64()?;
                    if *nan_zero {
                        v.iter_mut().filter(|x| x.is_nan()).for_each(|x| *x = 0.0);
                    }
                    // exact-ish accumulation for integers / f64
                    let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
                    if a.dtype.is_int() && !*mean {
                        int_sum(&v, &a.shape, &red)
                    } else {
                        k::reduce_sum(&f, &a.shape, &red).into_iter().map(|x| x as f64).collect()
                    }
                } else {
                    let mut f = a.read_f32()?;
                    if *nan_zero {
                        f.iter_mut().filter(|x| x.is_nan()).for_each(|x| *x = 0.0);
                    }
                    k::reduce_sum(&f, &a.shape, &red).into_iter().map(|x| x as f64).collect::<Vec<f64>>()
                };
                if *mean {
                    let cnt: i64 = a.shape.iter().zip(&red).filter(|(_, &r)| r).map(|(&d, _)| d).product();
                    for v in r.iter_mut() {
                        *v /= cnt as f64;
                    }
                }
                t(s, 1)?.write_f64(&r)
            }
            Op::InplaceCopy => {
                let o = t(s, 0)?;
                let b = bview(t(s, 1)?, &o.shape)?;
                if int_move(o, &[&b]) {
                    return o.write_i64(&b.read_i64()?);
                }
                o.write_f64(&b.read_f64()?)
            }
            Op::InplaceZero => {
                let o = t(s, 0)?;
                o.write_f64(&vec![0.0; o.numel()])
            }
            Op::InplaceFill { value, int } => {
                let o = t(s, 0)?;
                match int {
                    Some(i) => o.write_i64(&vec![*i; o.numel()]),
                    None => o.write_f64(&vec![*value; o.numel()]),
                }
            }
            Op::ApplyAdamW { amsgrad, maximize } => {
                let sc = |i: usize| -> Result<f32, i32> { Ok(t(s, i)?.read_f32()?[0]) };
                let (b1p, b2p, lr, wd, b1, b2, eps) = (sc(3)?, sc(4)?, sc(5)?, sc(6)?, sc(7)?, sc(8)?, sc(9)?);
                let mut var = t(s, 0)?.read_f32()?;
                let mut m = t(s, 1)?.read_f32()?;
                let mut v = t(s, 2)?.read_f32()?;
                let g = t(s, 10)?.read_f32()?;
                let mut mx = if *amsgrad { Some(t(s, 11)?.read_f32()?) } else { None };
                let (bc1, bc2) = (1.0 - b1p, 1.0 - b2p);
                for i in 0..var.len() {
                    let gi = if *maximize { -g[i] } else { g[i] };
                    var[i] *= 1.0 - lr * wd;
                    m[i] = m[i] * b1 + (1.0 - b1) * gi;
                    v[i] = v[i] * b2 + (1.0 - b2) * gi * gi;
                    let vv = match mx.as_mut() {
                        Some(mx) => {
                            mx[i] = mx[i].max(v[i]);
                            mx[i]
                        }
                        None => v[i],
                    };
                    let denom = (vv / bc2).sqrt() + eps;
                    var[i] -= lr * (m[i] / bc1) / denom;
                }
                t(s, 0)?.write_f32(&var)?;
                t(s, 1)?.write_f32(&m)?;
                t(s, 2)?.write_f32(&v)?;
                if let Some(mx) = mx {
                    t(s, 11)?.write_f32(&mx)?;
                }
                Ok(())
            }
            Op::Repeat { reps } => {
                let (a, o) = (t(s, 0)?, t(s, 1)?);
                let pad = reps.len() - a.shape.len();
                let ish: Vec<i64> = (0..reps.len()).map(|i| if i < pad { 1 } else { a.shape[i - pad] }).collect();
                let istr = crate::tensor::contiguous_strides(&ish);
                let n = o.numel();
                let mut out = Vec::with_capacity(n);
                let mut idx = vec![0i64; o.shape.len()];
                for _ in 0..n {
                    let mut off = 0i64;
                    for d in 0..idx.len() {
                        off += (idx[d] % ish[d]) * istr[d];
                    }
                    out.push((0, off as usize));
                    for d in (0..idx.len()).rev() {
                        idx[d] += 1;
                        if idx[d] < o.shape[d] {
                            break;
                        }
                        idx[d] = 0;
                    }
                }
                crate::tensor::move_elems(&[a], o, &out)
            }
            Op::Cat { dim } => {
                let SV::L(ts) = &s[0] else { return Err(ACLNN_ERR_PARAM_INVALID) };
                let o = t(s, 1)?;
                let d = norm_dim(*dim, o.shape.len())?;
                let (outer, _, inner) = k::split_dim(&o.shape, d);
                fn join<T: Copy>(ts: &[TView], parts: &[Vec<T>], outer: usize, inner: usize, d: usize) -> Vec<T> {
                    let mut out = Vec::new();
                    for a in 0..outer {
                        for (v, p) in ts.iter().zip(parts) {
                            let blk = v.shape[d] as usize * inner;
                            out.extend_from_slice(&p[a * blk..(a + 1) * blk]);
                        }
                    }
                    out
                }
                if int_move(o, &ts.iter().collect::<Vec<_>>()) {
                    let parts: Vec<Vec<i64>> = ts.iter().map(|v| v.read_i64()).collect::<Result<_, _>>()?;
                    return o.write_i64(&join(ts, &parts, outer, inner, d));
                }
                let parts: Vec<Vec<f64>> = ts.iter().map(|v| v.read_f64()).collect::<Result<_, _>>()?;
                o.write_f64(&join(ts, &parts, outer, inner, d))
            }
        }
    }
}

fn int_sum(v: &[f64], shape: &[i64], red: &[bool]) -> Vec<f64> {
    let out_shape: Vec<i64> = shape.iter().zip(red).map(|(&d, &r)| if r { 1 } else { d }).collect();
    let ostr = crate::tensor::contiguous_strides(&out_shape);
    let mut out = vec![0f64; numel(&out_shape)];
    let mut idx = vec![0i64; shape.len()];
    for &x in v {
        let o: i64 = (0..shape.len()).filter(|&k| !red[k]).map(|k| idx[k] * ostr[k]).sum();
        out[o as usize] += x;
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}
