//! libmsprobe.so: everything of msprobe-rs that crosses the FFI boundary.
//!
//! - [`ffi`]: the C ABI (`include/msprobe.h`) through which the Python layers (and any C client)
//!   submit records;
//! - `interposer`: the L2 interposer, loaded with `LD_PRELOAD`, which captures the kernels a job
//!   launches through CANN;
//! - `hook` (the one hook-slot mechanism and the real `dlsym`), `device` (the tool's own CANN
//!   runtime calls) and `session` (the process's one recorder, shared by both capture paths).
//!
//! The recorder core they feed is the safe-Rust crate `msprobe-core`. Every exported function
//! catches panics: on an internal error the original call goes through unchanged.

/// Records are built on the hooked thread and freed on the writer thread; glibc's malloc makes
/// such cross-thread frees contend on the allocating thread's arena lock (a futex wake-up per
/// record, measured in `perf`). mimalloc frees them without locks. It serves only this
/// library's Rust allocations; the host program's malloc is untouched.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod deferred;
mod device;
pub mod ffi;
mod hook;
mod interposer;
mod session;
mod signals;
