//! CANN's ABI facts: status codes, enum values and dtype tables, as the real headers define them
//! (`../shared/reference/cann-abi.md` gives the sources). One place for every number that crosses
//! the CANN C ABI, shared by the L2 interposer (which calls and wraps CANN) and the simulator
//! (which implements it), so the two can never disagree.
#![forbid(unsafe_code)]
#![no_std]

/// `aclError` / `aclnnStatus` / `HcclResult` values.
pub mod status {
    pub const ACL_SUCCESS: i32 = 0;
    pub const ACL_ERROR_INVALID_PARAM: i32 = 100000;
    pub const ACL_ERROR_UNINITIALIZE: i32 = 100001;
    pub const ACL_ERROR_REPEAT_INITIALIZE: i32 = 100002;
    pub const ACL_ERROR_OP_TYPE_NOT_MATCH: i32 = 100020;
    pub const ACL_ERROR_OP_INPUT_NOT_MATCH: i32 = 100021;
    pub const ACL_ERROR_OP_OUTPUT_NOT_MATCH: i32 = 100022;
    pub const ACL_ERROR_OP_ATTR_NOT_MATCH: i32 = 100023;
    pub const ACL_ERROR_OP_NOT_FOUND: i32 = 100024;
    pub const ACL_ERROR_UNSUPPORTED_DATA_TYPE: i32 = 100026;
    pub const ACL_ERROR_REPEAT_FINALIZE: i32 = 100037;
    pub const ACL_ERROR_BAD_ALLOC: i32 = 200000;
    pub const ACL_ERROR_INVALID_DEVICE: i32 = 200002;
    pub const ACL_ERROR_INVALID_RESOURCE_HANDLE: i32 = 200005;
    pub const ACL_ERROR_INTERNAL_ERROR: i32 = 500000;

    pub const ACL_ERROR_RT_PARAM_INVALID: i32 = 107000;
    pub const ACL_ERROR_RT_INVALID_DEVICEID: i32 = 107001;
    pub const ACL_ERROR_RT_CONTEXT_NULL: i32 = 107002;
    pub const ACL_ERROR_RT_STREAM_CONTEXT: i32 = 107003;
    /// Returned by the `...WithTimeout` synchronisations when the timeout expires.
    pub const ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: i32 = 107028;
    pub const ACL_ERROR_RT_FEATURE_NOT_SUPPORT: i32 = 207000;
    pub const ACL_ERROR_RT_MEMORY_ALLOCATION: i32 = 207001;
    /// A tdt queue had nothing to receive before the timeout.
    pub const ACL_ERROR_RT_QUEUE_EMPTY: i32 = 207013;
    /// A tdt queue stayed full until the timeout.
    pub const ACL_ERROR_RT_QUEUE_FULL: i32 = 207014;
    pub const ACL_ERROR_RT_INTERNAL_ERROR: i32 = 507000;

    pub const ACLNN_SUCCESS: i32 = 0;
    pub const ACLNN_ERR_PARAM_NULLPTR: i32 = 161001;
    pub const ACLNN_ERR_PARAM_INVALID: i32 = 161002;
    pub const ACLNN_ERR_RUNTIME_ERROR: i32 = 361001;
    pub const ACLNN_ERR_INNER: i32 = 561000;
    pub const ACLNN_ERR_INNER_NULLPTR: i32 = 561103;

    pub const HCCL_SUCCESS: i32 = 0;
    pub const HCCL_E_PARA: i32 = 1;
    pub const HCCL_E_PTR: i32 = 2;
    pub const HCCL_E_MEMORY: i32 = 3;
    pub const HCCL_E_INTERNAL: i32 = 4;
    pub const HCCL_E_NOT_SUPPORT: i32 = 5;
    pub const HCCL_E_NOT_FOUND: i32 = 6;
    pub const HCCL_E_UNAVAIL: i32 = 7;
    pub const HCCL_E_SYSCALL: i32 = 8;
    pub const HCCL_E_TIMEOUT: i32 = 9;
    pub const HCCL_E_REMOTE: i32 = 21;
}

/// `aclrtMemcpyKind`.
/// `aclMemType` (`aclSetTensorPlaceMent`).
pub mod memtype {
    pub const ACL_MEMTYPE_DEVICE: i32 = 0;
    pub const ACL_MEMTYPE_HOST: i32 = 1;
    pub const ACL_MEMTYPE_HOST_COMPILE_INDEPENDENT: i32 = 2;
}

pub mod memcpy {
    pub const ACL_MEMCPY_HOST_TO_HOST: i32 = 0;
    pub const ACL_MEMCPY_HOST_TO_DEVICE: i32 = 1;
    pub const ACL_MEMCPY_DEVICE_TO_HOST: i32 = 2;
    pub const ACL_MEMCPY_DEVICE_TO_DEVICE: i32 = 3;
    pub const ACL_MEMCPY_DEFAULT: i32 = 4;
    pub const ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: i32 = 5;
    pub const ACL_MEMCPY_INNER_DEVICE_TO_DEVICE: i32 = 6;
    pub const ACL_MEMCPY_INTER_DEVICE_TO_DEVICE: i32 = 7;
}

/// `aclrtEventRecordedStatus`.
pub mod event {
    pub const ACL_EVENT_RECORDED_STATUS_NOT_READY: i32 = 0;
    pub const ACL_EVENT_RECORDED_STATUS_COMPLETE: i32 = 1;
}

/// `aclDataType` values (cann-abi.md §2.1; 5, 14 and 15 are unused).
pub mod dtype {
    pub const ACL_DT_UNDEFINED: i32 = -1;
    pub const ACL_FLOAT: i32 = 0;
    pub const ACL_FLOAT16: i32 = 1;
    pub const ACL_INT8: i32 = 2;
    pub const ACL_INT32: i32 = 3;
    pub const ACL_UINT8: i32 = 4;
    pub const ACL_INT16: i32 = 6;
    pub const ACL_UINT16: i32 = 7;
    pub const ACL_UINT32: i32 = 8;
    pub const ACL_INT64: i32 = 9;
    pub const ACL_UINT64: i32 = 10;
    pub const ACL_DOUBLE: i32 = 11;
    pub const ACL_BOOL: i32 = 12;
    pub const ACL_STRING: i32 = 13;
    pub const ACL_COMPLEX64: i32 = 16;
    pub const ACL_COMPLEX128: i32 = 17;
    pub const ACL_BF16: i32 = 27;
    pub const ACL_INT4: i32 = 29;
    pub const ACL_UINT1: i32 = 30;
    pub const ACL_COMPLEX32: i32 = 33;
    pub const ACL_HIFLOAT8: i32 = 34;
    pub const ACL_FLOAT8_E5M2: i32 = 35;
    pub const ACL_FLOAT8_E4M3FN: i32 = 36;
    pub const ACL_FLOAT8_E8M0: i32 = 37;
    pub const ACL_FLOAT6_E3M2: i32 = 38;
    pub const ACL_FLOAT6_E2M3: i32 = 39;
    pub const ACL_FLOAT4_E2M1: i32 = 40;
    pub const ACL_FLOAT4_E1M2: i32 = 41;

    /// Bytes per element as the real `aclDataTypeSize` computes them (cann-abi.md §1.6),
    /// including its default branch of 8 (which the FLOAT6/FLOAT4 types fall into).
    pub const fn size(v: i32) -> usize {
        match v {
            ACL_STRING | ACL_DT_UNDEFINED => 0,
            ACL_UINT1 | ACL_INT4 | ACL_BOOL | ACL_INT8 | ACL_UINT8 | ACL_HIFLOAT8 | ACL_FLOAT8_E5M2
            | ACL_FLOAT8_E4M3FN | ACL_FLOAT8_E8M0 => 1,
            ACL_FLOAT16 | ACL_INT16 | ACL_UINT16 | ACL_BF16 => 2,
            ACL_FLOAT | ACL_INT32 | ACL_UINT32 | ACL_COMPLEX32 => 4,
            ACL_COMPLEX128 => 16,
            _ => 8,
        }
    }
}

/// HCCL's enums (cann-abi.md §5.3). `HcclDataType` numbers differ from `aclDataType`'s.
pub mod hccl {
    use crate::dtype::*;

    pub const HCCL_REDUCE_SUM: i32 = 0;
    pub const HCCL_REDUCE_PROD: i32 = 1;
    pub const HCCL_REDUCE_MAX: i32 = 2;
    pub const HCCL_REDUCE_MIN: i32 = 3;

    /// `HcclDataType` → the `aclDataType` of the same meaning, for every value that has one.
    pub const DTYPES: [(i32, i32); 16] = [
        (0, ACL_INT8),
        (1, ACL_INT16),
        (2, ACL_INT32),
        (3, ACL_FLOAT16),
        (4, ACL_FLOAT),
        (5, ACL_INT64),
        (6, ACL_UINT64),
        (7, ACL_UINT8),
        (8, ACL_UINT16),
        (9, ACL_UINT32),
        (10, ACL_DOUBLE),
        (11, ACL_BF16),
        (14, ACL_HIFLOAT8),
        (15, ACL_FLOAT8_E4M3FN),
        (16, ACL_FLOAT8_E5M2),
        (17, ACL_FLOAT8_E8M0),
    ];

    /// The `aclDataType` with the meaning of `HcclDataType` `v` (`None` for INT128, RESERVED and unknown values).
    pub const fn to_acl(v: i32) -> Option<i32> {
        let mut i = 0;
        while i < DTYPES.len() {
            if DTYPES[i].0 == v {
                return Some(DTYPES[i].1);
            }
            i += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hccl_dtypes_map_to_acl_types_of_the_same_width() {
        // FP16 is 3 in HCCL and 1 in ACL: the classic mix-up this table exists to prevent.
        assert_eq!(hccl::to_acl(3), Some(dtype::ACL_FLOAT16));
        assert_eq!(hccl::to_acl(12), None);
        let widths = [1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8, 2];
        for (h, w) in widths.iter().enumerate() {
            assert_eq!(dtype::size(hccl::to_acl(h as i32).unwrap()), *w, "HcclDataType {h}");
        }
    }

    #[test]
    fn dtype_sizes_follow_acl_data_type_size() {
        assert_eq!(dtype::size(dtype::ACL_BF16), 2);
        assert_eq!(dtype::size(dtype::ACL_STRING), 0);
        assert_eq!(dtype::size(dtype::ACL_FLOAT4_E2M1), 8); // the real default branch
        assert_eq!(dtype::size(dtype::ACL_COMPLEX128), 16);
    }
}
