//! aclnnFlashAttentionScore / aclnnFlashAttentionScoreGrad (CANN's aclnn_flash_attention_score.h and
//! aclnn_flash_attention_score_grad.h): the C arguments → [`crate::attention::FaParams`] and the slots it
//! reads.
use super::aclnn::{int_array, p1, u};
use super::cstr;
use crate::attention::{FaParams, Layout};
use crate::consts::ACLNN_ERR_PARAM_NULLPTR;
use crate::errmsg::fail;
use crate::nnop::Args;
use crate::ops::Op;
use crate::trace::Role::{Input as In, Output as Out};
use std::os::raw::{c_char, c_void};

type Status = i32;
type H = *mut c_void;

crate::phase2!(aclnnFlashAttentionScore, aclnnFlashAttentionScoreGrad);

fn params(
    prefix: H,
    (scale, keep_prob): (f64, f64),
    (pre_tokens, next_tokens, head_num): (i64, i64, i64),
    layout: *const c_char,
    (inner_precise, sparse_mode): (i64, i64),
) -> Result<FaParams, i32> {
    if !prefix.is_null() && !int_array(prefix, "prefixOptional")?.is_empty() {
        return Err(crate::ops_ext::inv("prefixOptional is not simulated"));
    }
    let layout = match cstr(layout) {
        Some(l) => Layout::parse(&l)?,
        None => return Err(fail(ACLNN_ERR_PARAM_NULLPTR, "inputLayout is NULL")),
    };
    Ok(FaParams { scale, keep_prob, pre_tokens, next_tokens, head_num, layout, sparse_mode, inner_precise })
}

/// `aclnnFlashAttentionScore(query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional,
/// attenMaskOptional, const aclIntArray *prefixOptional, double scaleValue, double keepProb, int64_t preTokens,
/// int64_t nextTokens, int64_t headNum, char *inputLayout, int64_t innerPrecise, int64_t sparseMode,
/// softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut)`; innerPrecise matters only for rows with
/// every key masked (attention.rs).
#[no_mangle]
pub extern "C" fn aclnnFlashAttentionScoreGetWorkspaceSize(
    query: H,
    key: H,
    value: H,
    pse: H,
    drop_mask: H,
    padding_mask: H,
    atten_mask: H,
    prefix: H,
    scale: f64,
    keep_prob: f64,
    pre_tokens: i64,
    next_tokens: i64,
    head_num: i64,
    layout: *const c_char,
    inner_precise: i64,
    sparse_mode: i64,
    softmax_max: H,
    softmax_sum: H,
    softmax_out: H,
    attention_out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnFlashAttentionScore", ws, ex, || {
        let p = params(
            prefix,
            (scale, keep_prob),
            (pre_tokens, next_tokens, head_num),
            layout,
            (inner_precise, sparse_mode),
        )?;
        let mut a = Args::new();
        a.t(In, "query", u(query))?.t(In, "key", u(key))?.t(In, "value", u(value))?;
        a.t(In, "realShiftOptional", u(pse))?.t(In, "dropMaskOptional", u(drop_mask))?;
        a.t(In, "paddingMaskOptional", u(padding_mask))?.t(In, "attenMaskOptional", u(atten_mask))?;
        a.t(Out, "softmaxMaxOut", u(softmax_max))?.t(Out, "softmaxSumOut", u(softmax_sum))?;
        a.t(Out, "softmaxOutOut", u(softmax_out))?.t(Out, "attentionOutOut", u(attention_out))?;
        Ok((Op::Attention { p: Box::new(p), grad: false }, a))
    })
}

/// `aclnnFlashAttentionScoreGrad(query, keyIn, value, dy, pseShiftOptional, dropMaskOptional,
/// paddingMaskOptional, attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional,
/// attentionInOptional, prefixOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout,
/// innerPrecise, sparseMode, dqOut, dkOut, dvOut, dpseOut)`.
#[no_mangle]
pub extern "C" fn aclnnFlashAttentionScoreGradGetWorkspaceSize(
    query: H,
    key: H,
    value: H,
    dy: H,
    pse: H,
    drop_mask: H,
    padding_mask: H,
    atten_mask: H,
    softmax_max: H,
    softmax_sum: H,
    softmax_in: H,
    attention_in: H,
    prefix: H,
    scale: f64,
    keep_prob: f64,
    pre_tokens: i64,
    next_tokens: i64,
    head_num: i64,
    layout: *const c_char,
    inner_precise: i64,
    sparse_mode: i64,
    dq: H,
    dk: H,
    dv: H,
    dpse: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnFlashAttentionScoreGrad", ws, ex, || {
        let p = params(
            prefix,
            (scale, keep_prob),
            (pre_tokens, next_tokens, head_num),
            layout,
            (inner_precise, sparse_mode),
        )?;
        let mut a = Args::new();
        a.t(In, "query", u(query))?.t(In, "keyIn", u(key))?.t(In, "value", u(value))?.t(In, "dy", u(dy))?;
        a.t(In, "pseShiftOptional", u(pse))?.t(In, "dropMaskOptional", u(drop_mask))?;
        a.t(In, "paddingMaskOptional", u(padding_mask))?.t(In, "attenMaskOptional", u(atten_mask))?;
        a.t(In, "softmaxMaxOptional", u(softmax_max))?.t(In, "softmaxSumOptional", u(softmax_sum))?;
        a.t(In, "softmaxInOptional", u(softmax_in))?.t(In, "attentionInOptional", u(attention_in))?;
        a.t(Out, "dqOut", u(dq))?.t(Out, "dkOut", u(dk))?.t(Out, "dvOut", u(dv))?;
        a.t(Out, "dpseOut", u(dpse))?;
        Ok((Op::Attention { p: Box::new(p), grad: true }, a))
    })
}
