//! Pointwise losses and their backward kernels, as torch defines them (CANN documents the same formulas):
//! aclnnBinaryCrossEntropy(WithLogits), aclnnSmoothL1Loss, aclnnL1Loss, aclnnKlDiv and their Backward forms.
//!
//! Slots: forward `self, target, [weight?], [posWeight?], out`; backward `gradOutput, self, target,
//! [weight?], [posWeight?], gradInput` (weight for the BCE forms, posWeight for BCE with logits). `target`,
//! `weight` and `posWeight` broadcast to self's shape; `reduction` 0 none (out of that shape), 1 mean, 2 sum
//! (out 0-d); a backward's gradOutput broadcasts (0-d after mean/sum) and mean divides by the element count.
//! Computed in f64 from the stored values, rounded to out's float dtype.
use crate::kernels::broadcast_shape;
use crate::ops_ext::{float, inv, opt, t};
use crate::tensor::{bview, SV};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LossKind {
    /// -w (t · max(ln x, -100) + (1 - t) · max(ln(1 - x), -100)) (torch clamps the logs at -100)
    Bce,
    /// w ((1 - t) x + (1 + (pw - 1) t) (ln(1 + e^-|x|) + max(-x, 0))), pw = posWeight (1 when absent)
    BceLogits,
    /// 0.5 d² / beta where |d| < beta, else |d| - 0.5 beta (d = x - t; beta 0 is L1)
    SmoothL1 { beta: f64 },
    /// |x - t|
    L1,
    /// t (ln t - x) (0 where t = 0), or with logTarget e^t (t - x)
    KlDiv { log_target: bool },
}

#[derive(Clone, Debug)]
pub struct Loss {
    pub kind: LossKind,
    pub reduction: i64,
    pub backward: bool,
}

/// torch's `max(log(v), -100)`, NaN kept (an input outside [0, 1] gives NaN, not a clamped loss).
fn clamp_log(v: f64) -> f64 {
    if v.is_nan() {
        v
    } else {
        v.max(-100.0)
    }
}

impl LossKind {
    fn weights(self) -> usize {
        match self {
            LossKind::Bce => 1,
            LossKind::BceLogits => 2,
            _ => 0,
        }
    }
    fn value(self, x: f64, t: f64, w: f64, pw: f64) -> f64 {
        match self {
            LossKind::Bce => -w * (t * clamp_log(x.ln()) + (1.0 - t) * clamp_log((1.0 - x).ln())),
            LossKind::BceLogits => {
                w * ((1.0 - t) * x + (1.0 + (pw - 1.0) * t) * ((-x.abs()).exp().ln_1p() + (-x).max(0.0)))
            }
            LossKind::SmoothL1 { beta } => {
                let d = (x - t).abs();
                if d < beta {
                    0.5 * d * d / beta
                } else {
                    d - 0.5 * beta
                }
            }
            LossKind::L1 => (x - t).abs(),
            LossKind::KlDiv { log_target: true } => t.exp() * (t - x),
            // torch's xlogy(t, t) - t · x: 0 · ln 0 is 0, but 0 · x is NaN for an infinite or NaN x
            LossKind::KlDiv { log_target: false } if t == 0.0 => -t * x,
            LossKind::KlDiv { log_target: false } => t * (t.ln() - x),
        }
    }
    /// d loss / d x (before the reduction's 1/n).
    fn grad(self, x: f64, t: f64, w: f64, pw: f64) -> f64 {
        match self {
            LossKind::Bce => w * (x - t) / ((1.0 - x) * x).max(1e-12),
            LossKind::BceLogits => {
                let z = 1.0 / (1.0 + (-x).exp());
                w * ((pw * t + 1.0 - t) * z - pw * t)
            }
            // torch's smooth_l1_backward: -1 at or below -beta, 1 at or above beta, d / beta between
            LossKind::SmoothL1 { beta } => {
                let d = x - t;
                if d <= -beta {
                    -1.0
                } else if d >= beta {
                    1.0
                } else {
                    d / beta
                }
            }
            LossKind::L1 => {
                let d = x - t;
                if d > 0.0 {
                    1.0
                } else if d < 0.0 {
                    -1.0
                } else {
                    0.0 // at 0 and for NaN, as torch's sign
                }
            }
            LossKind::KlDiv { log_target: true } => -t.exp(),
            LossKind::KlDiv { log_target: false } => -t,
        }
    }
}

impl Loss {
    /// The first slot of self, and the slot of out / gradInput.
    fn slots(&self, s: &[SV]) -> (usize, usize) {
        (usize::from(self.backward), s.len() - 1)
    }

    pub fn validate(&self, s: &[SV]) -> Result<u64, i32> {
        if !(0..=2).contains(&self.reduction) {
            return Err(inv(format!("reduction {} must be 0 (none), 1 (mean) or 2 (sum)", self.reduction)));
        }
        if let LossKind::SmoothL1 { beta } = self.kind {
            if beta.is_nan() || beta < 0.0 {
                return Err(inv(format!("beta {beta} must be >= 0")));
            }
        }
        let (x0, o) = self.slots(s);
        let x = t(s, x0)?;
        float(x, "self")?;
        for k in 1..=1 + self.kind.weights() {
            if let Some(v) = opt(s, x0 + k) {
                float(v, "target/weight")?;
                bview(v, &x.shape)?;
            } else if k == 1 {
                t(s, x0 + 1)?; // target is required
            }
        }
        let out = t(s, o)?;
        float(out, "out")?;
        // self's dtype, or the target's (torch_npu allocates BCE-with-logits' out like the target, L1 / KlDiv
        // like the promoted type)
        let target = t(s, x0 + 1)?;
        if out.dtype != x.dtype && out.dtype != target.dtype {
            return Err(inv(format!("out: dtype {} must be self's {} or target's", out.dtype.name(), x.dtype.name())));
        }
        let want: &[i64] = if self.reduction == 0 || self.backward { &x.shape } else { &[] };
        if out.shape != want {
            return Err(inv(format!("out: shape {:?} must be {want:?}", out.shape)));
        }
        if self.backward {
            let g = t(s, 0)?;
            float(g, "gradOutput")?;
            if self.reduction != 0 && g.numel() != 1 {
                return Err(inv(format!("gradOutput {:?} must have one element after a mean/sum", g.shape)));
            }
            if broadcast_shape(&g.shape, &x.shape).as_deref() != Some(&x.shape[..]) {
                return Err(inv(format!("gradOutput {:?} does not broadcast to self {:?}", g.shape, x.shape)));
            }
        }
        Ok(0)
    }

    pub fn exec(&self, s: &[SV]) -> Result<(), i32> {
        let (x0, o) = self.slots(s);
        let x = t(s, x0)?;
        let shape = x.shape.clone();
        let n = x.numel();
        let read = |k: usize, default: f64| -> Result<Vec<f64>, i32> {
            match opt(s, x0 + k) {
                Some(v) if k <= 1 + self.kind.weights() => bview(v, &shape)?.read_f64(),
                _ => Ok(vec![default; n]),
            }
        };
        let (xs, ts, ws, pws) = (x.read_f64()?, read(1, 0.0)?, read(2, 1.0)?, read(3, 1.0)?);
        let k = self.kind;
        if self.backward {
            let g = bview(t(s, 0)?, &shape)?.read_f64()?;
            let scale = if self.reduction == 1 { 1.0 / n as f64 } else { 1.0 };
            let gi: Vec<f64> = (0..n).map(|i| g[i] * scale * k.grad(xs[i], ts[i], ws[i], pws[i])).collect();
            return t(s, o)?.write_f64(&gi);
        }
        let l: Vec<f64> = (0..n).map(|i| k.value(xs[i], ts[i], ws[i], pws[i])).collect();
        let out = t(s, o)?;
        match self.reduction {
            0 => out.write_f64(&l),
            1 => out.write_f64(&[l.iter().sum::<f64>() / n as f64]),
            _ => out.write_f64(&[l.iter().sum::<f64>()]),
        }
    }
}
