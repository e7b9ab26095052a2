//! The L2 interposer: `LD_PRELOAD=libmsprobe.so` captures every kernel a job launches through
//! CANN, with no code change.
//!
//! Real clients resolve CANN with `dlopen` + `dlsym(handle, name)` (cann-abi.md §6), so the one
//! mandatory hook is `dlsym` itself ([`entry`]): for names we wrap it returns our wrapper and
//! remembers the real function. Wrappers keep side tables of the nnopbase objects ([`meta`]:
//! tensors, scalars, arrays, lists, executors), bind phase-1 arguments to the executor
//! ([`aclnn`], generated from headers by build.rs), and at phase 2 copy inputs off the device
//! before the launch and outputs after it ([`capture`]), handing records to the recorder. HCCL
//! collectives are wrapped in [`hccl`].
//!
//! Everything here is the unsafe FFI edge; the recorder core it feeds is safe Rust.
//! Activation is lazy ([`state`]): no threads, no files until the first capture; forked children
//! stay off.

pub(crate) mod aclnn;
pub(crate) mod aclop;
pub(crate) mod capture;
pub(crate) mod entry;
pub(crate) mod hccl;
pub(crate) mod meta;
pub(crate) mod real;
pub(crate) mod state;

/// Copies device bytes to a new host buffer with the real `aclrtMemcpy` (for the C ABI's
/// device-tensor path).
pub(crate) fn copy_device_span(src: usize, len: usize) -> Result<Vec<u8>, i32> {
    real::copy_to_host(src, len)
}
