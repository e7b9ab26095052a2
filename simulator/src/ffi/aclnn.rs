//! aclnn operators (libopapi): two-phase API, `aclnnXxxGetWorkspaceSize` + `aclnnXxx`.
use super::guard;
use crate::consts::*;
use crate::errmsg::fail;
use crate::nnop::{self, Args, Obj, ScalarObj};
use crate::ops::{Bin, Op, UFn};
use crate::trace::Role::{InOut, Input as In, Output as Out};
use std::os::raw::c_void;

type Status = i32;
type H = *mut c_void;

thread_local! {
    /// An integer scalar f64 cannot hold (beyond 2^53, e.g. 2^60 + 1) read by the current phase 1, with
    /// its name: [`p1`] refuses the op if it has an integer tensor (a device computes with the integer
    /// exactly, the simulator's kernels in f64, so the result would be silently wrong); with float tensors
    /// only, rounding the scalar to f64 is what the device does too.
    static INEXACT_SCALAR: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// An aclScalar's value as the simulator's kernels compute with it (f64); see [`INEXACT_SCALAR`].
/// (i64::MAX converts back exactly and is not inexact.)
pub(crate) fn scalar(h: H, what: &str) -> Result<f64, i32> {
    match nnop::get(h as usize) {
        Some(Obj::Scalar(ScalarObj { int: Some(i), value, .. })) if value as i64 != i => {
            INEXACT_SCALAR.with(|c| *c.borrow_mut() = Some(format!("{what}: the integer {i}")));
            Ok(value)
        }
        Some(Obj::Scalar(s)) => Ok(s.value),
        _ => Err(fail(
            if h.is_null() { ACLNN_ERR_PARAM_NULLPTR } else { ACLNN_ERR_PARAM_INVALID },
            format!("{what}: not a live aclScalar"),
        )),
    }
}
pub(crate) fn int_array(h: H, what: &str) -> Result<Vec<i64>, i32> {
    match nnop::get(h as usize) {
        Some(Obj::IntArray(v)) => Ok(v),
        _ => Err(fail(
            if h.is_null() { ACLNN_ERR_PARAM_NULLPTR } else { ACLNN_ERR_PARAM_INVALID },
            format!("{what}: not a live aclIntArray"),
        )),
    }
}
pub(crate) fn bool_array(h: H, what: &str) -> Result<Vec<bool>, i32> {
    match nnop::get(h as usize) {
        Some(Obj::BoolArray(v)) => Ok(v),
        _ => Err(fail(
            if h.is_null() { ACLNN_ERR_PARAM_NULLPTR } else { ACLNN_ERR_PARAM_INVALID },
            format!("{what}: not a live aclBoolArray"),
        )),
    }
}
pub(crate) fn cube(c: i8) -> Result<(), i32> {
    if (0..=3).contains(&c) {
        Ok(())
    } else {
        Err(fail(ACLNN_ERR_PARAM_INVALID, format!("cubeMathType {c} must be 0..3")))
    }
}
pub(crate) fn u(h: H) -> usize {
    h as usize
}

/// Common phase-1 driver.
pub(crate) fn p1(name: &'static str, ws: *mut u64, ex: *mut H, f: impl FnOnce() -> Result<(Op, Args), i32>) -> Status {
    guard(ACLNN_ERR_INNER, || {
        if ws.is_null() || ex.is_null() {
            return fail(ACLNN_ERR_PARAM_NULLPTR, format!("{name}GetWorkspaceSize: workspaceSize or executor is NULL"));
        }
        INEXACT_SCALAR.with(|c| c.borrow_mut().take());
        let (op, args) = match f() {
            Ok(x) => x,
            Err(e) => return e,
        };
        if let Some(what) = INEXACT_SCALAR.with(|c| c.borrow_mut().take()) {
            let int_tensor = args.slots.iter().any(|s| match &s.val {
                nnop::SlotVal::T(_, Some(v)) => v.dtype.is_int(),
                nnop::SlotVal::T(_, None) => false,
                nnop::SlotVal::L(_, l) => l.iter().any(|(_, v)| v.dtype.is_int()),
            });
            if int_tensor {
                return fail(
                    ACLNN_ERR_PARAM_INVALID,
                    format!("{name}: {what} is beyond 2^53, which the simulator cannot compute exactly with integers"),
                );
            }
        }
        match nnop::create_executor(name, op, args) {
            Ok((h, w)) => {
                super::put(ws, w);
                super::put(ex, h as H);
                ACLNN_SUCCESS
            }
            Err(e) => e,
        }
    })
}

#[macro_export]
macro_rules! phase2 {
    ($($name:ident),* $(,)?) => {
        $(
            #[no_mangle]
            pub extern "C" fn $name(workspace: *mut std::os::raw::c_void, workspace_size: u64, executor: *mut std::os::raw::c_void, stream: *mut std::os::raw::c_void) -> i32 {
                $crate::ffi::guard(cann_abi::status::ACLNN_ERR_INNER, || $crate::nnop::launch(stringify!($name), workspace as usize, workspace_size, executor as usize, stream as usize))
            }
        )*
    };
}

phase2!(
    aclnnAdd,
    aclnnAdds,
    aclnnInplaceAdd,
    aclnnInplaceAdds,
    aclnnSub,
    aclnnSubs,
    aclnnInplaceSub,
    aclnnInplaceSubs,
    aclnnMul,
    aclnnMuls,
    aclnnInplaceMul,
    aclnnInplaceMuls,
    aclnnDiv,
    aclnnDivs,
    aclnnInplaceDiv,
    aclnnInplaceDivs,
    aclnnRemainderTensorTensor,
    aclnnRemainderTensorScalar,
    aclnnInplaceRemainderTensorTensor,
    aclnnInplaceRemainderTensorScalar,
    aclnnFmodTensor,
    aclnnFmodScalar,
    aclnnInplaceFmodTensor,
    aclnnInplaceFmodScalar,
    aclnnFloorDivide,
    aclnnFloorDivides,
    aclnnInplaceFloorDivide,
    aclnnInplaceFloorDivides,
    aclnnAtan2,
    aclnnInplaceAtan2,
    aclnnDivMod,
    aclnnDivMods,
    aclnnInplaceDivMod,
    aclnnInplaceDivMods,
    aclnnMm,
    aclnnMatmul,
    aclnnBatchMatMul,
    aclnnAddmm,
    aclnnInplaceAddmm,
    aclnnRelu,
    aclnnInplaceRelu,
    aclnnThresholdBackward,
    aclnnGelu,
    aclnnGeluBackward,
    aclnnSoftmax,
    aclnnSoftmaxBackward,
    aclnnLogSoftmax,
    aclnnLogSoftmaxBackward,
    aclnnNLLLoss,
    aclnnNLLLossBackward,
    aclnnLayerNorm,
    aclnnLayerNormBackward,
    aclnnEmbedding,
    aclnnEmbeddingDenseBackward,
    aclnnCast,
    aclnnReduceSum,
    aclnnReduceNansum,
    aclnnMean,
    aclnnInplaceCopy,
    aclnnInplaceZero,
    aclnnInplaceFillScalar,
    aclnnApplyAdamW,
    aclnnCat,
    aclnnRepeat,
    aclnnLog,
    aclnnExp,
    aclnnNeg,
    aclnnSqrt,
    aclnnAbs,
    aclnnInplaceOne,
);

// ---- binary arithmetic

macro_rules! bin_tensor {
    ($name:ident, $p2:literal, $op:expr, alpha) => {
        #[no_mangle]
        pub extern "C" fn $name(self_: H, other: H, alpha: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let alpha = scalar(alpha, "alpha")?;
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(In, "other", u(other))?.t(Out, "out", u(out))?;
                Ok((Op::Binary { op: $op, alpha }, a))
            })
        }
    };
    ($name:ident, $p2:literal, $op:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_: H, other: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(In, "other", u(other))?.t(Out, "out", u(out))?;
                Ok((Op::Binary { op: $op, alpha: 1.0 }, a))
            })
        }
    };
}
bin_tensor!(aclnnAddGetWorkspaceSize, "aclnnAdd", Bin::Add, alpha);
bin_tensor!(aclnnSubGetWorkspaceSize, "aclnnSub", Bin::Sub, alpha);
bin_tensor!(aclnnMulGetWorkspaceSize, "aclnnMul", Bin::Mul);
bin_tensor!(aclnnDivGetWorkspaceSize, "aclnnDiv", Bin::Div);
bin_tensor!(aclnnRemainderTensorTensorGetWorkspaceSize, "aclnnRemainderTensorTensor", Bin::Rem);
bin_tensor!(aclnnFmodTensorGetWorkspaceSize, "aclnnFmodTensor", Bin::Fmod);
bin_tensor!(aclnnFloorDivideGetWorkspaceSize, "aclnnFloorDivide", Bin::FloorDiv);
bin_tensor!(aclnnAtan2GetWorkspaceSize, "aclnnAtan2", Bin::Atan2);

macro_rules! bin_scalar {
    ($name:ident, $p2:literal, $op:expr, alpha) => {
        #[no_mangle]
        pub extern "C" fn $name(self_: H, other: H, alpha: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let (other, alpha) = (scalar(other, "other")?, scalar(alpha, "alpha")?);
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
                Ok((Op::BinaryScalar { op: $op, other, alpha }, a))
            })
        }
    };
    ($name:ident, $p2:literal, $op:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_: H, other: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let other = scalar(other, "other")?;
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
                Ok((Op::BinaryScalar { op: $op, other, alpha: 1.0 }, a))
            })
        }
    };
}
bin_scalar!(aclnnAddsGetWorkspaceSize, "aclnnAdds", Bin::Add, alpha);
bin_scalar!(aclnnSubsGetWorkspaceSize, "aclnnSubs", Bin::Sub, alpha);
bin_scalar!(aclnnMulsGetWorkspaceSize, "aclnnMuls", Bin::Mul);
bin_scalar!(aclnnDivsGetWorkspaceSize, "aclnnDivs", Bin::Div);
bin_scalar!(aclnnRemainderTensorScalarGetWorkspaceSize, "aclnnRemainderTensorScalar", Bin::Rem);
bin_scalar!(aclnnFmodScalarGetWorkspaceSize, "aclnnFmodScalar", Bin::Fmod);
bin_scalar!(aclnnFloorDividesGetWorkspaceSize, "aclnnFloorDivides", Bin::FloorDiv);

macro_rules! inplace_tensor {
    ($name:ident, $p2:literal, $op:expr, alpha) => {
        #[no_mangle]
        pub extern "C" fn $name(self_ref: H, other: H, alpha: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let alpha = scalar(alpha, "alpha")?;
                let mut a = Args::new();
                a.t(InOut, "selfRef", u(self_ref))?.t(In, "other", u(other))?;
                Ok((Op::InplaceBinary { op: $op, alpha }, a))
            })
        }
    };
    ($name:ident, $p2:literal, $op:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_ref: H, other: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(InOut, "selfRef", u(self_ref))?.t(In, "other", u(other))?;
                Ok((Op::InplaceBinary { op: $op, alpha: 1.0 }, a))
            })
        }
    };
}
inplace_tensor!(aclnnInplaceAddGetWorkspaceSize, "aclnnInplaceAdd", Bin::Add, alpha);
inplace_tensor!(aclnnInplaceSubGetWorkspaceSize, "aclnnInplaceSub", Bin::Sub, alpha);
inplace_tensor!(aclnnInplaceMulGetWorkspaceSize, "aclnnInplaceMul", Bin::Mul);
inplace_tensor!(aclnnInplaceDivGetWorkspaceSize, "aclnnInplaceDiv", Bin::Div);
inplace_tensor!(aclnnInplaceRemainderTensorTensorGetWorkspaceSize, "aclnnInplaceRemainderTensorTensor", Bin::Rem);
inplace_tensor!(aclnnInplaceFmodTensorGetWorkspaceSize, "aclnnInplaceFmodTensor", Bin::Fmod);
inplace_tensor!(aclnnInplaceFloorDivideGetWorkspaceSize, "aclnnInplaceFloorDivide", Bin::FloorDiv);
inplace_tensor!(aclnnInplaceAtan2GetWorkspaceSize, "aclnnInplaceAtan2", Bin::Atan2);

macro_rules! inplace_scalar {
    ($name:ident, $p2:literal, $op:expr, alpha) => {
        #[no_mangle]
        pub extern "C" fn $name(self_ref: H, other: H, alpha: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let (other, alpha) = (scalar(other, "other")?, scalar(alpha, "alpha")?);
                let mut a = Args::new();
                a.t(InOut, "selfRef", u(self_ref))?;
                Ok((Op::InplaceBinaryScalar { op: $op, other, alpha }, a))
            })
        }
    };
    ($name:ident, $p2:literal, $op:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_ref: H, other: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let other = scalar(other, "other")?;
                let mut a = Args::new();
                a.t(InOut, "selfRef", u(self_ref))?;
                Ok((Op::InplaceBinaryScalar { op: $op, other, alpha: 1.0 }, a))
            })
        }
    };
}
inplace_scalar!(aclnnInplaceAddsGetWorkspaceSize, "aclnnInplaceAdds", Bin::Add, alpha);
inplace_scalar!(aclnnInplaceSubsGetWorkspaceSize, "aclnnInplaceSubs", Bin::Sub, alpha);
inplace_scalar!(aclnnInplaceMulsGetWorkspaceSize, "aclnnInplaceMuls", Bin::Mul);
inplace_scalar!(aclnnInplaceDivsGetWorkspaceSize, "aclnnInplaceDivs", Bin::Div);
inplace_scalar!(aclnnInplaceRemainderTensorScalarGetWorkspaceSize, "aclnnInplaceRemainderTensorScalar", Bin::Rem);
inplace_scalar!(aclnnInplaceFmodScalarGetWorkspaceSize, "aclnnInplaceFmodScalar", Bin::Fmod);
inplace_scalar!(aclnnInplaceFloorDividesGetWorkspaceSize, "aclnnInplaceFloorDivides", Bin::FloorDiv);

/// The `mode` of aclnnDivMod*: 0 true division, 1 rounded toward zero, 2 rounded down.
fn div_mode(mode: i32) -> Result<Bin, i32> {
    match mode {
        0 => Ok(Bin::Div),
        1 => Ok(Bin::TruncDiv),
        2 => Ok(Bin::FloorDiv),
        _ => Err(fail(ACLNN_ERR_PARAM_INVALID, format!("mode {mode} must be 0 (none), 1 (trunc) or 2 (floor)"))),
    }
}

/// Phase 1 of the aclnnDivMod forms: `other` a tensor, or with `scalar_other` an aclScalar; `out` None
/// for the in-place forms (self is written).
#[allow(clippy::too_many_arguments)]
fn div_mod(
    name: &'static str,
    self_: H,
    other: H,
    scalar_other: bool,
    mode: i32,
    out: Option<H>,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1(name, ws, ex, || {
        let op = div_mode(mode)?;
        let mut a = Args::new();
        match out {
            Some(_) => a.t(In, "self", u(self_))?,
            None => a.t(InOut, "selfRef", u(self_))?,
        };
        let op = match (scalar_other, out.is_some()) {
            (true, true) => Op::BinaryScalar { op, other: scalar(other, "other")?, alpha: 1.0 },
            (true, false) => Op::InplaceBinaryScalar { op, other: scalar(other, "other")?, alpha: 1.0 },
            (false, has_out) => {
                a.t(In, "other", u(other))?;
                if has_out {
                    Op::Binary { op, alpha: 1.0 }
                } else {
                    Op::InplaceBinary { op, alpha: 1.0 }
                }
            }
        };
        if let Some(o) = out {
            a.t(Out, "out", u(o))?;
        }
        Ok((op, a))
    })
}

/// `aclnnDivMod(self, other, int mode, out)`: self / other rounded by `mode` (torch's `div(rounding_mode=)`).
#[no_mangle]
pub extern "C" fn aclnnDivModGetWorkspaceSize(s: H, other: H, mode: i32, out: H, ws: *mut u64, ex: *mut H) -> Status {
    div_mod("aclnnDivMod", s, other, false, mode, Some(out), ws, ex)
}

/// `aclnnDivMods(self, const aclScalar *other, int mode, out)`.
#[no_mangle]
pub extern "C" fn aclnnDivModsGetWorkspaceSize(s: H, other: H, mode: i32, out: H, ws: *mut u64, ex: *mut H) -> Status {
    div_mod("aclnnDivMods", s, other, true, mode, Some(out), ws, ex)
}

/// `aclnnInplaceDivMod(selfRef, other, int mode)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceDivModGetWorkspaceSize(s: H, other: H, mode: i32, ws: *mut u64, ex: *mut H) -> Status {
    div_mod("aclnnInplaceDivMod", s, other, false, mode, None, ws, ex)
}

/// `aclnnInplaceDivMods(selfRef, const aclScalar *other, int mode)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceDivModsGetWorkspaceSize(s: H, other: H, mode: i32, ws: *mut u64, ex: *mut H) -> Status {
    div_mod("aclnnInplaceDivMods", s, other, true, mode, None, ws, ex)
}

// ---- matmul

macro_rules! mm_like {
    ($name:ident, $p2:literal, $op:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_: H, mat2: H, out: H, cube_math_type: i8, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                cube(cube_math_type)?;
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(In, "mat2", u(mat2))?.t(Out, "out", u(out))?;
                Ok(($op, a))
            })
        }
    };
}
mm_like!(aclnnMmGetWorkspaceSize, "aclnnMm", Op::Mm);
mm_like!(aclnnMatmulGetWorkspaceSize, "aclnnMatmul", Op::Matmul);
mm_like!(aclnnBatchMatMulGetWorkspaceSize, "aclnnBatchMatMul", Op::BatchMatMul);

#[no_mangle]
pub extern "C" fn aclnnAddmmGetWorkspaceSize(
    self_: H,
    mat1: H,
    mat2: H,
    beta: H,
    alpha: H,
    out: H,
    cube_math_type: i8,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnAddmm", ws, ex, || {
        cube(cube_math_type)?;
        let (beta, alpha) = (scalar(beta, "beta")?, scalar(alpha, "alpha")?);
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(In, "mat1", u(mat1))?.t(In, "mat2", u(mat2))?.t(Out, "out", u(out))?;
        Ok((Op::Addmm { beta, alpha }, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnInplaceAddmmGetWorkspaceSize(
    self_ref: H,
    mat1: H,
    mat2: H,
    beta: H,
    alpha: H,
    cube_math_type: i8,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnInplaceAddmm", ws, ex, || {
        cube(cube_math_type)?;
        let (beta, alpha) = (scalar(beta, "beta")?, scalar(alpha, "alpha")?);
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(self_ref))?.t(In, "mat1", u(mat1))?.t(In, "mat2", u(mat2))?;
        Ok((Op::InplaceAddmm { beta, alpha }, a))
    })
}

// ---- activations

macro_rules! unary {
    ($name:ident, $p2:literal, $op:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
                Ok(($op, a))
            })
        }
    };
}
/// Shared with aclnn_ext.rs and aclnn_ms.rs: every `(self, out)` operator.
pub(crate) use unary;
unary!(aclnnReluGetWorkspaceSize, "aclnnRelu", Op::Relu);
unary!(aclnnGeluGetWorkspaceSize, "aclnnGelu", Op::Gelu { tanh: true });
unary!(aclnnLogGetWorkspaceSize, "aclnnLog", Op::Unary(UFn::Log));
unary!(aclnnExpGetWorkspaceSize, "aclnnExp", Op::Unary(UFn::Exp));
unary!(aclnnNegGetWorkspaceSize, "aclnnNeg", Op::Unary(UFn::Neg));
unary!(aclnnSqrtGetWorkspaceSize, "aclnnSqrt", Op::Unary(UFn::Sqrt));
unary!(aclnnAbsGetWorkspaceSize, "aclnnAbs", Op::Unary(UFn::Abs));

macro_rules! inplace_unary {
    ($name:ident, $p2:literal, $op:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_ref: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(InOut, "selfRef", u(self_ref))?;
                Ok(($op, a))
            })
        }
    };
}
inplace_unary!(aclnnInplaceReluGetWorkspaceSize, "aclnnInplaceRelu", Op::InplaceRelu);
inplace_unary!(aclnnInplaceZeroGetWorkspaceSize, "aclnnInplaceZero", Op::InplaceZero);
inplace_unary!(aclnnInplaceOneGetWorkspaceSize, "aclnnInplaceOne", Op::InplaceFill { value: 1.0, int: Some(1) });

#[no_mangle]
pub extern "C" fn aclnnInplaceFillScalarGetWorkspaceSize(self_ref: H, value: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnInplaceFillScalar", ws, ex, || {
        // a fill moves the value: an integer one is exact at any size
        let int = match nnop::get(value as usize) {
            Some(Obj::Scalar(ScalarObj { int: Some(i), .. })) => Some(i),
            _ => None,
        };
        let value = if int.is_some() { 0.0 } else { scalar(value, "value")? };
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(self_ref))?;
        Ok((Op::InplaceFill { value, int }, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnThresholdBackwardGetWorkspaceSize(
    grad_output: H,
    self_: H,
    threshold: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnThresholdBackward", ws, ex, || {
        let threshold = scalar(threshold, "threshold")?;
        let mut a = Args::new();
        a.t(In, "gradOutput", u(grad_output))?.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((Op::ThresholdBackward { threshold }, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnGeluBackwardGetWorkspaceSize(
    grad_output: H,
    self_: H,
    grad_input: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnGeluBackward", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "gradOutput", u(grad_output))?.t(In, "self", u(self_))?.t(Out, "gradInput", u(grad_input))?;
        Ok((Op::GeluBackward { tanh: true }, a))
    })
}

macro_rules! softmax {
    ($name:ident, $p2:literal, $log:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(self_: H, dim: i64, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
                Ok((Op::Softmax { dim, log: $log }, a))
            })
        }
    };
}
softmax!(aclnnSoftmaxGetWorkspaceSize, "aclnnSoftmax", false);
softmax!(aclnnLogSoftmaxGetWorkspaceSize, "aclnnLogSoftmax", true);

macro_rules! softmax_bwd {
    ($name:ident, $p2:literal, $log:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(grad_output: H, output: H, dim: i64, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(In, "gradOutput", u(grad_output))?.t(In, "output", u(output))?.t(Out, "out", u(out))?;
                Ok((Op::SoftmaxBackward { dim, log: $log }, a))
            })
        }
    };
}
softmax_bwd!(aclnnSoftmaxBackwardGetWorkspaceSize, "aclnnSoftmaxBackward", false);
softmax_bwd!(aclnnLogSoftmaxBackwardGetWorkspaceSize, "aclnnLogSoftmaxBackward", true);

// ---- loss, norm, embedding

#[no_mangle]
pub extern "C" fn aclnnNLLLossGetWorkspaceSize(
    self_: H,
    target: H,
    weight: H,
    reduction: i64,
    ignore_index: i64,
    out: H,
    total_weight_out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnNLLLoss", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(In, "target", u(target))?.t(In, "weight", u(weight))?.t(Out, "out", u(out))?.t(
            Out,
            "totalWeightOut",
            u(total_weight_out),
        )?;
        Ok((Op::NllLoss { reduction, ignore: ignore_index }, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnNLLLossBackwardGetWorkspaceSize(
    grad_output: H,
    self_: H,
    target: H,
    weight: H,
    reduction: i64,
    ignore_index: i64,
    total_weight: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnNLLLossBackward", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "gradOutput", u(grad_output))?
            .t(In, "self", u(self_))?
            .t(In, "target", u(target))?
            .t(In, "weight", u(weight))?
            .t(In, "totalWeight", u(total_weight))?
            .t(Out, "out", u(out))?;
        Ok((Op::NllLossBackward { reduction, ignore: ignore_index }, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnLayerNormGetWorkspaceSize(
    input: H,
    normalized_shape: H,
    weight: H,
    bias: H,
    eps: f64,
    out: H,
    mean_out: H,
    rstd_out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnLayerNorm", ws, ex, || {
        let nshape = int_array(normalized_shape, "normalizedShape")?;
        let mut a = Args::new();
        a.t(In, "input", u(input))?
            .t(In, "weightOptional", u(weight))?
            .t(In, "biasOptional", u(bias))?
            .t(Out, "out", u(out))?
            .t(Out, "meanOutOptional", u(mean_out))?
            .t(Out, "rstdOutOptional", u(rstd_out))?;
        Ok((Op::LayerNorm { nshape, eps }, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnLayerNormBackwardGetWorkspaceSize(
    grad_out: H,
    input: H,
    normalized_shape: H,
    mean: H,
    rstd: H,
    weight: H,
    bias: H,
    output_mask: H,
    grad_input_out: H,
    grad_weight_out: H,
    grad_bias_out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnLayerNormBackward", ws, ex, || {
        let nshape = int_array(normalized_shape, "normalizedShape")?;
        let mask = bool_array(output_mask, "outputMask")?;
        let mut a = Args::new();
        a.t(In, "gradOut", u(grad_out))?
            .t(In, "input", u(input))?
            .t(In, "mean", u(mean))?
            .t(In, "rstd", u(rstd))?
            .t(In, "weightOptional", u(weight))?
            .t(In, "biasOptional", u(bias))?
            .t(Out, "gradInputOut", u(grad_input_out))?
            .t(Out, "gradWeightOut", u(grad_weight_out))?
            .t(Out, "gradBiasOut", u(grad_bias_out))?;
        Ok((Op::LayerNormBackward { nshape, mask }, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnEmbeddingGetWorkspaceSize(weight: H, indices: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnEmbedding", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "weight", u(weight))?.t(In, "indices", u(indices))?.t(Out, "out", u(out))?;
        Ok((Op::Embedding, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnEmbeddingDenseBackwardGetWorkspaceSize(
    grad: H,
    indices: H,
    num_weights: u64,
    padding_idx: u64,
    scale_grad_by_freq: bool,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnEmbeddingDenseBackward", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "grad", u(grad))?.t(In, "indices", u(indices))?.t(Out, "out", u(out))?;
        Ok((Op::EmbeddingDenseBackward { num_weights, padding_idx: padding_idx as i64, scale: scale_grad_by_freq }, a))
    })
}

// ---- conversion and reduction

#[no_mangle]
pub extern "C" fn aclnnCastGetWorkspaceSize(self_: H, dtype: i32, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnCast", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((Op::Cast { dtype }, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnReduceSumGetWorkspaceSize(
    self_: H,
    dims: H,
    keep_dims: bool,
    dtype: i32,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    reduce_sum("aclnnReduceSum", [self_, dims, out], keep_dims, dtype, false, ws, ex)
}

/// aclnnReduceSum and aclnnReduceNansum (NaN counted as 0): slots self, out; `[x, dims, out]` handles.
fn reduce_sum(
    name: &'static str,
    [x, dims, out]: [H; 3],
    keep: bool,
    dtype: i32,
    nan_zero: bool,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1(name, ws, ex, || {
        let dims = int_array(dims, if nan_zero { "dim" } else { "dims" })?;
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(Out, "out", u(out))?;
        Ok((Op::ReduceSum { dims, keep, dtype, mean: false, nan_zero }, a))
    })
}

/// `aclnnReduceNansum(self, const aclIntArray *dim, bool keepDim, aclDataType dtype, out)` (torch.nansum).
#[no_mangle]
pub extern "C" fn aclnnReduceNansumGetWorkspaceSize(
    self_: H,
    dims: H,
    keep_dims: bool,
    dtype: i32,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    reduce_sum("aclnnReduceNansum", [self_, dims, out], keep_dims, dtype, true, ws, ex)
}

#[no_mangle]
pub extern "C" fn aclnnMeanGetWorkspaceSize(
    self_: H,
    dim: H,
    keep_dim: bool,
    dtype: i32,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnMean", ws, ex, || {
        let dims = int_array(dim, "dim")?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((Op::ReduceSum { dims, keep: keep_dim, dtype, mean: true, nan_zero: false }, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnInplaceCopyGetWorkspaceSize(self_ref: H, src: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnInplaceCopy", ws, ex, || {
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(self_ref))?.t(In, "src", u(src))?;
        Ok((Op::InplaceCopy, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnCatGetWorkspaceSize(tensors: H, dim: i64, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnCat", ws, ex, || {
        let mut a = Args::new();
        a.list(In, "tensors", u(tensors))?.t(Out, "out", u(out))?;
        Ok((Op::Cat { dim }, a))
    })
}

#[no_mangle]
pub extern "C" fn aclnnRepeatGetWorkspaceSize(self_: H, repeats: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnRepeat", ws, ex, || {
        let reps = int_array(repeats, "repeats")?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((Op::Repeat { reps }, a))
    })
}

// ---- optimizer

#[no_mangle]
pub extern "C" fn aclnnApplyAdamWGetWorkspaceSize(
    var_ref: H,
    m_ref: H,
    v_ref: H,
    beta1_power: H,
    beta2_power: H,
    lr: H,
    weight_decay: H,
    beta1: H,
    beta2: H,
    eps: H,
    grad: H,
    max_grad_norm: H,
    amsgrad: bool,
    maximize: bool,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnApplyAdamW", ws, ex, || {
        let mut a = Args::new();
        a.t(InOut, "varRef", u(var_ref))?
            .t(InOut, "mRef", u(m_ref))?
            .t(InOut, "vRef", u(v_ref))?
            .t(In, "beta1Power", u(beta1_power))?
            .t(In, "beta2Power", u(beta2_power))?
            .t(In, "lr", u(lr))?
            .t(In, "weightDecay", u(weight_decay))?
            .t(In, "beta1", u(beta1))?
            .t(In, "beta2", u(beta2))?
            .t(In, "eps", u(eps))?
            .t(In, "grad", u(grad))?
            .t(if amsgrad { InOut } else { In }, "maxGradNormOptional", u(max_grad_norm))?;
        Ok((Op::ApplyAdamW { amsgrad, maximize }, a))
    })
}
