"""The dtypes the recorder reads and their aclDataType numbers (include/msprobe.h), by name.

The name is numpy's ``dtype.name`` (MindSpore tensors are read through ``asnumpy()``, where
ml_dtypes names BFloat16 ``bfloat16``) and torch's attribute (``torch.float32`` is
``getattr(torch, "float32")``). A dtype not listed is recorded as null.
"""

from __future__ import annotations

ACL_DTYPE: dict[str, int] = {
    "float32": 0,
    "float16": 1,
    "int8": 2,
    "int32": 3,
    "uint8": 4,
    "int16": 6,
    "uint16": 7,
    "uint32": 8,
    "int64": 9,
    "uint64": 10,
    "float64": 11,
    "bool": 12,
    "complex64": 16,
    "complex128": 17,
    "bfloat16": 27,
}
