//! Tensors made on the device: the random fills (torch.randn / rand / randint on the device, `normal_`,
//! `uniform_`, `random_`, and so nn.init's initialisers), linspace and eye, and torch.equal. Signatures from
//! CANN's headers. The random values come from the simulator's counter-based generator (rng.rs): the same
//! (seed, offset) gives the same values, not those of any other generator, as on a real device.
use super::aclnn::{p1, scalar, u};
use crate::nnop::Args;
use crate::ops::{Op, RandKind};
use crate::trace::Role::{InOut, Input as In, Output as Out};
use std::os::raw::c_void;

type Status = i32;
type H = *mut c_void;

crate::phase2!(aclnnInplaceNormal, aclnnInplaceUniform, aclnnInplaceRandom, aclnnLinspace, aclnnEye, aclnnEqual);

/// `aclnnInplaceNormal(aclTensor *selfRef, float mean, float std, int64_t seed, int64_t offset)`
/// (`normal_`, `torch.randn(device=npu)`).
#[no_mangle]
pub extern "C" fn aclnnInplaceNormalGetWorkspaceSize(
    x: H,
    mean: f32,
    std: f32,
    seed: i64,
    offset: i64,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    let op = Op::InplaceRandom { kind: RandKind::Normal, a: mean.into(), b: std.into(), seed, offset };
    random("aclnnInplaceNormal", x, op, ws, ex)
}

/// `aclnnInplaceUniform(aclTensor *selfRef, double from, double to, uint64_t seed, uint64_t offset)`
/// (`uniform_`, `torch.rand(device=npu)`).
#[no_mangle]
pub extern "C" fn aclnnInplaceUniformGetWorkspaceSize(
    x: H,
    from: f64,
    to: f64,
    seed: u64,
    offset: u64,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    let op = Op::InplaceRandom { kind: RandKind::Uniform, a: from, b: to, seed: seed as i64, offset: offset as i64 };
    random("aclnnInplaceUniform", x, op, ws, ex)
}

/// `aclnnInplaceRandom(aclTensor *selfRef, int64_t from, int64_t to, int64_t seed, int64_t offset)`
/// (`random_(from, to)`, `torch.randint(device=npu)`): integers in [from, to).
#[no_mangle]
pub extern "C" fn aclnnInplaceRandomGetWorkspaceSize(
    x: H,
    from: i64,
    to: i64,
    seed: i64,
    offset: i64,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    let op = Op::InplaceRandom { kind: RandKind::Integer, a: from as f64, b: to as f64, seed, offset };
    random("aclnnInplaceRandom", x, op, ws, ex)
}

fn random(name: &'static str, x: H, op: Op, ws: *mut u64, ex: *mut H) -> Status {
    p1(name, ws, ex, || {
        let mut a = Args::new();
        a.t(InOut, "selfRef", u(x))?;
        Ok((op, a))
    })
}

/// `aclnnLinspace(const aclScalar *start, const aclScalar *end, int64_t steps, aclTensor *out)`.
#[no_mangle]
pub extern "C" fn aclnnLinspaceGetWorkspaceSize(
    start: H,
    end: H,
    steps: i64,
    out: H,
    ws: *mut u64,
    ex: *mut H,
) -> Status {
    p1("aclnnLinspace", ws, ex, || {
        let (start, end) = (scalar(start, "start")?, scalar(end, "end")?);
        let mut a = Args::new();
        a.t(Out, "out", u(out))?;
        Ok((Op::Linspace { start, end, steps }, a))
    })
}

/// `aclnnEye(int64_t n, int64_t m, aclTensor *out)`.
#[no_mangle]
pub extern "C" fn aclnnEyeGetWorkspaceSize(n: i64, m: i64, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnEye", ws, ex, || {
        let mut a = Args::new();
        a.t(Out, "out", u(out))?;
        Ok((Op::Eye { n, m }, a))
    })
}

/// `aclnnEqual(const aclTensor *self, const aclTensor *other, aclTensor *out)` (torch.equal).
#[no_mangle]
pub extern "C" fn aclnnEqualGetWorkspaceSize(x: H, other: H, out: H, ws: *mut u64, ex: *mut H) -> Status {
    p1("aclnnEqual", ws, ex, || {
        let mut a = Args::new();
        a.t(In, "self", u(x))?.t(In, "other", u(other))?.t(Out, "out", u(out))?;
        Ok((Op::Equal, a))
    })
}
