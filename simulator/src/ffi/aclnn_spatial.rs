//! Pooling, resizing and padding (signatures from CANN's ops-nn, ops-cv and ops-math headers): the C
//! arguments → [`crate::spatial::Spatial`] and its slots.
use super::aclnn::{cube, int_array, p1, u};
use crate::consts::ACLNN_ERR_PARAM_INVALID;
use crate::errmsg::fail;
use crate::nnop::Args;
use crate::ops::Op;
use crate::ops_ext::PoolGeom;
use crate::spatial::{Backward, Kind, Spatial};
use crate::trace::Role::{Input as In, Output as Out};
use std::os::raw::c_void;

type Status = i32;
type H = *mut c_void;

crate::phase2!(
    aclnnAvgPool2d,
    aclnnAvgPool2dBackward,
    aclnnAdaptiveAvgPool2d,
    aclnnAdaptiveAvgPool2dBackward,
    aclnnUpsampleNearest2d,
    aclnnUpsampleNearest2dV2,
    aclnnUpsampleNearest2dBackward,
    aclnnUpsampleBilinear2d,
    aclnnUpsampleBilinear2dBackward,
    aclnnUpsampleBilinear2dBackwardV2,
    aclnnReflectionPad1d,
    aclnnReflectionPad1dBackward,
    aclnnReflectionPad2d,
    aclnnReflectionPad2dBackward,
    aclnnReplicationPad1d,
    aclnnReplicationPad1dBackward,
    aclnnReplicationPad2d,
    aclnnReplicationPad2dBackward,
);

fn op(kind: Kind, dims: usize, backward: Option<Backward>) -> Op {
    Op::Spatial(Box::new(Spatial { kind, dims, backward }))
}

/// Phase 1 of a forward form: slots self, out.
fn forward(
    name: &'static str,
    x: H,
    out: H,
    dims: usize,
    ws: *mut u64,
    ex: *mut H,
    kind: impl FnOnce() -> Result<Kind, i32>,
) -> Status {
    p1(name, ws, ex, || {
        let kind = kind()?;
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(Out, "out", u(out))?;
        Ok((op(kind, dims, None), a))
    })
}

/// Phase 1 of a backward form that takes `self`: slots gradOutput, self and the input's gradient, the
/// last named `grad` as in the header (`[g, x, gi]` are their handles).
fn backward(
    name: &'static str,
    [g, x, gi]: [H; 3],
    grad: &'static str,
    dims: usize,
    ws: *mut u64,
    ex: *mut H,
    kind: impl FnOnce() -> Result<Kind, i32>,
) -> Status {
    p1(name, ws, ex, || {
        let kind = kind()?;
        let mut a = Args::new();
        a.t(In, "gradOutput", u(g))?.t(In, "self", u(x))?.t(Out, grad, u(gi))?;
        Ok((op(kind, dims, Some(Backward { has_self: true, sizes: None })), a))
    })
}

/// Phase 1 of an upsample backward: slots gradOut and the input's gradient (named `grad`), the sizes
/// given as outputSize [H, W] and inputSize [N, C, H, W] (`[os, is]`); `kind` gets the output size.
fn upsample_backward(
    name: &'static str,
    [g, gi]: [H; 2],
    grad: &'static str,
    [os, is]: [H; 2],
    ws: *mut u64,
    ex: *mut H,
    kind: impl FnOnce([i64; 2]) -> Kind,
) -> Status {
    p1(name, ws, ex, || {
        let o = size2(os, "outputSize")?;
        let b = Backward { has_self: false, sizes: Some((o.to_vec(), int_array(is, "inputSize")?)) };
        let mut a = Args::new();
        a.t(In, "gradOut", u(g))?.t(Out, grad, u(gi))?;
        Ok((op(kind(o), 2, Some(b)), a))
    })
}

/// A two-element size array (outputSize).
fn size2(h: H, what: &str) -> Result<[i64; 2], i32> {
    match int_array(h, what)?[..] {
        [a, b] => Ok([a, b]),
        ref v => Err(fail(ACLNN_ERR_PARAM_INVALID, format!("{what} must have 2 elements, got {v:?}"))),
    }
}

fn avg_kind(k: H, stride: H, pad: H, ceil: bool, include_pad: bool, divisor: i64, cube_: i8) -> Result<Kind, i32> {
    cube(cube_)?;
    let g = PoolGeom::new(
        &int_array(k, "kernelSize")?,
        &int_array(stride, "strides")?,
        &int_array(pad, "paddings")?,
        &[],
        ceil,
    )?;
    Ok(Kind::AvgPool { g, count_include_pad: include_pad, divisor })
}

/// `aclnnAvgPool2d(self, kernelSize, strides, paddings, bool ceilMode, bool countIncludePad,
/// int64_t divisorOverride (0: none), int8_t cubeMathType, out)`.
#[no_mangle]
pub extern "C" fn aclnnAvgPool2dGetWorkspaceSize(
    self_: H,
    kernel: H,
    strides: H,
    paddings: H,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor: i64,
    cube_math_type: i8,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    forward("aclnnAvgPool2d", self_, out, 2, ws, ex, || {
        avg_kind(kernel, strides, paddings, ceil_mode, count_include_pad, divisor, cube_math_type)
    })
}

/// `aclnnAvgPool2dBackward(gradOutput, self, kernelSize, stride, padding, bool ceilMode,
/// bool countIncludePad, int64_t divisorOverride, int8_t cubeMathType, gradInput)`.
#[no_mangle]
pub extern "C" fn aclnnAvgPool2dBackwardGetWorkspaceSize(
    grad_output: H,
    self_: H,
    kernel: H,
    stride: H,
    padding: H,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor: i64,
    cube_math_type: i8,
    grad_input: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    backward("aclnnAvgPool2dBackward", [grad_output, self_, grad_input], "gradInput", 2, ws, ex, || {
        avg_kind(kernel, stride, padding, ceil_mode, count_include_pad, divisor, cube_math_type)
    })
}

/// `aclnnAdaptiveAvgPool2d(self, outputSize, out)`.
#[no_mangle]
pub extern "C" fn aclnnAdaptiveAvgPool2dGetWorkspaceSize(
    self_: H,
    output_size: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    forward("aclnnAdaptiveAvgPool2d", self_, out, 2, ws, ex, || {
        Ok(Kind::AdaptiveAvg { out: size2(output_size, "outputSize")? })
    })
}

/// `aclnnAdaptiveAvgPool2dBackward(gradOutput, self, out)`: the output size is gradOutput's.
#[no_mangle]
pub extern "C" fn aclnnAdaptiveAvgPool2dBackwardGetWorkspaceSize(
    grad_output: H,
    self_: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    // the output size is gradOutput's, read at launch
    backward("aclnnAdaptiveAvgPool2dBackward", [grad_output, self_, out], "out", 2, ws, ex, || {
        Ok(Kind::AdaptiveAvg { out: [0, 0] })
    })
}

/// `aclnnUpsampleNearest2d(self, outputSize, out)`: sizes only.
#[no_mangle]
pub extern "C" fn aclnnUpsampleNearest2dGetWorkspaceSize(
    self_: H,
    output_size: H,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    forward("aclnnUpsampleNearest2d", self_, out, 2, ws, ex, || {
        Ok(Kind::Nearest { out: size2(output_size, "outputSize")?, scales: [-1.0, -1.0] })
    })
}

/// `aclnnUpsampleNearest2dV2(self, outputSize, float scalesH, float scalesW, out)`: a scale ≤ 0 means none.
#[no_mangle]
pub extern "C" fn aclnnUpsampleNearest2dV2GetWorkspaceSize(
    self_: H,
    output_size: H,
    scales_h: f32,
    scales_w: f32,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    forward("aclnnUpsampleNearest2dV2", self_, out, 2, ws, ex, || {
        Ok(Kind::Nearest { out: size2(output_size, "outputSize")?, scales: [scales_h.into(), scales_w.into()] })
    })
}

/// `aclnnUpsampleNearest2dBackward(gradOut, outputSize, inputSize, double scalesH, double scalesW, gradInput)`.
#[no_mangle]
pub extern "C" fn aclnnUpsampleNearest2dBackwardGetWorkspaceSize(
    grad_out: H,
    output_size: H,
    input_size: H,
    scales_h: f64,
    scales_w: f64,
    grad_input: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    let sizes = [output_size, input_size];
    upsample_backward("aclnnUpsampleNearest2dBackward", [grad_out, grad_input], "gradInput", sizes, ws, ex, |o| {
        Kind::Nearest { out: o, scales: [scales_h, scales_w] }
    })
}

/// `aclnnUpsampleBilinear2d(self, outputSize, bool alignCorners, double scalesH, double scalesW, out)`:
/// a scale of 0 means none, a negative one is refused.
#[no_mangle]
pub extern "C" fn aclnnUpsampleBilinear2dGetWorkspaceSize(
    self_: H,
    output_size: H,
    align_corners: bool,
    scales_h: f64,
    scales_w: f64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    forward("aclnnUpsampleBilinear2d", self_, out, 2, ws, ex, || {
        Ok(Kind::Bilinear { out: size2(output_size, "outputSize")?, align_corners, scales: [scales_h, scales_w] })
    })
}

/// `aclnnUpsampleBilinear2dBackward(V2)(gradOut, outputSize, inputSize, bool alignCorners, double scalesH,
/// double scalesW, out)`.
macro_rules! bilinear_backward {
    ($name:ident, $p2:literal) => {
        #[no_mangle]
        pub extern "C" fn $name(
            grad_out: H,
            output_size: H,
            input_size: H,
            align_corners: bool,
            scales_h: f64,
            scales_w: f64,
            out: H,
            ws: *mut u64,
            ex: *mut H,
        ) -> Status {
            upsample_backward($p2, [grad_out, out], "out", [output_size, input_size], ws, ex, |o| Kind::Bilinear {
                out: o,
                align_corners,
                scales: [scales_h, scales_w],
            })
        }
    };
}
bilinear_backward!(aclnnUpsampleBilinear2dBackwardGetWorkspaceSize, "aclnnUpsampleBilinear2dBackward");
bilinear_backward!(aclnnUpsampleBilinear2dBackwardV2GetWorkspaceSize, "aclnnUpsampleBilinear2dBackwardV2");

/// `aclnnReflectionPad{1,2}d` / `aclnnReplicationPad{1,2}d(self, padding, out)` and their
/// `Backward(gradOutput, self, padding, gradInput)`; padding [left, right(, top, bottom)] as torch's.
macro_rules! pad {
    ($fwd:ident, $p2:literal, $bwd:ident, $p2b:literal, $reflect:expr, $dims:expr) => {
        #[no_mangle]
        pub extern "C" fn $fwd(self_: H, padding: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
            forward($p2, self_, out, $dims, ws, ex, || {
                Ok(Kind::Pad { reflect: $reflect, pads: int_array(padding, "padding")? })
            })
        }
        #[no_mangle]
        pub extern "C" fn $bwd(
            grad_output: H,
            self_: H,
            padding: H,
            grad_input: H,
            ws: *mut u64,
            ex: *mut H,
        ) -> Status {
            let handles = [grad_output, self_, grad_input];
            backward($p2b, handles, "gradInput", $dims, ws, ex, || {
                Ok(Kind::Pad { reflect: $reflect, pads: int_array(padding, "padding")? })
            })
        }
    };
}
pad!(
    aclnnReflectionPad1dGetWorkspaceSize,
    "aclnnReflectionPad1d",
    aclnnReflectionPad1dBackwardGetWorkspaceSize,
    "aclnnReflectionPad1dBackward",
    true,
    1
);
pad!(
    aclnnReflectionPad2dGetWorkspaceSize,
    "aclnnReflectionPad2d",
    aclnnReflectionPad2dBackwardGetWorkspaceSize,
    "aclnnReflectionPad2dBackward",
    true,
    2
);
pad!(
    aclnnReplicationPad1dGetWorkspaceSize,
    "aclnnReplicationPad1d",
    aclnnReplicationPad1dBackwardGetWorkspaceSize,
    "aclnnReplicationPad1dBackward",
    false,
    1
);
pad!(
    aclnnReplicationPad2dGetWorkspaceSize,
    "aclnnReplicationPad2d",
    aclnnReplicationPad2dBackwardGetWorkspaceSize,
    "aclnnReplicationPad2dBackward",
    false,
    2
);
