//! msprobe-rs: precision-debugging data capture for Ascend NPU training.
//!
//! Data flows one way: a capture path (the Python layers through the C ABI in [`ffi`], or the
//! L2 interposer) builds records with [`record::RecordBuilder`]; the [`recorder::Recorder`]
//! applies the configuration (steps, ranks, filters) and hands finished records to the
//! [`writer`], which writes tensor files, a crash-safe journal, and msprobe's JSON files.
//!
//! The core (everything but [`ffi`]) is safe Rust and is unit-tested without LD_PRELOAD.

/// Records are built on the hooked thread and freed on the writer thread; glibc's malloc makes
/// such cross-thread frees contend on the allocating thread's arena lock (a futex wake-up per
/// record, measured in `perf`). mimalloc frees them without locks. It serves only this
/// library's Rust allocations; the host program's malloc is untouched.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod config;
pub mod dtype;
pub mod ffi;
pub mod fsutil;
pub mod interposer;
pub mod journal;
pub mod json;
pub mod layout;
pub mod logging;
pub mod naming;
pub mod record;
pub mod recorder;
pub mod stats;
pub mod tensorfile;
pub mod writer;
