//! Planning of the classic-net aclop op types: attribute decoding (data_format, strides / pads / dilations in
//! the IR's 4-element form, TF padding strings) and the kernel steps, reusing the aclnn kernels where the
//! semantics are the same (convolution and its gradients, softmax, GELU, ReLU backward, mean, copies).
use crate::aclop_io::{Attr, AttrVal, IoT};
use crate::aclop_nn::Nn;
use crate::consts::*;
use crate::errmsg::fail;
use crate::ops::{Bin, Op, SV};
use crate::ops_ext::{ConvGeom, ExtOp};
use crate::tensor::TView;

type Steps = Vec<(Op, Vec<SV>)>;

fn bad(msg: impl Into<String>) -> i32 {
    fail(ACL_ERROR_OP_ATTR_NOT_MATCH, msg)
}
fn list(a: &Attr, k: &str) -> Option<Vec<i64>> {
    match a.get(k) {
        Some(AttrVal::ListInt(v)) => Some(v.clone()),
        _ => None,
    }
}
fn string(a: &Attr, k: &str, d: &str) -> String {
    match a.get(k) {
        Some(AttrVal::Str(v)) => v.clone(),
        _ => d.to_string(),
    }
}
fn int(a: &Attr, k: &str, d: i64) -> i64 {
    match a.get(k) {
        Some(AttrVal::Int(v)) => *v,
        _ => d,
    }
}
fn float(a: &Attr, k: &str) -> Option<f64> {
    match a.get(k) {
        Some(AttrVal::Float(v)) => Some(*v as f64),
        _ => None,
    }
}
fn boolean(a: &Attr, k: &str) -> bool {
    matches!(a.get(k), Some(AttrVal::Bool(true)))
}
/// NHWC tensors are handed to the NCHW kernels as stride-permuted views; `data_format` defaults to NHWC (IR).
fn is_nhwc(a: &Attr) -> Result<bool, i32> {
    match string(a, "data_format", "NHWC").as_str() {
        "NHWC" => Ok(true),
        "NCHW" => Ok(false),
        f => Err(bad(format!("data_format {f:?} is not supported (NCHW / NHWC)"))),
    }
}
fn as_nchw(v: &TView, nhwc: bool) -> TView {
    if !nhwc || v.shape.len() != 4 {
        return v.clone();
    }
    let p = [0usize, 3, 1, 2];
    TView {
        addr: v.addr,
        dtype: v.dtype,
        shape: p.iter().map(|&i| v.shape[i]).collect(),
        strides: p.iter().map(|&i| v.strides[i]).collect(),
        offset: v.offset,
    }
}
/// The (H, W) entries of a 4-element strides / dilations / ksize attribute in the op's data format.
fn hw(a: &Attr, k: &str, nhwc: bool, d: Option<[i64; 2]>) -> Result<[i64; 2], i32> {
    match list(a, k) {
        Some(v) if v.len() == 4 => Ok(if nhwc { [v[1], v[2]] } else { [v[2], v[3]] }),
        Some(v) if v.len() == 2 => Ok([v[0], v[1]]),
        Some(v) => Err(bad(format!("{k} must have 4 (or 2) elements, got {v:?}"))),
        None => d.ok_or_else(|| bad(format!("required attr {k} is missing"))),
    }
}
fn conv_geom(a: &Attr, nhwc: bool) -> Result<ConvGeom, i32> {
    let st = hw(a, "strides", nhwc, None)?;
    let dil = hw(a, "dilations", nhwc, Some([1, 1]))?;
    let p = list(a, "pads").ok_or_else(|| bad("required attr pads is missing"))?;
    if p.len() != 4 || p[0] != p[1] || p[2] != p[3] {
        return Err(bad(format!("pads {p:?}: only symmetric [top, bottom, left, right] pads are supported")));
    }
    ConvGeom::new(&st, &[p[0], p[2]], &dil, int(a, "groups", 1))
}
fn t(v: &TView) -> SV {
    SV::T(Some(v.clone()))
}
fn nn(n: Nn) -> Op {
    Op::Ext(Box::new(ExtOp::Nn(n)))
}
fn need_shape(v: &TView, want: &[i64], what: &str) -> Result<(), i32> {
    if v.shape == want {
        Ok(())
    } else {
        Err(fail(ACL_ERROR_INVALID_PARAM, format!("{what}: shape {:?}, {want:?} expected", v.shape)))
    }
}

/// The steps of a classic-net op type, or None for the types aclop.rs plans itself.
pub fn plan(op: &str, ins: &[IoT], iv: &[TView], ov: &[TView], a: &Attr) -> Result<Option<Steps>, i32> {
    let y = &ov[0];
    let st: Steps = match op {
        "Conv2D" => {
            let nhwc = is_nhwc(a)?;
            if int(a, "offset_x", 0) != 0 {
                return Err(bad("Conv2D: quantized convolution (offset_x) is not supported"));
            }
            let g = conv_geom(a, nhwc)?;
            let bias = iv.get(2).map(t).unwrap_or(SV::T(None));
            vec![(
                Op::Ext(Box::new(ExtOp::Conv2d(g))),
                vec![t(&as_nchw(&iv[0], nhwc)), t(&as_nchw(&iv[1], nhwc)), bias, t(&as_nchw(y, nhwc))],
            )]
        }
        "Conv2DBackpropInput" | "Conv2DBackpropFilter" => {
            // The size input must agree with the output; the kernel takes the output view in place of the
            // missing forward tensor (its values are not used for the requested gradient).
            let nhwc = is_nhwc(a)?;
            let size_in = if op == "Conv2DBackpropInput" { 0 } else { 1 };
            need_shape(y, &ins[size_in].ints()?, op)?;
            let g = conv_geom(a, nhwc)?;
            let (go, yn) = (as_nchw(&iv[2], nhwc), as_nchw(y, nhwc));
            let (x, w, mask, sv) = if op == "Conv2DBackpropInput" {
                (yn.clone(), as_nchw(&iv[1], nhwc), [true, false, false], vec![t(&yn), SV::T(None), SV::T(None)])
            } else {
                (as_nchw(&iv[0], nhwc), yn.clone(), [false, true, false], vec![SV::T(None), t(&yn), SV::T(None)])
            };
            let mut slots = vec![t(&go), t(&x), t(&w)];
            slots.extend(sv);
            vec![(Op::Ext(Box::new(ExtOp::Conv2dBackward { geom: g, mask })), slots)]
        }
        "BiasAddGrad" => {
            let x = &iv[0];
            let axis = if is_nhwc(a)? || x.shape.len() < 3 { x.shape.len() - 1 } else { 1 };
            need_shape(y, &[x.shape[axis]], op)?;
            vec![(nn(Nn::BiasAddGrad { axis }), vec![t(x), t(y)])]
        }
        "MaxPool" | "MaxPoolGrad" | "AvgPool" | "AvgPoolGrad" => {
            let nhwc = is_nhwc(a)?;
            // AvgPoolGrad(orig_input_shape, input_grad) -> out_grad: the geometry comes from the output.
            let x = if op == "AvgPoolGrad" {
                need_shape(y, &ins[0].ints()?, op)?;
                as_nchw(y, nhwc)
            } else {
                as_nchw(&iv[0], nhwc)
            };
            if x.shape.len() != 4 {
                return Err(fail(ACL_ERROR_INVALID_PARAM, format!("{op}: x must be 4-D")));
            }
            let k = hw(a, "ksize", nhwc, None)?;
            let s = hw(a, "strides", nhwc, None)?;
            let (h, w) = (x.shape[2], x.shape[3]);
            // TF padding: VALID = no padding; SAME = output ceil(in/stride), padding split low-first.
            let (ho, wo, p) = match string(a, "padding", "").as_str() {
                "VALID" => ((h - k[0]) / s[0] + 1, (w - k[1]) / s[1] + 1, [0, 0]),
                "SAME" => {
                    let (ho, wo) = ((h + s[0] - 1) / s[0], (w + s[1] - 1) / s[1]);
                    let ph = ((ho - 1) * s[0] + k[0] - h).max(0) / 2;
                    let pw = ((wo - 1) * s[1] + k[1] - w).max(0) / 2;
                    (ho, wo, [ph, pw])
                }
                p => return Err(bad(format!("{op}: padding {p:?} (SAME / VALID expected)"))),
            };
            let (ku, su, pu) =
                ([k[0] as usize, k[1] as usize], [s[0] as usize, s[1] as usize], [p[0] as usize, p[1] as usize]);
            let yn = as_nchw(y, nhwc);
            if op == "MaxPool" || op == "AvgPool" {
                need_shape(&yn, &[x.shape[0], x.shape[1], ho, wo], op)?;
                let k = if op == "MaxPool" {
                    Nn::MaxPool { k: ku, s: su, p: pu }
                } else {
                    Nn::AvgPool { k: ku, s: su, p: pu }
                };
                vec![(nn(k), vec![t(&x), t(&yn)])]
            } else if op == "AvgPoolGrad" {
                let g = as_nchw(&iv[1], nhwc);
                need_shape(&g, &[x.shape[0], x.shape[1], ho, wo], "AvgPoolGrad input_grad")?;
                vec![(nn(Nn::AvgPoolGrad { k: ku, s: su, p: pu }), vec![t(&g), t(&yn)])]
            } else {
                let g = as_nchw(&iv[2], nhwc);
                need_shape(&g, &[x.shape[0], x.shape[1], ho, wo], "MaxPoolGrad grad")?;
                need_shape(&yn, &x.shape, op)?;
                vec![(nn(Nn::MaxPoolGrad { k: ku, s: su, p: pu }), vec![t(&x), t(&g), t(&yn)])]
            }
        }
        "BNTrainingReduce" => vec![(nn(Nn::BnReduce), vec![t(&iv[0]), t(&ov[0]), t(&ov[1])])],
        "BNTrainingUpdate" => {
            let factor = float(a, "factor").ok_or_else(|| bad("BNTrainingUpdate: required attr factor"))?;
            let eps = float(a, "epsilon").ok_or_else(|| bad("BNTrainingUpdate: required attr epsilon"))?;
            let sv = iv.iter().chain(ov.iter()).map(t).collect();
            vec![(nn(Nn::BnUpdate { factor, eps }), sv)]
        }
        "BNTrainingUpdateGrad" | "BNTrainingReduceGrad" => {
            let eps = float(a, "epsilon").unwrap_or(1e-4);
            let sv = iv.iter().chain(ov.iter()).map(t).collect();
            let k = if op == "BNTrainingUpdateGrad" { Nn::BnUpdateGrad { eps } } else { Nn::BnReduceGrad { eps } };
            vec![(nn(k), sv)]
        }
        "SoftmaxCrossEntropyWithLogits" => {
            need_shape(&iv[1], &iv[0].shape, "labels")?;
            need_shape(&ov[1], &iv[0].shape, "backprop")?;
            need_shape(&ov[0], &iv[0].shape[..iv[0].shape.len() - 1], "loss")?;
            vec![(nn(Nn::SoftmaxXent), vec![t(&iv[0]), t(&iv[1]), t(&ov[0]), t(&ov[1])])]
        }
        "OneHot" => {
            let r = y.shape.len() as i64;
            let ax = int(a, "axis", -1);
            let axis = if ax < 0 { ax + r } else { ax };
            if !(0..r).contains(&axis) {
                return Err(bad(format!("OneHot: axis {ax} out of range for rank {r}")));
            }
            let depth = ins[1].ints()?;
            if depth.first() != Some(&y.shape[axis as usize]) {
                return Err(fail(
                    ACL_ERROR_INVALID_PARAM,
                    format!("OneHot: depth {depth:?} differs from y {:?}", y.shape),
                ));
            }
            vec![(nn(Nn::OneHot { axis: axis as usize }), vec![t(&iv[0]), t(&iv[2]), t(&iv[3]), t(y)])]
        }
        "ReduceMean" | "ReduceMeanD" => {
            let dims = if op == "ReduceMean" {
                ins[1].ints()?
            } else {
                list(a, "axes").ok_or_else(|| bad("ReduceMeanD: axes"))?
            };
            // An empty axes list reduces everything unless noop_with_empty_axes (then y = x).
            if dims.is_empty() && boolean(a, "noop_with_empty_axes") {
                vec![(Op::InplaceCopy, vec![t(y), t(&iv[0])])]
            } else {
                let dims = if dims.is_empty() { (0..iv[0].shape.len() as i64).collect() } else { dims };
                vec![(
                    Op::ReduceSum {
                        dims,
                        keep: boolean(a, "keep_dims"),
                        dtype: y.dtype.acl(),
                        mean: true,
                        nan_zero: false,
                    },
                    vec![t(&iv[0]), t(y)],
                )]
            }
        }
        "Assign" => vec![(Op::InplaceCopy, vec![t(y), t(&iv[1])])],
        "AssignAdd" => {
            if y.addr != iv[0].addr {
                return Err(fail(ACL_ERROR_INVALID_PARAM, "AssignAdd: output ref must be the input ref"));
            }
            vec![(Op::InplaceBinary { op: Bin::Add, alpha: 1.0 }, vec![t(y), t(&iv[1])])]
        }
        "ApplyAdam" | "ApplyAdamD" => {
            let mut sv: Vec<SV> = iv.iter().map(t).collect();
            sv.push(t(&ov[0]));
            sv.push(t(ov.get(1).unwrap_or(&iv[1])));
            sv.push(t(ov.get(2).unwrap_or(&iv[2])));
            vec![(nn(Nn::ApplyAdam { nesterov: boolean(a, "use_nesterov") }), sv)]
        }
        "ApplyMomentum" | "ApplyMomentumD" => {
            let mut sv: Vec<SV> = iv.iter().map(t).collect();
            sv.push(t(&ov[0]));
            sv.push(t(ov.get(1).unwrap_or(&iv[1])));
            vec![(nn(Nn::ApplyMomentum { nesterov: boolean(a, "use_nesterov") }), sv)]
        }
        "AddN" => {
            for v in iv {
                need_shape(v, &y.shape, "AddN input")?;
            }
            let mut sv: Vec<SV> = iv.iter().map(t).collect();
            sv.push(t(y));
            vec![(nn(Nn::AddN { n: iv.len() }), sv)]
        }
        "DropOutGenMask" => {
            // The mask of DropOutGenMask(shape, keep_prob): ceil(numel/128)*16 bytes, bit i = keep element i;
            // the simulator's counter generator seeded with (seed, seed2), not the hardware's Philox stream.
            let numel: i64 = ins[0].ints()?.iter().product();
            let bytes = crate::ops_ext::dropout_mask_bytes(numel as usize);
            if y.numel() * y.dtype.size() < bytes {
                return Err(fail(ACL_ERROR_INVALID_PARAM, format!("DropOutGenMask: mask smaller than {bytes} bytes")));
            }
            let seed = int(a, "seed", 0) ^ (int(a, "seed2", 0) << 32);
            vec![(nn(Nn::GenMask { numel: numel as usize, seed, offset: 0 }), vec![t(&iv[1]), t(y)])]
        }
        "DropOutDoMask" => vec![(nn(Nn::DoMask), vec![t(&iv[0]), t(&iv[1]), t(&iv[2]), t(y)])],
        // torch_npu.npu_scaled_masked_softmax and its backward (op-plugin's OpCommand forms: x, mask / y_grad,
        // y, mask; attrs scale and fixed_triu_mask), as the aclnn functions of the same name
        "ScaledMaskedSoftmax" | "ScaledMaskedSoftmaxGrad" => {
            let (scale, triu) = (float(a, "scale").unwrap_or(1.0), boolean(a, "fixed_triu_mask"));
            if op == "ScaledMaskedSoftmax" {
                let m = crate::ops_misc::MiscOp::ScaledMaskedSoftmax { scale, triu };
                vec![(Op::Misc(Box::new(m)), vec![t(&iv[0]), t(&iv[1]), t(y)])]
            } else {
                let m = crate::ops_misc::MiscOp::ScaledMaskedSoftmaxBackward { scale, triu };
                vec![(Op::Misc(Box::new(m)), vec![t(&iv[0]), t(&iv[1]), t(&iv[2]), t(y)])]
            }
        }
        "Gelu" => vec![(Op::Gelu { tanh: true }, vec![t(&iv[0]), t(y)])],
        "GeluGrad" => vec![(Op::GeluBackward { tanh: true }, vec![t(&iv[0]), t(&iv[1]), t(y)])],
        "ReluGrad" => vec![(Op::ThresholdBackward { threshold: 0.0 }, vec![t(&iv[0]), t(&iv[1]), t(y)])],
        "LogSoftmaxV2" | "SoftmaxGrad" | "LogSoftmaxGrad" => {
            let key = if op == "LogSoftmaxGrad" { "axis" } else { "axes" };
            let dim = match list(a, key) {
                Some(v) if v.len() == 1 => v[0],
                None => -1,
                Some(v) => return Err(bad(format!("{op}: {key} {v:?} must have one element"))),
            };
            match op {
                "LogSoftmaxV2" => vec![(Op::Softmax { dim, log: true }, vec![t(&iv[0]), t(y)])],
                // SoftmaxGrad(softmax, grad_softmax); LogSoftmaxGrad(grad, x = the log-softmax output)
                "SoftmaxGrad" => vec![(Op::SoftmaxBackward { dim, log: false }, vec![t(&iv[1]), t(&iv[0]), t(y)])],
                _ => vec![(Op::SoftmaxBackward { dim, log: true }, vec![t(&iv[0]), t(&iv[1]), t(y)])],
            }
        }
        "LayerNorm" | "LayerNormGrad" => {
            // LayerNorm: the row is the dims from begin_norm_axis. LayerNormGrad has no attributes: the row
            // is what the forward's per-row mean / variance imply.
            let x = &iv[if op == "LayerNorm" { 0 } else { 1 }];
            let row = if op == "LayerNorm" {
                let r = x.shape.len() as i64;
                let ax = int(a, "begin_norm_axis", 0);
                let axis = if ax < 0 { ax + r } else { ax };
                if !(0..r).contains(&axis) {
                    return Err(bad(format!("{op}: begin_norm_axis {ax} out of range for rank {r}")));
                }
                x.shape[axis as usize..].iter().product::<i64>() as usize
            } else {
                let (nv, nm) = (iv[2].numel(), iv[3].numel());
                if nv == 0 || nv != nm || !x.numel().is_multiple_of(nv) {
                    return Err(fail(
                        ACL_ERROR_INVALID_PARAM,
                        format!(
                            "{op}: variance {:?} / mean {:?} do not divide x {:?}",
                            iv[2].shape, iv[3].shape, x.shape
                        ),
                    ));
                }
                x.numel() / nv
            };
            let gamma = &iv[if op == "LayerNorm" { 1 } else { 4 }];
            if gamma.numel() == 0 || !row.is_multiple_of(gamma.numel()) {
                return Err(fail(
                    ACL_ERROR_INVALID_PARAM,
                    format!("{op}: gamma {:?} does not tile the row", gamma.shape),
                ));
            }
            let sv = iv.iter().chain(ov.iter()).map(t).collect();
            if op == "LayerNorm" {
                let eps = float(a, "epsilon").unwrap_or(1e-7);
                vec![(nn(Nn::LayerNorm { row, eps }), sv)]
            } else {
                vec![(nn(Nn::LayerNormGrad { row }), sv)]
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(st))
}
