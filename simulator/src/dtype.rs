//! aclDataType / HcclDataType handling and element conversion.
use half::{bf16, f16};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    I8,
    I32,
    U8,
    I16,
    U16,
    U32,
    I64,
    U64,
    F64,
    Bool,
    Bf16,
}

impl DType {
    pub fn from_acl(v: i32) -> Option<DType> {
        Some(match v {
            0 => DType::F32,
            1 => DType::F16,
            2 => DType::I8,
            3 => DType::I32,
            4 => DType::U8,
            6 => DType::I16,
            7 => DType::U16,
            8 => DType::U32,
            9 => DType::I64,
            10 => DType::U64,
            11 => DType::F64,
            12 => DType::Bool,
            27 => DType::Bf16,
            _ => return None,
        })
    }
    pub fn acl(self) -> i32 {
        match self {
            DType::F32 => 0,
            DType::F16 => 1,
            DType::I8 => 2,
            DType::I32 => 3,
            DType::U8 => 4,
            DType::I16 => 6,
            DType::U16 => 7,
            DType::U32 => 8,
            DType::I64 => 9,
            DType::U64 => 10,
            DType::F64 => 11,
            DType::Bool => 12,
            DType::Bf16 => 27,
        }
    }
    /// The element type of an `HcclDataType` (through `cann-abi`'s HCCL → ACL table).
    pub fn from_hccl(v: i32) -> Option<DType> {
        cann_abi::hccl::to_acl(v).and_then(DType::from_acl)
    }
    pub fn size(self) -> usize {
        acl_dtype_size(self.acl())
    }
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::Bf16 => "bfloat16",
            DType::F64 => "float64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::Bool => "bool",
        }
    }
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::Bf16 | DType::F64)
    }
    pub fn is_int(self) -> bool {
        !self.is_float() && self != DType::Bool
    }

    /// Decode one element as f64.
    pub fn get(self, b: &[u8]) -> f64 {
        match self {
            DType::F32 => f32::from_le_bytes(b[..4].try_into().unwrap()) as f64,
            DType::F16 => f16::from_le_bytes(b[..2].try_into().unwrap()).to_f64(),
            DType::Bf16 => bf16::from_le_bytes(b[..2].try_into().unwrap()).to_f64(),
            DType::F64 => f64::from_le_bytes(b[..8].try_into().unwrap()),
            DType::I8 => b[0] as i8 as f64,
            DType::U8 => b[0] as f64,
            DType::Bool => {
                if b[0] != 0 {
                    1.0
                } else {
                    0.0
                }
            }
            DType::I16 => i16::from_le_bytes(b[..2].try_into().unwrap()) as f64,
            DType::U16 => u16::from_le_bytes(b[..2].try_into().unwrap()) as f64,
            DType::I32 => i32::from_le_bytes(b[..4].try_into().unwrap()) as f64,
            DType::U32 => u32::from_le_bytes(b[..4].try_into().unwrap()) as f64,
            DType::I64 => i64::from_le_bytes(b[..8].try_into().unwrap()) as f64,
            DType::U64 => u64::from_le_bytes(b[..8].try_into().unwrap()) as f64,
        }
    }
    /// Decode one integer element exactly.
    pub fn get_i64(self, b: &[u8]) -> i64 {
        match self {
            DType::I64 => i64::from_le_bytes(b[..8].try_into().unwrap()),
            DType::U64 => u64::from_le_bytes(b[..8].try_into().unwrap()) as i64,
            _ => self.get(b) as i64,
        }
    }
    /// Encode one integer exactly (narrower integer dtypes keep the low bytes, as a C cast; floats
    /// and bool through `put`).
    pub fn put_i64(self, b: &mut [u8], v: i64) {
        if self.is_int() {
            let n = self.size();
            b[..n].copy_from_slice(&v.to_le_bytes()[..n]);
        } else {
            self.put(b, v as f64);
        }
    }
    /// Encode one element (f32 values round to nearest-even for f16/bf16; ints truncate, saturating).
    pub fn put(self, b: &mut [u8], v: f64) {
        match self {
            DType::F32 => b[..4].copy_from_slice(&(v as f32).to_le_bytes()),
            DType::F16 => b[..2].copy_from_slice(&f16::from_f32(v as f32).to_le_bytes()),
            DType::Bf16 => b[..2].copy_from_slice(&bf16::from_f32(v as f32).to_le_bytes()),
            DType::F64 => b[..8].copy_from_slice(&v.to_le_bytes()),
            DType::I8 => b[0] = (v as i8) as u8,
            DType::U8 => b[0] = v as u8,
            DType::Bool => b[0] = (v != 0.0) as u8,
            DType::I16 => b[..2].copy_from_slice(&(v as i16).to_le_bytes()),
            DType::U16 => b[..2].copy_from_slice(&(v as u16).to_le_bytes()),
            DType::I32 => b[..4].copy_from_slice(&(v as i32).to_le_bytes()),
            DType::U32 => b[..4].copy_from_slice(&(v as u32).to_le_bytes()),
            DType::I64 => b[..8].copy_from_slice(&(v as i64).to_le_bytes()),
            DType::U64 => b[..8].copy_from_slice(&(v as u64).to_le_bytes()),
        }
    }
}

/// aclDataTypeSize semantics for every aclDataType value (§1.6 of cann-abi.md).
pub fn acl_dtype_size(v: i32) -> usize {
    cann_abi::dtype::size(v)
}

#[cfg(test)]
mod t {
    use super::*;
    #[test]
    fn roundtrip() {
        let mut b = [0u8; 8];
        for d in [DType::F32, DType::F16, DType::Bf16, DType::I32, DType::I64] {
            d.put(&mut b, 3.0);
            assert_eq!(d.get(&b), 3.0);
        }
        DType::Bf16.put(&mut b, 1.0 + 1.0 / 256.0 + 1e-6);
        assert_eq!(DType::Bf16.get(&b), 1.0078125);
        assert_eq!(DType::from_hccl(3), Some(DType::F16));
        assert_eq!(acl_dtype_size(27), 2);
    }
}
