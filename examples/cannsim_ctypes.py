"""Minimal ctypes bindings for the CANN C ABI (as simulated by cannsim).

Libraries are opened by their CANN client file names (libascendcl.so, libnnopbase.so, libopapi.so,
libhccl.so, libacl_op_compiler.so) from a lib64 directory, and every function is resolved with
dlsym through those handles -- exactly like the real frameworks do.

lib64 lookup order: argument, $CANNSIM_LIB64, $ASCEND_HOME_PATH/lib64, <repo>/target/cann/latest/lib64.
"""

import ctypes as C
import os

import numpy as np

# aclDataType
ACL_FLOAT, ACL_FLOAT16, ACL_INT8, ACL_INT32, ACL_UINT8 = 0, 1, 2, 3, 4
ACL_INT64, ACL_DOUBLE, ACL_BOOL, ACL_BF16 = 9, 11, 12, 27
ACL_FORMAT_ND = 2
# aclrtMemcpyKind
H2H, H2D, D2H, D2D, DEFAULT = 0, 1, 2, 3, 4
# HcclDataType / HcclReduceOp
HCCL_INT8, HCCL_INT32, HCCL_FP16, HCCL_FP32, HCCL_INT64, HCCL_BF16 = 0, 2, 3, 4, 5, 11
HCCL_SUM, HCCL_PROD, HCCL_MAX, HCCL_MIN = 0, 1, 2, 3

NP2ACL = {
    np.dtype(np.float32): ACL_FLOAT,
    np.dtype(np.float16): ACL_FLOAT16,
    np.dtype(np.int8): ACL_INT8,
    np.dtype(np.int32): ACL_INT32,
    np.dtype(np.uint8): ACL_UINT8,
    np.dtype(np.int64): ACL_INT64,
    np.dtype(np.float64): ACL_DOUBLE,
    np.dtype(np.bool_): ACL_BOOL,
}
ACL2HCCL = {
    ACL_FLOAT: HCCL_FP32,
    ACL_FLOAT16: HCCL_FP16,
    ACL_BF16: HCCL_BF16,
    ACL_INT32: HCCL_INT32,
    ACL_INT64: HCCL_INT64,
    ACL_INT8: HCCL_INT8,
}
DTYPE_NAMES = {"float32": ACL_FLOAT, "float16": ACL_FLOAT16, "bfloat16": ACL_BF16}


def f32_to_bf16_bits(a):
    """float32 array -> uint16 bf16 bit patterns, round to nearest even."""
    a = np.asarray(a, dtype=np.float32)
    u = np.ascontiguousarray(a).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return r.astype(np.uint16).reshape(a.shape)


def bf16_bits_to_f32(b):
    b = np.asarray(b, dtype=np.uint16)
    return (np.ascontiguousarray(b).astype(np.uint32) << 16).view(np.float32).reshape(b.shape)


def to_device_bytes(a, dtype):
    """numpy values -> contiguous host array holding the bytes of `dtype`."""
    if dtype == ACL_BF16:
        return f32_to_bf16_bits(np.asarray(a, dtype=np.float32))
    np_dt = {v: k for k, v in NP2ACL.items()}[dtype]
    return np.ascontiguousarray(np.asarray(a).astype(np_dt))


def from_device_bytes(raw, dtype, shape):
    if dtype == ACL_BF16:
        return bf16_bits_to_f32(raw.view(np.uint16)).reshape(shape)
    np_dt = {v: k for k, v in NP2ACL.items()}[dtype]
    return raw.view(np_dt).reshape(shape)


def default_lib64():
    for cand in (
        os.environ.get("CANNSIM_LIB64"),
        os.path.join(os.environ["ASCEND_HOME_PATH"], "lib64") if os.environ.get("ASCEND_HOME_PATH") else None,
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "cann", "latest", "lib64"),
    ):
        if cand and os.path.exists(os.path.join(cand, "libascendcl.so")):
            return os.path.abspath(cand)
    raise RuntimeError("cannot find the simulated CANN lib64 (run scripts/sim-install.sh, set CANNSIM_LIB64)")


class AclError(RuntimeError):
    def __init__(self, what, code, msg=""):
        super().__init__(f"{what} failed with {code}: {msg}")
        self.code = code


VP = C.c_void_p
# phase-1 argument codes: T tensor, S scalar, I int array, B bool array, L tensor list,
# l int64, i int32, b int8, ? bool, d double, f float, Q uint64
SIGS = {
    "Add": "TTST",
    "Adds": "TSST",
    "InplaceAdd": "TTS",
    "InplaceAdds": "TSS",
    "Sub": "TTST",
    "Subs": "TSST",
    "InplaceSub": "TTS",
    "InplaceSubs": "TSS",
    "Mul": "TTT",
    "Muls": "TST",
    "InplaceMul": "TT",
    "InplaceMuls": "TS",
    "Div": "TTT",
    "Divs": "TST",
    "InplaceDiv": "TT",
    "InplaceDivs": "TS",
    "Mm": "TTTb",
    "Matmul": "TTTb",
    "BatchMatMul": "TTTb",
    "Addmm": "TTTSSTb",
    "InplaceAddmm": "TTTSSb",
    "Relu": "TT",
    "InplaceRelu": "T",
    "ThresholdBackward": "TTST",
    "Gelu": "TT",
    "GeluBackward": "TTT",
    "Softmax": "TlT",
    "SoftmaxBackward": "TTlT",
    "LogSoftmax": "TlT",
    "LogSoftmaxBackward": "TTlT",
    "NLLLoss": "TTTllTT",
    "NLLLossBackward": "TTTTllTT",
    "LayerNorm": "TITTdTTT",
    "LayerNormBackward": "TTITTTTBTTT",
    "Embedding": "TTT",
    "EmbeddingDenseBackward": "TTQQ?T",
    "Cast": "TiT",
    "Max": "TT",
    "Min": "TT",
    "Norm": "TSI?T",
    "AminmaxAll": "TTT",
    "Aminmax": "TI?TT",
    "NanToNum": "TfffT",
    "ReduceSum": "TI?iT",
    "ReduceNansum": "TI?iT",
    "RepeatInterleave": "TTlT",
    "RepeatInterleaveWithDim": "TTllT",
    "RepeatInterleaveInt": "TllT",
    "RepeatInterleaveIntWithDim": "TlllT",
    "RepeatInterleaveTensor": "TlT",
    "IndexAdd": "TlTTST",
    "Bincount": "TTlT",
    "Prelu": "TTT",
    "PreluBackward": "TTTTT",
    "Glu": "TlT",
    "GluBackward": "TTlT",
    "SwiGlu": "TlT",
    "SwiGluGrad": "TTlT",
    "RmsNorm": "TTdTT",
    "RmsNormGrad": "TTTTTT",
    "AddRmsNorm": "TTTdTTT",
    "FastGelu": "TT",
    "FastGeluBackward": "TTT",
    "ScaledMaskedSoftmax": "TTd?T",
    "ScaledMaskedSoftmaxBackward": "TTTd?T",
    "IsClose": "TTdd?T",
    "IndexFillTensor": "TlIST",
    "InplaceIndexFillTensor": "TlIS",
    "StdMeanCorrection": "TIl?TT",
    "Dot": "TTT",
    "Kthvalue": "Tll?TT",
    "Cummax": "TlTT",
    "LinalgCross": "TTlT",
    "AdaptiveMaxPool2d": "TITT",
    "Cdist": "TTflT",
    "LeftShift": "TTT",
    "LeftShifts": "TST",
    "RightShift": "TTT",
    "AdaptiveMaxPool2dBackward": "TTTT",
    "Mean": "TI?iT",
    "InplaceCopy": "TT",
    "InplaceZero": "T",
    "InplaceFillScalar": "TS",
    "ApplyAdamW": "TTTTTTTTTTTT??",
    "Cat": "LlT",
    "Arange": "SSST",
    "Tril": "TlT",
    "Triu": "TlT",
    "InplaceTril": "Tl",
    "LogicalNot": "TT",
    "EqTensor": "TTT",
    "EqScalar": "TST",
    "NeTensor": "TTT",
    "NeScalar": "TST",
    "GtTensor": "TTT",
    "GtScalar": "TST",
    "GeTensor": "TTT",
    "GeScalar": "TST",
    "LtTensor": "TTT",
    "LtScalar": "TST",
    "LeTensor": "TTT",
    "LeScalar": "TST",
    "BitwiseNot": "TT",
    "InplaceMaskedFillScalar": "TTS",
    "InplaceFillTensor": "TT",
    "Addcdiv": "TTTST",
    "Addcmul": "TTTST",
    "InplaceAddcdiv": "TTTS",
    "ForeachAddScalarV2": "LSL",
    "ForeachMulScalarV2": "LSL",
    "ForeachAddListV2": "LLSL",
    "ForeachLerpScalar": "LLSL",
    "ForeachAddcmulScalarV2": "LLLSL",
    "ForeachAddcdivScalarV2": "LLLSL",
    "ForeachSqrt": "LL",
    "Convolution": "TTTIII?IlTb",
    "ConvolutionBackward": "TTTIIII?IlBbTTT",
    "BatchNorm": "TTTTT?ddTTT",
    "BatchNormBackward": "TTTTTTT?dBTTT",
    "DropoutGenMaskV2": "IdlliT",
    "DropoutDoMask": "TTdT",
    "MaxPool2dWithMask": "TIIII?TT",
    "MaxPool2dWithIndices": "TIIII?TT",
    "MaxPool2dWithMaskBackward": "TTTIIII?T",
    "MaxPool2dWithIndicesBackward": "TTTIIII?T",
    "AvgPool2d": "TIII??lbT",
    "AvgPool2dBackward": "TTIII??lbT",
    "AdaptiveAvgPool2d": "TIT",
    "AdaptiveAvgPool2dBackward": "TTT",
    "UpsampleNearest2d": "TIT",
    "UpsampleNearest2dV2": "TIffT",
    "UpsampleNearest2dBackward": "TIIddT",
    "UpsampleBilinear2d": "TI?ddT",
    "UpsampleBilinear2dBackward": "TII?ddT",
    "UpsampleBilinear2dBackwardV2": "TII?ddT",
    "ReflectionPad1d": "TIT",
    "ReflectionPad1dBackward": "TTIT",
    "ReflectionPad2d": "TIT",
    "ReflectionPad2dBackward": "TTIT",
    "ReplicationPad1d": "TIT",
    "ReplicationPad1dBackward": "TTIT",
    "ReplicationPad2d": "TIT",
    "ReplicationPad2dBackward": "TTIT",
    "Tanh": "TT",
    "Sigmoid": "TT",
    "Erf": "TT",
    "Sin": "TT",
    "Cos": "TT",
    "Floor": "TT",
    "Round": "TT",
    "Reciprocal": "TT",
    "Sign": "TT",
    "SWhere": "TTTT",
    "Maximum": "TTT",
    "Minimum": "TTT",
    "LogicalAnd": "TTT",
    "LogicalOr": "TTT",
    "LogicalXor": "TTT",
    "Equal": "TTT",
    "BitwiseAndTensor": "TTT",
    "BitwiseOrTensor": "TTT",
    "BitwiseXorTensor": "TTT",
    "Any": "TI?T",
    "All": "TI?T",
    "IsFinite": "TT",
    "IndexSelect": "TlTT",
    "Gather": "TlTT",
    "TanhBackward": "TTT",
    "SigmoidBackward": "TTT",
    "GeluV2": "TlT",
    "GeluBackwardV2": "TTsT",
    "Clamp": "TSST",
    "ClampMin": "TST",
    "ClampMax": "TST",
    "ClampTensor": "TTTT",
    "ClampMinTensor": "TTT",
    "InplaceClampMaxTensor": "TT",
    "Permute": "TIT",
    "PowTensorTensor": "TTT",
    "PowTensorScalar": "TST",
    "ApplyAdamWV2": "TTTTTTfffff??",
    "Silu": "TT",
    "SiluBackward": "TTT",
    "RemainderTensorTensor": "TTT",
    "RemainderTensorScalar": "TST",
    "FloorDivide": "TTT",
    "FloorDivides": "TST",
    "Atan2": "TTT",
    "InplaceAtan2": "TT",
    "DivMod": "TTiT",
    "DivMods": "TSiT",
    "InplaceDivMod": "TTi",
    "InplaceDivMods": "TSi",
    "InplaceRemainderTensorTensor": "TT",
    "InplaceRemainderTensorScalar": "TS",
    "FmodTensor": "TTT",
    "FmodScalar": "TST",
    "InplaceFmodTensor": "TT",
    "InplaceFmodScalar": "TS",
    "Cumsum": "TliT",
    "Cumprod": "TSiT",
    "Linspace": "SSlT",
    "Eye": "llT",
    "MaxDim": "Tl?TT",
    "MinDim": "Tl?TT",
    "ArgMax": "Tl?T",
    "ArgMin": "Tl?T",
    "Sort": "T?l?TT",
    "Topk": "Tll??TT",
    "Flip": "TIT",
    "Roll": "TIIT",
    "Scatter": "TlTTlT",
    "InplaceScatter": "TlTTl",
    "ScatterValue": "TlTSlT",
    "InplaceScatterValue": "TlTSl",
    "ScatterAdd": "TlTTT",
    "VarCorrection": "TIl?T",
    "Std": "TIl?T",
    "Prod": "TiT",
    "ProdDim": "Tl?iT",
    "LogSumExp": "TI?T",
    "Lerp": "TTTT",
    "Lerps": "TTST",
    "InplaceLerp": "TTT",
    "InplaceLerps": "TTS",
    "MseLoss": "TTlT",
    "MseLossBackward": "TTTlT",
    "Index": "TLT",
    "IndexPutImpl": "TLT??",
    "Nonzero": "TT",
    "NonzeroV2": "TT",
    "MaskedSelect": "TTT",
    "Unique": "T??TT",
    "Unique2": "T???TTT",
    "UniqueConsecutive": "T??lTTT",
    "Expm1": "TT",
    "Erfinv": "TT",
    "Log1p": "TT",
    "Log2": "TT",
    "Log10": "TT",
    "Ceil": "TT",
    "Tan": "TT",
    "Atan": "TT",
    "Asin": "TT",
    "Acos": "TT",
    "Sinh": "TT",
    "Cosh": "TT",
    "Hardswish": "TT",
    "Mish": "TT",
    "LogSigmoid": "TT",
    "HardswishBackward": "TTT",
    "MishBackward": "TTT",
    "LogSigmoidForward": "TTT",
    "LogSigmoidBackward": "TTTT",
    "LeakyRelu": "TST",
    "LeakyReluBackward": "TTS?T",
    "Hardtanh": "TSST",
    "HardtanhBackward": "TTSST",
    "Softplus": "TSST",
    "SoftplusBackward": "TTSST",
    "Elu": "TSSST",
    "EluBackward": "TSSS?TT",
    "PowScalarTensor": "STT",
    "RemainderScalarTensor": "STT",
    "InplaceLeakyRelu": "TS",
    "InplaceHardtanh": "TSS",
    "InplaceHardswish": "T",
    "InplaceMish": "T",
    "InplaceElu": "TSSS",
    "InplaceSigmoid": "T",
    "InplaceTanh": "T",
    "InplaceExp": "T",
    "InplaceSqrt": "T",
    "InplaceLog": "T",
    "InplaceRsqrt": "T",
    "InplaceReciprocal": "T",
    "InplaceSin": "T",
    "InplaceCos": "T",
    "InplaceErf": "T",
    "InplaceFloor": "T",
    "InplaceRound": "T",
    "InplaceTrunc": "T",
    "InplaceCeil": "T",
    "InplaceExpm1": "T",
    "InplaceErfinv": "T",
    "InplaceNormal": "Tffll",
    "InplaceUniform": "Tddll",
    "InplaceRandom": "Tllll",
    "InplaceLog1p": "T",
    "InplacePowTensorScalar": "TS",
    "FlashAttentionScore": "TTTTTTTIddlllsllTTTT",
    "FlashAttentionScoreGrad": "TTTTTTTTTTTTIddlllsllTTTT",
    "BinaryCrossEntropy": "TTTlT",
    "BinaryCrossEntropyBackward": "TTTTlT",
    "BinaryCrossEntropyWithLogits": "TTTTlT",
    "BinaryCrossEntropyWithLogitsBackward": "TTTTTlT",
    "SmoothL1Loss": "TTlfT",
    "SmoothL1LossBackward": "TTTlfT",
    "L1Loss": "TTlT",
    "L1LossBackward": "TTTlT",
    "KlDiv": "TTl?T",
    "KlDivBackward": "TTTl?T",
    "ForeachMaximumScalarV2": "LSL",
    "ForeachMinimumScalarV2": "LSL",
    "ForeachMaximumScalar": "LTL",
    "ForeachMinimumScalar": "LTL",
    "ForeachNonFiniteCheckAndUnscale": "LTT",
    "AmpUpdateScale": "TTTddlTT",
    "GroupNorm": "TTTlllldTTT",
    "GroupNormBackward": "TTTTTllllBTTT",
}
CT = {
    "T": VP,
    "S": VP,
    "I": VP,
    "B": VP,
    "L": VP,
    "l": C.c_int64,
    "i": C.c_int32,
    "b": C.c_int8,
    "?": C.c_bool,
    "d": C.c_double,
    "f": C.c_float,
    "Q": C.c_uint64,
    "s": C.c_char_p,
}


class Acl:
    """Handles on the simulated CANN libraries plus small helpers."""

    def __init__(self, lib64=None, init=True, device=0):
        self._fns = {}
        self.lib64 = lib64 or default_lib64()

        def L(n):
            return C.CDLL(os.path.join(self.lib64, n))

        self.rt = L("libascendcl.so")
        self.nn = L("libnnopbase.so")
        self.op = L("libopapi.so")
        self.hccl = L("libhccl.so")
        self.opc = L("libacl_op_compiler.so")
        self._ws = {}  # stream -> (ptr, size)
        self._sizes = {}  # aclDataType -> bytes per element
        if init:
            r = self.fn(self.rt, "aclInit", C.c_int, [C.c_char_p])(None)
            if r not in (0, 100002):
                raise AclError("aclInit", r)
            self.check("aclrtSetDevice", self.call("aclrtSetDevice", device))

    # -- generic access
    def fn(self, lib, name, restype, argtypes):
        key = (id(lib), name)
        f = self._fns.get(key)
        if f is None:
            f = getattr(lib, name)
            f.restype = restype
            f.argtypes = argtypes
            self._fns[key] = f
        return f

    _RT = {
        "aclrtSetDevice": [C.c_int32],
        "aclrtResetDevice": [C.c_int32],
        "aclrtGetDevice": [C.POINTER(C.c_int32)],
        "aclrtGetDeviceCount": [C.POINTER(C.c_uint32)],
        "aclrtMalloc": [C.POINTER(VP), C.c_size_t, C.c_uint32],
        "aclrtFree": [VP],
        "aclrtMallocHost": [C.POINTER(VP), C.c_size_t],
        "aclrtFreeHost": [VP],
        "aclrtMemcpy": [VP, C.c_size_t, VP, C.c_size_t, C.c_int],
        "aclrtMemcpyAsync": [VP, C.c_size_t, VP, C.c_size_t, C.c_int, VP],
        "aclrtMemset": [VP, C.c_size_t, C.c_int32, C.c_size_t],
        "aclrtMemsetAsync": [VP, C.c_size_t, C.c_int32, C.c_size_t, VP],
        "aclrtCreateStream": [C.POINTER(VP)],
        "aclrtCreateStreamWithConfig": [C.POINTER(VP), C.c_uint32, C.c_uint32],
        "aclrtDestroyStream": [VP],
        "aclrtDestroyStreamForce": [VP],
        "aclrtSynchronizeStream": [VP],
        "aclrtSynchronizeStreamWithTimeout": [VP, C.c_int32],
        "aclrtSynchronizeDevice": [],
        "aclrtStreamQuery": [VP, C.POINTER(C.c_int32)],
        "aclrtCreateEvent": [C.POINTER(VP)],
        "aclrtCreateEventWithFlag": [C.POINTER(VP), C.c_uint32],
        "aclrtDestroyEvent": [VP],
        "aclrtRecordEvent": [VP, VP],
        "aclrtSynchronizeEvent": [VP],
        "aclrtQueryEventStatus": [VP, C.POINTER(C.c_int32)],
        "aclrtEventElapsedTime": [C.POINTER(C.c_float), VP, VP],
        "aclrtStreamWaitEvent": [VP, VP],
        "aclrtGetMemInfo": [C.c_int, C.POINTER(C.c_size_t), C.POINTER(C.c_size_t)],
        "aclrtCreateContext": [C.POINTER(VP), C.c_int32],
        "aclrtSetCurrentContext": [VP],
        "aclrtGetCurrentContext": [C.POINTER(VP)],
        "aclrtDestroyContext": [VP],
        "aclrtLaunchCallback": [VP, VP, C.c_int, VP],
        "aclFinalize": [],
        "aclInit": [C.c_char_p],
    }

    def call(self, name, *args):
        f = self.fn(self.rt, name, C.c_int, self._RT[name])
        return f(*args)

    def errmsg(self):
        m = self.fn(self.rt, "aclGetRecentErrMsg", C.c_char_p, [])()
        return m.decode() if m else ""

    def check(self, what, code):
        if code != 0:
            raise AclError(what, code, self.errmsg())
        return code

    def dtype_size(self, dtype):
        """Bytes per element of an aclDataType number, from CANN's own aclDataTypeSize (cached)."""
        n = self._sizes.get(dtype)
        if n is None:
            n = self._sizes[dtype] = self.fn(self.rt, "aclDataTypeSize", C.c_size_t, [C.c_int])(dtype)
        return n

    def soc_name(self):
        return self.fn(self.rt, "aclrtGetSocName", C.c_char_p, [])().decode()

    # -- memory
    def malloc(self, nbytes):
        p = VP()
        self.check("aclrtMalloc", self.call("aclrtMalloc", C.byref(p), max(int(nbytes), 1), 0))
        return p.value

    def free(self, ptr):
        self.check("aclrtFree", self.call("aclrtFree", ptr))

    def h2d(self, dev, host):
        host = np.ascontiguousarray(host)
        self.check("aclrtMemcpy", self.call("aclrtMemcpy", dev, host.nbytes, host.ctypes.data, host.nbytes, H2D))

    def d2h(self, dev, nbytes):
        out = np.empty(int(nbytes), dtype=np.uint8)
        self.check("aclrtMemcpy", self.call("aclrtMemcpy", out.ctypes.data, out.nbytes, dev, out.nbytes, D2H))
        return out

    # -- streams
    def stream(self):
        s = VP()
        self.check("aclrtCreateStream", self.call("aclrtCreateStream", C.byref(s)))
        return s.value

    def sync(self, stream=None):
        self.check("aclrtSynchronizeStream", self.call("aclrtSynchronizeStream", stream))

    # -- tensors
    def tensor(self, data=None, shape=None, dtype=ACL_FLOAT):
        return DevTensor(self, data, shape, dtype)

    def create_tensor(self, shape, dtype, addr, strides=None, offset=0, storage=None, fmt=ACL_FORMAT_ND):
        nd = len(shape)
        dims = (C.c_int64 * max(nd, 1))(*shape)
        st = (C.c_int64 * max(nd, 1))(*strides) if strides is not None else None
        stor = list(storage) if storage is not None else list(shape)
        sd = (C.c_int64 * max(len(stor), 1))(*stor)
        f = self.fn(
            self.nn, "aclCreateTensor", VP, [VP, C.c_uint64, C.c_int, VP, C.c_int64, C.c_int, VP, C.c_uint64, VP]
        )
        h = f(dims, nd, dtype, st, offset, fmt, sd, len(stor), addr)
        if not h:
            raise AclError("aclCreateTensor", -1, self.errmsg())
        return h

    def destroy_tensor(self, h):
        return self.fn(self.nn, "aclDestroyTensor", C.c_int, [VP])(h)

    def scalar(self, v, dtype=None):
        if dtype is None:
            dtype = ACL_BOOL if isinstance(v, bool) else (ACL_INT64 if isinstance(v, int) else ACL_FLOAT)
        cv = {
            ACL_FLOAT: C.c_float,
            ACL_INT64: C.c_int64,
            ACL_BOOL: C.c_bool,
            ACL_DOUBLE: C.c_double,
            ACL_INT32: C.c_int32,
            ACL_FLOAT16: C.c_uint16,
        }[dtype](v)
        return self.fn(self.nn, "aclCreateScalar", VP, [VP, C.c_int])(C.byref(cv), dtype)

    def int_array(self, vals):
        a = (C.c_int64 * max(len(vals), 1))(*vals)
        return self.fn(self.nn, "aclCreateIntArray", VP, [VP, C.c_uint64])(a, len(vals))

    def bool_array(self, vals):
        a = (C.c_bool * max(len(vals), 1))(*vals)
        return self.fn(self.nn, "aclCreateBoolArray", VP, [VP, C.c_uint64])(a, len(vals))

    def tensor_list(self, handles):
        a = (VP * max(len(handles), 1))(*handles)
        return self.fn(self.nn, "aclCreateTensorList", VP, [VP, C.c_uint64])(a, len(handles))

    # -- aclnn two-phase calls
    def prepare(self, name, *args):
        """Phase 1. Returns (status, workspace_size, executor, temporaries to destroy)."""
        sig = SIGS[name]
        assert len(sig) == len(args), f"{name}: expected {len(sig)} args, got {len(args)}"
        cargs, temps = [], []
        for code, a in zip(sig, args):
            if isinstance(a, C.c_void_p):  # an explicit raw handle
                cargs.append(a.value)
            elif code == "T":
                cargs.append(a.handle if isinstance(a, DevTensor) else a)
            elif code == "S":
                if isinstance(a, (int, float, bool)):  # a Python number -> a temporary aclScalar
                    a = self.scalar(a)
                    temps.append(("aclDestroyScalar", a))
                cargs.append(a)
            elif code in "IB":
                if isinstance(a, (list, tuple)):
                    a = self.int_array(a) if code == "I" else self.bool_array(a)
                    temps.append(("aclDestroyIntArray" if code == "I" else "aclDestroyBoolArray", a))
                cargs.append(a)
            elif code == "L":
                if isinstance(a, (list, tuple)):
                    hs = [self.create_tensor(t.shape, t.dtype, t.ptr) for t in a]
                    a = self.tensor_list(hs)
                    temps.append(("aclDestroyTensorList", a))
                cargs.append(a)
            else:
                cargs.append(a)
        ws, ex = C.c_uint64(0), VP()
        f = self.fn(
            self.op,
            f"aclnn{name}GetWorkspaceSize",
            C.c_int,
            [CT[c] for c in sig] + [C.POINTER(C.c_uint64), C.POINTER(VP)],
        )
        st = f(*cargs, C.byref(ws), C.byref(ex))
        return st, ws.value, ex.value, temps

    def release(self, temps):
        for fname, h in temps:
            self.fn(self.nn, fname, C.c_int, [VP])(h)

    def workspace(self, size, stream):
        if size == 0:
            return None
        p, n = self._ws.get(stream, (None, 0))
        if n < size:
            if p:
                self.sync(stream)
                self.free(p)
            p, n = self.malloc(size), size
            self._ws[stream] = (p, n)
        return p

    def launch(self, name, ws_ptr, ws_size, executor, stream=None):
        f = self.fn(self.op, f"aclnn{name}", C.c_int, [VP, C.c_uint64, VP, VP])
        return f(ws_ptr, ws_size, executor, stream)

    def run(self, name, *args, stream=None):
        """GetWorkspaceSize + workspace allocation + launch. Raises AclError on failure."""
        st, ws, ex, temps = self.prepare(name, *args)
        self.release(temps)  # scalars/arrays are copied at creation; lists were bound at phase 1
        if st != 0:
            raise AclError(f"aclnn{name}GetWorkspaceSize", st, self.errmsg())
        st = self.launch(name, self.workspace(ws, stream), ws, ex, stream)
        if st != 0:
            raise AclError(f"aclnn{name}", st, self.errmsg())

    def nn_fn(self, name, restype, argtypes):
        return self.fn(self.nn, name, restype, argtypes)

    # -- HCCL
    def hccl_root_info(self):
        buf = C.create_string_buffer(4108)
        r = self.fn(self.hccl, "HcclGetRootInfo", C.c_int, [VP])(buf)
        if r:
            raise AclError("HcclGetRootInfo", r)
        return buf.raw

    def hccl_init(self, nranks, root_info, rank):
        comm = VP()
        buf = C.create_string_buffer(root_info, 4108)
        r = self.fn(self.hccl, "HcclCommInitRootInfo", C.c_int, [C.c_uint32, VP, C.c_uint32, C.POINTER(VP)])(
            nranks, buf, rank, C.byref(comm)
        )
        if r:
            raise AclError("HcclCommInitRootInfo", r, self.errmsg())
        return comm.value

    def hccl_call(self, name, argtypes, *args):
        return self.fn(self.hccl, name, C.c_int, argtypes)(*args)

    def allreduce(self, send, recv, count, hdtype, op, comm, stream):
        r = self.hccl_call(
            "HcclAllReduce", [VP, VP, C.c_uint64, C.c_int, C.c_int, VP, VP], send, recv, count, hdtype, op, comm, stream
        )
        if r:
            raise AclError("HcclAllReduce", r, self.errmsg())


class DevTensor:
    """A contiguous device tensor with an aclTensor handle."""

    def __init__(self, acl, data=None, shape=None, dtype=ACL_FLOAT):
        self.acl = acl
        self.dtype = dtype
        if data is not None:
            data = np.asarray(data)
            if shape is None:
                shape = data.shape
        self.shape = tuple(int(s) for s in shape)
        self.numel = int(np.prod(self.shape)) if self.shape else 1
        self.nbytes = self.numel * acl.dtype_size(dtype)
        self.ptr = acl.malloc(self.nbytes)
        if data is not None:
            self.upload(data)
        self.handle = acl.create_tensor(self.shape, dtype, self.ptr)

    def upload(self, data):
        self.acl.h2d(self.ptr, to_device_bytes(np.asarray(data).reshape(self.shape), self.dtype))

    def numpy(self, stream=None, sync=True):
        if sync:
            self.acl.sync(stream)
        return from_device_bytes(self.acl.d2h(self.ptr, self.nbytes), self.dtype, self.shape)

    def free(self):
        self.acl.destroy_tensor(self.handle)
        self.acl.free(self.ptr)
