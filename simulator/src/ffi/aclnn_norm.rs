//! aclnnGroupNorm / aclnnGroupNormBackward (signatures from CANN's ops-nn headers): the C arguments →
//! [`crate::group_norm::GroupNorm`] and its slots.
use super::aclnn::{bool_array, p1, u};
use crate::consts::ACLNN_ERR_PARAM_INVALID;
use crate::errmsg::fail;
use crate::group_norm::GroupNorm;
use crate::nnop::Args;
use crate::ops::Op;
use crate::trace::Role::{Input as In, Output as Out};
use std::os::raw::c_void;

type Status = i32;
type H = *mut c_void;

crate::phase2!(aclnnGroupNorm, aclnnGroupNormBackward);

/// `aclnnGroupNorm(self, gammaOptional, betaOptional, int64_t N, int64_t C, int64_t HxW, int64_t group,
/// double eps, out, meanOut, rstdOut)`.
#[no_mangle]
pub extern "C" fn aclnnGroupNormGetWorkspaceSize(
    x: H,
    gamma: H,
    beta: H,
    n: i64,
    c: i64,
    hxw: i64,
    group: i64,
    eps: f64,
    out: H,
    mean: H,
    rstd: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnGroupNorm", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(In, "gammaOptional", u(gamma))?.t(In, "betaOptional", u(beta))?;
        a.t(Out, "out", u(out))?.t(Out, "meanOut", u(mean))?.t(Out, "rstdOut", u(rstd))?;
        Ok((Op::GroupNorm(Box::new(GroupNorm { n, c, hxw, group, eps, backward: None })), a))
    })
}

/// `aclnnGroupNormBackward(gradOut, input, mean, rstd, gamma, int64_t N, int64_t C, int64_t HxW, int64_t group,
/// const aclBoolArray *outputMask, gradInput, gradGammaOut, gradBetaOut)`.
#[no_mangle]
pub extern "C" fn aclnnGroupNormBackwardGetWorkspaceSize(
    grad_out: H,
    input: H,
    mean: H,
    rstd: H,
    gamma: H,
    n: i64,
    c: i64,
    hxw: i64,
    group: i64,
    output_mask: H,
    grad_input: H,
    grad_gamma: H,
    grad_beta: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnGroupNormBackward", ws, ex, || {
        let m = bool_array(output_mask, "outputMask")?;
        let [m0, m1, m2] = m[..] else {
            return Err(fail(ACLNN_ERR_PARAM_INVALID, "outputMask must have 3 elements"));
        };
        let mut a = Args::new();
        a.t(In, "gradOut", u(grad_out))?.t(In, "input", u(input))?.t(In, "mean", u(mean))?;
        a.t(In, "rstd", u(rstd))?.t(In, "gamma", u(gamma))?;
        a.t(Out, "gradInput", u(grad_input))?.t(Out, "gradGammaOut", u(grad_gamma))?;
        a.t(Out, "gradBetaOut", u(grad_beta))?;
        let g = GroupNorm { n, c, hxw, group, eps: 0.0, backward: Some([m0, m1, m2]) };
        Ok((Op::GroupNorm(Box::new(g)), a))
    })
}
