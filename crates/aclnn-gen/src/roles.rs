//! How each phase-1 parameter is recorded: its [`ArgKind`] from its type, and for tensors and
//! tensor lists its [`Role`] (input, output or in-place) from its name, then its const-ness.
//!
//! Both functions take the parameter name as bindgen spells it and the type as the compact text
//! of bindgen's Rust type with spaces removed (`*constaclTensor`, `*mutaclTensorList`, `i64`,
//! `*mut::std::os::raw::c_char`, `aclDataType`, ...): see [`crate::parse::type_text`].

use std::fmt;

/// Whether the interposer copies a tensor before the launch (input), after it (output) or both.
/// Mirrors `interposer::meta::Role` of libmsprobe, which the emitted code names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    In,
    Out,
    InOut,
}

impl Role {
    /// The variant's name as the emitted code spells it (`Role::In` ...).
    pub fn variant(self) -> &'static str {
        match self {
            Role::In => "In",
            Role::Out => "Out",
            Role::InOut => "InOut",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::In => "in",
            Role::Out => "out",
            Role::InOut => "inout",
        })
    }
}

/// How a phase-1 argument is recorded. Mirrors `interposer::aclnn::Arg` of libmsprobe (the
/// emitted code builds one `Arg` per parameter); tensors and tensor lists carry their role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgKind {
    Tensor(Role),
    TensorList(Role),
    Scalar,
    IntArray,
    FloatArray,
    BoolArray,
    /// A host C string (`char *`).
    Str,
    DType,
    Bool,
    Int,
    Float,
    /// Recorded as null: scalar lists, pointers to anything else, unknown types.
    Opaque,
}

impl ArgKind {
    /// The tensor role, for tensors and tensor lists.
    pub fn role(self) -> Option<Role> {
        match self {
            ArgKind::Tensor(r) | ArgKind::TensorList(r) => Some(r),
            _ => None,
        }
    }
}

impl fmt::Display for ArgKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgKind::Tensor(r) => write!(f, "tensor {r}"),
            ArgKind::TensorList(r) => write!(f, "tensor-list {r}"),
            ArgKind::Scalar => f.write_str("scalar"),
            ArgKind::IntArray => f.write_str("int-array"),
            ArgKind::FloatArray => f.write_str("float-array"),
            ArgKind::BoolArray => f.write_str("bool-array"),
            ArgKind::Str => f.write_str("str"),
            ArgKind::DType => f.write_str("dtype"),
            ArgKind::Bool => f.write_str("bool"),
            ArgKind::Int => f.write_str("int"),
            ArgKind::Float => f.write_str("float"),
            ArgKind::Opaque => f.write_str("opaque"),
        }
    }
}

/// Integer types recorded as `Arg::Int` (by the end of the type text, pointers excluded).
const INT_TYPES: [&str; 10] = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "c_int", "c_long"];

/// How a parameter is recorded, by its type (first match wins; the order matters, e.g. a tensor
/// list before a tensor and a scalar list before a scalar).
pub fn classify(name: &str, ty: &str) -> ArgKind {
    let role = tensor_role(name, ty);
    if ty.contains("aclTensorList") {
        ArgKind::TensorList(role)
    } else if ty.contains("aclTensor") {
        ArgKind::Tensor(role)
    } else if ty.contains("aclScalarList") {
        ArgKind::Opaque
    } else if ty.contains("aclScalar") {
        ArgKind::Scalar
    } else if ty.contains("aclIntArray") {
        ArgKind::IntArray
    } else if ty.contains("aclFloatArray") {
        ArgKind::FloatArray
    } else if ty.contains("aclBoolArray") {
        ArgKind::BoolArray
    } else if ty.contains("c_char") && ty.matches('*').count() == 1 {
        ArgKind::Str
    } else if ty.contains("aclDataType") {
        ArgKind::DType
    } else if ty == "bool" {
        ArgKind::Bool
    } else if ty == "f64" || ty == "f32" {
        ArgKind::Float
    } else if !ty.contains('*') && INT_TYPES.iter().any(|t| ty.ends_with(t)) {
        ArgKind::Int
    } else {
        ArgKind::Opaque
    }
}

/// The role of a tensor (or tensor list) parameter: by name first, because the headers'
/// const-ness is unreliable (cann-abi.md §3.2), then by const-ness. A trailing `Optional` is
/// ignored (`meanOutOptional` is `meanOut`).
///
/// 1. `*Ref` → in/out (in-place), whatever the const-ness (`const aclTensor *selfRef`), and the
///    AMP unscale's `scaledGrads`; a
///    non-const `running*` tensor → in/out too: running statistics, read and updated in place
///    (`aclTensor *runningMean` / `runningVar` of aclnnBatchNorm; the const ones of
///    aclnnBatchNormBackward are inputs by rule 4).
/// 2. `gradOut`, `gradOutput*` declared const → input: the incoming gradient of a backward op
///    ("grad of the output"), although it looks like an output name.
/// 3. `out`, `*Out` (so `*OutOut`), `y`, `gradInput*` → output, whatever the const-ness
///    (`const aclTensor *out` of Relu, `const aclTensor *gradInput` of GeluBackward).
/// 4. Any other name: non-const → output (`aclTensor *indices` of MaxDim), const → input.
pub fn tensor_role(name: &str, ty: &str) -> Role {
    /// In-place arguments CANN declares const under a plain name no other op uses:
    /// aclnnForeachNonFiniteCheckAndUnscale's gradients, unscaled in place. (Its `foundInf`, set to 1 on a
    /// NaN or inf, shares its name with aclnnAmpUpdateScale's input: the bundled header calls it
    /// `foundInfRef`; with CANN's own headers it is recorded as an input only.)
    const IN_PLACE_BY_NAME: [&str; 1] = ["scaledGrads"];
    let n = name.trim_end_matches("Optional");
    let is_const = ty.contains("const");
    if n.ends_with("Ref") || (n.starts_with("running") && !is_const) || IN_PLACE_BY_NAME.contains(&n) {
        Role::InOut
    } else if (n == "gradOut" || n.starts_with("gradOutput")) && is_const {
        Role::In
    } else if n == "out" || n.ends_with("Out") || n == "y" || n.starts_with("gradInput") || !is_const {
        // An output name (rule 3), or any other name declared non-const (rule 4).
        Role::Out
    } else {
        Role::In
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONST_T: &str = "*constaclTensor";
    const MUT_T: &str = "*mutaclTensor";

    fn role(name: &str, ty: &str) -> Role {
        tensor_role(name, ty)
    }

    // ---- rule 1: *Ref is in/out, const or not ----

    #[test]
    fn amp_unscale_arguments_are_inout() {
        // aclnnForeachNonFiniteCheckAndUnscale(const aclTensorList *scaledGrads, const aclTensor *foundInf, ...)
        assert_eq!(role("scaledGrads", "*constaclTensorList"), Role::InOut);
        assert_eq!(role("foundInfRef", CONST_T), Role::InOut);
        // aclnnAmpUpdateScale's foundInf is read only
        assert_eq!(role("foundInf", CONST_T), Role::In);
        assert_eq!(role("invScale", CONST_T), Role::In);
    }

    #[test]
    fn ref_is_inout_even_when_declared_const() {
        // aclnnInplaceAdd / InplaceAdds / InplaceAddmm declare `const aclTensor *selfRef`.
        assert_eq!(role("selfRef", CONST_T), Role::InOut);
        // aclnnInplaceSub / Mul / Copy / Zero declare `aclTensor *selfRef`.
        assert_eq!(role("selfRef", MUT_T), Role::InOut);
        // aclnnInplaceAddV3(const aclScalar *selfRef, aclTensor *otherRef, ...) writes its second
        // argument: the tensor is copied before the launch and again after it.
        assert_eq!(role("otherRef", MUT_T), Role::InOut);
        assert_eq!(classify("selfRef", "* const aclScalar"), ArgKind::Scalar);
        // aclnnApplyAdamW.
        for n in ["varRef", "mRef", "vRef"] {
            assert_eq!(role(n, MUT_T), Role::InOut, "{n}");
        }
    }

    #[test]
    fn running_statistics_are_inout_when_writable() {
        // aclnnBatchNorm: `aclTensor *runningMean, aclTensor *runningVar`, updated when training.
        for n in ["runningMean", "runningVar"] {
            assert_eq!(role(n, MUT_T), Role::InOut, "{n}");
            // aclnnBatchNormBackward: `const aclTensor *runningMean`, only read.
            assert_eq!(role(n, CONST_T), Role::In, "{n}");
        }
        // Only the prefix counts.
        assert_eq!(role("notrunningMean", MUT_T), Role::Out);
    }

    #[test]
    fn ref_before_optional_suffix() {
        // aclnnApplyAdamWV2: `aclTensor *maxGradNormOptionalRef`.
        assert_eq!(role("maxGradNormOptionalRef", MUT_T), Role::InOut);
        // `...RefOptional` (Optional is stripped first).
        assert_eq!(role("selfRefOptional", CONST_T), Role::InOut);
    }

    // ---- rule 2: the incoming gradient is an input ----

    #[test]
    fn grad_output_const_is_input() {
        // aclnnGeluBackward / SoftmaxBackward / ThresholdBackward / SiluBackward / NLLLossBackward.
        assert_eq!(role("gradOutput", CONST_T), Role::In);
        // aclnnLayerNormBackward: `const aclTensor *gradOut`.
        assert_eq!(role("gradOut", CONST_T), Role::In);
        assert_eq!(role("gradOutputOptional", CONST_T), Role::In);
    }

    #[test]
    fn grad_output_non_const_falls_back_to_output() {
        // Only a const gradOutput is taken as the incoming gradient; a non-const one is written.
        assert_eq!(role("gradOutput", MUT_T), Role::Out);
        assert_eq!(role("gradOut", MUT_T), Role::Out);
    }

    // ---- rule 3: output names, const or not ----

    #[test]
    fn out_is_output_even_when_declared_const() {
        // aclnnAdd etc. declare `aclTensor *out`; aclnnRelu / Embedding / EmbeddingDenseBackward
        // declare `const aclTensor *out`.
        assert_eq!(role("out", MUT_T), Role::Out);
        assert_eq!(role("out", CONST_T), Role::Out);
        assert_eq!(role("outOptional", CONST_T), Role::Out);
    }

    #[test]
    fn suffix_out_is_output() {
        // aclnnNLLLoss `totalWeightOut`, aclnnDropout `maskOut`, aclnnLayerNorm `meanOutOptional`,
        // `rstdOutOptional`, aclnnFlashAttentionScore(Grad) outputs declared const.
        for n in ["totalWeightOut", "maskOut", "meanOutOptional", "rstdOutOptional", "dqOut", "dpseOut"] {
            assert_eq!(role(n, MUT_T), Role::Out, "{n}");
            assert_eq!(role(n, CONST_T), Role::Out, "{n}");
        }
        // `...OutOut`: an output whose own name ends in Out (softmaxOut, attentionOut).
        for n in ["softmaxOutOut", "attentionOutOut", "xOutOut"] {
            assert_eq!(role(n, CONST_T), Role::Out, "{n}");
        }
    }

    #[test]
    fn y_is_output() {
        // aclnnGeluV2(const aclTensor *x, int64_t approximate, aclTensor *y, ...).
        assert_eq!(role("y", MUT_T), Role::Out);
        assert_eq!(role("y", CONST_T), Role::Out);
        assert_eq!(role("yOptional", CONST_T), Role::Out);
    }

    #[test]
    fn grad_input_is_output() {
        // aclnnGeluBackward declares `const aclTensor *gradInput`; aclnnSiluBackward `aclTensor *`;
        // aclnnLayerNormBackward `gradInputOut`.
        assert_eq!(role("gradInput", CONST_T), Role::Out);
        assert_eq!(role("gradInput", MUT_T), Role::Out);
        assert_eq!(role("gradInputOut", MUT_T), Role::Out);
    }

    // ---- rule 4: const-ness for every other name ----

    #[test]
    fn other_non_const_is_output() {
        // aclnnMaxDim(..., aclTensor *out, aclTensor *indices, ...).
        assert_eq!(role("indices", MUT_T), Role::Out);
    }

    #[test]
    fn other_const_is_input() {
        for n in ["self", "other", "mat2", "input", "weightOptional", "indices", "grad", "x", "dy", "query"] {
            assert_eq!(role(n, CONST_T), Role::In, "{n}");
        }
    }

    // ---- names that must NOT be outputs ----

    #[test]
    fn look_alike_inputs_stay_inputs() {
        // aclnnSoftmaxBackward / LogSoftmaxBackward: `const aclTensor *output` (the forward output).
        assert_eq!(role("output", CONST_T), Role::In);
        // aclnnLayerNormBackward `mean`, `rstd`; aclnnNLLLossBackward `totalWeight`.
        for n in ["mean", "rstd", "totalWeight", "meanOptional"] {
            assert_eq!(role(n, CONST_T), Role::In, "{n}");
        }
        // aclnnFlashAttentionScoreGrad: forward results fed back in.
        for n in ["softmaxInOptional", "attentionInOptional", "softmaxMaxOptional", "keyIn"] {
            assert_eq!(role(n, CONST_T), Role::In, "{n}");
        }
        // Case matters: `*Out` needs a capital O; `y` must be the whole name.
        for n in ["dout", "layout", "timeout", "yy", "gamma", "ys", "outer", "output_"] {
            assert_eq!(role(n, CONST_T), Role::In, "{n}");
        }
        // `Optional` is only stripped as a suffix.
        assert_eq!(role("outOptionalX", CONST_T), Role::In);
    }

    #[test]
    fn const_anywhere_in_the_type_counts() {
        // A const tensor list, and bindgen's spelling of C++ `const aclTensor *` are both const.
        assert_eq!(role("tensors", "*constaclTensorList"), Role::In);
        assert_eq!(role("x", "*constaclTensorList"), Role::In);
        assert_eq!(role("out", "*mutaclTensorList"), Role::Out);
    }

    // ---- classify ----

    #[test]
    fn classify_tensors_carry_roles() {
        assert_eq!(classify("self", CONST_T), ArgKind::Tensor(Role::In));
        assert_eq!(classify("out", MUT_T), ArgKind::Tensor(Role::Out));
        assert_eq!(classify("selfRef", CONST_T), ArgKind::Tensor(Role::InOut));
        // Lists before tensors: `aclTensorList` contains `aclTensor`.
        assert_eq!(classify("tensors", "*constaclTensorList"), ArgKind::TensorList(Role::In));
        assert_eq!(classify("out", "*mutaclTensorList"), ArgKind::TensorList(Role::Out));
    }

    #[test]
    fn classify_handles() {
        assert_eq!(classify("alpha", "*constaclScalar"), ArgKind::Scalar);
        // Scalar lists are not bound (checked before `aclScalar`, which they contain).
        assert_eq!(classify("scalars", "*constaclScalarList"), ArgKind::Opaque);
        assert_eq!(classify("normalizedShape", "*constaclIntArray"), ArgKind::IntArray);
        assert_eq!(classify("prefixOptional", "*constaclIntArray"), ArgKind::IntArray);
        assert_eq!(classify("weights", "*constaclFloatArray"), ArgKind::FloatArray);
        assert_eq!(classify("outputMask", "*constaclBoolArray"), ArgKind::BoolArray);
        // Non-tensor parameters never get a role, even with output-like names.
        assert_eq!(classify("selfRef", "*constaclScalar"), ArgKind::Scalar);
        assert_eq!(classify("out", "*mutaclIntArray"), ArgKind::IntArray);
    }

    #[test]
    fn classify_strings() {
        // aclnnFlashAttentionScore `char *inputLayout` (bindgen: `*mut ::std::os::raw::c_char`).
        assert_eq!(classify("inputLayout", "*mut::std::os::raw::c_char"), ArgKind::Str);
        assert_eq!(classify("inputLayout", "*const::std::os::raw::c_char"), ArgKind::Str);
        // char ** and a plain char are not strings.
        assert_eq!(classify("names", "*mut*mut::std::os::raw::c_char"), ArgKind::Opaque);
        assert_eq!(classify("c", "::std::os::raw::c_char"), ArgKind::Opaque);
    }

    #[test]
    fn classify_values() {
        // aclnnCast `const aclDataType dtype` (bindgen drops the value const), aclnnReduceSum.
        assert_eq!(classify("dtype", "aclDataType"), ArgKind::DType);
        assert_eq!(classify("keepDims", "bool"), ArgKind::Bool);
        assert_eq!(classify("eps", "f64"), ArgKind::Float);
        assert_eq!(classify("lr", "f32"), ArgKind::Float);
        // aclnnMatmul `int8_t cubeMathType`, aclnnSoftmax `int64_t dim`, aclnnEmbeddingDenseBackward
        // `uint64_t numWeights`, aclnnDivMod `int mode`.
        for ty in
            ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "::std::os::raw::c_int", "::std::os::raw::c_long"]
        {
            assert_eq!(classify("dim", ty), ArgKind::Int, "{ty}");
        }
    }

    #[test]
    fn classify_everything_else_is_opaque() {
        // Pointers to integers (the phase-1 tail) and types with no rule.
        for ty in [
            "*mutu64",
            "*mut*mutaclOpExecutor",
            "*mutf32",
            "*mut::std::os::raw::c_void",
            "usize",
            "::std::os::raw::c_uint",
            "::std::os::raw::c_ulong",
            "::std::os::raw::c_short",
        ] {
            assert_eq!(classify("x", ty), ArgKind::Opaque, "{ty}");
        }
    }

    #[test]
    fn display() {
        assert_eq!(ArgKind::Tensor(Role::InOut).to_string(), "tensor inout");
        assert_eq!(ArgKind::TensorList(Role::Out).to_string(), "tensor-list out");
        assert_eq!(ArgKind::IntArray.to_string(), "int-array");
        assert_eq!(ArgKind::Tensor(Role::In).role(), Some(Role::In));
        assert_eq!(ArgKind::Scalar.role(), None);
        assert_eq!(Role::InOut.variant(), "InOut");
    }
}
