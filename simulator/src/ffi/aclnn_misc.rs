//! aclnnRepeatInterleave(*), aclnnIndexAdd, aclnnBincount, aclnnPrelu(+Backward), aclnnGlu(+Backward),
//! aclnnIsClose (signatures from CANN's ops-nn / ops-math headers): the C arguments →
//! [`crate::ops_misc::MiscOp`] and its slots.
use super::aclnn::{int_array, p1, scalar, u};
use crate::nnop::Args;
use crate::ops::Op;
use crate::ops_misc::MiscOp;
use crate::trace::Role::{InOut, Input as In, Output as Out};
use std::os::raw::c_void;

type Status = i32;
type H = *mut c_void;

crate::phase2!(
    aclnnRepeatInterleave,
    aclnnRepeatInterleaveWithDim,
    aclnnRepeatInterleaveInt,
    aclnnRepeatInterleaveIntWithDim,
    aclnnRepeatInterleaveTensor,
    aclnnIndexAdd,
    aclnnBincount,
    aclnnPrelu,
    aclnnPreluBackward,
    aclnnGlu,
    aclnnGluBackward,
    aclnnIsClose,
    aclnnIndexFillTensor,
    aclnnInplaceIndexFillTensor,
    aclnnStdMeanCorrection,
    aclnnDot,
    aclnnKthvalue,
    aclnnCummax,
    aclnnLinalgCross,
    aclnnAdaptiveMaxPool2d,
    aclnnAdaptiveMaxPool2dBackward,
    aclnnCdist,
    aclnnLeftShift,
    aclnnLeftShifts,
    aclnnRightShift,
    aclnnSwiGlu,
    aclnnSwiGluGrad,
    aclnnRmsNorm,
    aclnnRmsNormGrad,
    aclnnAddRmsNorm,
    aclnnFastGelu,
    aclnnFastGeluBackward,
    aclnnScaledMaskedSoftmax,
    aclnnScaledMaskedSoftmaxBackward,
);

fn misc(m: MiscOp) -> Op {
    Op::Misc(Box::new(m))
}

/// The four self-taking repeat_interleave forms: (self, repeats tensor or count, [dim], outputSize, out).
fn repeat(
    name: &'static str,
    x: H,
    reps: Option<H>,
    count: Option<i64>,
    dim: Option<i64>,
    size: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1(name, ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(In, "repeats", reps.map_or(0, u))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::RepeatInterleave { count, dim, output_size: size }), a))
    })
}

/// `aclnnRepeatInterleave(self, const aclTensor *repeats, int64_t outputSize, out)` (flattened).
#[no_mangle]
pub extern "C" fn aclnnRepeatInterleaveGetWorkspaceSize(
    x: H,
    reps: H,
    size: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    repeat("aclnnRepeatInterleave", x, Some(reps), None, None, size, out, ws, ex)
}

/// `aclnnRepeatInterleaveWithDim(self, const aclTensor *repeats, int64_t dim, int64_t outputSize, out)`.
#[no_mangle]
pub extern "C" fn aclnnRepeatInterleaveWithDimGetWorkspaceSize(
    x: H,
    reps: H,
    dim: i64,
    size: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    repeat("aclnnRepeatInterleaveWithDim", x, Some(reps), None, Some(dim), size, out, ws, ex)
}

/// `aclnnRepeatInterleaveInt(self, int64_t repeats, int64_t outputSize, out)` (flattened).
#[no_mangle]
pub extern "C" fn aclnnRepeatInterleaveIntGetWorkspaceSize(
    x: H,
    reps: i64,
    size: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    repeat("aclnnRepeatInterleaveInt", x, None, Some(reps), None, size, out, ws, ex)
}

/// `aclnnRepeatInterleaveIntWithDim(self, int64_t repeats, int64_t dim, int64_t outputSize, out)`.
#[no_mangle]
pub extern "C" fn aclnnRepeatInterleaveIntWithDimGetWorkspaceSize(
    x: H,
    reps: i64,
    dim: i64,
    size: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    repeat("aclnnRepeatInterleaveIntWithDim", x, None, Some(reps), Some(dim), size, out, ws, ex)
}

/// `aclnnRepeatInterleaveTensor(const aclTensor *repeats, int64_t outputSize, out)`.
#[no_mangle]
pub extern "C" fn aclnnRepeatInterleaveTensorGetWorkspaceSize(
    reps: H,
    size: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnRepeatInterleaveTensor", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "repeats", u(reps))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::RepeatIndices { output_size: size }), a))
    })
}

/// `aclnnIndexAdd(self, const int64_t dim, index, source, const aclScalar *alpha, out)`.
#[no_mangle]
pub extern "C" fn aclnnIndexAddGetWorkspaceSize(
    x: H,
    dim: i64,
    index: H,
    source: H,
    alpha: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnIndexAdd", ws, ex, || {
        let alpha = scalar(alpha, "alpha")?;
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(In, "index", u(index))?.t(In, "source", u(source))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::IndexAdd { dim, alpha }), a))
    })
}

/// `aclnnBincount(self, const aclTensor *weights (may be NULL), int64_t minlength, out)`.
#[no_mangle]
pub extern "C" fn aclnnBincountGetWorkspaceSize(
    x: H,
    weights: H,
    minlength: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnBincount", ws, ex, || {
        if minlength < 0 {
            return Err(crate::ops_ext::inv(format!("minlength {minlength} must not be negative")));
        }
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(In, "weights", u(weights))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::Bincount), a))
    })
}

/// `aclnnPreluBackward(gradOutput, self, weight, gradInput, gradWeight)`.
#[no_mangle]
pub extern "C" fn aclnnPreluBackwardGetWorkspaceSize(
    g: H,
    x: H,
    weight: H,
    gx: H,
    gw: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnPreluBackward", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "gradOutput", u(g))?.t(In, "self", u(x))?.t(In, "weight", u(weight))?;
        a.t(Out, "gradInput", u(gx))?.t(Out, "gradWeight", u(gw))?;
        Ok((misc(MiscOp::PreluBackward), a))
    })
}

/// `aclnnGlu(self, int64_t dim, out)`.
#[no_mangle]
pub extern "C" fn aclnnGluGetWorkspaceSize(x: H, dim: i64, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnGlu", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::Glu { dim, swi: false }), a))
    })
}

/// `aclnnGluBackward(gradOut, self, int64_t dim, out)`: out is the input's gradient.
#[no_mangle]
pub extern "C" fn aclnnGluBackwardGetWorkspaceSize(g: H, x: H, dim: i64, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnGluBackward", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "gradOut", u(g))?.t(In, "self", u(x))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::GluBackward { dim, swi: false }), a))
    })
}

/// `aclnnSwiGlu(x, int64_t dim, out)` (CANN 8.x `aclnn_swi_glu.h`): silu(a) · b, (a, b) the halves of x
/// along `dim`; torch_npu.npu_swiglu.
#[no_mangle]
pub extern "C" fn aclnnSwiGluGetWorkspaceSize(x: H, dim: i64, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnSwiGlu", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "x", u(x))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::Glu { dim, swi: true }), a))
    })
}

/// `aclnnSwiGluGrad(yGrad, x, int64_t dim, out)`: out is x's gradient.
#[no_mangle]
pub extern "C" fn aclnnSwiGluGradGetWorkspaceSize(g: H, x: H, dim: i64, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnSwiGluGrad", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "yGrad", u(g))?.t(In, "x", u(x))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::GluBackward { dim, swi: true }), a))
    })
}

/// `aclnnRmsNorm(x, gamma, double epsilon, yOut, rstdOut)` (CANN 8.x `aclnn_rms_norm.h`);
/// torch_npu.npu_rms_norm.
#[no_mangle]
pub extern "C" fn aclnnRmsNormGetWorkspaceSize(
    x: H,
    gamma: H,
    epsilon: f64,
    y: H,
    rstd: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnRmsNorm", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "x", u(x))?.t(In, "gamma", u(gamma))?.t(Out, "yOut", u(y))?.t(Out, "rstdOut", u(rstd))?;
        Ok((misc(MiscOp::RmsNorm { eps: epsilon }), a))
    })
}

/// `aclnnAddRmsNorm(x1, x2, gamma, double epsilon, yOut, rstdOut, xOut)` (CANN 8.x `aclnn_add_rms_norm.h`);
/// torch_npu.npu_add_rms_norm.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn aclnnAddRmsNormGetWorkspaceSize(
    x1: H,
    x2: H,
    gamma: H,
    epsilon: f64,
    y: H,
    rstd: H,
    x: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnAddRmsNorm", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "x1", u(x1))?.t(In, "x2", u(x2))?.t(In, "gamma", u(gamma))?;
        a.t(Out, "yOut", u(y))?.t(Out, "rstdOut", u(rstd))?.t(Out, "xOut", u(x))?;
        Ok((misc(MiscOp::AddRmsNorm { eps: epsilon }), a))
    })
}

/// `aclnnScaledMaskedSoftmax(x, mask, double scale, bool fixTriuMask, y)`; torch_npu.npu_scaled_masked_softmax.
#[no_mangle]
pub extern "C" fn aclnnScaledMaskedSoftmaxGetWorkspaceSize(
    x: H,
    mask: H,
    scale: f64,
    fix_triu_mask: bool,
    y: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnScaledMaskedSoftmax", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "x", u(x))?.t(In, "mask", u(mask))?.t(Out, "y", u(y))?;
        Ok((misc(MiscOp::ScaledMaskedSoftmax { scale, triu: fix_triu_mask }), a))
    })
}

/// `aclnnScaledMaskedSoftmaxBackward(gradOutput, y, mask, double scale, bool fixTriuMask, out)`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize(
    g: H,
    y: H,
    mask: H,
    scale: f64,
    fix_triu_mask: bool,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnScaledMaskedSoftmaxBackward", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "gradOutput", u(g))?.t(In, "y", u(y))?.t(In, "mask", u(mask))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::ScaledMaskedSoftmaxBackward { scale, triu: fix_triu_mask }), a))
    })
}

/// `aclnnFastGelu(self, out)`; torch_npu.npu_fast_gelu.
#[no_mangle]
pub extern "C" fn aclnnFastGeluGetWorkspaceSize(x: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnFastGelu", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::FastGelu), a))
    })
}

/// `aclnnFastGeluBackward(gradOutput, self, gradInput)`.
#[no_mangle]
pub extern "C" fn aclnnFastGeluBackwardGetWorkspaceSize(g: H, x: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnFastGeluBackward", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "gradOutput", u(g))?.t(In, "self", u(x))?.t(Out, "gradInput", u(out))?;
        Ok((misc(MiscOp::FastGeluBackward), a))
    })
}

/// `aclnnRmsNormGrad(dy, x, rstd, gamma, dxOut, dgammaOut)` (CANN 8.x `aclnn_rms_norm_grad.h`).
#[no_mangle]
pub extern "C" fn aclnnRmsNormGradGetWorkspaceSize(
    dy: H,
    x: H,
    rstd: H,
    gamma: H,
    dx: H,
    dgamma: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnRmsNormGrad", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "dy", u(dy))?.t(In, "x", u(x))?.t(In, "rstd", u(rstd))?.t(In, "gamma", u(gamma))?;
        a.t(Out, "dxOut", u(dx))?.t(Out, "dgammaOut", u(dgamma))?;
        Ok((misc(MiscOp::RmsNormGrad), a))
    })
}

/// `aclnnIsClose(self, other, double rtol, double atol, bool equalNan, out)`.
#[no_mangle]
pub extern "C" fn aclnnIsCloseGetWorkspaceSize(
    x: H,
    other: H,
    rtol: f64,
    atol: f64,
    equal_nan: bool,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnIsClose", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(In, "other", u(other))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::IsClose { rtol, atol, equal_nan }), a))
    })
}

/// `aclnnIndexFillTensor(self, int64_t dim, const aclIntArray *index, const aclScalar *value, out)`.
#[no_mangle]
pub extern "C" fn aclnnIndexFillTensorGetWorkspaceSize(
    x: H,
    dim: i64,
    index: H,
    value: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnIndexFillTensor", ws, ex, || {
        let (index, value) = (int_array(index, "index")?, scalar(value, "value")?);
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::IndexFill { dim, index, value, in_place: false }), a))
    })
}

/// `aclnnInplaceIndexFillTensor(aclTensor *selfRef, int64_t dim, const aclIntArray *index, const aclScalar *value)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceIndexFillTensorGetWorkspaceSize(
    x: H,
    dim: i64,
    index: H,
    value: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnInplaceIndexFillTensor", ws, ex, || {
        let (index, value) = (int_array(index, "index")?, scalar(value, "value")?);
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(x))?;
        Ok((misc(MiscOp::IndexFill { dim, index, value, in_place: true }), a))
    })
}

/// `aclnnStdMeanCorrection(self, const aclIntArray *dim, int64_t correction, bool keepdim, stdOut, meanOut)`.
#[no_mangle]
pub extern "C" fn aclnnStdMeanCorrectionGetWorkspaceSize(
    x: H,
    dim: H,
    correction: i64,
    keep: bool,
    std_out: H,
    mean_out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnStdMeanCorrection", ws, ex, || {
        let dims = if dim.is_null() { Vec::new() } else { int_array(dim, "dim")? };
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(Out, "stdOut", u(std_out))?.t(Out, "meanOut", u(mean_out))?;
        Ok((misc(MiscOp::StdMean { dims, correction, keep }), a))
    })
}

/// `aclnnKthvalue(self, int64_t k, int64_t dim, bool keepdim, valuesOut, indicesOut)`.
#[no_mangle]
pub extern "C" fn aclnnKthvalueGetWorkspaceSize(
    x: H,
    k: i64,
    dim: i64,
    keep: bool,
    values: H,
    indices: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnKthvalue", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(Out, "valuesOut", u(values))?.t(Out, "indicesOut", u(indices))?;
        Ok((misc(MiscOp::Kthvalue { k, dim, keep }), a))
    })
}

/// `aclnnCummax(self, int64_t dim, valuesOut, indicesOut)`.
#[no_mangle]
pub extern "C" fn aclnnCummaxGetWorkspaceSize(
    x: H,
    dim: i64,
    values: H,
    indices: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnCummax", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(Out, "valuesOut", u(values))?.t(Out, "indicesOut", u(indices))?;
        Ok((misc(MiscOp::Cummax { dim }), a))
    })
}

/// `aclnnLinalgCross(self, other, int64_t dim, out)`.
#[no_mangle]
pub extern "C" fn aclnnLinalgCrossGetWorkspaceSize(
    x: H,
    other: H,
    dim: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnLinalgCross", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(In, "other", u(other))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::Cross { dim }), a))
    })
}

/// `aclnnAdaptiveMaxPool2d(self, const aclIntArray *outputSize, outputOut, indicesOut)`.
#[no_mangle]
pub extern "C" fn aclnnAdaptiveMaxPool2dGetWorkspaceSize(
    x: H,
    size: H,
    out: H,
    indices: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnAdaptiveMaxPool2d", ws, ex, || {
        let o = match int_array(size, "outputSize")?[..] {
            [a, b] => [a, b],
            ref v => return Err(crate::ops_ext::inv(format!("outputSize must have 2 elements, got {v:?}"))),
        };
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(Out, "outputOut", u(out))?.t(Out, "indicesOut", u(indices))?;
        Ok((misc(MiscOp::AdaptiveMaxPool2d { out: o }), a))
    })
}

/// `aclnnAdaptiveMaxPool2dBackward(gradOutput, self, indices, gradInput)`.
#[no_mangle]
pub extern "C" fn aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize(
    g: H,
    x: H,
    indices: H,
    gx: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnAdaptiveMaxPool2dBackward", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "gradOutput", u(g))?.t(In, "self", u(x))?.t(In, "indices", u(indices))?.t(Out, "gradInput", u(gx))?;
        Ok((misc(MiscOp::AdaptiveMaxPool2dBackward), a))
    })
}

/// `aclnnCdist(x1, x2, float p, int64_t compute_mode, out)`: compute_mode only picks how a device
/// computes p = 2, the values are the same.
#[no_mangle]
pub extern "C" fn aclnnCdistGetWorkspaceSize(
    x1: H,
    x2: H,
    p: f32,
    mode: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnCdist", ws, ex, || {
        if !(0..=2).contains(&mode) {
            return Err(crate::ops_ext::inv(format!("compute_mode {mode} must be 0, 1 or 2")));
        }
        let mut a = Args::new();
        a.t(In, "x1", u(x1))?.t(In, "x2", u(x2))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::Cdist { p: p.into() }), a))
    })
}

/// The `(self, const aclTensor *<second>, out)` forms: `aclnnPrelu(self, weight, out)`,
/// `aclnnDot(self, tensor, out)`, `aclnnLeftShift` / `aclnnRightShift(self, shiftBits, out)`.
macro_rules! self_tensor_out {
    ($name:ident, $p2:literal, $second:literal, $op:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(x: H, y: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(In, "self", u(x))?.t(In, $second, u(y))?.t(Out, "out", u(out))?;
                Ok((misc($op), a))
            })
        }
    };
}
self_tensor_out!(aclnnPreluGetWorkspaceSize, "aclnnPrelu", "weight", MiscOp::Prelu);
self_tensor_out!(aclnnDotGetWorkspaceSize, "aclnnDot", "tensor", MiscOp::Dot);
self_tensor_out!(
    aclnnLeftShiftGetWorkspaceSize,
    "aclnnLeftShift",
    "shiftBits",
    MiscOp::Shift { left: true, scalar: None }
);
self_tensor_out!(
    aclnnRightShiftGetWorkspaceSize,
    "aclnnRightShift",
    "shiftBits",
    MiscOp::Shift { left: false, scalar: None }
);

/// `aclnnLeftShifts(self, const aclScalar *shiftBits, out)`.
#[no_mangle]
pub extern "C" fn aclnnLeftShiftsGetWorkspaceSize(x: H, bits: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnLeftShifts", ws, ex, || {
        let k = scalar(bits, "shiftBits")?;
        if k.fract() != 0.0 {
            return Err(crate::ops_ext::inv(format!("shiftBits {k} must be an integer")));
        }
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(Out, "out", u(out))?;
        Ok((misc(MiscOp::Shift { left: true, scalar: Some(k as i64) }), a))
    })
}
