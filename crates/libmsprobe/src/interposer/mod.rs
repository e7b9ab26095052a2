//! The L2 interposer: `LD_PRELOAD=libmsprobe.so` captures every kernel a job launches through
//! CANN, with no code change.
//!
//! Real clients resolve CANN with `dlopen` + `dlsym(handle, name)` (cann-abi.md §6), so the one
//! mandatory hook is `dlsym` itself ([`entry`]): [`dispatch`] hands out our wrapper for each name
//! a library's hook table declares (`crate::hook`) and remembers the real function. Wrappers keep
//! side tables of the nnopbase objects ([`meta`]: tensors, scalars, arrays, lists, executors),
//! bind phase-1 arguments to the executor ([`aclnn`], generated from headers by build.rs; the op
//! table is [`ops`]), and at launch copy inputs off the device before the launch and outputs after
//! it ([`capture`]), handing records to the recorder. aclop executions are wrapped in [`aclop`],
//! HCCL collectives in [`hccl`]. Each library's hooked names are declared once ([`table`]): the
//! same slot and wrapper serve the dlsym path and the export of the name for linked clients.
//!
//! Modules depend downwards only: `entry → dispatch → aclnn/aclop/hccl → capture → activation →
//! ops`, with `meta` beside them; activation (is capture on, step ends, the run summary) knows no
//! wrapper. Activation is lazy: no threads, no files until the first capture; forked children
//! stay off.

pub(crate) mod aclnn;
pub(crate) mod aclop;
pub(crate) mod activation;
pub(crate) mod capture;
pub(crate) mod devstats;
pub(crate) mod dispatch;
pub(crate) mod entry;
pub(crate) mod hccl;
pub(crate) mod meta;
pub(crate) mod ops;
pub(crate) mod pinned;
pub(crate) mod table;
