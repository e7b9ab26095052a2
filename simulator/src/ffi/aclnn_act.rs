//! Elementwise math and activations that torch_npu reaches for torch ops found missing by a probe of 331
//! common torch ops: expm1, log1p, log2/log10, ceil, the trigonometric and hyperbolic functions,
//! hardswish, mish, logsigmoid, leaky_relu, hardtanh (and relu6), softplus, elu, and the backward kernels
//! autograd launches for the activations; their in-place forms and those of the older math functions
//! (`sigmoid_`, `exp_`, `sqrt_`, `pow_`, …); and the scalar-first binaries `2 ** t` and `5 % t`. Without them torch_npu falls back to aclop kernels the
//! simulator does not have, and the op fails.
//!
//! Every function computes in float32 (f16/bf16 rounded to the out dtype), with torch's formulas and NaN
//! rules, stated on each `UFn` variant.
use super::aclnn::{p1, scalar, u, unary};
use crate::consts::ACLNN_ERR_PARAM_INVALID;
use crate::errmsg::fail;
use crate::nnop::Args;
use crate::ops::{Bin, Op, UFn};
use crate::trace::Role::{InOut, Input as In, Output as Out};
use std::os::raw::c_void;

type Status = i32;
type H = *mut c_void;

crate::phase2!(
    aclnnExpm1,
    aclnnErfinv,
    aclnnLog1p,
    aclnnLog2,
    aclnnLog10,
    aclnnCeil,
    aclnnTan,
    aclnnAtan,
    aclnnAsin,
    aclnnAcos,
    aclnnSinh,
    aclnnCosh,
    aclnnHardswish,
    aclnnHardswishBackward,
    aclnnMish,
    aclnnMishBackward,
    aclnnLogSigmoid,
    aclnnLogSigmoidForward,
    aclnnLogSigmoidBackward,
    aclnnLeakyRelu,
    aclnnLeakyReluBackward,
    aclnnHardtanh,
    aclnnHardtanhBackward,
    aclnnSoftplus,
    aclnnSoftplusBackward,
    aclnnElu,
    aclnnEluBackward,
    aclnnPowScalarTensor,
    aclnnRemainderScalarTensor,
    aclnnInplaceLeakyRelu,
    aclnnInplaceHardtanh,
    aclnnInplaceHardswish,
    aclnnInplaceMish,
    aclnnInplaceElu,
    aclnnInplaceSigmoid,
    aclnnInplaceTanh,
    aclnnInplaceExp,
    aclnnInplaceSqrt,
    aclnnInplaceLog,
    aclnnInplaceRsqrt,
    aclnnInplaceReciprocal,
    aclnnInplaceSin,
    aclnnInplaceCos,
    aclnnInplaceErf,
    aclnnInplaceFloor,
    aclnnInplaceRound,
    aclnnInplaceTrunc,
    aclnnInplaceCeil,
    aclnnInplaceExpm1,
    aclnnInplaceErfinv,
    aclnnInplaceLog1p,
    aclnnInplacePowTensorScalar,
);

unary!(aclnnExpm1GetWorkspaceSize, "aclnnExpm1", Op::Unary(UFn::Expm1));
unary!(aclnnErfinvGetWorkspaceSize, "aclnnErfinv", Op::Unary(UFn::Erfinv));
unary!(aclnnLog1pGetWorkspaceSize, "aclnnLog1p", Op::Unary(UFn::Log1p));
unary!(aclnnLog2GetWorkspaceSize, "aclnnLog2", Op::Unary(UFn::Log2));
unary!(aclnnLog10GetWorkspaceSize, "aclnnLog10", Op::Unary(UFn::Log10));
unary!(aclnnCeilGetWorkspaceSize, "aclnnCeil", Op::Unary(UFn::Ceil));
unary!(aclnnTanGetWorkspaceSize, "aclnnTan", Op::Unary(UFn::Tan));
unary!(aclnnAtanGetWorkspaceSize, "aclnnAtan", Op::Unary(UFn::Atan));
unary!(aclnnAsinGetWorkspaceSize, "aclnnAsin", Op::Unary(UFn::Asin));
unary!(aclnnAcosGetWorkspaceSize, "aclnnAcos", Op::Unary(UFn::Acos));
unary!(aclnnSinhGetWorkspaceSize, "aclnnSinh", Op::Unary(UFn::Sinh));
unary!(aclnnCoshGetWorkspaceSize, "aclnnCosh", Op::Unary(UFn::Cosh));
unary!(aclnnHardswishGetWorkspaceSize, "aclnnHardswish", Op::Unary(UFn::Hardswish));
unary!(aclnnMishGetWorkspaceSize, "aclnnMish", Op::Unary(UFn::Mish));
unary!(aclnnLogSigmoidGetWorkspaceSize, "aclnnLogSigmoid", Op::Unary(UFn::LogSigmoid));

/// `(gradOutput, self, <out>)` backward kernels: gradInput = gradOutput · f'(self).
fn backward(
    name: &'static str,
    g: H,
    x: H,
    out_name: &'static str,
    out: H,
    f: UFn,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1(name, ws, ex, || {
        let mut a = Args::new();
        a.t(In, "gradOutput", u(g))?.t(In, "self", u(x))?.t(Out, out_name, u(out))?;
        Ok((Op::UnaryBackward(f), a))
    })
}

/// `aclnnHardswishBackward(gradOutput, self, out)`.
#[no_mangle]
pub extern "C" fn aclnnHardswishBackwardGetWorkspaceSize(g: H, x: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    backward("aclnnHardswishBackward", g, x, "out", out, UFn::Hardswish, ws, ex)
}

/// `aclnnMishBackward(gradOutput, self, gradInput)`.
#[no_mangle]
pub extern "C" fn aclnnMishBackwardGetWorkspaceSize(g: H, x: H, gi: H, ws: *mut u64, ex: *mut H) -> Status {
    backward("aclnnMishBackward", g, x, "gradInput", gi, UFn::Mish, ws, ex)
}

/// `aclnnLogSigmoidForward(self, out, buffer)`: torch's `log_sigmoid_forward`; `buffer` is a workspace
/// output that torch_npu allocates and passes on to the backward, which does not read it (neither does
/// torch's CPU kernel); the simulator leaves it as it was.
#[no_mangle]
pub extern "C" fn aclnnLogSigmoidForwardGetWorkspaceSize(x: H, out: H, buffer: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnLogSigmoidForward", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(Out, "out", u(out))?;
        if !buffer.is_null() {
            a.t(Out, "buffer", u(buffer))?;
        }
        Ok((Op::Unary(UFn::LogSigmoid), a))
    })
}

/// `aclnnLogSigmoidBackward(gradOutput, self, buffer, gradInput)`; `buffer` is an input that is not read
/// (a NULL one is accepted); it is in the launch's inputs, after the slots the kernel uses.
#[no_mangle]
pub extern "C" fn aclnnLogSigmoidBackwardGetWorkspaceSize(
    g: H,
    x: H,
    buffer: H,
    gi: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnLogSigmoidBackward", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "gradOutput", u(g))?.t(In, "self", u(x))?.t(Out, "gradInput", u(gi))?;
        if !buffer.is_null() {
            a.t(In, "buffer", u(buffer))?;
        }
        Ok((Op::UnaryBackward(UFn::LogSigmoid), a))
    })
}

fn activation(name: &'static str, x: H, out: H, f: Result<UFn, i32>, ws: *mut u64, ex: *mut H) -> Status {
    p1(name, ws, ex, || {
        let f = f?;
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(Out, "out", u(out))?;
        Ok((Op::Unary(f), a))
    })
}

fn f32_scalar(h: H, what: &str) -> Result<f32, i32> {
    scalar(h, what).map(|v| v as f32)
}

/// `aclnnLeakyRelu(self, const aclScalar *negativeSlope, out)`.
#[no_mangle]
pub extern "C" fn aclnnLeakyReluGetWorkspaceSize(x: H, slope: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    activation("aclnnLeakyRelu", x, out, f32_scalar(slope, "negativeSlope").map(UFn::LeakyRelu), ws, ex)
}

/// `aclnnLeakyReluBackward(gradOutput, self, const aclScalar *negativeSlope, bool selfIsResult, out)`: with
/// `selfIsResult` the slope must be >= 0 (CANN refuses others), and then the sign test on the result is the
/// one on the input.
#[no_mangle]
pub extern "C" fn aclnnLeakyReluBackwardGetWorkspaceSize(
    g: H,
    x: H,
    slope: H,
    self_is_result: bool,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    match f32_scalar(slope, "negativeSlope") {
        Ok(s) if self_is_result && s < 0.0 => fail(
            ACLNN_ERR_PARAM_INVALID,
            format!("aclnnLeakyReluBackward: negativeSlope {s} must be >= 0 when selfIsResult is true"),
        ),
        Ok(s) => backward("aclnnLeakyReluBackward", g, x, "out", out, UFn::LeakyRelu(s), ws, ex),
        Err(e) => e,
    }
}

fn bounds(lo: H, hi: H, lo_name: &str, hi_name: &str) -> Result<UFn, i32> {
    Ok(UFn::Hardtanh(f32_scalar(lo, lo_name)?, f32_scalar(hi, hi_name)?))
}

/// `aclnnHardtanh(self, const aclScalar *clipValueMin, const aclScalar *clipValueMax, out)`.
#[no_mangle]
pub extern "C" fn aclnnHardtanhGetWorkspaceSize(x: H, lo: H, hi: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    activation("aclnnHardtanh", x, out, bounds(lo, hi, "clipValueMin", "clipValueMax"), ws, ex)
}

/// `aclnnHardtanhBackward(gradOutput, self, const aclScalar *min, const aclScalar *max, out)`.
#[no_mangle]
pub extern "C" fn aclnnHardtanhBackwardGetWorkspaceSize(
    g: H,
    x: H,
    lo: H,
    hi: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    match bounds(lo, hi, "min", "max") {
        Ok(f) => backward("aclnnHardtanhBackward", g, x, "out", out, f, ws, ex),
        Err(e) => e,
    }
}

fn softplus(beta: H, threshold: H) -> Result<UFn, i32> {
    Ok(UFn::Softplus(f32_scalar(beta, "beta")?, f32_scalar(threshold, "threshold")?))
}

/// `aclnnSoftplus(self, const aclScalar *beta, const aclScalar *threshold, out)`.
#[no_mangle]
pub extern "C" fn aclnnSoftplusGetWorkspaceSize(
    x: H,
    beta: H,
    threshold: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    activation("aclnnSoftplus", x, out, softplus(beta, threshold), ws, ex)
}

/// `aclnnSoftplusBackward(gradOutput, self, const aclScalar *beta, const aclScalar *threshold, gradInput)`.
#[no_mangle]
pub extern "C" fn aclnnSoftplusBackwardGetWorkspaceSize(
    g: H,
    x: H,
    beta: H,
    threshold: H,
    gi: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    match softplus(beta, threshold) {
        Ok(f) => backward("aclnnSoftplusBackward", g, x, "gradInput", gi, f, ws, ex),
        Err(e) => e,
    }
}

fn elu(alpha: H, scale: H, input_scale: H, from_result: bool) -> Result<UFn, i32> {
    Ok(UFn::Elu {
        alpha: f32_scalar(alpha, "alpha")?,
        scale: f32_scalar(scale, "scale")?,
        input_scale: f32_scalar(input_scale, "inputScale")?,
        from_result,
    })
}

/// `aclnnElu(self, const aclScalar *alpha, const aclScalar *scale, const aclScalar *inputScale, out)`.
#[no_mangle]
pub extern "C" fn aclnnEluGetWorkspaceSize(
    x: H,
    alpha: H,
    scale: H,
    input_scale: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    activation("aclnnElu", x, out, elu(alpha, scale, input_scale, false), ws, ex)
}

/// `aclnnEluBackward(gradOutput, alpha, scale, inputScale, bool isResult, selfOrResult, gradInput)`: with
/// isResult the gradient is taken from the forward's output (torch's in-place elu), and alpha must be >= 0.
#[no_mangle]
pub extern "C" fn aclnnEluBackwardGetWorkspaceSize(
    g: H,
    alpha: H,
    scale: H,
    input_scale: H,
    is_result: bool,
    self_or_result: H,
    gi: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    match elu(alpha, scale, input_scale, is_result) {
        Ok(UFn::Elu { alpha, .. }) if is_result && alpha < 0.0 => {
            fail(ACLNN_ERR_PARAM_INVALID, format!("aclnnEluBackward: alpha {alpha} must be >= 0 when isResult is true"))
        }
        Ok(f) => p1("aclnnEluBackward", ws, ex, || {
            let mut a = Args::new();
            a.t(In, "gradOutput", u(g))?.t(In, "selfOrResult", u(self_or_result))?.t(Out, "gradInput", u(gi))?;
            Ok((Op::UnaryBackward(f), a))
        }),
        Err(e) => e,
    }
}

fn scalar_first(name: &'static str, op: Bin, x: H, other: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1(name, ws, ex, || {
        let scalar = scalar(x, "self")?;
        let mut a = Args::new();
        a.t(In, "other", u(other))?.t(Out, "out", u(out))?;
        Ok((Op::ScalarBinary { op, scalar }, a))
    })
}

/// `aclnnPowScalarTensor(const aclScalar *self, const aclTensor *exponent, out)`: self ** exponent
/// (torch's `2 ** t`), computed in f64 and rounded to out's dtype.
#[no_mangle]
pub extern "C" fn aclnnPowScalarTensorGetWorkspaceSize(x: H, exponent: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    scalar_first("aclnnPowScalarTensor", Bin::Pow, x, exponent, out, ws, ex)
}

/// `aclnnRemainderScalarTensor(const aclScalar *self, const aclTensor *other, out)`: self % other with the
/// sign of other (torch's `5 % t`).
#[no_mangle]
pub extern "C" fn aclnnRemainderScalarTensorGetWorkspaceSize(
    x: H,
    other: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    scalar_first("aclnnRemainderScalarTensor", Bin::Rem, x, other, out, ws, ex)
}

/// The in-place forms (`nn.ReLU6(inplace=True)`, `nn.Hardswish(inplace=True)`, `leaky_relu_`, `elu_`, …).
fn in_place(name: &'static str, x: H, f: Result<UFn, i32>, ws: *mut u64, ex: *mut H) -> Status {
    p1(name, ws, ex, || {
        let f = f?;
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(x))?;
        Ok((Op::InplaceUnary(f), a))
    })
}

/// `aclnnInplaceLeakyRelu(aclTensor *selfRef, const aclScalar *negativeSlope)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceLeakyReluGetWorkspaceSize(x: H, slope: H, ws: *mut u64, ex: *mut H) -> Status {
    in_place("aclnnInplaceLeakyRelu", x, f32_scalar(slope, "negativeSlope").map(UFn::LeakyRelu), ws, ex)
}

/// `aclnnInplaceHardtanh(aclTensor *selfRef, const aclScalar *clipValueMin, const aclScalar *clipValueMax)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceHardtanhGetWorkspaceSize(x: H, lo: H, hi: H, ws: *mut u64, ex: *mut H) -> Status {
    in_place("aclnnInplaceHardtanh", x, bounds(lo, hi, "clipValueMin", "clipValueMax"), ws, ex)
}

/// `aclnnInplaceHardswish(const aclTensor *self)` (CANN names the in-out tensor `self`).
#[no_mangle]
pub extern "C" fn aclnnInplaceHardswishGetWorkspaceSize(x: H, ws: *mut u64, ex: *mut H) -> Status {
    in_place("aclnnInplaceHardswish", x, Ok(UFn::Hardswish), ws, ex)
}

/// `aclnnInplaceMish(aclTensor *selfRef)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceMishGetWorkspaceSize(x: H, ws: *mut u64, ex: *mut H) -> Status {
    in_place("aclnnInplaceMish", x, Ok(UFn::Mish), ws, ex)
}

/// `aclnnInplaceElu(aclTensor *selfRef, const aclScalar *alpha, const aclScalar *scale, const aclScalar *inputScale)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceEluGetWorkspaceSize(
    x: H,
    alpha: H,
    scale: H,
    input_scale: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    in_place("aclnnInplaceElu", x, elu(alpha, scale, input_scale, false), ws, ex)
}

/// `aclnnInplaceX(aclTensor *selfRef)` of the elementwise math functions (`sigmoid_`, `exp_`, `sqrt_`, …).
macro_rules! in_place_math {
    ($($name:ident, $p2:literal, $f:expr;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(x: H, ws: *mut u64, ex: *mut H) -> Status {
            in_place($p2, x, Ok($f), ws, ex)
        }
    )*};
}
in_place_math! {
    aclnnInplaceSigmoidGetWorkspaceSize, "aclnnInplaceSigmoid", UFn::Sigmoid;
    aclnnInplaceTanhGetWorkspaceSize, "aclnnInplaceTanh", UFn::Tanh;
    aclnnInplaceExpGetWorkspaceSize, "aclnnInplaceExp", UFn::Exp;
    aclnnInplaceSqrtGetWorkspaceSize, "aclnnInplaceSqrt", UFn::Sqrt;
    aclnnInplaceLogGetWorkspaceSize, "aclnnInplaceLog", UFn::Log;
    aclnnInplaceRsqrtGetWorkspaceSize, "aclnnInplaceRsqrt", UFn::Rsqrt;
    aclnnInplaceReciprocalGetWorkspaceSize, "aclnnInplaceReciprocal", UFn::Reciprocal;
    aclnnInplaceSinGetWorkspaceSize, "aclnnInplaceSin", UFn::Sin;
    aclnnInplaceCosGetWorkspaceSize, "aclnnInplaceCos", UFn::Cos;
    aclnnInplaceErfGetWorkspaceSize, "aclnnInplaceErf", UFn::Erf;
    aclnnInplaceFloorGetWorkspaceSize, "aclnnInplaceFloor", UFn::Floor;
    aclnnInplaceRoundGetWorkspaceSize, "aclnnInplaceRound", UFn::Round;
    aclnnInplaceTruncGetWorkspaceSize, "aclnnInplaceTrunc", UFn::Trunc;
    aclnnInplaceCeilGetWorkspaceSize, "aclnnInplaceCeil", UFn::Ceil;
    aclnnInplaceExpm1GetWorkspaceSize, "aclnnInplaceExpm1", UFn::Expm1;
    aclnnInplaceErfinvGetWorkspaceSize, "aclnnInplaceErfinv", UFn::Erfinv;
    aclnnInplaceLog1pGetWorkspaceSize, "aclnnInplaceLog1p", UFn::Log1p;
}

/// `aclnnInplacePowTensorScalar(aclTensor *selfRef, const aclScalar *exponent)` (`pow_(2)`).
#[no_mangle]
pub extern "C" fn aclnnInplacePowTensorScalarGetWorkspaceSize(x: H, exponent: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnInplacePowTensorScalar", ws, ex, || {
        let other = scalar(exponent, "exponent")?;
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(x))?;
        Ok((Op::InplaceBinaryScalar { op: Bin::Pow, other, alpha: 1.0 }, a))
    })
}
