//! aclnn functions MindSpore 2.10's Ascend plugin resolves (real-clients.md §6.2) that the other files lack:
//! Tanh / Sigmoid and their backward, Erf, GeluV2 (approximate 0 = erf, 1 = tanh) / GeluBackwardV2 ("none" / "tanh"), Clamp, Permute,
//! PowTensorTensor, PowTensorScalar, ApplyAdamWV2, SplitWithSize, LinalgVectorNorm and Stack (`mint.norm`,
//! `mint.stack`: msprobe's MindSpore statistics and our device statistics), and the nnopbase thread-local huge-memory hooks (InitHugeMemThreadLocal,
//! UnInitHugeMemThreadLocal, ReleaseHugeMem) that clients wrap around every aclnn call.
use super::aclnn::{int_array, p1, scalar, u, unary};
use crate::aclop_nn::Nn;
use crate::consts::*;
use crate::errmsg::fail;
use crate::nnop::Args;
use crate::ops::{Bin, Op, UFn};
use crate::ops_ext::ExtOp;
use crate::trace::Role::{InOut, Input as In, Output as Out};
use std::os::raw::{c_char, c_void};

type Status = i32;
type H = *mut c_void;

fn nn(n: Nn) -> Op {
    Op::Ext(Box::new(ExtOp::Nn(n)))
}
fn inv(msg: impl Into<String>) -> i32 {
    fail(ACLNN_ERR_PARAM_INVALID, msg)
}

crate::phase2!(
    aclnnTanh,
    aclnnSigmoid,
    aclnnErf,
    aclnnSin,
    aclnnCos,
    aclnnFloor,
    aclnnRound,
    aclnnReciprocal,
    aclnnSign,
    aclnnTanhBackward,
    aclnnSigmoidBackward,
    aclnnGeluV2,
    aclnnGeluBackwardV2,
    aclnnClamp,
    aclnnTrunc,
    aclnnRsqrt,
    aclnnClampMin,
    aclnnClampMax,
    aclnnInplaceClampMax,
    aclnnClampTensor,
    aclnnClampMinTensor,
    aclnnClampMaxTensor,
    aclnnInplaceClampMinTensor,
    aclnnInplaceClampMaxTensor,
    aclnnPermute,
    aclnnPowTensorTensor,
    aclnnPowTensorScalar,
    aclnnApplyAdamWV2,
    aclnnSplitWithSize,
    aclnnLinalgVectorNorm,
    aclnnStack,
);

/// `aclnnLinalgVectorNorm(self, const aclScalar *ord, const aclIntArray *dims, bool keepDims,
/// aclDataType dtype, out)`: (sum |x|^ord)^(1/ord) over `dims` (all when empty), as aclnnNorm;
/// `dtype` (the compute type, FLOAT or FLOAT16 per CANN's header, BFLOAT16 accepted as by its
/// newer releases) must be a float type. Computed in f64 and rounded to out's dtype.
#[no_mangle]
pub extern "C" fn aclnnLinalgVectorNormGetWorkspaceSize(
    self_: H,
    ord: H,
    dims: H,
    keep_dims: bool,
    dtype: i32,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnLinalgVectorNorm", ws, ex, || {
        let p = scalar(ord, "ord")?;
        if p < 0.0 || p.is_nan() {
            return Err(inv(format!("aclnnLinalgVectorNorm: ord = {p} is not supported")));
        }
        if !matches!(crate::dtype::DType::from_acl(dtype), Some(d) if d.is_float()) {
            return Err(inv(format!("aclnnLinalgVectorNorm: dtype {dtype} is not a float type")));
        }
        let dims = int_array(dims, "dims")?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((Op::Ext(Box::new(ExtOp::Norm { p, dims, keep: keep_dims })), a))
    })
}

/// `aclnnStack(const aclTensorList *tensors, int64_t dim, out)`.
#[no_mangle]
pub extern "C" fn aclnnStackGetWorkspaceSize(tensors: H, dim: i64, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnStack", ws, ex, || {
        let mut a = Args::new();
        a.list(In, "tensors", u(tensors))?.t(Out, "out", u(out))?;
        Ok((Op::Ext(Box::new(ExtOp::Stack { dim })), a))
    })
}

unary!(aclnnTanhGetWorkspaceSize, "aclnnTanh", Op::Unary(UFn::Tanh));
unary!(aclnnSigmoidGetWorkspaceSize, "aclnnSigmoid", Op::Unary(UFn::Sigmoid));
unary!(aclnnErfGetWorkspaceSize, "aclnnErf", Op::Unary(UFn::Erf));
unary!(aclnnSinGetWorkspaceSize, "aclnnSin", Op::Unary(UFn::Sin));
unary!(aclnnCosGetWorkspaceSize, "aclnnCos", Op::Unary(UFn::Cos));
unary!(aclnnFloorGetWorkspaceSize, "aclnnFloor", Op::Unary(UFn::Floor));
unary!(aclnnTruncGetWorkspaceSize, "aclnnTrunc", Op::Unary(UFn::Trunc));
unary!(aclnnRsqrtGetWorkspaceSize, "aclnnRsqrt", Op::Unary(UFn::Rsqrt));
unary!(aclnnRoundGetWorkspaceSize, "aclnnRound", Op::Unary(UFn::Round));
unary!(aclnnReciprocalGetWorkspaceSize, "aclnnReciprocal", Op::Unary(UFn::Reciprocal));
unary!(aclnnSignGetWorkspaceSize, "aclnnSign", Op::Unary(UFn::Sign));

macro_rules! backward {
    ($name:ident, $p2:literal, $f:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(grad_output: H, output: H, grad_input: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(In, "gradOutput", u(grad_output))?.t(In, "output", u(output))?.t(
                    Out,
                    "gradInput",
                    u(grad_input),
                )?;
                Ok((Op::UnaryBackward($f), a))
            })
        }
    };
}
backward!(aclnnTanhBackwardGetWorkspaceSize, "aclnnTanhBackward", UFn::Tanh);
backward!(aclnnSigmoidBackwardGetWorkspaceSize, "aclnnSigmoidBackward", UFn::Sigmoid);

#[no_mangle]
pub extern "C" fn aclnnGeluV2GetWorkspaceSize(self_: H, approximate: i64, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnGeluV2", ws, ex, || {
        let op = match approximate {
            0 => Op::Gelu { tanh: false },
            1 => Op::Unary(UFn::GeluTanh),
            v => return Err(inv(format!("approximate must be 0 (none) or 1 (tanh), got {v}"))),
        };
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((op, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnGeluBackwardV2GetWorkspaceSize(
    grad_output: H,
    self_: H,
    approximate: *const c_char,
    grad_input: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    // Unlike aclnnGeluV2's int64 flag, the backward takes the mode as a C string (CANN's
    // aclnn_gelu_backward_v2.h: `char *approximate`, "none" or "tanh").
    p1("aclnnGeluBackwardV2", ws, ex, || {
        let op = match super::cstr(approximate).as_deref() {
            Some("none") => Op::GeluBackward { tanh: false },
            Some("tanh") => Op::UnaryBackward(UFn::GeluTanh),
            Some(v) => return Err(inv(format!("approximate must be \"none\" or \"tanh\", got {v:?}"))),
            None => return Err(fail(ACLNN_ERR_PARAM_NULLPTR, "approximate is NULL")),
        };
        let mut a = Args::new();
        a.t(In, "gradOutput", u(grad_output))?.t(In, "self", u(self_))?.t(Out, "gradInput", u(grad_input))?;
        Ok((op, a))
    })
}

fn opt_scalar(h: H, what: &str) -> Result<Option<f64>, i32> {
    if h.is_null() {
        Ok(None)
    } else {
        scalar(h, what).map(Some)
    }
}

#[no_mangle]
pub extern "C" fn aclnnClampGetWorkspaceSize(self_: H, min: H, max: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnClamp", ws, ex, || {
        let (min, max) = (opt_scalar(min, "clipValueMin")?, opt_scalar(max, "clipValueMax")?);
        if min.is_none() && max.is_none() {
            return Err(fail(ACLNN_ERR_PARAM_NULLPTR, "clipValueMin and clipValueMax are both NULL"));
        }
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((nn(Nn::Clamp { min, max }), a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnPermuteGetWorkspaceSize(self_: H, dims: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnPermute", ws, ex, || {
        let d = int_array(dims, "dims")?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        let r = d.len() as i64;
        let mut norm: Vec<usize> = Vec::with_capacity(d.len());
        for &x in &d {
            let v = if x < 0 { x + r } else { x };
            if !(0..r).contains(&v) || norm.contains(&(v as usize)) {
                return Err(inv(format!("dims {d:?} is not a permutation of 0..{r}")));
            }
            norm.push(v as usize);
        }
        Ok((nn(Nn::Permute { dims: norm }), a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnPowTensorTensorGetWorkspaceSize(
    self_: H,
    exponent: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnPowTensorTensor", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(In, "exponent", u(exponent))?.t(Out, "out", u(out))?;
        Ok((Op::Binary { op: Bin::Pow, alpha: 1.0 }, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnPowTensorScalarGetWorkspaceSize(
    self_: H,
    exponent: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnPowTensorScalar", ws, ex, || {
        let e = scalar(exponent, "exponent")?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((Op::BinaryScalar { op: Bin::Pow, other: e, alpha: 1.0 }, a))
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn aclnnApplyAdamWV2GetWorkspaceSize(
    var_ref: H,
    m_ref: H,
    v_ref: H,
    max_grad_norm_ref: H,
    grad: H,
    step: H,
    lr: f32,
    beta1: f32,
    beta2: f32,
    weight_decay: f32,
    eps: f32,
    amsgrad: bool,
    maximize: bool,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnApplyAdamWV2", ws, ex, || {
        if amsgrad && max_grad_norm_ref.is_null() {
            return Err(fail(ACLNN_ERR_PARAM_NULLPTR, "amsgrad needs maxGradNormOptionalRef"));
        }
        let mut a = Args::new();
        a.t(InOut, "varRef", u(var_ref))?
            .t(InOut, "mRef", u(m_ref))?
            .t(InOut, "vRef", u(v_ref))?
            .t(if amsgrad { InOut } else { In }, "maxGradNormOptionalRef", u(max_grad_norm_ref))?
            .t(In, "grad", u(grad))?
            .t(In, "step", u(step))?;
        let (lr, b1, b2, wd, eps) = (lr as f64, beta1 as f64, beta2 as f64, weight_decay as f64, eps as f64);
        Ok((nn(Nn::AdamWV2 { lr, b1, b2, wd, eps, amsgrad, maximize }), a))
    })
}

// nnopbase's thread-local huge-memory pool: clients call Init before phase 1 and UnInit / Release after
// phase 2. The simulator's executors own their memory, so there is no pool: Init succeeds (0), the others
// do nothing.
#[no_mangle]
pub extern "C" fn InitHugeMemThreadLocal(_arg: *mut c_void, _sync: bool) -> i32 {
    0
}
#[no_mangle]
pub extern "C" fn UnInitHugeMemThreadLocal(_arg: *mut c_void, _sync: bool) {}
#[no_mangle]
pub extern "C" fn ReleaseHugeMem(_arg: *mut c_void, _sync: bool) {}

#[no_mangle]
pub extern "C" fn aclnnSplitWithSizeGetWorkspaceSize(
    self_: H,
    split_size: H,
    dim: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnSplitWithSize", ws, ex, || {
        let sizes = int_array(split_size, "splitSize")?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.list(Out, "out", u(out))?;
        Ok((nn(Nn::SplitWithSize { sizes, dim }), a))
    })
}

/// Phase 1 of the clamp forms with one bound or tensor bounds (`Nn::ClampBy`): `min`/`max` are
/// None (absent), Some(Some(v)) (a scalar) or Some(None) (the tensor handle in `tensors`, in order).
fn clamp_by(
    name: &'static str,
    self_: H,
    min: Option<Option<f64>>,
    max: Option<Option<f64>>,
    tensors: &[(&'static str, H)],
    out: Option<H>,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1(name, ws, ex, || {
        let mut a = Args::new();
        a.t(if out.is_some() { In } else { InOut }, "self", u(self_))?;
        for (what, h) in tensors {
            if h.is_null() {
                return Err(fail(ACLNN_ERR_PARAM_NULLPTR, format!("{what} is NULL")));
            }
            a.t(In, what, u(*h))?;
        }
        if let Some(o) = out {
            a.t(Out, "out", u(o))?;
        }
        Ok((nn(Nn::ClampBy { min, max, inplace: out.is_none() }), a))
    })
}

/// `aclnnClampMin(self, const aclScalar *clipValueMin, out)`: max(x, min) (torch's `clamp_min`).
#[no_mangle]
pub extern "C" fn aclnnClampMinGetWorkspaceSize(self_: H, min: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    match scalar(min, "clipValueMin") {
        Ok(v) => clamp_by("aclnnClampMin", self_, Some(Some(v)), None, &[], Some(out), ws, ex),
        Err(e) => e,
    }
}

/// `aclnnClampMax(self, const aclScalar *clipValueMax, out)`: min(x, max).
#[no_mangle]
pub extern "C" fn aclnnClampMaxGetWorkspaceSize(self_: H, max: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    match scalar(max, "clipValueMax") {
        Ok(v) => clamp_by("aclnnClampMax", self_, None, Some(Some(v)), &[], Some(out), ws, ex),
        Err(e) => e,
    }
}

/// `aclnnInplaceClampMax(selfRef, const aclScalar *clipValueMax)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceClampMaxGetWorkspaceSize(self_ref: H, max: H, ws: *mut u64, ex: *mut H) -> Status {
    match scalar(max, "clipValueMax") {
        Ok(v) => clamp_by("aclnnInplaceClampMax", self_ref, None, Some(Some(v)), &[], None, ws, ex),
        Err(e) => e,
    }
}

/// `aclnnClampTensor(self, const aclTensor *clipValueMin, const aclTensor *clipValueMax, out)`: either
/// bound may be NULL, not both (torch's `clamp(min=T, max=T)`).
#[no_mangle]
pub extern "C" fn aclnnClampTensorGetWorkspaceSize(
    self_: H,
    min: H,
    max: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    if min.is_null() && max.is_null() {
        return fail(ACLNN_ERR_PARAM_NULLPTR, "aclnnClampTensor: clipValueMin and clipValueMax are both NULL");
    }
    let mut tensors = Vec::new();
    let lo = (!min.is_null()).then(|| tensors.push(("clipValueMin", min))).map(|_| None);
    let hi = (!max.is_null()).then(|| tensors.push(("clipValueMax", max))).map(|_| None);
    clamp_by("aclnnClampTensor", self_, lo, hi, &tensors, Some(out), ws, ex)
}

/// `aclnnClampMinTensor(self, const aclTensor *clipValueMin, out)`.
#[no_mangle]
pub extern "C" fn aclnnClampMinTensorGetWorkspaceSize(self_: H, min: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    clamp_by("aclnnClampMinTensor", self_, Some(None), None, &[("clipValueMin", min)], Some(out), ws, ex)
}

/// `aclnnClampMaxTensor(self, const aclTensor *clipValueMax, out)`.
#[no_mangle]
pub extern "C" fn aclnnClampMaxTensorGetWorkspaceSize(self_: H, max: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    clamp_by("aclnnClampMaxTensor", self_, None, Some(None), &[("clipValueMax", max)], Some(out), ws, ex)
}

/// `aclnnInplaceClampMinTensor(selfRef, const aclTensor *clipValueMin)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceClampMinTensorGetWorkspaceSize(self_ref: H, min: H, ws: *mut u64, ex: *mut H) -> Status {
    clamp_by("aclnnInplaceClampMinTensor", self_ref, Some(None), None, &[("clipValueMin", min)], None, ws, ex)
}

/// `aclnnInplaceClampMaxTensor(selfRef, const aclTensor *clipValueMax)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceClampMaxTensorGetWorkspaceSize(self_ref: H, max: H, ws: *mut u64, ex: *mut H) -> Status {
    clamp_by("aclnnInplaceClampMaxTensor", self_ref, None, Some(None), &[("clipValueMax", max)], None, ws, ex)
}
