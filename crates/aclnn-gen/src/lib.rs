//! The generator of the L2 interposer's aclnn phase-1 wrappers, run by libmsprobe's `build.rs`.
//!
//! 1. [`headers`]: find the declarations (the bundled `include/cann/aclnn_ops.h` through
//!    `wrapper.h`, or every `include/aclnnop/*.h` of a CANN that `ASCEND_TOOLKIT_HOME` /
//!    `ASCEND_HOME_PATH` points at) and run bindgen over them ([`bindings`]).
//! 2. [`parse`]: bindgen's output → the op list, one [`Op`] per `aclnnXxxGetWorkspaceSize`.
//! 3. [`roles`]: how each parameter is recorded ([`classify`] → [`ArgKind`]), and for tensors
//!    whether it is an input, an output or in-place ([`tensor_role`] → [`Role`]): by name first,
//!    because the headers' const-ness is unreliable, then by const-ness.
//! 4. [`emit`]: the op list → `aclnn_table.rs` and `aclnn_wrappers.rs`, which libmsprobe includes.
//!
//! [`report`] renders the decisions as a table, one line per op; `tests/snapshot.rs` pins it for
//! the bundled header (`UPDATE_SNAPSHOTS=1` rewrites the snapshot).
//!
//! Phase 2 (`aclnnXxx(workspace, size, executor, stream)`) has one signature for every op and is
//! handled by a const-generic wrapper in libmsprobe, not generated.
#![forbid(unsafe_code)]

pub mod emit;
pub mod headers;
pub mod parse;
pub mod report;
pub mod roles;

pub use emit::{emit, Generated};
pub use headers::{bindings, cann_include, Headers};
pub use parse::{parse, Op, Param, Parsed};
pub use report::report;
pub use roles::{classify, tensor_role, ArgKind, Role};
