//! aclnn operators of `ops_dim.rs`, plus aclnnSilu (C signatures of CANN's aclnn headers, argument
//! order as torch_npu's op-plugin passes them).
use super::aclnn::{int_array, p1, scalar, u, unary};
use crate::dtype::DType;
use crate::errmsg::fail;
use crate::nnop::Args;
use crate::ops::{Op, UFn};
use crate::ops_dim::{DimOp, RKind};
use crate::trace::Role::{InOut, Input as In, Output as Out};
use cann_abi::status::ACLNN_ERR_PARAM_INVALID;
use std::os::raw::c_void;

type Status = i32;
type H = *mut c_void;

fn dim(d: DimOp) -> Op {
    Op::Dim(Box::new(d))
}

/// An optional aclIntArray of dims: NULL means every dim.
fn dims(h: H, what: &str) -> Result<Vec<i64>, i32> {
    if h.is_null() {
        Ok(Vec::new())
    } else {
        int_array(h, what)
    }
}

/// The `dtype` argument of aclnnCumsum / aclnnProd must be out's dtype.
fn dtype_is(dtype: i32, out: H) -> Result<(), i32> {
    if out.is_null() {
        return Err(fail(cann_abi::status::ACLNN_ERR_PARAM_NULLPTR, "out is NULL"));
    }
    let o = crate::nnop::tensor(u(out)).map(|t| t.view.dtype);
    match (DType::from_acl(dtype), o) {
        (Some(d), Some(o)) if d == o => Ok(()),
        _ => Err(fail(ACLNN_ERR_PARAM_INVALID, format!("dtype {dtype} must be a known aclDataType equal to out's"))),
    }
}

crate::phase2!(
    aclnnSilu,
    aclnnSiluBackward,
    aclnnCumsum,
    aclnnCumprod,
    aclnnMaxDim,
    aclnnMinDim,
    aclnnArgMax,
    aclnnArgMin,
    aclnnSort,
    aclnnTopk,
    aclnnFlip,
    aclnnRoll,
    aclnnScatter,
    aclnnInplaceScatter,
    aclnnScatterValue,
    aclnnInplaceScatterValue,
    aclnnScatterAdd,
    aclnnVarCorrection,
    aclnnStd,
    aclnnProd,
    aclnnProdDim,
    aclnnLogSumExp,
    aclnnLerp,
    aclnnLerps,
    aclnnInplaceLerp,
    aclnnInplaceLerps,
    aclnnMseLoss,
    aclnnMseLossBackward,
    aclnnIndex,
    aclnnIndexPutImpl,
    aclnnNonzero,
    aclnnNonzeroV2,
    aclnnMaskedSelect,
    aclnnUnique,
    aclnnUnique2,
    aclnnUniqueConsecutive,
);

unary!(aclnnSiluGetWorkspaceSize, "aclnnSilu", Op::Unary(UFn::Silu));

/// `aclnnSiluBackward(gradOutput, self, gradInput)`.
#[no_mangle]
pub extern "C" fn aclnnSiluBackwardGetWorkspaceSize(g: H, self_: H, gi: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnSiluBackward", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "gradOutput", u(g))?.t(In, "self", u(self_))?.t(Out, "gradInput", u(gi))?;
        Ok((Op::UnaryBackward(UFn::Silu), a))
    })
}

/// `aclnnCumsum(self, int64_t dim, aclDataType dtype, out)`.
#[no_mangle]
pub extern "C" fn aclnnCumsumGetWorkspaceSize(
    self_: H,
    d: i64,
    dtype: i32,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnCumsum", ws, ex, || {
        dtype_is(dtype, out)?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Cumsum { dim: d, prod: false }), a))
    })
}

/// `aclnnCumprod(input, const aclScalar *dim, aclDataType dtype, out)`: dtype ACL_DT_UNDEFINED (-1)
/// means out's; the product is computed in out's dtype (the input converted to it).
#[no_mangle]
pub extern "C" fn aclnnCumprodGetWorkspaceSize(input: H, d: H, dtype: i32, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnCumprod", ws, ex, || {
        if dtype != -1 {
            dtype_is(dtype, out)?;
        }
        let dv = super::aclnn::scalar(d, "dim")?;
        if dv.fract() != 0.0 {
            return Err(fail(ACLNN_ERR_PARAM_INVALID, format!("dim {dv} must be an integer scalar")));
        }
        let mut a = Args::new();
        a.t(In, "input", u(input))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Cumsum { dim: dv as i64, prod: true }), a))
    })
}

macro_rules! max_dim {
    ($name:ident, $p2:literal, $min:expr) => {
        /// `(self, int64_t dim, bool keepdim, out, indices)`.
        #[no_mangle]
        pub extern "C" fn $name(self_: H, d: i64, keep: bool, out: H, idx: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(Out, "out", u(out))?.t(Out, "indices", u(idx))?;
                Ok((dim(DimOp::Extreme { dim: d, keep, min: $min, values: true }), a))
            })
        }
    };
}
max_dim!(aclnnMaxDimGetWorkspaceSize, "aclnnMaxDim", false);
max_dim!(aclnnMinDimGetWorkspaceSize, "aclnnMinDim", true);

macro_rules! arg_max {
    ($name:ident, $p2:literal, $min:expr) => {
        /// `(self, int64_t dim, bool keepdim, out)`: out holds the int64 indices.
        #[no_mangle]
        pub extern "C" fn $name(self_: H, d: i64, keep: bool, out: H, ws: *mut u64, ex: *mut H) -> Status {
            p1($p2, ws, ex, || {
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
                Ok((dim(DimOp::Extreme { dim: d, keep, min: $min, values: false }), a))
            })
        }
    };
}
arg_max!(aclnnArgMaxGetWorkspaceSize, "aclnnArgMax", false);
arg_max!(aclnnArgMinGetWorkspaceSize, "aclnnArgMin", true);

/// `aclnnSort(self, bool stable, int64_t dim, bool descending, valuesOut, indicesOut)`; the
/// simulator's sort is always stable.
#[no_mangle]
pub extern "C" fn aclnnSortGetWorkspaceSize(
    self_: H,
    _stable: bool,
    d: i64,
    descending: bool,
    values: H,
    indices: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnSort", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "valuesOut", u(values))?.t(Out, "indicesOut", u(indices))?;
        Ok((dim(DimOp::Sort { dim: d, descending, k: None }), a))
    })
}

/// `aclnnTopk(self, int64_t k, int64_t dim, bool largest, bool sorted, valuesOut, indicesOut)`;
/// results are always sorted.
#[no_mangle]
pub extern "C" fn aclnnTopkGetWorkspaceSize(
    self_: H,
    k: i64,
    d: i64,
    largest: bool,
    _sorted: bool,
    values: H,
    indices: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnTopk", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "valuesOut", u(values))?.t(Out, "indicesOut", u(indices))?;
        Ok((dim(DimOp::Sort { dim: d, descending: largest, k: Some(k) }), a))
    })
}

/// `aclnnFlip(self, const aclIntArray *dims, out)`.
#[no_mangle]
pub extern "C" fn aclnnFlipGetWorkspaceSize(self_: H, ds: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnFlip", ws, ex, || {
        let dims = int_array(ds, "dims")?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Flip { dims }), a))
    })
}

/// `aclnnRoll(x, const aclIntArray *shifts, const aclIntArray *dims, out)`.
#[no_mangle]
pub extern "C" fn aclnnRollGetWorkspaceSize(x: H, sh: H, ds: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnRoll", ws, ex, || {
        let (shifts, dims) = (int_array(sh, "shifts")?, dims(ds, "dims")?);
        let mut a = Args::new();
        a.t(In, "x", u(x))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Roll { shifts, dims }), a))
    })
}

/// `aclnnScatter(self, int64_t dim, index, src, int64_t reduce, out)`.
#[no_mangle]
pub extern "C" fn aclnnScatterGetWorkspaceSize(
    self_: H,
    d: i64,
    index: H,
    src: H,
    reduce: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnScatter", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(In, "index", u(index))?.t(In, "src", u(src))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Scatter { dim: d, reduce, value: None, inplace: false }), a))
    })
}

/// `aclnnInplaceScatter(selfRef, int64_t dim, index, src, int64_t reduce)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceScatterGetWorkspaceSize(
    self_ref: H,
    d: i64,
    index: H,
    src: H,
    reduce: i64,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnInplaceScatter", ws, ex, || {
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(self_ref))?.t(In, "index", u(index))?.t(In, "src", u(src))?;
        Ok((dim(DimOp::Scatter { dim: d, reduce, value: None, inplace: true }), a))
    })
}

/// `aclnnScatterValue(self, int64_t dim, index, const aclScalar *value, int64_t reduce, out)`.
#[no_mangle]
pub extern "C" fn aclnnScatterValueGetWorkspaceSize(
    self_: H,
    d: i64,
    index: H,
    value: H,
    reduce: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnScatterValue", ws, ex, || {
        let v = scalar(value, "value")?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(In, "index", u(index))?;
        a.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Scatter { dim: d, reduce, value: Some(v), inplace: false }), a))
    })
}

/// `aclnnInplaceScatterValue(selfRef, int64_t dim, index, const aclScalar *value, int64_t reduce)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceScatterValueGetWorkspaceSize(
    self_ref: H,
    d: i64,
    index: H,
    value: H,
    reduce: i64,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnInplaceScatterValue", ws, ex, || {
        let v = scalar(value, "value")?;
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(self_ref))?.t(In, "index", u(index))?;
        Ok((dim(DimOp::Scatter { dim: d, reduce, value: Some(v), inplace: true }), a))
    })
}

/// `aclnnScatterAdd(self, int64_t dim, index, src, out)`.
#[no_mangle]
pub extern "C" fn aclnnScatterAddGetWorkspaceSize(
    self_: H,
    d: i64,
    index: H,
    src: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnScatterAdd", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(In, "index", u(index))?.t(In, "src", u(src))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Scatter { dim: d, reduce: 1, value: None, inplace: false }), a))
    })
}

macro_rules! var_std {
    ($name:ident, $p2:literal, $kind:ident) => {
        /// `(self, const aclIntArray *dim, int64_t correction, bool keepdim, out)`.
        #[no_mangle]
        pub extern "C" fn $name(
            self_: H,
            ds: H,
            correction: i64,
            keep: bool,
            out: H,
            ws: *mut u64,
            ex: *mut H,
        ) -> Status {
            p1($p2, ws, ex, || {
                let dims = dims(ds, "dim")?;
                let mut a = Args::new();
                a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
                Ok((dim(DimOp::Reduce { kind: RKind::$kind { correction }, dims, keep }), a))
            })
        }
    };
}
var_std!(aclnnVarCorrectionGetWorkspaceSize, "aclnnVarCorrection", Var);
var_std!(aclnnStdGetWorkspaceSize, "aclnnStd", Std);

/// `aclnnProd(self, aclDataType dtype, out)`: the product of all elements.
#[no_mangle]
pub extern "C" fn aclnnProdGetWorkspaceSize(self_: H, dtype: i32, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnProd", ws, ex, || {
        dtype_is(dtype, out)?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Reduce { kind: RKind::Prod, dims: Vec::new(), keep: false }), a))
    })
}

/// `aclnnProdDim(self, int64_t dim, bool keepDim, aclDataType dtype, out)`.
#[no_mangle]
pub extern "C" fn aclnnProdDimGetWorkspaceSize(
    self_: H,
    d: i64,
    keep: bool,
    dtype: i32,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnProdDim", ws, ex, || {
        dtype_is(dtype, out)?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Reduce { kind: RKind::Prod, dims: vec![d], keep }), a))
    })
}

/// `aclnnLogSumExp(self, const aclIntArray *dim, bool keepDim, out)`.
#[no_mangle]
pub extern "C" fn aclnnLogSumExpGetWorkspaceSize(
    self_: H,
    ds: H,
    keep: bool,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnLogSumExp", ws, ex, || {
        let dims = dims(ds, "dim")?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Reduce { kind: RKind::LogSumExp, dims, keep }), a))
    })
}

/// `aclnnLerp(self, end, weight, out)`.
#[no_mangle]
pub extern "C" fn aclnnLerpGetWorkspaceSize(self_: H, end: H, w: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnLerp", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(In, "end", u(end))?.t(In, "weight", u(w))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Lerp { weight: None, inplace: false }), a))
    })
}

/// `aclnnLerps(self, end, const aclScalar *weight, out)`.
#[no_mangle]
pub extern "C" fn aclnnLerpsGetWorkspaceSize(self_: H, end: H, w: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnLerps", ws, ex, || {
        let w = scalar(w, "weight")?;
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(In, "end", u(end))?;
        a.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Lerp { weight: Some(w), inplace: false }), a))
    })
}

/// `aclnnInplaceLerp(selfRef, end, weight)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceLerpGetWorkspaceSize(self_ref: H, end: H, w: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnInplaceLerp", ws, ex, || {
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(self_ref))?.t(In, "end", u(end))?.t(In, "weight", u(w))?;
        Ok((dim(DimOp::Lerp { weight: None, inplace: true }), a))
    })
}

/// `aclnnInplaceLerps(selfRef, end, const aclScalar *weight)`.
#[no_mangle]
pub extern "C" fn aclnnInplaceLerpsGetWorkspaceSize(self_ref: H, end: H, w: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnInplaceLerps", ws, ex, || {
        let w = scalar(w, "weight")?;
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(self_ref))?.t(In, "end", u(end))?;
        Ok((dim(DimOp::Lerp { weight: Some(w), inplace: true }), a))
    })
}

/// `aclnnMseLoss(self, target, int64_t reduction, out)`.
#[no_mangle]
pub extern "C" fn aclnnMseLossGetWorkspaceSize(
    self_: H,
    target: H,
    reduction: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnMseLoss", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(In, "target", u(target))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::MseLoss { reduction }), a))
    })
}

/// `aclnnMseLossBackward(gradOutput, self, target, int64_t reduction, gradInput)`.
#[no_mangle]
pub extern "C" fn aclnnMseLossBackwardGetWorkspaceSize(
    g: H,
    self_: H,
    target: H,
    reduction: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnMseLossBackward", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "gradOutput", u(g))?.t(In, "self", u(self_))?.t(In, "target", u(target))?;
        a.t(Out, "gradInput", u(out))?;
        Ok((dim(DimOp::MseLossBackward { reduction }), a))
    })
}

/// `aclnnIndex(self, const aclTensorList *indices, out)`.
#[no_mangle]
pub extern "C" fn aclnnIndexGetWorkspaceSize(self_: H, indices: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnIndex", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.list(In, "indices", u(indices))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Index), a))
    })
}

/// `aclnnIndexPutImpl(selfRef, const aclTensorList *indices, values, bool accumulate, bool unsafe)`.
#[no_mangle]
pub extern "C" fn aclnnIndexPutImplGetWorkspaceSize(
    self_ref: H,
    indices: H,
    values: H,
    accumulate: bool,
    _unsafe: bool,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnIndexPutImpl", ws, ex, || {
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(self_ref))?.list(In, "indices", u(indices))?.t(In, "values", u(values))?;
        Ok((dim(DimOp::IndexPut { accumulate }), a))
    })
}

/// Phase 1 of aclnnNonzero / aclnnNonzeroV2 (`transpose`).
fn nonzero(name: &'static str, self_: H, out: H, transpose: bool, ws: *mut u64, ex: *mut H) -> Status {
    p1(name, ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::Nonzero { out_handle: u(out), transpose }), a))
    })
}

/// `aclnnNonzero(self, out)`: out is [numel, rank] int64; after the kernel its view shape is
/// [count, rank] (aclGetViewShape, once the client has synced the stream).
#[no_mangle]
pub extern "C" fn aclnnNonzeroGetWorkspaceSize(self_: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    nonzero("aclnnNonzero", self_, out, false, ws, ex)
}

/// `aclnnNonzeroV2(self, out)`: as aclnnNonzero, transposed: out is [rank, numel] int64, each column
/// a coordinate; after the kernel its view shape is [rank, count] (`x[mask]` in torch_npu and MindSpore).
#[no_mangle]
pub extern "C" fn aclnnNonzeroV2GetWorkspaceSize(self_: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    nonzero("aclnnNonzeroV2", self_, out, true, ws, ex)
}

/// `aclnnMaskedSelect(self, mask, out)`: self's elements where the bool mask (broadcast with self) is
/// true; out is 1-D, self's dtype, as long as the broadcast shape; after the kernel its view shape is
/// [count] (`masked_select` in torch_npu and MindSpore).
#[no_mangle]
pub extern "C" fn aclnnMaskedSelectGetWorkspaceSize(self_: H, mask: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnMaskedSelect", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(In, "mask", u(mask))?.t(Out, "out", u(out))?;
        Ok((dim(DimOp::MaskedSelect { out_handle: u(out) }), a))
    })
}

/// Phase 1 of aclnnUnique / aclnnUnique2 (`counts_out` NULL for aclnnUnique, which has none).
#[allow(clippy::too_many_arguments)]
fn unique(
    name: &'static str,
    self_: H,
    consecutive: bool,
    return_inverse: bool,
    return_counts: bool,
    value_out: H,
    inverse_out: H,
    counts_out: Option<H>,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1(name, ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(self_))?.t(Out, "valueOut", u(value_out))?.t(Out, "inverseOut", u(inverse_out))?;
        if let Some(c) = counts_out {
            a.t(Out, "countsOut", u(c))?;
        }
        if value_out.is_null() || inverse_out.is_null() || counts_out.is_some_and(|c| c.is_null()) {
            return Err(fail(
                cann_abi::status::ACLNN_ERR_PARAM_NULLPTR,
                "valueOut, inverseOut and countsOut must not be NULL",
            ));
        }
        let op = DimOp::Unique {
            inverse: return_inverse,
            counts: return_counts,
            consecutive,
            value_handle: u(value_out),
            counts_handle: counts_out.map_or(0, u),
        };
        Ok((dim(op), a))
    })
}

/// `aclnnUnique(self, bool sorted, bool returnInverse, valueOut, inverseOut)`: the distinct elements
/// of self (always ascending: `sorted` false lets the kernel choose the order); valueOut is 1-D, self's
/// dtype, as long as self; after the kernel its view shape is [distinct] (aclGetViewShape after the
/// client's sync). inverseOut (int64, self's shape) is written only with returnInverse.
#[no_mangle]
pub extern "C" fn aclnnUniqueGetWorkspaceSize(
    self_: H,
    _sorted: bool,
    return_inverse: bool,
    value_out: H,
    inverse_out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    unique("aclnnUnique", self_, false, return_inverse, false, value_out, inverse_out, None, ws, ex)
}

/// `aclnnUnique2(self, bool sorted, bool returnInverse, bool returnCounts, valueOut, inverseOut,
/// countsOut)`: aclnnUnique plus countsOut (int64, 1-D as valueOut; with returnCounts, how often each
/// value occurs, its view shape then [distinct] too). torch_npu's `torch.unique` / `_unique2`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn aclnnUnique2GetWorkspaceSize(
    self_: H,
    _sorted: bool,
    return_inverse: bool,
    return_counts: bool,
    value_out: H,
    inverse_out: H,
    counts_out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    unique(
        "aclnnUnique2",
        self_,
        false,
        return_inverse,
        return_counts,
        value_out,
        inverse_out,
        Some(counts_out),
        ws,
        ex,
    )
}

/// torch_npu's encoding of "no dim" for aclnnUniqueConsecutive (the flattened self).
const NO_DIM: i64 = 1000;

/// `aclnnUniqueConsecutive(self, bool returnInverse, bool returnCounts, int64_t dim, valueOut,
/// inverseOut, countsOut)`: the runs of equal elements of the flattened self (`dim` 1000, torch_npu's
/// "None"); the outputs as aclnnUnique2's (torch_npu reads both valueOut's and countsOut's view
/// shape after its sync). A real `dim` (runs of equal slices) of a self of rank > 1 is not simulated:
/// refused with ACLNN_ERR_PARAM_INVALID (dim 0 or -1 of a 1-D self is the flattened case).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn aclnnUniqueConsecutiveGetWorkspaceSize(
    self_: H,
    return_inverse: bool,
    return_counts: bool,
    dim: i64,
    value_out: H,
    inverse_out: H,
    counts_out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    // along the one dim of a 1-D self is the flattened case
    let one_d = crate::nnop::tensor(u(self_)).is_some_and(|t| t.view.shape.len() == 1);
    if dim != NO_DIM && !(one_d && (dim == 0 || dim == -1)) {
        let why =
            format!("aclnnUniqueConsecutive: dim {dim} is not simulated (only {NO_DIM}, or 0 / -1 of a 1-D self)");
        return fail(ACLNN_ERR_PARAM_INVALID, why);
    }
    unique(
        "aclnnUniqueConsecutive",
        self_,
        true,
        return_inverse,
        return_counts,
        value_out,
        inverse_out,
        Some(counts_out),
        ws,
        ex,
    )
}
