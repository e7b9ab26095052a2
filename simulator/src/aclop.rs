//! aclop: tensor descriptors, data buffers, attributes and a few single-op executions.
use crate::consts::*;
use crate::dtype::DType;
use crate::errmsg::fail;
use crate::ops::{Bin, Op, SV};
use crate::tensor::TView;
use crate::trace::{Arg, Role};

pub use crate::aclop_io::{Attr, AttrVal, Desc, IoT};

/// aclMemType values of `aclSetTensorPlaceMent`.
const ACL_MEMTYPE_HOST: i32 = 1;
const ACL_MEMTYPE_HOST_COMPILE_INDEPENDENT: i32 = 2;

/// Simulator-owned device buffers holding staged host inputs; freed when the kernel task is done
/// (or dropped without running).
struct Staged(Vec<usize>);
impl Drop for Staged {
    fn drop(&mut self) {
        free_all(&self.0);
    }
}

/// The bytes of a host-placed (`aclSetTensorPlaceMent(ACL_MEMTYPE_HOST)`) or constant
/// (`aclSetTensorConst`) input, read when the op is called (as the real runtime stages them).
fn host_bytes(x: &IoT) -> Result<Option<Vec<u8>>, i32> {
    let n = DType::from_acl(x.desc.dtype)
        .map(|d| crate::tensor::numel(&x.desc.dims) * d.size())
        .ok_or_else(|| fail(ACL_ERROR_UNSUPPORTED_DATA_TYPE, format!("unsupported dtype {}", x.desc.dtype)))?;
    if let Some(c) = &x.desc.const_data {
        if c.len() < n {
            return Err(fail(ACL_ERROR_INVALID_PARAM, format!("const data of {} bytes, {n} needed", c.len())));
        }
        return Ok(Some(c[..n].to_vec()));
    }
    if !matches!(x.desc.placement, ACL_MEMTYPE_HOST | ACL_MEMTYPE_HOST_COMPILE_INDEPENDENT)
        || crate::mem::is_device(x.addr)
    {
        return Ok(None);
    }
    if n > 0 && (x.addr == 0 || x.size < n) {
        return Err(fail(ACL_ERROR_INVALID_PARAM, format!("host input: buffer of {} bytes, {n} needed", x.size)));
    }
    if n == 0 {
        return Ok(Some(Vec::new()));
    }
    // SAFETY: a host-placed aclop input: the caller guarantees `size` (>= n) readable bytes at `addr`
    // for the duration of the call, which is when they are read.
    Ok(Some(unsafe { std::slice::from_raw_parts(x.addr as *const u8, n) }.to_vec()))
}

/// Inputs with host-placed and constant ones copied into simulator-owned device buffers (returned
/// separately, to be freed after the kernel ran).
fn stage_inputs(ins: &[IoT]) -> Result<(Vec<IoT>, Vec<usize>), i32> {
    let mut staged = Vec::new();
    let mut out = Vec::with_capacity(ins.len());
    for x in ins {
        match host_bytes(x) {
            Ok(Some(b)) => {
                let dev = match crate::mem::alloc(b.len().max(1)) {
                    Ok(d) => d,
                    Err(e) => {
                        free_all(&staged);
                        return Err(fail(e, "no device memory to stage a host input"));
                    }
                };
                staged.push(dev);
                if let Err(e) = crate::mem::write(dev, &b) {
                    free_all(&staged);
                    return Err(e);
                }
                let mut desc = x.desc.clone();
                desc.const_data = None;
                out.push(IoT { desc, handle: x.handle, addr: dev, size: b.len() });
            }
            Ok(None) => out.push(IoT { desc: x.desc.clone(), handle: x.handle, addr: x.addr, size: x.size }),
            Err(e) => {
                free_all(&staged);
                return Err(e);
            }
        }
    }
    Ok((out, staged))
}

fn free_all(v: &[usize]) {
    for &a in v {
        let _ = crate::mem::free(a);
    }
}

/// ConfusionTransposeD(x; perm, shape, transpose_first) -> y (torch_npu.npu_confusion_transpose and its
/// backward): x permuted by `perm` then read as `shape`, or (transpose_first false) x read as `shape` then
/// permuted; one copy between views (y and x are the op's contiguous ND tensors).
fn confusion_transpose(x: &TView, y: &TView, attr: &Attr) -> Result<(Op, Vec<SV>), i32> {
    let bad = |m: String| fail(ACL_ERROR_OP_ATTR_NOT_MATCH, format!("ConfusionTransposeD: {m}"));
    let (perm, shape) = match (attr.get("perm"), attr.get("shape")) {
        (Some(AttrVal::ListInt(p)), Some(AttrVal::ListInt(s))) => (p.clone(), s.clone()),
        _ => return Err(bad("needs the list attrs perm and shape".into())),
    };
    let first = abool(attr, "transpose_first");
    let mut seen = vec![false; perm.len()];
    for &d in &perm {
        if d < 0 || d as usize >= perm.len() || std::mem::replace(&mut seen[d as usize], true) {
            return Err(bad(format!("perm {perm:?} is not a permutation")));
        }
    }
    let permute = |v: &TView| TView {
        shape: perm.iter().map(|&d| v.shape[d as usize]).collect(),
        strides: perm.iter().map(|&d| v.strides[d as usize]).collect(),
        ..v.clone()
    };
    let as_shape =
        |v: &TView, sh: &[i64]| TView { offset: v.offset, ..TView::contiguous(v.addr, v.dtype, sh.to_vec()) };
    let contiguous = |v: &TView| v.strides == crate::tensor::contiguous_strides(&v.shape);
    if x.dtype != y.dtype || x.numel() != y.numel() || !contiguous(x) || !contiguous(y) {
        return Err(fail(
            ACL_ERROR_INVALID_PARAM,
            "ConfusionTransposeD: x and y must be contiguous, of one dtype and size",
        ));
    }
    let (dst, src) = if first {
        if x.shape.len() != perm.len() || y.shape != shape {
            return Err(bad(format!("perm {perm:?} / shape {shape:?} do not fit x {:?} -> y {:?}", x.shape, y.shape)));
        }
        let px = permute(x);
        (as_shape(y, &px.shape), px)
    } else {
        if shape.len() != perm.len() || shape.iter().product::<i64>() as usize != x.numel() {
            return Err(bad(format!("shape {shape:?} / perm {perm:?} do not fit x {:?}", x.shape)));
        }
        let px = permute(&as_shape(x, &shape));
        if px.shape != y.shape {
            return Err(bad(format!("y {:?}, {:?} expected", y.shape, px.shape)));
        }
        (y.clone(), px)
    };
    Ok((Op::InplaceCopy, vec![SV::T(Some(dst)), SV::T(Some(src))]))
}

/// The `p` attr of LpNormReduceV2 / LpNormUpdateV2 (default 2). The op encodes the infinity norms as
/// the int32 limits (torch_npu passes `float(INT32_MAX)` for inf and `float(INT32_MIN)` for -inf): as a
/// plain exponent they would give inf, or by chance the minimum, instead of max |x| / min |x|.
fn lp_norm_p(attr: &Attr, op: &str) -> Result<f64, i32> {
    let p = match attr.get("p") {
        None => 2.0,
        Some(AttrVal::Float(p)) => *p as f64,
        Some(AttrVal::Int(p)) => *p as f64,
        Some(v) => return Err(fail(ACL_ERROR_OP_ATTR_NOT_MATCH, format!("{op}: p {v:?}"))),
    };
    Ok(if p >= i32::MAX as f64 {
        f64::INFINITY
    } else if p <= i32::MIN as f64 {
        f64::NEG_INFINITY
    } else {
        p
    })
}

/// The single value of a one-element input (e.g. Fill's value, Range's bounds), as f64.
pub(crate) fn scalar_in(v: &TView) -> Result<f64, i32> {
    if v.numel() != 1 {
        return Err(fail(ACL_ERROR_INVALID_PARAM, format!("scalar input has {} elements", v.numel())));
    }
    Ok(v.read_f64()?[0])
}

fn abool(a: &Attr, k: &str) -> bool {
    matches!(a.get(k), Some(AttrVal::Bool(true))) || matches!(a.get(k), Some(AttrVal::Int(v)) if *v != 0)
}

fn transposed(mut v: TView, t: bool) -> TView {
    if t && v.shape.len() >= 2 {
        let n = v.shape.len();
        v.shape.swap(n - 1, n - 2);
        v.strides.swap(n - 1, n - 2);
    }
    v
}

fn opfail(e: i32) -> i32 {
    if e == ACLNN_ERR_PARAM_INVALID || e == ACLNN_ERR_PARAM_NULLPTR {
        ACL_ERROR_INVALID_PARAM
    } else {
        e
    }
}

/// Supported op types.
pub const OP_TYPES: &[&str] = &[
    "Add",
    "AddV2",
    "Sub",
    "Mul",
    "RealDiv",
    "Div",
    "MatMul",
    "MatMulV2",
    "BatchMatMul",
    "BatchMatMulV2",
    "Cast",
    "ReduceSum",
    "ReduceSumD",
    "BiasAdd",
    "Relu",
    "SoftmaxV2",
    "Identity",
    "Fill",
    "Range",
    "PadV3",
    "ReduceMax",
    "ReduceMin",
    "LpNormReduceV2",
    "LpNormUpdateV2",
    "Pack",
    // classic nets (MindSpore 2.10's aclop path): aclop_nn.rs and the shared aclnn kernels
    "Conv2D",
    "Conv2DBackpropInput",
    "Conv2DBackpropFilter",
    "BiasAddGrad",
    "MaxPool",
    "MaxPoolGrad",
    "BNTrainingReduce",
    "BNTrainingUpdate",
    "BNTrainingUpdateGrad",
    "BNTrainingReduceGrad",
    "SoftmaxCrossEntropyWithLogits",
    "OneHot",
    "ReduceMean",
    "ReduceMeanD",
    "Assign",
    "AssignAdd",
    "ApplyAdam",
    "ApplyAdamD",
    "ApplyMomentum",
    "ApplyMomentumD",
    "AddN",
    "DropOutGenMask",
    "DropOutDoMask",
    "Gelu",
    "GeluGrad",
    // torch_npu's fused softmax (npu_scaled_masked_softmax and its backward) and npu_confusion_transpose
    "ConfusionTransposeD",
    "ScaledMaskedSoftmax",
    "ScaledMaskedSoftmaxGrad",
    "SoftmaxGrad",
    "LogSoftmaxV2",
    "LogSoftmaxGrad",
    "ReluGrad",
    "LayerNorm",
    "LayerNormGrad",
    "AvgPool",
    "AvgPoolGrad",
    "LogicalAnd",
    "LogicalOr",
    "BroadcastTo",
    "NonZero",
    "MaskedSelect",
];

/// Op types whose kernel decides the output shape (CANN's "third-class" operators).
const SHAPE_BY_KERNEL: &[&str] = &["NonZero", "MaskedSelect"];

/// Build the kernel steps for an aclop op. Returns (steps, trace args).
/// Kernel steps of an aclop execution and the tensors to trace.
pub type Plan = (Vec<(Op, Vec<SV>)>, Vec<Arg>);

pub fn plan(op_type: &str, ins: &[IoT], outs: &[IoT], attr: &Attr) -> Result<Plan, i32> {
    if !OP_TYPES.contains(&op_type) {
        return Err(fail(ACL_ERROR_OP_NOT_FOUND, format!("op type {op_type} is not supported by the simulator")));
    }
    let addn_ins = [ins.len().max(1)];
    let (nin, nout): (&[usize], usize) = match op_type {
        "MatMul" | "MatMulV2" | "BatchMatMul" | "BatchMatMulV2" => (&[2, 3], 1),
        "Cast" | "Relu" | "ReduceSumD" | "SoftmaxV2" | "Identity" | "NonZero" => (&[1], 1),
        "Range" => (&[3], 1),
        "LpNormReduceV2" | "LpNormUpdateV2" => (&[1], 1),
        "Pack" => (&addn_ins, 1),
        "PadV3" => (&[2, 3], 1),
        "Conv2D" => (&[2, 3], 1),
        "Conv2DBackpropInput" | "Conv2DBackpropFilter" | "MaxPoolGrad" | "DropOutDoMask" | "GeluGrad" => (&[3], 1),
        "ScaledMaskedSoftmax" => (&[2], 1),
        "ConfusionTransposeD" => (&[1], 1),
        "ScaledMaskedSoftmaxGrad" => (&[3], 1),
        "BiasAddGrad" | "MaxPool" | "AvgPool" | "ReduceMeanD" | "Gelu" | "LogSoftmaxV2" => (&[1], 1),
        "BNTrainingReduce" => (&[1], 2),
        "LayerNorm" => (&[3], 3),
        "LayerNormGrad" => (&[5], 3),
        "BNTrainingUpdate" => (&[7], 5),
        "BNTrainingUpdateGrad" => (&[4], 2),
        "BNTrainingReduceGrad" => (&[7], 1),
        "SoftmaxCrossEntropyWithLogits" => (&[2], 2),
        "OneHot" => (&[4], 1),
        "ApplyAdam" => (&[10], 1),
        "ApplyAdamD" => (&[10], 3),
        "ApplyMomentum" => (&[5], 1),
        "ApplyMomentumD" => (&[5], 2),
        "AddN" => (&addn_ins, 1),
        _ => (&[2], 1),
    };
    if !nin.contains(&ins.len()) {
        return Err(fail(
            ACL_ERROR_OP_INPUT_NOT_MATCH,
            format!("{op_type}: {} inputs given, {nin:?} expected", ins.len()),
        ));
    }
    if outs.len() != nout {
        return Err(fail(
            ACL_ERROR_OP_OUTPUT_NOT_MATCH,
            format!("{op_type}: {} outputs given, {nout} expected", outs.len()),
        ));
    }
    let iv: Vec<TView> = ins.iter().map(|x| x.view()).collect::<Result<_, _>>()?;
    let ov: Vec<TView> = outs.iter().map(|x| x.view()).collect::<Result<_, _>>()?;
    let mut args: Vec<Arg> = Vec::new();
    for (i, (x, v)) in ins.iter().zip(&iv).enumerate() {
        let nm = x.desc.name.to_string_lossy();
        args.push(Arg {
            role: Role::Input,
            name: if nm.is_empty() { format!("x{i}") } else { nm.into_owned() },
            view: v.clone(),
            index: i,
            list_index: None,
        });
    }
    for (i, (x, v)) in outs.iter().zip(&ov).enumerate() {
        let nm = x.desc.name.to_string_lossy();
        args.push(Arg {
            role: Role::Output,
            name: if nm.is_empty() { format!("y{i}") } else { nm.into_owned() },
            view: v.clone(),
            index: ins.len() + i,
            list_index: None,
        });
    }
    let t = |v: &TView| SV::T(Some(v.clone()));
    let y = &ov[0];
    let mut steps = Vec::new();
    if let Some(st) = crate::aclop_nn_plan::plan(op_type, ins, &iv, &ov, attr)? {
        steps = st;
    } else {
        match op_type {
            "Add" | "AddV2" | "Sub" | "Mul" | "RealDiv" | "Div" => {
                let op = match op_type {
                    "Sub" => Bin::Sub,
                    "Mul" => Bin::Mul,
                    "RealDiv" | "Div" => Bin::Div,
                    _ => Bin::Add,
                };
                steps.push((Op::Binary { op, alpha: 1.0 }, vec![t(&iv[0]), t(&iv[1]), t(y)]));
            }
            "MatMul" | "MatMulV2" | "BatchMatMul" | "BatchMatMulV2" => {
                let (k1, k2) =
                    if op_type.starts_with("Batch") { ("adj_x1", "adj_x2") } else { ("transpose_x1", "transpose_x2") };
                let a = transposed(iv[0].clone(), abool(attr, k1));
                let b = transposed(iv[1].clone(), abool(attr, k2));
                let op = if op_type.starts_with("Batch") { Op::Matmul } else { Op::Mm };
                steps.push((op, vec![t(&a), t(&b), t(y)]));
                if iv.len() == 3 {
                    steps.push((Op::InplaceBinary { op: Bin::Add, alpha: 1.0 }, vec![t(y), t(&iv[2])]));
                }
            }
            "LogicalAnd" | "LogicalOr" => {
                let op = crate::ops_ext::ExtOp::Logical { op: if op_type == "LogicalOr" { b'|' } else { b'&' } };
                steps.push((Op::Ext(Box::new(op)), vec![t(&iv[0]), t(&iv[1]), t(y)]));
            }
            "Cast" => steps.push((Op::Cast { dtype: y.dtype.acl() }, vec![t(&iv[0]), t(y)])),
            "Relu" => steps.push((Op::Relu, vec![t(&iv[0]), t(y)])),
            "ConfusionTransposeD" => steps.push(confusion_transpose(&iv[0], y, attr)?),
            "Identity" => {
                if y.shape != iv[0].shape || y.dtype != iv[0].dtype {
                    return Err(fail(ACL_ERROR_INVALID_PARAM, "Identity: output shape/dtype differs from the input"));
                }
                steps.push((Op::InplaceCopy, vec![t(y), t(&iv[0])]))
            }
            "SoftmaxV2" => {
                let dim = match attr.get("axes") {
                    Some(AttrVal::ListInt(v)) if v.len() == 1 => v[0],
                    None => -1,
                    _ => return Err(fail(ACL_ERROR_OP_ATTR_NOT_MATCH, "SoftmaxV2: axes must have one element")),
                };
                steps.push((Op::Softmax { dim, log: false }, vec![t(&iv[0]), t(y)]));
            }
            "ReduceSum" | "ReduceSumD" => {
                let dims = if op_type == "ReduceSum" {
                    ins[1].ints()?
                } else {
                    match attr.get("axes") {
                        Some(AttrVal::ListInt(v)) => v.clone(),
                        _ => return Err(fail(ACL_ERROR_OP_ATTR_NOT_MATCH, "ReduceSumD needs attr axes")),
                    }
                };
                let keep = abool(attr, "keep_dims");
                steps.push((
                    Op::ReduceSum { dims, keep, dtype: y.dtype.acl(), mean: false, nan_zero: false },
                    vec![t(&iv[0]), t(y)],
                ));
            }
            "ReduceMax" | "ReduceMin" => {
                // ReduceMax(x, axes) -> y, attr keep_dims; NaN-propagating (ops_reduce.rs).
                let dims = ins[1].ints()?;
                let e = crate::ops_reduce::RedOp::MaxMin {
                    min: op_type == "ReduceMin",
                    dims,
                    keep: abool(attr, "keep_dims"),
                };
                steps.push((Op::Red(Box::new(e)), vec![t(&iv[0]), t(y)]));
            }
            "LpNormReduceV2" => {
                // LpNormReduceV2(x) -> y, attrs p (float, default 2), axes (list, empty = all), keepdim.
                let p = lp_norm_p(attr, "LpNormReduceV2")?;
                let dims = match attr.get("axes") {
                    None => Vec::new(),
                    Some(AttrVal::ListInt(v)) => v.clone(),
                    Some(v) => return Err(fail(ACL_ERROR_OP_ATTR_NOT_MATCH, format!("LpNormReduceV2: axes {v:?}"))),
                };
                let e = crate::ops_reduce::RedOp::LpNorm { p, dims, keep: abool(attr, "keepdim") };
                steps.push((Op::Red(Box::new(e)), vec![t(&iv[0]), t(y)]));
            }
            "LpNormUpdateV2" => {
                // LpNormUpdateV2(x) -> y, attr p: the root after LpNormReduceV2.
                let p = lp_norm_p(attr, "LpNormUpdateV2")?;
                let e = crate::ops_reduce::RedOp::LpUpdate { p };
                steps.push((Op::Red(Box::new(e)), vec![t(&iv[0]), t(y)]));
            }
            "Pack" => {
                // Pack(x0..xN-1) -> y, attr axis: stacks equal-shaped inputs along a new axis, i.e.
                // concatenates them each viewed with a size-1 axis inserted there.
                let r = iv[0].shape.len() as i64;
                let axis = match attr.get("axis") {
                    None => 0,
                    Some(AttrVal::Int(a)) => *a,
                    Some(v) => return Err(fail(ACL_ERROR_OP_ATTR_NOT_MATCH, format!("Pack: axis {v:?}"))),
                };
                let a = if axis < 0 { axis + r + 1 } else { axis };
                if a < 0 || a > r {
                    return Err(fail(ACL_ERROR_INVALID_PARAM, format!("Pack: axis {axis} for rank {r}")));
                }
                let mut parts = Vec::with_capacity(iv.len());
                for v in &iv {
                    if v.shape != iv[0].shape || v.dtype != iv[0].dtype {
                        return Err(fail(ACL_ERROR_INVALID_PARAM, "Pack: inputs differ in shape or dtype"));
                    }
                    let mut u = v.clone();
                    u.shape.insert(a as usize, 1);
                    u.strides.insert(a as usize, 1);
                    parts.push(u);
                }
                steps.push((Op::Cat { dim: a }, vec![SV::L(parts), t(y)]));
            }
            "BiasAdd" => {
                let x = &iv[0];
                let nchw = matches!(attr.get("data_format"), Some(AttrVal::Str(s)) if s == "NCHW" || s == "NCDHW");
                let mut b = iv[1].clone();
                if nchw && x.shape.len() >= 2 {
                    let extra = x.shape.len() - 2;
                    b.shape.resize(b.shape.len() + extra, 1);
                    b.strides.resize(b.strides.len() + extra, 1);
                }
                steps.push((Op::Binary { op: Bin::Add, alpha: 1.0 }, vec![t(x), t(&b), t(y)]));
            }
            "BroadcastTo" => {
                // BroadcastTo(x, shape) -> y: x broadcast to the shape given by the shape input.
                let shape = ins[1].ints()?;
                if shape != y.shape || crate::kernels::broadcast_shape(&iv[0].shape, &shape).as_ref() != Some(&shape) {
                    return Err(fail(
                        ACL_ERROR_INVALID_PARAM,
                        format!(
                            "BroadcastTo: x {:?} does not broadcast to shape {shape:?} (y {:?})",
                            iv[0].shape, y.shape
                        ),
                    ));
                }
                steps.push((Op::InplaceCopy, vec![t(y), t(&iv[0])]));
            }
            "Fill" => {
                // Fill(dims, value) -> y: y has the shape given by the dims input (or as many elements),
                // every element = value.
                // torch_npu's median() fills a 0-d y with dims [1]: the same elements, accepted as CANN does
                let dims = ins[0].ints()?;
                if dims != y.shape && (dims.iter().any(|d| *d < 0) || dims.iter().product::<i64>() != y.numel() as i64)
                {
                    return Err(fail(
                        ACL_ERROR_INVALID_PARAM,
                        format!("Fill: dims {dims:?} differ from y {:?} in elements", y.shape),
                    ));
                }
                // the value (often a device result of the kernel before, as median()'s) is read when the
                // kernel runs, not at enqueue: an earlier read saw the stale bytes
                let e = crate::ops_ext::ExtOp::FillTensor;
                steps.push((Op::Ext(Box::new(e)), vec![t(y), t(&iv[1])]));
            }
            "PadV3" => {
                // PadV3(x, paddings, constant_values?) -> y; mode "constant" only. paddings_contiguous
                // (default true): [d0_begin, d0_end, d1_begin, ...]; else [d0_begin, d1_begin, ..., d0_end, ...].
                match attr.get("mode") {
                    None => {}
                    Some(AttrVal::Str(m)) if m == "constant" => {}
                    Some(m) => {
                        return Err(fail(ACL_ERROR_OP_ATTR_NOT_MATCH, format!("PadV3: mode {m:?} is not supported")))
                    }
                }
                let p = ins[1].ints()?;
                let r = iv[0].shape.len();
                if p.len() != 2 * r {
                    return Err(fail(ACL_ERROR_INVALID_PARAM, format!("PadV3: {} paddings for rank {r}", p.len())));
                }
                let contiguous = !matches!(attr.get("paddings_contiguous"), Some(AttrVal::Bool(false)));
                let before: Vec<i64> = (0..r).map(|d| if contiguous { p[2 * d] } else { p[d] }).collect();
                let after: Vec<i64> = (0..r).map(|d| if contiguous { p[2 * d + 1] } else { p[r + d] }).collect();
                let want: Vec<i64> = (0..r).map(|d| iv[0].shape[d] + before[d] + after[d]).collect();
                if want != y.shape {
                    return Err(fail(ACL_ERROR_INVALID_PARAM, format!("PadV3: y {:?}, {want:?} expected", y.shape)));
                }
                let e = crate::ops_ext::ExtOp::PadConstant { before };
                let mut sv = vec![t(&iv[0]), t(y)];
                if let Some(v) = iv.get(2) {
                    sv.push(t(v));
                }
                steps.push((Op::Ext(Box::new(e)), sv));
            }
            "NonZero" => {
                // NonZero(x) -> y, attr transpose: the coordinates of x's non-zero elements, y sized for
                // all of them ([numel, rank], or [rank, numel] transposed); the kernel sets y's desc dims to
                // the real count, read by the client after its sync (so only the V2 entries, whose
                // output descs the runtime may update, report it).
                let e =
                    crate::ops_dim::DimOp::Nonzero { out_handle: outs[0].handle, transpose: abool(attr, "transpose") };
                steps.push((Op::Dim(Box::new(e)), vec![t(&iv[0]), t(y)]));
            }
            "MaskedSelect" => {
                // MaskedSelect(x, mask) -> y: x's elements where the broadcast mask is true (shape set by the kernel)
                let e = crate::ops_dim::DimOp::MaskedSelect { out_handle: outs[0].handle };
                steps.push((Op::Dim(Box::new(e)), vec![t(&iv[0]), t(&iv[1]), t(y)]));
            }
            "Range" => {
                // Range(start, limit, delta) -> y
                let (start, end, step) = (scalar_in(&iv[0])?, scalar_in(&iv[1])?, scalar_in(&iv[2])?);
                let n = crate::ops_ext::arange_len(start, end, step).map_err(opfail)?;
                if y.numel() != n {
                    return Err(fail(
                        ACL_ERROR_INVALID_PARAM,
                        format!("Range: y has {} elements, {n} expected", y.numel()),
                    ));
                }
                let e = crate::ops_ext::ExtOp::Arange { start, end, step };
                steps.push((Op::Ext(Box::new(e)), vec![t(y)]));
            }
            _ => unreachable!(),
        }
    }
    for (op, sv) in &steps {
        op.validate(sv).map_err(opfail)?;
    }
    for a in &args {
        a.view.check().map_err(opfail)?;
    }
    Ok((steps, args))
}

/// Validate and enqueue an aclop execution.
pub fn execute(entry: &str, op_type: &str, ins: &[IoT], outs: &[IoT], attr: &Attr, stream: usize) -> i32 {
    let Some(st) = crate::stream::get(stream) else {
        return fail(ACL_ERROR_INVALID_PARAM, format!("invalid stream {stream:#x}"));
    };
    let (ins, staged) = match stage_inputs(ins) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let staged = Staged(staged);
    // The V2 entries may update their output descs: for an op whose kernel decides the output shape
    // they return once it ran, with the descs holding the real shape (torch_npu reads them right
    // after the call). The V1 entries take the descs as const and do not wait.
    let v2 = entry.ends_with("V2");
    let mut outs = outs.to_vec();
    if !v2 {
        outs.iter_mut().for_each(|x| x.handle = 0);
    }
    let (steps, args) = match plan(op_type, &ins, &outs, attr) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let name = format!("{entry}:{op_type}");
    let sid = st.id;
    let shaped: Vec<(usize, usize)> = if SHAPE_BY_KERNEL.contains(&op_type) {
        outs.iter().enumerate().filter(|(_, x)| x.handle != 0).map(|(i, x)| (ins.len() + i, x.handle)).collect()
    } else {
        Vec::new()
    };
    let r = st.submit(Box::new(move || {
        crate::stream::kernel_delay();
        let r = crate::trace::run_traced_shaped(&name, sid, &args, &shaped, || {
            for (op, sv) in &steps {
                op.exec(sv)?;
            }
            Ok(())
        });
        drop(staged);
        r
    }));
    match r {
        Ok(()) if v2 && SHAPE_BY_KERNEL.contains(&op_type) => {
            crate::stats::wait(crate::stats::Wait::Stream);
            match st.wait_done() {
                Ok(()) => ACL_SUCCESS,
                Err(e) => e, // the failed task's message is the thread's (stream::report)
            }
        }
        Ok(()) => ACL_SUCCESS,
        Err(c) => c,
    }
}
