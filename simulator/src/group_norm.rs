//! aclnnGroupNorm and aclnnGroupNormBackward (torch's F.group_norm / nn.GroupNorm), computed in f64.
//!
//! Forward slots: self [N, C, *], gamma? [C], beta? [C], out (self's shape), meanOut [N, group],
//! rstdOut [N, group]. Each (n, g) normalises its C / group channels × HxW elements by their mean and biased
//! variance: `rstd = 1 / sqrt(var + eps)`, `out = (x - mean) · rstd · gamma[c] + beta[c]`.
//! Backward slots: gradOut, input, mean, rstd, gamma?, gradInput?, gradGammaOut?, gradBetaOut?, with
//! `outputMask` choosing which are computed (from the mean and rstd passed in, as CANN's kernel):
//! `gradBeta[c] = Σ dy`, `gradGamma[c] = Σ dy · x̂`, and per (n, g) with `dŷ = dy · gamma[c]` over D elements,
//! `dx = rstd · (dŷ - (Σ dŷ + x̂ · Σ dŷ x̂) / D)`.
use crate::ops_ext::{float, inv, opt, t};
use crate::tensor::{TView, SV};

#[derive(Clone, Debug)]
pub struct GroupNorm {
    pub n: i64,
    pub c: i64,
    pub hxw: i64,
    pub group: i64,
    pub eps: f64,
    /// None for the forward; the backward's outputMask (gradInput, gradGamma, gradBeta).
    pub backward: Option<[bool; 3]>,
}

impl GroupNorm {
    fn check_x(&self, x: &TView) -> Result<(), i32> {
        float(x, "input")?;
        let (n, c, hxw, g) = (self.n, self.c, self.hxw, self.group);
        if g <= 0 || c % g != 0 {
            return Err(inv(format!("group {g} must divide C {c}")));
        }
        let rest: i64 = x.shape.iter().skip(2).product();
        if x.shape.len() < 2 || x.shape[0] != n || x.shape[1] != c || rest != hxw {
            return Err(inv(format!("input {:?} is not [N {n}, C {c}, HxW {hxw}]", x.shape)));
        }
        Ok(())
    }
    /// `v` of `shape` (gamma / beta may also be given as any one-dimensional view of C elements) and of the
    /// input's float dtype.
    fn check(v: &TView, x: &TView, shape: &[i64], what: &str) -> Result<(), i32> {
        float(v, what)?;
        if v.shape != shape {
            return Err(inv(format!("{what}: shape {:?} must be {shape:?}", v.shape)));
        }
        if v.dtype != x.dtype {
            return Err(inv(format!("{what}: dtype {} must be the input's {}", v.dtype.name(), x.dtype.name())));
        }
        Ok(())
    }

    pub fn validate(&self, s: &[SV]) -> Result<u64, i32> {
        let (c, ng) = (self.c, [self.n, self.group]);
        match self.backward {
            None => {
                let x = t(s, 0)?;
                self.check_x(x)?;
                for (i, what) in [(1, "gamma"), (2, "beta")] {
                    if let Some(v) = opt(s, i) {
                        Self::check(v, x, &[c], what)?;
                    }
                }
                Self::check(t(s, 3)?, x, &x.shape, "out")?;
                Self::check(t(s, 4)?, x, &ng, "meanOut")?;
                Self::check(t(s, 5)?, x, &ng, "rstdOut")?;
            }
            Some(mask) => {
                let x = t(s, 1)?;
                self.check_x(x)?;
                Self::check(t(s, 0)?, x, &x.shape, "gradOut")?;
                Self::check(t(s, 2)?, x, &ng, "mean")?;
                Self::check(t(s, 3)?, x, &ng, "rstd")?;
                if let Some(v) = opt(s, 4) {
                    Self::check(v, x, &[c], "gamma")?;
                }
                for (k, (i, shape, what)) in
                    [(5, x.shape.clone(), "gradInput"), (6, vec![c], "gradGammaOut"), (7, vec![c], "gradBetaOut")]
                        .into_iter()
                        .enumerate()
                {
                    if mask[k] {
                        Self::check(t(s, i)?, x, &shape, what)?;
                    }
                }
            }
        }
        Ok(0)
    }

    /// (channels per group, elements per group, elements per channel)
    fn dims(&self) -> (usize, usize, usize) {
        let cg = (self.c / self.group) as usize;
        (cg, cg * self.hxw as usize, self.hxw as usize)
    }

    pub fn exec(&self, s: &[SV]) -> Result<(), i32> {
        let (cg, d, hw) = self.dims();
        let (n, c, g) = (self.n as usize, self.c as usize, self.group as usize);
        let ones =
            |slot: usize, v: f64| -> Result<Vec<f64>, i32> { opt(s, slot).map_or(Ok(vec![v; c]), |t| t.read_f64()) };
        match self.backward {
            None => {
                let x = t(s, 0)?.read_f64()?;
                let (gamma, beta) = (ones(1, 1.0)?, ones(2, 0.0)?);
                let mut y = vec![0.0; x.len()];
                let (mut mean, mut rstd) = (vec![0.0; n * g], vec![0.0; n * g]);
                for ng in 0..n * g {
                    let xs = &x[ng * d..(ng + 1) * d];
                    let m = xs.iter().sum::<f64>() / d as f64;
                    let var = xs.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / d as f64;
                    let r = 1.0 / (var + self.eps).sqrt();
                    (mean[ng], rstd[ng]) = (m, r);
                    for (k, v) in xs.iter().enumerate() {
                        let ch = (ng % g) * cg + k / hw;
                        y[ng * d + k] = (v - m) * r * gamma[ch] + beta[ch];
                    }
                }
                t(s, 3)?.write_f64(&y)?;
                t(s, 4)?.write_f64(&mean)?;
                t(s, 5)?.write_f64(&rstd)
            }
            Some(mask) => {
                let (dy, x) = (t(s, 0)?.read_f64()?, t(s, 1)?.read_f64()?);
                let (mean, rstd, gamma) = (t(s, 2)?.read_f64()?, t(s, 3)?.read_f64()?, ones(4, 1.0)?);
                let (mut dx, mut dgamma, mut dbeta) = (vec![0.0; x.len()], vec![0.0; c], vec![0.0; c]);
                for ng in 0..n * g {
                    let (m, r) = (mean[ng], rstd[ng]);
                    let ch = |k: usize| (ng % g) * cg + k / hw;
                    let (mut sum_dyg, mut sum_dyg_xh) = (0.0, 0.0);
                    for k in 0..d {
                        let (i, xh) = (ng * d + k, (x[ng * d + k] - m) * r);
                        dbeta[ch(k)] += dy[i];
                        dgamma[ch(k)] += dy[i] * xh;
                        sum_dyg += dy[i] * gamma[ch(k)];
                        sum_dyg_xh += dy[i] * gamma[ch(k)] * xh;
                    }
                    for k in 0..d {
                        let (i, xh) = (ng * d + k, (x[ng * d + k] - m) * r);
                        dx[i] = r * (dy[i] * gamma[ch(k)] - (sum_dyg + xh * sum_dyg_xh) / d as f64);
                    }
                }
                for (k, (i, v)) in [(5, dx), (6, dgamma), (7, dbeta)].into_iter().enumerate() {
                    if mask[k] {
                        t(s, i)?.write_f64(&v)?;
                    }
                }
                Ok(())
            }
        }
    }
}
