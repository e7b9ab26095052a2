//! aclnnFlashAttentionScore and aclnnFlashAttentionScoreGrad: the fused attention torch_npu launches for
//! `F.scaled_dot_product_attention` and `torch_npu.npu_fusion_attention`, computed exactly (f64) on the CPU.
//!
//! Forward, per batch b, query head n and query row i (CANN's formula, no pse):
//! `s_ij = scale · q_i · k_j` over the unmasked keys j, `max_i = max_j s_ij`, `sum_i = Σ_j e^(s_ij - max_i)`,
//! `P_ij = e^(s_ij - max_i) / sum_i`, with dropout `P_ij · keep_ij / keepProb`, and `out_i = Σ_j P_ij v_j`.
//! softmaxMaxOut / softmaxSumOut hold max_i and sum_i as float32, repeated 8 times ([B, N1, Sq, 8]), which
//! the backward reads back. Key/value may have fewer heads (N2 dividing N1: grouped-query attention).
//!
//! Masks (1 = masked): without an attenMask CANN computes the full matrix, whatever sparseMode and the
//! tokens say (modes 1–4 need one). With a mask, mode 0 applies it, broadcast from [Sq, Skv] or
//! [1|B, 1|N1, Sq, Skv], and the band `i - preTokens <= j <= i + nextTokens`; 1 applies it alone; 2 (left-up
//! causal, torch's `is_causal`) masks j > i, 3 (right-down causal) j > i + Skv - Sq, 4 the band aligned
//! right-down; 2–4 take CANN's compressed [2048, 2048] mask, whose values are not read. CANN replaces a masked
//! score by -FLT_MAX, so a query row with every key masked averages V uniformly (max -FLT_MAX, sum Skv),
//! unless the call runs in CANN's invalid-line mode (innerPrecise 2, or a band that leaves some row without
//! keys), where such rows give 0 and their sum is FLT_MAX. pse, padding masks, prefix, the variable-length
//! modes (5–8), float64 and a value head dim other than the query's are refused as not simulated.

use crate::dtype::DType;
use crate::ops_ext::{float, inv, opt, t};
use crate::tensor::SV;

/// The input layout (`inputLayout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Bnsd,
    Bsnd,
    Bsh,
    Sbh,
}

impl Layout {
    pub fn parse(s: &str) -> Result<Layout, i32> {
        match s {
            "BNSD" => Ok(Layout::Bnsd),
            "BSND" => Ok(Layout::Bsnd),
            "BSH" => Ok(Layout::Bsh),
            "SBH" => Ok(Layout::Sbh),
            _ => Err(inv(format!("inputLayout {s:?} is not simulated (BNSD, BSND, BSH, SBH)"))),
        }
    }
    /// (batch, heads, sequence, head dim) of a 3-d or 4-d tensor in this layout; `d` is the head dim for
    /// BSH / SBH, where the heads come from H / d.
    fn dims(self, shape: &[i64], d: Option<i64>, heads: i64) -> Result<[usize; 4], i32> {
        let want = if matches!(self, Layout::Bsh | Layout::Sbh) { 3 } else { 4 };
        if shape.len() != want || shape.iter().any(|&x| x < 0) {
            return Err(inv(format!("a {self:?} tensor must be {want}-d, got {shape:?}")));
        }
        let u = |i: usize| shape[i] as usize;
        Ok(match self {
            Layout::Bnsd => [u(0), u(1), u(2), u(3)],
            Layout::Bsnd => [u(0), u(2), u(1), u(3)],
            Layout::Bsh | Layout::Sbh => {
                let (b, s, h) = if self == Layout::Bsh { (u(0), u(1), shape[2]) } else { (u(1), u(0), shape[2]) };
                let d = d.unwrap_or(if heads > 0 { h / heads } else { 0 });
                if d <= 0 || h % d != 0 {
                    return Err(inv(format!("hidden size {h} is not a multiple of the head dim {d}")));
                }
                [b, (h / d) as usize, s, d as usize]
            }
        })
    }
    /// The flat (row-major) index of element (b, n, s, d) of a tensor of dims [B, N, S, D].
    fn at(self, [_, nn, ss, dd]: [usize; 4], bb: usize, b: usize, n: usize, s: usize, d: usize) -> usize {
        match self {
            Layout::Bnsd => ((b * nn + n) * ss + s) * dd + d,
            Layout::Bsnd | Layout::Bsh => ((b * ss + s) * nn + n) * dd + d,
            Layout::Sbh => ((s * bb + b) * nn + n) * dd + d,
        }
    }
}

/// The scalar arguments of both calls.
#[derive(Clone, Debug)]
pub struct FaParams {
    pub scale: f64,
    pub keep_prob: f64,
    pub pre_tokens: i64,
    pub next_tokens: i64,
    pub head_num: i64,
    pub layout: Layout,
    pub sparse_mode: i64,
    pub inner_precise: i64,
}

/// Tensor slots of the forward: query, key, value, realShift?, dropMask?, paddingMask?, attenMask?,
/// softmaxMaxOut, softmaxSumOut, softmaxOutOut?, attentionOutOut.
pub mod fwd {
    pub const Q: usize = 0;
    pub const K: usize = 1;
    pub const V: usize = 2;
    pub const PSE: usize = 3;
    pub const DROP: usize = 4;
    pub const PAD: usize = 5;
    pub const MASK: usize = 6;
    pub const MAX: usize = 7;
    pub const SUM: usize = 8;
    pub const OUT: usize = 10;
}
/// Tensor slots of the backward: query, key, value, dy, pseShift?, dropMask?, paddingMask?, attenMask?,
/// softmaxMax?, softmaxSum?, softmaxIn?, attentionIn?, dqOut, dkOut, dvOut, dpseOut?.
pub mod bwd {
    pub const DY: usize = 3;
    pub const PSE: usize = 4;
    pub const DROP: usize = 5;
    pub const PAD: usize = 6;
    pub const MASK: usize = 7;
    pub const MAX: usize = 8;
    pub const SUM: usize = 9;
    pub const DQ: usize = 12;
    pub const DK: usize = 13;
    pub const DV: usize = 14;
}

/// The geometry of one call, checked.
struct Geom {
    q: [usize; 4],
    kv: [usize; 4],
}

impl FaParams {
    fn geom(&self, s: &[SV], pse: usize, pad: usize) -> Result<Geom, i32> {
        if !(0..=4).contains(&self.sparse_mode) {
            return Err(inv(format!("sparseMode {} is not simulated (0-4)", self.sparse_mode)));
        }
        if opt(s, pse).is_some() || opt(s, pad).is_some() {
            return Err(inv("pse and paddingMask are not simulated"));
        }
        if !(self.keep_prob > 0.0 && self.keep_prob <= 1.0) {
            return Err(inv(format!("keepProb {} must be in (0, 1]", self.keep_prob)));
        }
        let (q, k, v) = (t(s, 0)?, t(s, 1)?, t(s, 2)?);
        for (x, what) in [(q, "query"), (k, "key"), (v, "value")] {
            float(x, what)?;
            if x.dtype == DType::F64 {
                return Err(inv(format!("{what}: float64 is not supported (float32, float16, bfloat16)")));
            }
            if x.dtype != q.dtype {
                return Err(inv(format!("{what}: dtype {} must be query's {}", x.dtype.name(), q.dtype.name())));
            }
        }
        let qd = self.layout.dims(&q.shape, None, self.head_num)?;
        if qd[1] as i64 != self.head_num {
            return Err(inv(format!("headNum {} differs from query's {} heads", self.head_num, qd[1])));
        }
        let kd = self.layout.dims(&k.shape, Some(qd[3] as i64), 0)?;
        if self.layout.dims(&v.shape, Some(qd[3] as i64), 0)? != kd {
            return Err(inv(format!("value {:?} must have key's shape {:?}", v.shape, k.shape)));
        }
        if kd[0] != qd[0] || kd[3] != qd[3] || kd[1] == 0 || qd[1] % kd[1] != 0 {
            return Err(inv(format!(
                "key {:?} does not fit query {:?} (same batch and head dim, key heads dividing query heads)",
                k.shape, q.shape
            )));
        }
        match opt(s, pse + 1) {
            None if self.keep_prob < 1.0 => return Err(inv("keepProb < 1 needs a dropMask")),
            Some(m) if m.dtype != DType::U8 => {
                return Err(inv(format!("dropMask: dtype {} must be uint8", m.dtype.name())))
            }
            _ => {}
        }
        if matches!(self.sparse_mode, 0 | 4) && self.pre_tokens.saturating_add(self.next_tokens) < 0 {
            return Err(inv(format!(
                "preTokens {} and nextTokens {} leave no key for any query (no valid data block)",
                self.pre_tokens, self.next_tokens
            )));
        }
        Ok(Geom { q: qd, kv: kd })
    }

    /// The explicit mask's (batch, head) strides, or None when this call reads no mask values; checks the
    /// mask's dtype and shape without reading it (phase 1 must not read device memory). Without a mask CANN
    /// computes the full matrix whatever the mode and tokens; modes 2–4 take the compressed [2048, 2048] form.
    fn mask_strides(&self, s: &[SV], slot: usize, g: &Geom) -> Result<Option<(usize, usize)>, i32> {
        let [b, n, sq, _] = g.q;
        let skv = g.kv[2];
        let Some(m) = opt(s, slot) else {
            return if self.sparse_mode == 0 {
                Ok(None)
            } else {
                Err(inv(format!("sparseMode {} needs an attenMask", self.sparse_mode)))
            };
        };
        if !matches!(m.dtype, DType::Bool | DType::U8) {
            return Err(inv(format!("attenMask: dtype {} must be bool or uint8", m.dtype.name())));
        }
        if self.sparse_mode >= 2 {
            return if m.shape == [2048, 2048] {
                Ok(None)
            } else {
                Err(inv(format!(
                    "attenMask {:?}: sparseMode {} takes the compressed [2048, 2048] mask",
                    m.shape, self.sparse_mode
                )))
            };
        }
        let rows = (sq * skv) as i64;
        match m.shape.as_slice() {
            [x, y] if (*x, *y) == (sq as i64, skv as i64) => Ok(Some((0, 0))),
            [mb, mn, x, y]
                if (*x, *y) == (sq as i64, skv as i64)
                    && (*mb == 1 || *mb == b as i64)
                    && (*mn == 1 || *mn == n as i64) =>
            {
                Ok(Some((((*mb != 1) as i64 * mn * rows) as usize, ((*mn != 1) as i64 * rows) as usize)))
            }
            _ => Err(inv(format!("attenMask {:?} does not fit [{sq}, {skv}] or [1|{b}, 1|{n}, {sq}, {skv}]", m.shape))),
        }
    }

    /// Whether the mode's band (applied only with a mask) masks key j for query row i.
    fn band(&self, sq: usize, skv: usize) -> impl Fn(usize, usize) -> bool {
        let (mode, pre, next) = (self.sparse_mode, self.pre_tokens, self.next_tokens);
        let shift = skv as i64 - sq as i64;
        move |i: usize, j: usize| {
            let (i, j) = (i as i64, j as i64);
            match mode {
                0 => j > i.saturating_add(next) || j < i.saturating_sub(pre),
                2 => j > i,
                3 => j > i + shift,
                4 => j > (i + shift).saturating_add(next) || j < (i + shift).saturating_sub(pre),
                _ => false,
            }
        }
    }

    /// Whether some query row has every key masked by the band alone: CANN then computes the whole call in
    /// its "invalid line" mode (such rows, and explicitly fully masked ones, give 0, as innerPrecise 2).
    fn band_empties_rows(&self, s: &[SV], slot: usize, g: &Geom) -> bool {
        let (sq, skv) = (g.q[2], g.kv[2]);
        if opt(s, slot).is_none() || self.sparse_mode == 1 || sq == 0 {
            return false;
        }
        let band = self.band(sq, skv);
        (0..sq).any(|i| (0..skv).all(|j| band(i, j)))
    }

    /// Whether key j is masked for query row i of (b, n).
    fn masker(&self, s: &[SV], slot: usize, g: &Geom) -> Result<impl Fn(usize, usize, usize, usize) -> bool, i32> {
        let skv = g.kv[2];
        let explicit = match (self.mask_strides(s, slot, g)?, opt(s, slot)) {
            (Some((sb, sn)), Some(m)) => Some((m.read_f64()?, sb, sn)),
            _ => None,
        };
        let with_mask = opt(s, slot).is_some();
        let band = self.band(g.q[2], skv);
        Ok(move |bi: usize, ni: usize, i: usize, j: usize| {
            (with_mask && band(i, j))
                || explicit.as_ref().is_some_and(|(m, sb, sn)| m[bi * sb + ni * sn + i * skv + j] != 0.0)
        })
    }

    /// The drop-mask bit of element (b, n, i, j) of [B, N1, Sq, Skv]: 1 = keep (DropoutGenMask's order).
    fn keeper(&self, s: &[SV], slot: usize, g: &Geom) -> Result<impl Fn(usize, usize, usize, usize) -> bool, i32> {
        let bits = match opt(s, slot) {
            Some(m) if self.keep_prob < 1.0 => {
                let need = (g.q[0] * g.q[1] * g.q[2] * g.kv[2]).div_ceil(8);
                let bytes: Vec<u8> = m.read_i64()?.into_iter().map(|v| v as u8).collect();
                if bytes.len() < need {
                    return Err(inv(format!("dropMask has {} bytes, {need} needed", bytes.len())));
                }
                Some(bytes)
            }
            _ => None,
        };
        let [_, n, sq, _] = g.q;
        let skv = g.kv[2];
        Ok(move |b: usize, h: usize, i: usize, j: usize| {
            bits.as_ref().is_none_or(|m| {
                let e = ((b * n + h) * sq + i) * skv + j;
                m[e / 8] >> (e % 8) & 1 == 1
            })
        })
    }

    pub fn validate_fwd(&self, s: &[SV]) -> Result<u64, i32> {
        let g = self.geom(s, fwd::PSE, fwd::PAD)?;
        self.mask_strides(s, fwd::MASK, &g)?;
        let [b, n, sq, _] = g.q;
        for (slot, what) in [(fwd::MAX, "softmaxMaxOut"), (fwd::SUM, "softmaxSumOut")] {
            let o = t(s, slot)?;
            if o.dtype != DType::F32 || o.shape != [b as i64, n as i64, sq as i64, 8] {
                return Err(inv(format!(
                    "{what} must be float32 [{b}, {n}, {sq}, 8], got {} {:?}",
                    o.dtype.name(),
                    o.shape
                )));
            }
        }
        let (q, o) = (t(s, fwd::Q)?, t(s, fwd::OUT)?);
        if o.shape != q.shape || o.dtype != q.dtype {
            return Err(inv(format!("attentionOutOut must be query's {} {:?}", q.dtype.name(), q.shape)));
        }
        Ok(0)
    }

    /// Scores of (b, n, i) against every key: (scaled score, masked) per j.
    fn row(
        &self,
        q: &[f64],
        k: &[f64],
        g: &Geom,
        (b, n, i): (usize, usize, usize),
        masked: &impl Fn(usize, usize, usize, usize) -> bool,
    ) -> Vec<Option<f64>> {
        let (l, d, group) = (self.layout, g.q[3], g.q[1] / g.kv[1]);
        (0..g.kv[2])
            .map(|j| {
                if masked(b, n, i, j) {
                    return None;
                }
                let dot: f64 =
                    (0..d).map(|x| q[l.at(g.q, g.q[0], b, n, i, x)] * k[l.at(g.kv, g.q[0], b, n / group, j, x)]).sum();
                Some(dot * self.scale)
            })
            .collect()
    }

    /// The row's softmax: (max, sum, [(key j, P_ij)]). A row with every key masked has max -FLT_MAX (CANN's
    /// masked score): P is uniform (the scores are all equal), or, in the invalid-line mode (`zero_rows`),
    /// the row gives nothing and its sum is FLT_MAX.
    fn softmax(row: &[Option<f64>], zero_rows: bool) -> (f64, f64, Vec<(usize, f64)>) {
        let m = row.iter().flatten().copied().fold(f64::NEG_INFINITY, f64::max);
        if m == f64::NEG_INFINITY {
            let lowest = f64::from(f32::MIN);
            let n = row.len();
            return if zero_rows {
                (lowest, f64::from(f32::MAX), Vec::new())
            } else {
                (lowest, n as f64, (0..n).map(|j| (j, 1.0 / n as f64)).collect())
            };
        }
        let sum: f64 = row.iter().flatten().map(|x| (x - m).exp()).sum();
        let p = row.iter().enumerate().filter_map(|(j, x)| x.map(|x| (j, (x - m).exp() / sum))).collect();
        (m, sum, p)
    }

    /// innerPrecise 2, or a band that empties rows, switches CANN to its invalid-line mode.
    fn zero_rows(&self, s: &[SV], mask: usize, g: &Geom) -> bool {
        self.inner_precise == 2 || self.band_empties_rows(s, mask, g)
    }

    pub fn exec_fwd(&self, s: &[SV]) -> Result<(), i32> {
        let g = self.geom(s, fwd::PSE, fwd::PAD)?;
        let masked = self.masker(s, fwd::MASK, &g)?;
        let keep = self.keeper(s, fwd::DROP, &g)?;
        let zero = self.zero_rows(s, fwd::MASK, &g);
        let (q, k, v) = (t(s, 0)?.read_f64()?, t(s, 1)?.read_f64()?, t(s, 2)?.read_f64()?);
        let (l, [b_, n_, sq, d], group) = (self.layout, g.q, g.q[1] / g.kv[1]);
        let mut out = vec![0.0; q.len()];
        let (mut mx, mut sm) = (vec![0f32; b_ * n_ * sq * 8], vec![0f32; b_ * n_ * sq * 8]);
        for b in 0..b_ {
            for n in 0..n_ {
                for i in 0..sq {
                    let (m, sum, probs) = Self::softmax(&self.row(&q, &k, &g, (b, n, i), &masked), zero);
                    let r = ((b * n_ + n) * sq + i) * 8;
                    mx[r..r + 8].fill(m as f32);
                    sm[r..r + 8].fill(sum as f32);
                    for (j, p) in probs {
                        if !keep(b, n, i, j) {
                            continue;
                        }
                        let p = p / self.keep_prob;
                        for x in 0..d {
                            out[l.at(g.q, b_, b, n, i, x)] += p * v[l.at(g.kv, b_, b, n / group, j, x)];
                        }
                    }
                }
            }
        }
        t(s, fwd::MAX)?.write_f32(&mx)?;
        t(s, fwd::SUM)?.write_f32(&sm)?;
        t(s, fwd::OUT)?.write_f64(&out)
    }

    pub fn validate_bwd(&self, s: &[SV]) -> Result<u64, i32> {
        let g = self.geom(s, bwd::PSE, bwd::PAD)?;
        self.mask_strides(s, bwd::MASK, &g)?;
        let q = t(s, 0)?;
        let dy = t(s, bwd::DY)?;
        if dy.shape != q.shape || dy.dtype != q.dtype {
            return Err(inv(format!("dy must be query's {} {:?}", q.dtype.name(), q.shape)));
        }
        let [b, n, sq, _] = g.q;
        for (slot, what) in [(bwd::MAX, "softmaxMax"), (bwd::SUM, "softmaxSum")] {
            match opt(s, slot) {
                Some(o) if o.dtype == DType::F32 && o.shape == [b as i64, n as i64, sq as i64, 8] => {}
                _ => return Err(inv(format!("{what} must be the forward's float32 [{b}, {n}, {sq}, 8]"))),
            }
        }
        for (slot, like, what) in [(bwd::DQ, 0, "dqOut"), (bwd::DK, 1, "dkOut"), (bwd::DV, 2, "dvOut")] {
            let (o, x) = (t(s, slot)?, t(s, like)?);
            if o.shape != x.shape || o.dtype != x.dtype {
                return Err(inv(format!("{what} must be {} {:?}", x.dtype.name(), x.shape)));
            }
        }
        Ok(0)
    }

    /// dq, dk, dv from the probabilities recomputed exactly from q and k (softmaxMax / softmaxSum must be the
    /// forward's; CANN reads P back from them, so its P differs from this one by their float32 rounding).
    pub fn exec_bwd(&self, s: &[SV]) -> Result<(), i32> {
        let g = self.geom(s, bwd::PSE, bwd::PAD)?;
        let masked = self.masker(s, bwd::MASK, &g)?;
        let keep = self.keeper(s, bwd::DROP, &g)?;
        let zero = self.zero_rows(s, bwd::MASK, &g);
        let (q, k, v, dy) =
            (t(s, 0)?.read_f64()?, t(s, 1)?.read_f64()?, t(s, 2)?.read_f64()?, t(s, bwd::DY)?.read_f64()?);
        let (l, [b_, n_, sq, d], group, skv) = (self.layout, g.q, g.q[1] / g.kv[1], g.kv[2]);
        let (mut dq, mut dk, mut dv) = (vec![0.0; q.len()], vec![0.0; k.len()], vec![0.0; v.len()]);
        for b in 0..b_ {
            for n in 0..n_ {
                let h = n / group;
                for i in 0..sq {
                    let (_, _, probs) = Self::softmax(&self.row(&q, &k, &g, (b, n, i), &masked), zero);
                    // P, the kept-and-scaled factor, and dP = dy_i · v_j (times the same factor); as CANN's
                    // kernel, dS = P (dP - D) is not masked again (it is 0 where P is, except in a fully masked
                    // row outside the invalid-line mode, where P is uniform and q and k get a gradient)
                    let mut terms = Vec::with_capacity(skv);
                    for (j, p) in probs {
                        let f = if keep(b, n, i, j) { 1.0 / self.keep_prob } else { 0.0 };
                        let dp: f64 =
                            (0..d).map(|x| dy[l.at(g.q, b_, b, n, i, x)] * v[l.at(g.kv, b_, b, h, j, x)]).sum::<f64>()
                                * f;
                        terms.push((j, p, f, dp));
                    }
                    let di: f64 = terms.iter().map(|&(_, p, _, dp)| p * dp).sum();
                    for &(j, p, f, dp) in &terms {
                        let ds = p * (dp - di) * self.scale;
                        for x in 0..d {
                            let (qi, kj) = (l.at(g.q, b_, b, n, i, x), l.at(g.kv, b_, b, h, j, x));
                            dv[kj] += p * f * dy[qi];
                            dq[qi] += ds * k[kj];
                            dk[kj] += ds * q[qi];
                        }
                    }
                }
            }
        }
        t(s, bwd::DQ)?.write_f64(&dq)?;
        t(s, bwd::DK)?.write_f64(&dk)?;
        t(s, bwd::DV)?.write_f64(&dv)
    }
}
