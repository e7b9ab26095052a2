//! The pointwise losses torch_npu launches for F.binary_cross_entropy(_with_logits), F.smooth_l1_loss,
//! F.l1_loss and F.kl_div, forward and backward (signatures from CANN's ops-nn headers): the C arguments →
//! [`crate::losses::Loss`] and its slots.
use super::aclnn::{p1, u};
use crate::losses::{Loss, LossKind};
use crate::nnop::Args;
use crate::ops::Op;
use crate::trace::Role::{Input as In, Output as Out};
use std::os::raw::c_void;

type Status = i32;
type H = *mut c_void;

crate::phase2!(
    aclnnBinaryCrossEntropy,
    aclnnBinaryCrossEntropyBackward,
    aclnnBinaryCrossEntropyWithLogits,
    aclnnBinaryCrossEntropyWithLogitsBackward,
    aclnnSmoothL1Loss,
    aclnnSmoothL1LossBackward,
    aclnnL1Loss,
    aclnnL1LossBackward,
    aclnnKlDiv,
    aclnnKlDivBackward,
);

/// Phase 1 of a loss: `grad` (backward only), self, target, then `weights` (named, possibly NULL), out.
fn loss(
    name: &'static str,
    kind: LossKind,
    reduction: i64,
    grad: Option<H>,
    (x, target): (H, H),
    weights: &[(&'static str, H)],
    (out_name, out): (&'static str, H),
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1(name, ws, ex, || {
        let mut a = Args::new();
        if let Some(g) = grad {
            a.t(In, "gradOutput", u(g))?;
        }
        a.t(In, "self", u(x))?.t(In, "target", u(target))?;
        for &(w, h) in weights {
            a.t(In, w, u(h))?;
        }
        a.t(Out, out_name, u(out))?;
        Ok((Op::Loss(Box::new(Loss { kind, reduction, backward: grad.is_some() })), a))
    })
}

/// `aclnnBinaryCrossEntropy(self, target, weight, int64_t reduction, out)`.
#[no_mangle]
pub extern "C" fn aclnnBinaryCrossEntropyGetWorkspaceSize(
    x: H,
    t: H,
    w: H,
    r: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    loss("aclnnBinaryCrossEntropy", LossKind::Bce, r, None, (x, t), &[("weight", w)], ("out", out), ws, ex)
}

/// `aclnnBinaryCrossEntropyBackward(gradOutput, self, target, weightOptional, int64_t reduction, out)`.
#[no_mangle]
pub extern "C" fn aclnnBinaryCrossEntropyBackwardGetWorkspaceSize(
    g: H,
    x: H,
    t: H,
    w: H,
    r: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    let w = [("weightOptional", w)];
    loss("aclnnBinaryCrossEntropyBackward", LossKind::Bce, r, Some(g), (x, t), &w, ("out", out), ws, ex)
}

/// `aclnnBinaryCrossEntropyWithLogits(self, target, weightOptional, posWeightOptional, int64_t reduction, out)`.
#[no_mangle]
pub extern "C" fn aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(
    x: H,
    t: H,
    w: H,
    pw: H,
    r: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    let w = [("weightOptional", w), ("posWeightOptional", pw)];
    loss("aclnnBinaryCrossEntropyWithLogits", LossKind::BceLogits, r, None, (x, t), &w, ("out", out), ws, ex)
}

/// `aclnnBinaryCrossEntropyWithLogitsBackward(gradOutput, self, target, weightOptional, posWeightOptional,
/// int64_t reduction, out)`.
#[no_mangle]
pub extern "C" fn aclnnBinaryCrossEntropyWithLogitsBackwardGetWorkspaceSize(
    g: H,
    x: H,
    t: H,
    w: H,
    pw: H,
    r: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    let w = [("weightOptional", w), ("posWeightOptional", pw)];
    let name = "aclnnBinaryCrossEntropyWithLogitsBackward";
    loss(name, LossKind::BceLogits, r, Some(g), (x, t), &w, ("out", out), ws, ex)
}

/// `aclnnSmoothL1Loss(self, target, int64_t reduction, float beta, result)`.
#[no_mangle]
pub extern "C" fn aclnnSmoothL1LossGetWorkspaceSize(
    x: H,
    t: H,
    r: i64,
    beta: f32,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    let kind = LossKind::SmoothL1 { beta: f64::from(beta) };
    loss("aclnnSmoothL1Loss", kind, r, None, (x, t), &[], ("result", out), ws, ex)
}

/// `aclnnSmoothL1LossBackward(gradOut, self, target, int64_t reduction, float beta, gradInput)`.
#[no_mangle]
pub extern "C" fn aclnnSmoothL1LossBackwardGetWorkspaceSize(
    g: H,
    x: H,
    t: H,
    r: i64,
    beta: f32,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    let kind = LossKind::SmoothL1 { beta: f64::from(beta) };
    loss("aclnnSmoothL1LossBackward", kind, r, Some(g), (x, t), &[], ("gradInput", out), ws, ex)
}

/// `aclnnL1Loss(self, target, int64_t reduction, out)`.
#[no_mangle]
pub extern "C" fn aclnnL1LossGetWorkspaceSize(x: H, t: H, r: i64, out: H, ws: *mut u64, ex: *mut H) -> Status {
    loss("aclnnL1Loss", LossKind::L1, r, None, (x, t), &[], ("out", out), ws, ex)
}

/// `aclnnL1LossBackward(gradOutput, self, target, int64_t reduction, gradInput)`.
#[no_mangle]
pub extern "C" fn aclnnL1LossBackwardGetWorkspaceSize(
    g: H,
    x: H,
    t: H,
    r: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    loss("aclnnL1LossBackward", LossKind::L1, r, Some(g), (x, t), &[], ("gradInput", out), ws, ex)
}

/// `aclnnKlDiv(self, target, int64_t reduction, bool logTarget, out)`; reduction 3 (batchmean) is not simulated
/// (torch sends batchmean as a sum and divides itself).
#[no_mangle]
pub extern "C" fn aclnnKlDivGetWorkspaceSize(
    x: H,
    t: H,
    r: i64,
    log_target: bool,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    loss("aclnnKlDiv", LossKind::KlDiv { log_target }, r, None, (x, t), &[], ("out", out), ws, ex)
}

/// `aclnnKlDivBackward(gradOutput, self, target, int64_t reduction, bool logTarget, out)`.
#[no_mangle]
pub extern "C" fn aclnnKlDivBackwardGetWorkspaceSize(
    g: H,
    x: H,
    t: H,
    r: i64,
    log_target: bool,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    loss("aclnnKlDivBackward", LossKind::KlDiv { log_target }, r, Some(g), (x, t), &[], ("out", out), ws, ex)
}
