//! aclnn operators of `ops_ext.rs` (the C signatures of CANN's aclnn headers; argument order as
//! torch_npu's op-plugin passes them).
use super::aclnn::{bool_array, cube, int_array, p1, scalar, u, unary};
use crate::consts::*;
use crate::errmsg::fail;
use crate::nnop::{self, Args, Obj};
use crate::ops::Op;
use crate::ops_ext::{Cmp, ConvGeom, ExtOp, FKind, PoolGeom};
use crate::trace::Role::{InOut, Input as In, Output as Out};
use std::os::raw::c_void;

type Status = i32;
type H = *mut c_void;

fn ext(e: ExtOp) -> Op {
    Op::Ext(Box::new(e))
}

fn scalar_list(h: H, what: &str) -> Result<Vec<f64>, i32> {
    match nnop::get(h as usize) {
        Some(Obj::ScalarList(v)) => v.into_iter().map(|s| scalar(s as H, what)).collect(),
        _ => Err(fail(
            if h.is_null() { ACLNN_ERR_PARAM_NULLPTR } else { ACLNN_ERR_PARAM_INVALID },
            format!("{what}: not a live aclScalarList"),
        )),
    }
}

crate::phase2!(
    aclnnSWhere,
    aclnnMaximum,
    aclnnMinimum,
    aclnnLogicalAnd,
    aclnnLogicalXor,
    aclnnLogicalOr,
    aclnnBitwiseAndTensor,
    aclnnBitwiseOrTensor,
    aclnnBitwiseXorTensor,
    aclnnAny,
    aclnnAll,
    aclnnIsFinite,
    aclnnIndexSelect,
    aclnnGather,
    aclnnEqTensor,
    aclnnEqScalar,
    aclnnNeTensor,
    aclnnNeScalar,
    aclnnGtTensor,
    aclnnGtScalar,
    aclnnGeTensor,
    aclnnGeScalar,
    aclnnLtTensor,
    aclnnLtScalar,
    aclnnLeTensor,
    aclnnLeScalar,
    aclnnArange,
    aclnnTril,
    aclnnTriu,
    aclnnInplaceTril,
    aclnnInplaceTriu,
    aclnnLogicalNot,
    aclnnInplaceLogicalNot,
    aclnnBitwiseNot,
    aclnnInplaceMaskedFillScalar,
    aclnnInplaceMaskedFillTensor,
    aclnnInplaceFillTensor,
    aclnnAddcdiv,
    aclnnInplaceAddcdiv,
    aclnnAddcmul,
    aclnnInplaceAddcmul,
    aclnnForeachAddScalarV2,
    aclnnForeachMulScalarV2,
    aclnnForeachDivScalarV2,
    aclnnForeachMaximumScalarV2,
    aclnnForeachMinimumScalarV2,
    aclnnForeachMaximumScalar,
    aclnnForeachMinimumScalar,
    aclnnForeachNonFiniteCheckAndUnscale,
    aclnnAmpUpdateScale,
    aclnnForeachAddListV2,
    aclnnForeachMulList,
    aclnnForeachDivList,
    aclnnForeachLerpScalar,
    aclnnForeachAddcmulScalarV2,
    aclnnForeachAddcdivScalarV2,
    aclnnForeachSqrt,
    aclnnForeachAddScalarList,
    aclnnForeachMulScalarList,
    aclnnForeachDivScalarList,
    aclnnDropoutGenMaskV2,
    aclnnDropoutDoMask,
    aclnnConvolution,
    aclnnConvolutionBackward,
    aclnnBatchNorm,
    aclnnBatchNormBackward,
    aclnnMaxPool2dWithMask,
    aclnnMaxPool2dWithIndices,
    aclnnMaxPool2dWithMaskBackward,
    aclnnMaxPool2dWithIndicesBackward,
    aclnnMax,
    aclnnMin,
    aclnnAminmaxAll,
    aclnnAminmax,
    aclnnNorm,
    aclnnNanToNum,
);

/// `aclnnMax(self, out)`: the maximum of all elements into a 0-d out of self's dtype.
#[no_mangle]
pub extern "C" fn aclnnMaxGetWorkspaceSize(self_: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnMax", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((ext(ExtOp::ReduceAll { min: false }), a))
    })
}

/// `aclnnMin(self, out)`: the minimum of all elements into a 0-d out of self's dtype.
#[no_mangle]
pub extern "C" fn aclnnMinGetWorkspaceSize(self_: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnMin", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((ext(ExtOp::ReduceAll { min: true }), a))
    })
}

/// `aclnnAminmaxAll(self, minOut, maxOut)`: min and max of all elements into 0-d outs of self's dtype.
#[no_mangle]
pub extern "C" fn aclnnAminmaxAllGetWorkspaceSize(
    self_: H,
    min_out: H,
    max_out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnAminmaxAll", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "minOut", u(min_out))?.t(Out, "maxOut", u(max_out))?;
        Ok((ext(ExtOp::Aminmax { dims: None, keep: false }), a))
    })
}

/// `aclnnAminmax(self, const aclIntArray *dim, bool keepDim, minOut, maxOut)`: per-row min and max.
#[no_mangle]
pub extern "C" fn aclnnAminmaxGetWorkspaceSize(
    self_: H,
    dim: H,
    keep_dim: bool,
    min_out: H,
    max_out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnAminmax", ws, ex, || {
        let dims = int_array(dim, "dim")?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "minOut", u(min_out))?.t(Out, "maxOut", u(max_out))?;
        Ok((ext(ExtOp::Aminmax { dims: Some(dims), keep: keep_dim }), a))
    })
}

/// `aclnnNorm(self, const aclScalar *pScalar, const aclIntArray *dim, bool keepdim, out)`.
#[no_mangle]
pub extern "C" fn aclnnNormGetWorkspaceSize(
    self_: H,
    p: H,
    dim: H,
    keepdim: bool,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnNorm", ws, ex, || {
        let p = scalar(p, "pScalar")?;
        if p < 0.0 || p.is_nan() {
            return Err(fail(ACLNN_ERR_PARAM_INVALID, format!("aclnnNorm: p = {p} is not supported")));
        }
        let dims = int_array(dim, "dim")?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((ext(ExtOp::Norm { p, dims, keep: keepdim }), a))
    })
}

/// `aclnnNanToNum(self, float nan, float posInf, float negInf, out)`.
#[no_mangle]
pub extern "C" fn aclnnNanToNumGetWorkspaceSize(
    self_: H,
    nan: f32,
    posinf: f32,
    neginf: f32,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnNanToNum", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((ext(ExtOp::NanToNum { nan, posinf, neginf }), a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnArangeGetWorkspaceSize(start: H, end: H, step: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnArange", ws, ex, || {
        let (start, end, step) = (scalar(start, "start")?, scalar(end, "end")?, scalar(step, "step")?);
        let mut a = Args::new();
        a.t(Out, "out", u(out))?;
        Ok((ext(ExtOp::Arange { start, end, step }), a))
    })
}

macro_rules! tri {
    ($name:ident, $p2:literal, $upper:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_: H, diagonal: i64, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
                Ok((ext(ExtOp::Tri { diag: diagonal, upper: $upper }), a))
            })
        }
    };
}
tri!(aclnnTrilGetWorkspaceSize, "aclnnTril", false);
tri!(aclnnTriuGetWorkspaceSize, "aclnnTriu", true);

macro_rules! inplace_tri {
    ($name:ident, $p2:literal, $upper:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_ref: H, diagonal: i64, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(InOut, "selfRef", u(self_ref))?;
                Ok((ext(ExtOp::Tri { diag: diagonal, upper: $upper }), a))
            })
        }
    };
}
inplace_tri!(aclnnInplaceTrilGetWorkspaceSize, "aclnnInplaceTril", false);
inplace_tri!(aclnnInplaceTriuGetWorkspaceSize, "aclnnInplaceTriu", true);

/// `aclnnMaximum` / `aclnnMinimum` / `aclnnLogical{And,Or,Xor}` /
/// `aclnnBitwise{And,Or,Xor}Tensor` / `aclnn{Eq,..}Tensor(self, const aclTensor *other, out)`.
macro_rules! binary_ext {
    ($name:ident, $p2:literal, $op:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_: H, other: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(In, "other", u(other))?.t(Out, "out", u(out))?;
                Ok((ext($op), a))
            })
        }
    };
}
binary_ext!(aclnnMaximumGetWorkspaceSize, "aclnnMaximum", ExtOp::MaxMin { min: false });
binary_ext!(aclnnMinimumGetWorkspaceSize, "aclnnMinimum", ExtOp::MaxMin { min: true });
binary_ext!(aclnnLogicalAndGetWorkspaceSize, "aclnnLogicalAnd", ExtOp::Logical { op: b'&' });
binary_ext!(aclnnLogicalOrGetWorkspaceSize, "aclnnLogicalOr", ExtOp::Logical { op: b'|' });
binary_ext!(aclnnLogicalXorGetWorkspaceSize, "aclnnLogicalXor", ExtOp::Logical { op: b'^' });
binary_ext!(aclnnBitwiseAndTensorGetWorkspaceSize, "aclnnBitwiseAndTensor", ExtOp::Bitwise { op: b'&' });
binary_ext!(aclnnBitwiseOrTensorGetWorkspaceSize, "aclnnBitwiseOrTensor", ExtOp::Bitwise { op: b'|' });
binary_ext!(aclnnBitwiseXorTensorGetWorkspaceSize, "aclnnBitwiseXorTensor", ExtOp::Bitwise { op: b'^' });

/// `aclnnAny` / `aclnnAll(self, const aclIntArray *dim, bool keepdim, out)`.
macro_rules! any_all {
    ($name:ident, $p2:literal, $all:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_: H, dim: H, keepdim: bool, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let dims = int_array(dim, "dim")?;
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
                Ok((ext(ExtOp::AnyAll { all: $all, dims, keep: keepdim }), a))
            })
        }
    };
}
any_all!(aclnnAnyGetWorkspaceSize, "aclnnAny", false);
any_all!(aclnnAllGetWorkspaceSize, "aclnnAll", true);

unary!(aclnnIsFiniteGetWorkspaceSize, "aclnnIsFinite", ext(ExtOp::IsFinite));
unary!(aclnnLogicalNotGetWorkspaceSize, "aclnnLogicalNot", ext(ExtOp::LogicalNot));
unary!(aclnnBitwiseNotGetWorkspaceSize, "aclnnBitwiseNot", ext(ExtOp::BitwiseNot));

/// `aclnnIndexSelect(self, int64_t dim, const aclTensor *index, out)` and `aclnnGather(self,
/// const int64_t dim, const aclTensor *index, out)`.
macro_rules! by_index {
    ($name:ident, $p2:literal, $op:ident) => {
        #[no_mangle]
        pub extern "C" fn $name(self_: H, dim: i64, index: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(In, "index", u(index))?.t(Out, "out", u(out))?;
                Ok((ext(ExtOp::$op { dim }), a))
            })
        }
    };
}
by_index!(aclnnIndexSelectGetWorkspaceSize, "aclnnIndexSelect", IndexSelect);
by_index!(aclnnGatherGetWorkspaceSize, "aclnnGather", Gather);

/// `aclnnSWhere(const aclTensor *condition, const aclTensor *self, const aclTensor *other, out)`:
/// torch.where.
#[no_mangle]
pub extern "C" fn aclnnSWhereGetWorkspaceSize(cond: H, self_: H, other: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnSWhere", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "condition", u(cond))?.t(In, "self", u(self_))?.t(In, "other", u(other))?.t(Out, "out", u(out))?;
        Ok((ext(ExtOp::Where), a))
    })
}

/// `aclnn{Eq,Ne,Gt,Ge,Lt,Le}Tensor(self, const aclTensor *other, out)` and `...Scalar(self, const
/// aclScalar *other, out)`: torch_npu's comparison operators (bool out).
macro_rules! compare {
    ($tensor:ident, $tname:literal, $scalar:ident, $sname:literal, $cmp:expr) => {
        binary_ext!($tensor, $tname, ExtOp::Compare { cmp: $cmp, other: None });
        #[no_mangle]
        pub extern "C" fn $scalar(self_: H, other: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($sname, ws, ex, || {
                let other = scalar(other, "other")?;
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
                Ok((ext(ExtOp::Compare { cmp: $cmp, other: Some(other) }), a))
            })
        }
    };
}
compare!(aclnnEqTensorGetWorkspaceSize, "aclnnEqTensor", aclnnEqScalarGetWorkspaceSize, "aclnnEqScalar", Cmp::Eq);
compare!(aclnnNeTensorGetWorkspaceSize, "aclnnNeTensor", aclnnNeScalarGetWorkspaceSize, "aclnnNeScalar", Cmp::Ne);
compare!(aclnnGtTensorGetWorkspaceSize, "aclnnGtTensor", aclnnGtScalarGetWorkspaceSize, "aclnnGtScalar", Cmp::Gt);
compare!(aclnnGeTensorGetWorkspaceSize, "aclnnGeTensor", aclnnGeScalarGetWorkspaceSize, "aclnnGeScalar", Cmp::Ge);
compare!(aclnnLtTensorGetWorkspaceSize, "aclnnLtTensor", aclnnLtScalarGetWorkspaceSize, "aclnnLtScalar", Cmp::Lt);
compare!(aclnnLeTensorGetWorkspaceSize, "aclnnLeTensor", aclnnLeScalarGetWorkspaceSize, "aclnnLeScalar", Cmp::Le);

#[no_mangle]
pub extern "C" fn aclnnInplaceLogicalNotGetWorkspaceSize(self_ref: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnInplaceLogicalNot", ws, ex, || {
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(self_ref))?;
        Ok((ext(ExtOp::LogicalNot), a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnInplaceFillTensorGetWorkspaceSize(self_ref: H, value: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnInplaceFillTensor", ws, ex, || {
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(self_ref))?.t(In, "value", u(value))?;
        Ok((ext(ExtOp::FillTensor), a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnInplaceMaskedFillScalarGetWorkspaceSize(
    self_ref: H,
    mask: H,
    value: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnInplaceMaskedFillScalar", ws, ex, || {
        let value = scalar(value, "value")?;
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(self_ref))?.t(In, "mask", u(mask))?;
        Ok((ext(ExtOp::MaskedFill { value: Some(value) }), a))
    })
}

/// `aclnnInplaceMaskedFillTensor(selfRef, mask, const aclTensor *value)`: as the scalar form, the value a
/// one-element tensor (torch's `masked_fill(mask, tensor)`, and max()'s backward).
#[no_mangle]
pub extern "C" fn aclnnInplaceMaskedFillTensorGetWorkspaceSize(
    self_ref: H,
    mask: H,
    value: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnInplaceMaskedFillTensor", ws, ex, || {
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(self_ref))?.t(In, "mask", u(mask))?.t(In, "value", u(value))?;
        Ok((ext(ExtOp::MaskedFill { value: None }), a))
    })
}

macro_rules! addc {
    ($name:ident, $p2:literal, $div:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_: H, t1: H, t2: H, value: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let value = scalar(value, "value")?;
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(In, "tensor1", u(t1))?.t(In, "tensor2", u(t2))?.t(Out, "out", u(out))?;
                Ok((ext(ExtOp::Addc { value, div: $div }), a))
            })
        }
    };
}
addc!(aclnnAddcdivGetWorkspaceSize, "aclnnAddcdiv", true);
addc!(aclnnAddcmulGetWorkspaceSize, "aclnnAddcmul", false);

macro_rules! inplace_addc {
    ($name:ident, $p2:literal, $div:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_ref: H, t1: H, t2: H, value: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let value = scalar(value, "value")?;
                let mut a = Args::new();
                a.t(InOut, "selfRef", u(self_ref))?.t(In, "tensor1", u(t1))?.t(In, "tensor2", u(t2))?;
                Ok((ext(ExtOp::Addc { value, div: $div }), a))
            })
        }
    };
}
inplace_addc!(aclnnInplaceAddcdivGetWorkspaceSize, "aclnnInplaceAddcdiv", true);
inplace_addc!(aclnnInplaceAddcmulGetWorkspaceSize, "aclnnInplaceAddcmul", false);

// ---- Foreach (x: aclTensorList inputs, out: aclTensorList; the V2 forms take an aclScalar)

fn foreach(kind: FKind, lists: &[(&'static str, H)], out: H, scalars: Vec<f64>) -> Result<(Op, Args), i32> {
    let mut a = Args::new();
    for (nm, h) in lists {
        // An in-place call passes the first input list again as `out`.
        a.list(if *h == out { InOut } else { In }, nm, u(*h))?;
    }
    a.list(Out, "out", u(out))?;
    Ok((ext(ExtOp::Foreach { kind, scalars }), a))
}

macro_rules! foreach_scalar {
    ($name:ident, $p2:literal, $kind:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(x: H, scalar_: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || foreach($kind, &[("x", x)], out, vec![scalar(scalar_, "scalar")?]))
        }
    };
}
foreach_scalar!(aclnnForeachAddScalarV2GetWorkspaceSize, "aclnnForeachAddScalarV2", FKind::AddScalar);
foreach_scalar!(aclnnForeachMulScalarV2GetWorkspaceSize, "aclnnForeachMulScalarV2", FKind::MulScalar);
foreach_scalar!(aclnnForeachDivScalarV2GetWorkspaceSize, "aclnnForeachDivScalarV2", FKind::DivScalar);
foreach_scalar!(aclnnForeachMaximumScalarV2GetWorkspaceSize, "aclnnForeachMaximumScalarV2", FKind::MaxScalar);
foreach_scalar!(aclnnForeachMinimumScalarV2GetWorkspaceSize, "aclnnForeachMinimumScalarV2", FKind::MinScalar);

/// The V1 forms `aclnnForeachXScalar(const aclTensorList *x, const aclTensor *scalar, aclTensorList *out)`: the
/// scalar is a one-element tensor, read when the kernel runs.
macro_rules! foreach_scalar_tensor {
    ($name:ident, $p2:literal, $kind:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(x: H, scalar_: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let (op, mut a) = foreach($kind, &[("x", x)], out, Vec::new())?;
                a.t(In, "scalar", u(scalar_))?;
                Ok((op, a))
            })
        }
    };
}
foreach_scalar_tensor!(aclnnForeachMaximumScalarGetWorkspaceSize, "aclnnForeachMaximumScalar", FKind::MaxScalar);
foreach_scalar_tensor!(aclnnForeachMinimumScalarGetWorkspaceSize, "aclnnForeachMinimumScalar", FKind::MinScalar);

/// `aclnnForeachNonFiniteCheckAndUnscale(const aclTensorList *scaledGrads, const aclTensor *foundInf,
/// const aclTensor *invScale)`: torch's `_amp_foreach_non_finite_check_and_unscale_` (GradScaler); the
/// gradients and foundInf are updated in place although CANN's header declares them const.
#[no_mangle]
pub extern "C" fn aclnnForeachNonFiniteCheckAndUnscaleGetWorkspaceSize(
    grads: H,
    found_inf: H,
    inv_scale: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnForeachNonFiniteCheckAndUnscale", ws, ex, || {
        let mut a = Args::new();
        a.list(InOut, "scaledGrads", u(grads))?.t(InOut, "foundInf", u(found_inf))?.t(In, "invScale", u(inv_scale))?;
        Ok((ext(ExtOp::NonFiniteCheckAndUnscale), a))
    })
}

/// `aclnnAmpUpdateScale(currentScale, growthTracker, foundInf, double growthFactor, double backoffFactor,
/// int64_t growthInterval, updatedScaleOut, updatedGrowthTrackerOut)`: torch's `_amp_update_scale_`
/// (torch_npu passes the scale and tracker again as the outputs).
#[no_mangle]
pub extern "C" fn aclnnAmpUpdateScaleGetWorkspaceSize(
    scale: H,
    tracker: H,
    found_inf: H,
    growth: f64,
    backoff: f64,
    interval: i64,
    scale_out: H,
    tracker_out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnAmpUpdateScale", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "currentScale", u(scale))?.t(In, "growthTracker", u(tracker))?.t(In, "foundInf", u(found_inf))?;
        a.t(Out, "updatedScaleOut", u(scale_out))?.t(Out, "updatedGrowthTrackerOut", u(tracker_out))?;
        Ok((ext(ExtOp::AmpUpdateScale { growth, backoff, interval }), a))
    })
}

macro_rules! foreach_scalar_list {
    ($name:ident, $p2:literal, $kind:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(x: H, scalars: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || foreach($kind, &[("x", x)], out, scalar_list(scalars, "scalars")?))
        }
    };
}
foreach_scalar_list!(aclnnForeachAddScalarListGetWorkspaceSize, "aclnnForeachAddScalarList", FKind::AddScalar);
foreach_scalar_list!(aclnnForeachMulScalarListGetWorkspaceSize, "aclnnForeachMulScalarList", FKind::MulScalar);
foreach_scalar_list!(aclnnForeachDivScalarListGetWorkspaceSize, "aclnnForeachDivScalarList", FKind::DivScalar);

#[no_mangle]
pub extern "C" fn aclnnForeachAddListV2GetWorkspaceSize(
    x1: H,
    x2: H,
    alpha: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnForeachAddListV2", ws, ex, || {
        foreach(FKind::AddList, &[("x1", x1), ("x2", x2)], out, vec![scalar(alpha, "alpha")?])
    })
}

macro_rules! foreach_list {
    ($name:ident, $p2:literal, $kind:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(x1: H, x2: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || foreach($kind, &[("x1", x1), ("x2", x2)], out, vec![1.0]))
        }
    };
}
foreach_list!(aclnnForeachMulListGetWorkspaceSize, "aclnnForeachMulList", FKind::MulList);
foreach_list!(aclnnForeachDivListGetWorkspaceSize, "aclnnForeachDivList", FKind::DivList);

#[no_mangle]
pub extern "C" fn aclnnForeachLerpScalarGetWorkspaceSize(
    x1: H,
    x2: H,
    weight: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnForeachLerpScalar", ws, ex, || {
        foreach(FKind::LerpScalar, &[("x1", x1), ("x2", x2)], out, vec![scalar(weight, "weight")?])
    })
}

macro_rules! foreach_addc {
    ($name:ident, $p2:literal, $kind:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(x1: H, x2: H, x3: H, scalar_: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                foreach($kind, &[("x1", x1), ("x2", x2), ("x3", x3)], out, vec![scalar(scalar_, "scalar")?])
            })
        }
    };
}
foreach_addc!(aclnnForeachAddcmulScalarV2GetWorkspaceSize, "aclnnForeachAddcmulScalarV2", FKind::AddcmulScalar);
foreach_addc!(aclnnForeachAddcdivScalarV2GetWorkspaceSize, "aclnnForeachAddcdivScalarV2", FKind::AddcdivScalar);

#[no_mangle]
pub extern "C" fn aclnnForeachSqrtGetWorkspaceSize(x: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnForeachSqrt", ws, ex, || foreach(FKind::Sqrt, &[("x", x)], out, vec![0.0]))
}

// ---- dropout

#[no_mangle]
pub extern "C" fn aclnnDropoutGenMaskV2GetWorkspaceSize(
    shape: H,
    prob: f64,
    seed: i64,
    offset: i64,
    _prob_data_type: i32,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnDropoutGenMaskV2", ws, ex, || {
        let sh = int_array(shape, "shape")?;
        if sh.iter().any(|&d| d < 0) {
            return Err(fail(ACLNN_ERR_PARAM_INVALID, format!("negative shape {sh:?}")));
        }
        let numel = sh.iter().product::<i64>() as usize;
        let mut a = Args::new();
        a.t(Out, "out", u(out))?;
        Ok((ext(ExtOp::DropoutGenMask { numel, p: prob, seed, offset }), a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnDropoutDoMaskGetWorkspaceSize(
    self_: H,
    mask: H,
    prob: f64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnDropoutDoMask", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(In, "mask", u(mask))?.t(Out, "out", u(out))?;
        Ok((ext(ExtOp::DropoutDoMask { p: prob }), a))
    })
}

// ---- convolution, batch norm, max pooling

fn conv_geom(
    stride: H,
    padding: H,
    dilation: H,
    transposed: bool,
    output_padding: H,
    groups: i64,
) -> Result<ConvGeom, i32> {
    let op = if output_padding.is_null() { Vec::new() } else { int_array(output_padding, "outputPadding")? };
    let g = ConvGeom::new(
        &int_array(stride, "stride")?,
        &int_array(padding, "padding")?,
        &int_array(dilation, "dilation")?,
        groups,
    )?;
    if transposed {
        return g.transposed(&op);
    }
    if op.iter().any(|&v| v != 0) {
        return Err(fail(ACLNN_ERR_PARAM_INVALID, "outputPadding must be 0 for a non-transposed convolution"));
    }
    Ok(g)
}

#[no_mangle]
pub extern "C" fn aclnnConvolutionGetWorkspaceSize(
    input: H,
    weight: H,
    bias: H,
    stride: H,
    padding: H,
    dilation: H,
    transposed: bool,
    output_padding: H,
    groups: i64,
    output: H,
    cube_math_type: i8,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnConvolution", ws, ex, || {
        cube(cube_math_type)?;
        let g = conv_geom(stride, padding, dilation, transposed, output_padding, groups)?;
        let mut a = Args::new();
        a.t(In, "input", u(input))?.t(In, "weight", u(weight))?.t(In, "bias", u(bias))?.t(Out, "output", u(output))?;
        Ok((ext(ExtOp::Conv2d(g)), a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnConvolutionBackwardGetWorkspaceSize(
    grad_output: H,
    input: H,
    weight: H,
    _bias_sizes: H,
    stride: H,
    padding: H,
    dilation: H,
    transposed: bool,
    output_padding: H,
    groups: i32,
    output_mask: H,
    cube_math_type: i8,
    grad_input: H,
    grad_weight: H,
    grad_bias: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnConvolutionBackward", ws, ex, || {
        cube(cube_math_type)?;
        let geom = conv_geom(stride, padding, dilation, transposed, output_padding, i64::from(groups))?;
        let m = bool_array(output_mask, "outputMask")?;
        if m.len() != 3 {
            return Err(fail(ACLNN_ERR_PARAM_INVALID, "outputMask must have 3 elements"));
        }
        let mask = [m[0], m[1], m[2]];
        // A gradient masked out is still an argument of the launch when the caller passes one
        // (torch_npu passes gradInput of the first layer with outputMask[0] false): the kernel
        // leaves it untouched, and the trace shows it unchanged.
        let mut a = Args::new();
        a.t(In, "gradOutput", u(grad_output))?
            .t(In, "input", u(input))?
            .t(In, "weight", u(weight))?
            .t(Out, "gradInput", u(grad_input))?
            .t(Out, "gradWeight", u(grad_weight))?
            .t(Out, "gradBias", u(grad_bias))?;
        Ok((ext(ExtOp::Conv2dBackward { geom, mask }), a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnBatchNormGetWorkspaceSize(
    input: H,
    weight: H,
    bias: H,
    running_mean: H,
    running_var: H,
    training: bool,
    momentum: f64,
    eps: f64,
    output: H,
    save_mean: H,
    save_invstd: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnBatchNorm", ws, ex, || {
        let running = if training { InOut } else { In };
        let mut a = Args::new();
        a.t(In, "input", u(input))?
            .t(In, "weight", u(weight))?
            .t(In, "bias", u(bias))?
            .t(running, "runningMean", u(running_mean))?
            .t(running, "runningVar", u(running_var))?
            .t(Out, "output", u(output))?
            .t(Out, "saveMean", u(save_mean))?
            .t(Out, "saveInvstd", u(save_invstd))?;
        Ok((ext(ExtOp::BatchNorm { training, momentum, eps }), a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnBatchNormBackwardGetWorkspaceSize(
    grad_out: H,
    input: H,
    weight: H,
    running_mean: H,
    running_var: H,
    save_mean: H,
    save_invstd: H,
    training: bool,
    eps: f64,
    output_mask: H,
    grad_input: H,
    grad_weight: H,
    grad_bias: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnBatchNormBackward", ws, ex, || {
        let mask = bool_array(output_mask, "outputMask")?;
        let mut a = Args::new();
        a.t(In, "gradOut", u(grad_out))?
            .t(In, "input", u(input))?
            .t(In, "weight", u(weight))?
            .t(In, "runningMean", u(running_mean))?
            .t(In, "runningVar", u(running_var))?
            .t(In, "saveMean", u(save_mean))?
            .t(In, "saveInvstd", u(save_invstd))?
            .t(Out, "gradInput", u(grad_input))?
            .t(Out, "gradWeight", u(grad_weight))?
            .t(Out, "gradBias", u(grad_bias))?;
        Ok((ext(ExtOp::BatchNormBackward { training, eps, mask }), a))
    })
}

fn pool_geom(k: H, stride: H, padding: H, dilation: H, ceil: bool) -> Result<PoolGeom, i32> {
    PoolGeom::new(
        &int_array(k, "kernelSize")?,
        &int_array(stride, "stride")?,
        &int_array(padding, "padding")?,
        &int_array(dilation, "dilation")?,
        ceil,
    )
}

macro_rules! maxpool {
    ($name:ident, $p2:literal, $mask:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(
            self_: H,
            kernel_size: H,
            stride: H,
            padding: H,
            dilation: H,
            ceil_mode: bool,
            out: H,
            indices: H,
            ws: *mut u64,
            ex: *mut H,
        ) -> Status {
            p1($p2, ws, ex, || {
                let geom = pool_geom(kernel_size, stride, padding, dilation, ceil_mode)?;
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(Out, "out", u(out))?.t(Out, "indices", u(indices))?;
                Ok((ext(ExtOp::MaxPool2d { geom, mask: $mask }), a))
            })
        }
    };
}
maxpool!(aclnnMaxPool2dWithMaskGetWorkspaceSize, "aclnnMaxPool2dWithMask", true);
maxpool!(aclnnMaxPool2dWithIndicesGetWorkspaceSize, "aclnnMaxPool2dWithIndices", false);

macro_rules! maxpool_bwd {
    ($name:ident, $p2:literal, $mask:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(
            grad_output: H,
            self_: H,
            indices: H,
            kernel_size: H,
            stride: H,
            padding: H,
            dilation: H,
            ceil_mode: bool,
            grad_input: H,
            ws: *mut u64,
            ex: *mut H,
        ) -> Status {
            p1($p2, ws, ex, || {
                let geom = pool_geom(kernel_size, stride, padding, dilation, ceil_mode)?;
                let mut a = Args::new();
                a.t(In, "gradOutput", u(grad_output))?.t(In, "self", u(self_))?.t(In, "indices", u(indices))?.t(
                    Out,
                    "gradInput",
                    u(grad_input),
                )?;
                Ok((ext(ExtOp::MaxPool2dBackward { geom, mask: $mask }), a))
            })
        }
    };
}
maxpool_bwd!(aclnnMaxPool2dWithMaskBackwardGetWorkspaceSize, "aclnnMaxPool2dWithMaskBackward", true);
maxpool_bwd!(aclnnMaxPool2dWithIndicesBackwardGetWorkspaceSize, "aclnnMaxPool2dWithIndicesBackward", false);
