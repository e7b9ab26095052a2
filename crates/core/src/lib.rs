//! The recorder core of msprobe-rs: safe Rust, unit-tested without LD_PRELOAD.
//!
//! Data flows one way. A capture path (the Python layers through the C ABI, or the L2
//! interposer, both in the `msprobe` cdylib crate) builds records with [`record::RecordBuilder`];
//! the [`recorder::Recorder`] applies the configuration (steps, ranks, filters), appends each
//! finished record to the crash [`journal`] before the hooked call returns (through a
//! [`journal::Sink`]: libmsprobe's is a shared file mapping, in the `msprobe-mmap-journal` crate)
//! and hands it to the [`writer`], which writes tensor files and msprobe's JSON files. Tensor bytes on their way to the writer are capped by the [`budget`]; each step's
//! dump.json opens with its [`header`]. `msprobe recover` replays a journal into its dump
//! directories (see [`recover`]).
//!
//! Everything that touches raw pointers lives in the cdylib crate; this crate cannot contain
//! `unsafe` code.
#![forbid(unsafe_code)]

pub mod budget;
pub mod config;
pub mod dtype;
pub mod fsutil;
pub mod header;
pub mod journal;
pub mod json;
pub mod layout;
pub mod logging;
pub mod naming;
pub mod record;
pub mod recorder;
pub mod recover;
pub mod stats;
pub mod tensorfile;
pub mod writer;
