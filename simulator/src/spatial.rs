//! Ops that map each plane of the last one or two axes to another plane by fixed weights, forward and
//! backward: average pooling (aclnnAvgPool2d), adaptive average pooling (aclnnAdaptiveAvgPool2d), nearest
//! and bilinear resizing (aclnnUpsampleNearest2d(V2), aclnnUpsampleBilinear2d) and reflection /
//! replication padding (aclnnReflectionPad1d/2d, aclnnReplicationPad1d/2d).
//!
//! Each output element is a weighted sum of elements of the same plane of the input (its *taps*), so
//! every forward is `out[o] = Σ w · x[i]` and every backward `gradInput[i] += w · gradOut[o]`, from one
//! description per kind, written as torch's CPU kernels define it (index and weight formulas computed in
//! float32 where torch computes them so; sums in f64, rounded to out's dtype).
//!
//! Slots: forward `self, out`; backward `gradOut, [self], gradInput` (the upsample backwards take the
//! input's size as an array instead of `self`). Leading axes (batch, channels) are any, at most two.
use crate::dtype::DType;
use crate::ops_ext::{float, inv, t, PoolGeom};
use crate::tensor::{numel, TView, SV};

#[derive(Clone, Debug)]
pub enum Kind {
    /// torch's avg_pool2d: windows clipped to the padded input; divided by `divisor` when non-zero, else
    /// by the window's size within the padded input (`count_include_pad`) or within the input.
    AvgPool { g: PoolGeom, count_include_pad: bool, divisor: i64 },
    /// torch's adaptive_avg_pool2d: output cell o averages [floor(o·in/out), ceil((o+1)·in/out)).
    /// The backward's `out` is [0, 0]: gradOutput's plane.
    AdaptiveAvg { out: [i64; 2] },
    /// torch's upsample_nearest2d: src = min(floor(dst · scale), in - 1), scale (float32) = 1 / scales
    /// when given (> 0), else in / out; out = in copies, out = 2 · in halves.
    Nearest { out: [i64; 2], scales: [f64; 2] },
    /// torch's upsample_bilinear2d (area_pixel_compute_source_index and linear weights, float32).
    Bilinear { out: [i64; 2], align_corners: bool, scales: [f64; 2] },
    /// Padding [left, right] (1-D) or [left, right, top, bottom] (2-D): mirrored without repeating the
    /// edge (`reflect`) or repeating it (`replicate`).
    Pad { reflect: bool, pads: Vec<i64> },
}

#[derive(Clone, Debug)]
pub struct Spatial {
    pub kind: Kind,
    /// Spatial axes: 1 (the 1-D pads) or 2.
    pub dims: usize,
    /// Backward: slot of `self` (None for the upsample backwards) and the input size given as an array.
    pub backward: Option<Backward>,
}

#[derive(Clone, Debug)]
pub struct Backward {
    pub has_self: bool,
    /// The upsample backwards: (outputSize, inputSize) as passed.
    pub sizes: Option<(Vec<i64>, Vec<i64>)>,
}

/// The source coordinate and its two taps for linear interpolation along one axis (torch's
/// `compute_indices_weights_linear` in float32): (i0, i1, lambda0, lambda1).
fn linear(dst: i64, inp: i64, out: i64, align: bool, scales: f64) -> (i64, i64, f64, f64) {
    let scale: f32 = if align {
        if out > 1 {
            (inp - 1) as f32 / (out - 1) as f32
        } else {
            0.0
        }
    } else if scales > 0.0 {
        (1.0 / scales) as f32
    } else {
        inp as f32 / out as f32
    };
    let src = if align { scale * dst as f32 } else { (scale * (dst as f32 + 0.5) - 0.5).max(0.0) };
    let i0 = (src as i64).min(inp - 1);
    let i1 = i0 + i64::from(i0 < inp - 1);
    let l1 = (src - i0 as f32).clamp(0.0, 1.0);
    (i0, i1, f64::from(1.0 - l1), f64::from(l1))
}

fn nearest(dst: i64, inp: i64, out: i64, scales: f64) -> i64 {
    if out == inp {
        return dst;
    }
    if out == 2 * inp {
        return dst >> 1;
    }
    let scale: f32 = if scales > 0.0 { (1.0 / scales) as f32 } else { inp as f32 / out as f32 };
    ((dst as f32 * scale).floor() as i64).min(inp - 1)
}

fn mirror(i: i64, n: i64, reflect: bool) -> i64 {
    if reflect {
        let i = if i < 0 { -i } else { i };
        if i >= n {
            2 * (n - 1) - i
        } else {
            i
        }
    } else {
        i.clamp(0, n - 1)
    }
}

impl Spatial {
    /// The output plane [oh, ow] of an input plane [h, w] (a 1-D op has h = 1), checking parameters.
    fn out_plane(&self, h: i64, w: i64) -> Result<[i64; 2], i32> {
        let o = match &self.kind {
            Kind::AvgPool { g, divisor, .. } => {
                if *divisor < 0 {
                    return Err(inv(format!("divisorOverride {divisor} must not be negative")));
                }
                [g.out_len(0, h), g.out_len(1, w)]
            }
            Kind::AdaptiveAvg { out } | Kind::Nearest { out, .. } => *out,
            Kind::Bilinear { out, scales, .. } => {
                if scales.iter().any(|&v| v < 0.0) {
                    return Err(inv(format!("scales {scales:?} must not be negative")));
                }
                *out
            }
            Kind::Pad { reflect, pads } => {
                if pads.len() != 2 * self.dims {
                    return Err(inv(format!("padding {pads:?}: {} values expected", 2 * self.dims)));
                }
                let pw = [pads[0], pads[1]];
                let ph = if self.dims == 2 { [pads[2], pads[3]] } else { [0, 0] };
                if *reflect && (pw.iter().any(|&p| p >= w) || ph.iter().any(|&p| p >= h)) {
                    return Err(inv(format!("reflection padding {pads:?} must be below the input's size {h}x{w}")));
                }
                if !*reflect && (w == 0 || h == 0) {
                    return Err(inv("replication padding of an empty plane"));
                }
                [h + ph[0] + ph[1], w + pw[0] + pw[1]]
            }
        };
        if o.iter().any(|&v| v < 1) || h < 1 || w < 1 {
            return Err(inv(format!("plane {h}x{w} → {o:?}: sizes must be positive")));
        }
        Ok(o)
    }

    /// The taps (index in the input plane, weight) of every element of the output plane, in order.
    fn taps(&self, h: i64, w: i64, o: [i64; 2]) -> Vec<Vec<(usize, f64)>> {
        let at = |y: i64, x: i64| (y * w + x) as usize;
        let mut r = Vec::with_capacity((o[0] * o[1]) as usize);
        for oy in 0..o[0] {
            for ox in 0..o[1] {
                let taps = match &self.kind {
                    Kind::AvgPool { g, count_include_pad, divisor } => {
                        let (mut y0, mut x0) = (oy * g.stride[0] - g.pad[0], ox * g.stride[1] - g.pad[1]);
                        let (mut y1, mut x1) = ((y0 + g.k[0]).min(h + g.pad[0]), (x0 + g.k[1]).min(w + g.pad[1]));
                        let padded = (y1 - y0) * (x1 - x0);
                        (y0, x0, y1, x1) = (y0.max(0), x0.max(0), y1.min(h), x1.min(w));
                        let d = if *divisor != 0 {
                            *divisor
                        } else if *count_include_pad {
                            padded
                        } else {
                            (y1 - y0) * (x1 - x0)
                        };
                        let mut v = Vec::new();
                        for y in y0..y1 {
                            for x in x0..x1 {
                                v.push((at(y, x), 1.0 / d as f64));
                            }
                        }
                        v
                    }
                    Kind::AdaptiveAvg { out } => {
                        let lo = |d: i64, n: i64, m: i64| (d * n) / m;
                        let hi = |d: i64, n: i64, m: i64| ((d + 1) * n + m - 1) / m;
                        let (y0, y1, x0, x1) =
                            (lo(oy, h, out[0]), hi(oy, h, out[0]), lo(ox, w, out[1]), hi(ox, w, out[1]));
                        let d = ((y1 - y0) * (x1 - x0)) as f64;
                        (y0..y1).flat_map(|y| (x0..x1).map(move |x| (at(y, x), 1.0 / d))).collect()
                    }
                    Kind::Nearest { out, scales } => {
                        vec![(at(nearest(oy, h, out[0], scales[0]), nearest(ox, w, out[1], scales[1])), 1.0)]
                    }
                    Kind::Bilinear { out, align_corners, scales } => {
                        let (y0, y1, ly0, ly1) = linear(oy, h, out[0], *align_corners, scales[0]);
                        let (x0, x1, lx0, lx1) = linear(ox, w, out[1], *align_corners, scales[1]);
                        vec![
                            (at(y0, x0), ly0 * lx0),
                            (at(y0, x1), ly0 * lx1),
                            (at(y1, x0), ly1 * lx0),
                            (at(y1, x1), ly1 * lx1),
                        ]
                    }
                    Kind::Pad { reflect, pads } => {
                        let top = if self.dims == 2 { pads[2] } else { 0 };
                        vec![(at(mirror(oy - top, h, *reflect), mirror(ox - pads[0], w, *reflect)), 1.0)]
                    }
                };
                r.push(taps);
            }
        }
        r
    }

    /// Whether each output element is one input element (so any dtype moves exactly).
    fn moves_only(&self) -> bool {
        matches!(self.kind, Kind::Pad { .. } | Kind::Nearest { .. })
    }

    /// (leading shape, h, w) of a tensor of this op's rank.
    fn split<'a>(&self, shape: &'a [i64], what: &str) -> Result<(&'a [i64], i64, i64), i32> {
        let d = self.dims;
        if shape.len() < d + 1 || shape.len() > d + 2 {
            return Err(inv(format!("{what}: a {}-D or {}-D tensor expected, got {shape:?}", d + 1, d + 2)));
        }
        let (lead, plane) = shape.split_at(shape.len() - d);
        Ok(if d == 2 { (lead, plane[0], plane[1]) } else { (lead, 1, plane[0]) })
    }

    fn shape_of(&self, lead: &[i64], o: [i64; 2]) -> Vec<i64> {
        let mut v = lead.to_vec();
        if self.dims == 2 {
            v.push(o[0]);
        }
        v.push(o[1]);
        v
    }

    /// (input, output) views: the forward's self and out, the backward's gradInput and gradOut.
    fn io<'a>(&self, s: &'a [SV]) -> Result<(&'a TView, &'a TView), i32> {
        match &self.backward {
            None => Ok((t(s, 0)?, t(s, 1)?)),
            Some(b) => Ok((t(s, if b.has_self { 2 } else { 1 })?, t(s, 0)?)),
        }
    }

    /// The adaptive backward's output size comes from gradOutput (its C signature has none).
    fn resolve(&self, y: &TView) -> Spatial {
        let mut r = self.clone();
        if let (Kind::AdaptiveAvg { out }, Some(_)) = (&mut r.kind, &self.backward) {
            if y.shape.len() >= 2 {
                *out = [y.shape[y.shape.len() - 2], y.shape[y.shape.len() - 1]];
            }
        }
        r
    }

    pub fn validate(&self, s: &[SV]) -> Result<u64, i32> {
        let (_, y) = self.io(s)?;
        self.resolve(y).validate_resolved(s)
    }

    pub fn exec(&self, s: &[SV]) -> Result<(), i32> {
        let (_, y) = self.io(s)?;
        self.resolve(y).exec_resolved(s)
    }

    fn validate_resolved(&self, s: &[SV]) -> Result<u64, i32> {
        let (x, y) = self.io(s)?;
        let (xw, yw) = if self.backward.is_some() { ("gradInput", "gradOut") } else { ("self", "out") };
        // the pads and nearest resizing only move elements: CANN takes integers (and bool) there too
        if self.backward.is_some() || !self.moves_only() {
            float(x, xw)?;
        }
        if y.dtype != x.dtype {
            return Err(inv(format!("{yw}: dtype {} must be {xw}'s {}", y.dtype.name(), x.dtype.name())));
        }
        let (lead, h, w) = self.split(&x.shape, xw)?;
        let want = self.shape_of(lead, self.out_plane(h, w)?);
        if y.shape != want {
            return Err(inv(format!("{yw}: shape {:?}, {want:?} expected", y.shape)));
        }
        if let Some(b) = &self.backward {
            if b.has_self && t(s, 1)?.shape != x.shape {
                return Err(inv(format!("self: shape {:?} must be gradInput's {:?}", t(s, 1)?.shape, x.shape)));
            }
            if let Some((os, is)) = &b.sizes {
                let plane = &want[want.len() - self.dims..];
                if os.as_slice() != plane || is.as_slice() != x.shape.as_slice() {
                    return Err(inv(format!(
                        "outputSize {os:?} / inputSize {is:?} do not match gradOut {:?} / gradInput {:?}",
                        y.shape, x.shape
                    )));
                }
            }
        }
        Ok(0)
    }

    fn exec_resolved(&self, s: &[SV]) -> Result<(), i32> {
        let (x, y) = self.io(s)?;
        let (_, h, w) = self.split(&x.shape, "input")?;
        let o = self.out_plane(h, w)?;
        let taps = self.taps(h, w, o);
        let (pin, pout) = ((h * w) as usize, (o[0] * o[1]) as usize);
        let planes = numel(&x.shape).checked_div(pin).unwrap_or(0);
        match self.backward {
            None if x.dtype.is_int() || x.dtype == DType::Bool => {
                // a move of raw values (int64 beyond 2^53 exact)
                let xv = x.read_i64()?;
                let mut out = vec![0i64; planes * pout];
                for p in 0..planes {
                    for (k, tap) in taps.iter().enumerate() {
                        out[p * pout + k] = xv[p * pin + tap[0].0];
                    }
                }
                y.write_i64(&out)
            }
            None => {
                let xv = x.read_f64()?;
                let mut out = vec![0f64; planes * pout];
                for p in 0..planes {
                    for (k, tap) in taps.iter().enumerate() {
                        out[p * pout + k] = tap.iter().map(|&(i, wt)| xv[p * pin + i] * wt).sum();
                    }
                }
                y.write_f64(&out)
            }
            Some(_) => {
                let gv = y.read_f64()?;
                let mut gx = vec![0f64; planes * pin];
                for p in 0..planes {
                    for (k, tap) in taps.iter().enumerate() {
                        for &(i, wt) in tap {
                            gx[p * pin + i] += wt * gv[p * pout + k];
                        }
                    }
                }
                x.write_f64(&gx)
            }
        }
    }
}
