//! `msprobe._fastpath`: the hot path of the Python layers, in Rust.
//!
//! A hooked call used to cross ctypes a dozen times per record (begin, sections, a descriptor
//! per tensor, containers, the stack) and build as many Python objects, which made the hooking
//! itself the cost. Here one call per record phase walks the arguments, reads tensors by
//! attribute (no copy), formats the stack from a cache and talks to libmsprobe.so's C ABI
//! directly. Values it does not handle go to the framework's pure-Python encoder, which is also
//! the whole path when this module is not built.
//!
//! Errors never reach the hooked program: a record that fails is aborted and the failure is
//! logged once per message.

mod abi;
mod encoder;
mod frames;
mod hooks;
mod values;

use pyo3::prelude::*;

#[pymodule]
fn _fastpath(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<encoder::Encoder>()?;
    m.add_class::<hooks::LeanHooks>()
}
