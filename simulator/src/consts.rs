//! Error codes and enum values of the CANN C ABI: the one table in the `cann-abi` crate, which the
//! interposer uses too, plus the simulated device's identity.
#![allow(unused_imports)]

pub use cann_abi::event::*;
pub use cann_abi::memcpy::*;
pub use cann_abi::status::*;

pub const SOC_NAME: &str = "Ascend910B1";
