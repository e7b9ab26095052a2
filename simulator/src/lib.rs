//! cannsim: a CPU simulator of the CANN libraries (ACL runtime, nnopbase/aclnn, aclop, HCCL).
//!
//! Internal logic lives in safe(ish) modules (`mem`, `stream`, `kernels`, `ops`, `nnop`, `aclop`,
//! `hccl`, `trace`); the C ABI lives in `ffi`. See `simulator/README.md`.

pub mod aclop;
pub mod aclop_io;
pub mod aclop_nn;
pub mod aclop_nn_plan;
pub mod attention;
pub mod consts;
pub mod dtype;
pub mod errmsg;
pub mod ffi;
pub mod group_norm;
pub mod hccl;
pub mod kernels;
pub mod losses;
pub mod mem;
pub mod nnop;
pub mod ops;
pub mod ops_dim;
pub mod ops_ext;
pub mod ops_misc;
pub mod ops_reduce;
pub mod rng;
pub mod spatial;
pub mod stats;
pub mod stream;
pub mod tensor;
pub mod trace;

/// Log to stderr when `CANNSIM_LOG` is set (any non-empty value other than `0`).
#[macro_export]
macro_rules! simlog {
    ($($arg:tt)*) => {
        if $crate::log_enabled() { eprintln!("[cannsim {}] {}", std::process::id(), format!($($arg)*)); }
    };
}

pub fn log_enabled() -> bool {
    use std::sync::OnceLock;
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| matches!(std::env::var("CANNSIM_LOG"), Ok(v) if !v.is_empty() && v != "0"))
}

/// Read an environment variable as a number, with a default.
pub fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}
