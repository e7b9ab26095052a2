//! Element types, keyed by their ACL (`aclDataType`) numbers.
//!
//! Every capture path speaks ACL numbers: the interposer reads them from `aclTensor`s and HCCL
//! calls, and the Python layers map framework dtypes onto them. The names written into dump.json
//! depend on the framework dialect (`torch.float32` vs `Float32`), so they live here too.

use cann_abi::dtype::*;

/// A tensor element type with a host meaning. Values are the `aclDataType` numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32 = ACL_FLOAT as isize,
    F16 = ACL_FLOAT16 as isize,
    I8 = ACL_INT8 as isize,
    I32 = ACL_INT32 as isize,
    U8 = ACL_UINT8 as isize,
    I16 = ACL_INT16 as isize,
    U16 = ACL_UINT16 as isize,
    U32 = ACL_UINT32 as isize,
    I64 = ACL_INT64 as isize,
    U64 = ACL_UINT64 as isize,
    F64 = ACL_DOUBLE as isize,
    Bool = ACL_BOOL as isize,
    C64 = ACL_COMPLEX64 as isize,
    C128 = ACL_COMPLEX128 as isize,
    BF16 = ACL_BF16 as isize,
}

/// Which framework's spelling a dump uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// `"type": "torch.Tensor"`, `torch.float32`, `requires_grad`, `.pt` files.
    PyTorch,
    /// `"type": "mindspore.Tensor"`, `Float32`, no `requires_grad`, `.npy` files.
    MindSpore,
}

impl DType {
    pub const ALL: [DType; 15] = [
        DType::F32,
        DType::F16,
        DType::I8,
        DType::I32,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F64,
        DType::Bool,
        DType::C64,
        DType::C128,
        DType::BF16,
    ];

    /// Maps an `aclDataType` number; `None` for types without a host meaning (strings, 4-bit, fp8).
    pub fn from_acl(v: i32) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| *d as i32 == v)
    }

    pub fn acl(self) -> i32 {
        self as i32
    }

    /// Bytes per element (`aclDataTypeSize`, from the one table in `cann-abi`).
    pub fn size(self) -> usize {
        cann_abi::dtype::size(self as i32)
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }

    /// `str(torch.dtype)`.
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::F32 => "torch.float32",
            DType::F16 => "torch.float16",
            DType::BF16 => "torch.bfloat16",
            DType::F64 => "torch.float64",
            DType::I8 => "torch.int8",
            DType::I16 => "torch.int16",
            DType::I32 => "torch.int32",
            DType::I64 => "torch.int64",
            DType::U8 => "torch.uint8",
            DType::U16 => "torch.uint16",
            DType::U32 => "torch.uint32",
            DType::U64 => "torch.uint64",
            DType::Bool => "torch.bool",
            DType::C64 => "torch.complex64",
            DType::C128 => "torch.complex128",
        }
    }

    /// `str(mindspore.dtype)`.
    pub fn mindspore_name(self) -> &'static str {
        match self {
            DType::F32 => "Float32",
            DType::F16 => "Float16",
            DType::BF16 => "BFloat16",
            DType::F64 => "Float64",
            DType::I8 => "Int8",
            DType::I16 => "Int16",
            DType::I32 => "Int32",
            DType::I64 => "Int64",
            DType::U8 => "UInt8",
            DType::U16 => "UInt16",
            DType::U32 => "UInt32",
            DType::U64 => "UInt64",
            DType::Bool => "Bool",
            DType::C64 => "Complex64",
            DType::C128 => "Complex128",
        }
    }

    pub fn name(self, dialect: Dialect) -> &'static str {
        match dialect {
            Dialect::PyTorch => self.torch_name(),
            Dialect::MindSpore => self.mindspore_name(),
        }
    }

    /// Parses either spelling (used by the recover command and tests).
    pub fn from_name(s: &str) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.torch_name() == s || d.mindspore_name() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_numbers_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_acl(d.acl()), Some(d));
            assert_eq!(DType::from_name(d.torch_name()), Some(d));
            assert_eq!(DType::from_name(d.mindspore_name()), Some(d));
        }
        assert_eq!(DType::from_acl(13), None); // ACL_STRING
        assert_eq!(DType::from_acl(27), Some(DType::BF16));
    }
}
