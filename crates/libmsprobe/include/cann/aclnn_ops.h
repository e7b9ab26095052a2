/*
 * aclnn declarations bundled with msprobe-rs (written for this project from the public CANN op
 * signatures; see ../shared/reference/cann-abi.md §2–§3). build.rs runs bindgen over them to
 * generate the L2 interposer's phase-1 wrappers. When CANN headers are present at build time
 * (ASCEND_TOOLKIT_HOME / ASCEND_HOME_PATH), those are read instead and every
 * aclnn*GetWorkspaceSize they declare gets a wrapper.
 *
 * Parameter names matter: the generator classifies tensors by them (outputs: out, *Out,
 * *OutOptional, gradInput, y, indices-like non-const; in/out: *Ref), because const-ness in the
 * real headers is not reliable.
 */
#ifndef MSPROBE_BUNDLED_ACLNN_OPS_H
#define MSPROBE_BUNDLED_ACLNN_OPS_H
#include <stdbool.h>
#include <stdint.h>

typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclFloatArray aclFloatArray;
typedef struct aclBoolArray aclBoolArray;
typedef struct aclTensorList aclTensorList;
typedef struct aclScalarList aclScalarList;
typedef int32_t aclnnStatus;
typedef int32_t aclDataType;
typedef void *aclrtStream;

#define P1 uint64_t *workspaceSize, aclOpExecutor **executor

/* Arithmetic */
aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other, const aclScalar *alpha, aclTensor *out, P1);
aclnnStatus aclnnAddsGetWorkspaceSize(const aclTensor *self, const aclScalar *other, const aclScalar *alpha, aclTensor *out, P1);
aclnnStatus aclnnInplaceAddGetWorkspaceSize(const aclTensor *selfRef, const aclTensor *other, const aclScalar *alpha, P1);
aclnnStatus aclnnInplaceAddsGetWorkspaceSize(const aclTensor *selfRef, const aclScalar *other, const aclScalar *alpha, P1);
aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor *self, const aclTensor *other, const aclScalar *alpha, aclTensor *out, P1);
aclnnStatus aclnnSubsGetWorkspaceSize(const aclTensor *self, const aclScalar *other, const aclScalar *alpha, aclTensor *out, P1);
aclnnStatus aclnnInplaceSubGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other, const aclScalar *alpha, P1);
aclnnStatus aclnnInplaceSubsGetWorkspaceSize(aclTensor *selfRef, const aclScalar *other, const aclScalar *alpha, P1);
aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnMulsGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out, P1);
aclnnStatus aclnnInplaceMulGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other, P1);
aclnnStatus aclnnInplaceMulsGetWorkspaceSize(aclTensor *selfRef, const aclScalar *other, P1);
aclnnStatus aclnnDivGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnDivsGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out, P1);
aclnnStatus aclnnInplaceDivGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other, P1);
aclnnStatus aclnnInplaceDivsGetWorkspaceSize(aclTensor *selfRef, const aclScalar *other, P1);

/* Matmul */
aclnnStatus aclnnMatmulGetWorkspaceSize(const aclTensor *self, const aclTensor *mat2, aclTensor *out, int8_t cubeMathType, P1);
aclnnStatus aclnnMmGetWorkspaceSize(const aclTensor *self, const aclTensor *mat2, aclTensor *out, int8_t cubeMathType, P1);
aclnnStatus aclnnBatchMatMulGetWorkspaceSize(const aclTensor *self, const aclTensor *mat2, aclTensor *out, int8_t cubeMathType, P1);
aclnnStatus aclnnAddmmGetWorkspaceSize(const aclTensor *self, const aclTensor *mat1, const aclTensor *mat2, const aclScalar *beta, const aclScalar *alpha, aclTensor *out, int8_t cubeMathType, P1);
aclnnStatus aclnnInplaceAddmmGetWorkspaceSize(const aclTensor *selfRef, const aclTensor *mat1, const aclTensor *mat2, const aclScalar *beta, const aclScalar *alpha, int8_t cubeMathType, P1);

/* Activations */
aclnnStatus aclnnReluGetWorkspaceSize(const aclTensor *self, const aclTensor *out, P1);
aclnnStatus aclnnInplaceReluGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnGeluGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnGeluBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *gradInput, P1);
aclnnStatus aclnnSoftmaxGetWorkspaceSize(const aclTensor *self, int64_t dim, aclTensor *out, P1);
aclnnStatus aclnnSoftmaxBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *output, int64_t dim, aclTensor *out, P1);
aclnnStatus aclnnLogSoftmaxGetWorkspaceSize(const aclTensor *self, int64_t dim, aclTensor *out, P1);
aclnnStatus aclnnLogSoftmaxBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *output, int64_t dim, aclTensor *out, P1);
aclnnStatus aclnnThresholdBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclScalar *threshold, aclTensor *out, P1);
aclnnStatus aclnnSiluGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnSiluBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, aclTensor *gradInput, P1);
aclnnStatus aclnnSigmoidGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
/* MindSpore 2.10's aclnn path (classic nets): activations, Erf, GELU V2, Clamp, Pow, SplitWithSize, LinalgVectorNorm (mint.norm), Stack */
aclnnStatus aclnnTanhGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnErfGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnSinGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnCosGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnFloorGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnTruncGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnRsqrtGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnRoundGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnReciprocalGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnSignGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnSWhereGetWorkspaceSize(const aclTensor *condition, const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnMaximumGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnMinimumGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnLogicalAndGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnLogicalXorGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnLinspaceGetWorkspaceSize(const aclScalar *start, const aclScalar *end, int64_t steps, aclTensor *out, P1);
aclnnStatus aclnnEyeGetWorkspaceSize(int64_t n, int64_t m, aclTensor *out, P1);
aclnnStatus aclnnEqualGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnLogicalOrGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnBitwiseAndTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnBitwiseOrTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnBitwiseXorTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnAnyGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepdim, aclTensor *out, P1);
aclnnStatus aclnnAllGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepdim, aclTensor *out, P1);
aclnnStatus aclnnIsFiniteGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnIndexSelectGetWorkspaceSize(const aclTensor *self, int64_t dim, const aclTensor *index, aclTensor *out, P1);
aclnnStatus aclnnGatherGetWorkspaceSize(const aclTensor *self, const int64_t dim, const aclTensor *index, aclTensor *out, P1);
aclnnStatus aclnnTanhBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *output, aclTensor *gradInput, P1);
aclnnStatus aclnnSigmoidBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *output, aclTensor *gradInput, P1);
aclnnStatus aclnnGeluV2GetWorkspaceSize(const aclTensor *self, int64_t approximate, aclTensor *out, P1);
aclnnStatus aclnnGeluBackwardV2GetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, char *approximate, aclTensor *gradInput, P1);
aclnnStatus aclnnClampGetWorkspaceSize(const aclTensor *self, const aclScalar *clipValueMin, const aclScalar *clipValueMax, aclTensor *out, P1);
aclnnStatus aclnnClampMinGetWorkspaceSize(const aclTensor *self, const aclScalar *clipValueMin, aclTensor *out, P1);
aclnnStatus aclnnClampMaxGetWorkspaceSize(const aclTensor *self, const aclScalar *clipValueMax, aclTensor *out, P1);
aclnnStatus aclnnInplaceClampMaxGetWorkspaceSize(aclTensor *selfRef, const aclScalar *clipValueMax, P1);
aclnnStatus aclnnClampTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *clipValueMin, const aclTensor *clipValueMax, aclTensor *out, P1);
aclnnStatus aclnnClampMinTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *clipValueMin, aclTensor *out, P1);
aclnnStatus aclnnClampMaxTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *clipValueMax, aclTensor *out, P1);
aclnnStatus aclnnInplaceClampMinTensorGetWorkspaceSize(aclTensor *selfRef, const aclTensor *clipValueMin, P1);
aclnnStatus aclnnInplaceClampMaxTensorGetWorkspaceSize(aclTensor *selfRef, const aclTensor *clipValueMax, P1);
aclnnStatus aclnnPowTensorTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *exponent, aclTensor *out, P1);
aclnnStatus aclnnPowTensorScalarGetWorkspaceSize(const aclTensor *self, const aclScalar *exponent, aclTensor *out, P1);
aclnnStatus aclnnSplitWithSizeGetWorkspaceSize(const aclTensor *self, const aclIntArray *splitSize, int64_t dim, aclTensorList *out, P1);
aclnnStatus aclnnLinalgVectorNormGetWorkspaceSize(const aclTensor *self, const aclScalar *ord, const aclIntArray *dims, bool keepDims, const aclDataType dtype, aclTensor *out, P1);
aclnnStatus aclnnStackGetWorkspaceSize(const aclTensorList *tensors, int64_t dim, aclTensor *out, P1);

/* Normalisation */
aclnnStatus aclnnLayerNormGetWorkspaceSize(const aclTensor *input, const aclIntArray *normalizedShape, const aclTensor *weightOptional, const aclTensor *biasOptional, double eps, aclTensor *out, aclTensor *meanOutOptional, aclTensor *rstdOutOptional, P1);
aclnnStatus aclnnLayerNormBackwardGetWorkspaceSize(const aclTensor *gradOut, const aclTensor *input, const aclIntArray *normalizedShape, const aclTensor *mean, const aclTensor *rstd, const aclTensor *weightOptional, const aclTensor *biasOptional, const aclBoolArray *outputMask, aclTensor *gradInputOut, aclTensor *gradWeightOut, aclTensor *gradBiasOut, P1);

/* Index and loss */
aclnnStatus aclnnEmbeddingGetWorkspaceSize(const aclTensor *weight, const aclTensor *indices, const aclTensor *out, P1);
aclnnStatus aclnnEmbeddingDenseBackwardGetWorkspaceSize(const aclTensor *grad, const aclTensor *indices, uint64_t numWeights, uint64_t paddingIdx, bool scaleGradByFreq, const aclTensor *out, P1);
aclnnStatus aclnnNLLLossGetWorkspaceSize(const aclTensor *self, const aclTensor *target, const aclTensor *weight, int64_t reduction, int64_t ignoreIndex, aclTensor *out, aclTensor *totalWeightOut, P1);
aclnnStatus aclnnNLLLossBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *target, const aclTensor *weight, int64_t reduction, int64_t ignoreIndex, const aclTensor *totalWeight, aclTensor *out, P1);
aclnnStatus aclnnMseLossGetWorkspaceSize(const aclTensor *self, const aclTensor *target, int64_t reduction, aclTensor *out, P1);

/* Conversion, reduction */
aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor *self, const aclDataType dtype, aclTensor *out, P1);
aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor *self, const aclIntArray *dims, bool keepDims, aclDataType dtype, aclTensor *out, P1);
aclnnStatus aclnnReduceNansumGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepDim, aclDataType dtype, aclTensor *out, P1);
aclnnStatus aclnnRepeatInterleaveGetWorkspaceSize(const aclTensor *self, const aclTensor *repeats, int64_t outputSize, aclTensor *out, P1);
aclnnStatus aclnnRepeatInterleaveWithDimGetWorkspaceSize(const aclTensor *self, const aclTensor *repeats, int64_t dim, int64_t outputSize, aclTensor *out, P1);
aclnnStatus aclnnRepeatInterleaveIntGetWorkspaceSize(const aclTensor *self, int64_t repeats, int64_t outputSize, aclTensor *out, P1);
aclnnStatus aclnnRepeatInterleaveIntWithDimGetWorkspaceSize(const aclTensor *self, int64_t repeats, int64_t dim, int64_t outputSize, aclTensor *out, P1);
aclnnStatus aclnnRepeatInterleaveTensorGetWorkspaceSize(const aclTensor *repeats, int64_t outputSize, aclTensor *out, P1);
aclnnStatus aclnnIndexAddGetWorkspaceSize(const aclTensor *self, const int64_t dim, const aclTensor *index, const aclTensor *source, const aclScalar *alpha, aclTensor *out, P1);
aclnnStatus aclnnBincountGetWorkspaceSize(const aclTensor *self, const aclTensor *weights, int64_t minlength, aclTensor *out, P1);
aclnnStatus aclnnPreluGetWorkspaceSize(const aclTensor *self, const aclTensor *weight, aclTensor *out, P1);
aclnnStatus aclnnPreluBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *weight, aclTensor *gradInput, aclTensor *gradWeight, P1);
aclnnStatus aclnnGluGetWorkspaceSize(const aclTensor *self, int64_t dim, const aclTensor *out, P1);
aclnnStatus aclnnGluBackwardGetWorkspaceSize(const aclTensor *gradOut, const aclTensor *self, int64_t dim, const aclTensor *out, P1);
aclnnStatus aclnnSwiGluGetWorkspaceSize(const aclTensor *x, int64_t dim, const aclTensor *out, P1);
aclnnStatus aclnnSwiGluGradGetWorkspaceSize(const aclTensor *yGrad, const aclTensor *x, int64_t dim, const aclTensor *out, P1);
aclnnStatus aclnnRmsNormGetWorkspaceSize(const aclTensor *x, const aclTensor *gamma, double epsilon, const aclTensor *yOut, const aclTensor *rstdOut, P1);
aclnnStatus aclnnRmsNormGradGetWorkspaceSize(const aclTensor *dy, const aclTensor *x, const aclTensor *rstd, const aclTensor *gamma, const aclTensor *dxOut, const aclTensor *dgammaOut, P1);
aclnnStatus aclnnAddRmsNormGetWorkspaceSize(const aclTensor *x1, const aclTensor *x2, const aclTensor *gamma, double epsilon, const aclTensor *yOut, const aclTensor *rstdOut, const aclTensor *xOut, P1);
aclnnStatus aclnnFastGeluGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnFastGeluBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, aclTensor *gradInput, P1);
aclnnStatus aclnnScaledMaskedSoftmaxGetWorkspaceSize(const aclTensor *x, const aclTensor *mask, double scale, bool fixTriuMask, aclTensor *y, P1);
aclnnStatus aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *y, const aclTensor *mask, double scale, bool fixTriuMask, aclTensor *out, P1);
aclnnStatus aclnnIndexFillTensorGetWorkspaceSize(const aclTensor *self, int64_t dim, const aclIntArray *index, const aclScalar *value, aclTensor *out, P1);
aclnnStatus aclnnInplaceIndexFillTensorGetWorkspaceSize(aclTensor *selfRef, int64_t dim, const aclIntArray *index, const aclScalar *value, P1);
aclnnStatus aclnnStdMeanCorrectionGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, int64_t correction, bool keepdim, aclTensor *stdOut, aclTensor *meanOut, P1);
aclnnStatus aclnnDotGetWorkspaceSize(const aclTensor *self, const aclTensor *tensor, aclTensor *out, P1);
aclnnStatus aclnnKthvalueGetWorkspaceSize(const aclTensor *self, int64_t k, int64_t dim, bool keepdim, aclTensor *valuesOut, aclTensor *indicesOut, P1);
aclnnStatus aclnnCummaxGetWorkspaceSize(const aclTensor *self, int64_t dim, aclTensor *valuesOut, aclTensor *indicesOut, P1);
aclnnStatus aclnnLinalgCrossGetWorkspaceSize(const aclTensor *self, const aclTensor *other, int64_t dim, aclTensor *out, P1);
aclnnStatus aclnnAdaptiveMaxPool2dGetWorkspaceSize(const aclTensor *self, const aclIntArray *outputSize, aclTensor *outputOut, aclTensor *indicesOut, P1);
aclnnStatus aclnnAdaptiveMaxPool2dBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *indices, aclTensor *gradInput, P1);
aclnnStatus aclnnCdistGetWorkspaceSize(const aclTensor *x1, const aclTensor *x2, float p, int64_t compute_mode, aclTensor *out, P1);
aclnnStatus aclnnLeftShiftGetWorkspaceSize(const aclTensor *self, const aclTensor *shiftBits, aclTensor *out, P1);
aclnnStatus aclnnLeftShiftsGetWorkspaceSize(const aclTensor *self, const aclScalar *shiftBits, aclTensor *out, P1);
aclnnStatus aclnnRightShiftGetWorkspaceSize(const aclTensor *self, const aclTensor *shiftBits, aclTensor *out, P1);
aclnnStatus aclnnIsCloseGetWorkspaceSize(const aclTensor *self, const aclTensor *other, double rtol, double atol, bool equalNan, aclTensor *out, P1);
aclnnStatus aclnnMeanGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepDim, aclDataType dtype, aclTensor *out, P1);
aclnnStatus aclnnMaxGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnMinGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnAminmaxAllGetWorkspaceSize(const aclTensor *self, aclTensor *minOut, aclTensor *maxOut, P1);
aclnnStatus aclnnAminmaxGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepDim, aclTensor *minOut, aclTensor *maxOut, P1);
aclnnStatus aclnnNormGetWorkspaceSize(const aclTensor *self, const aclScalar *pScalar, const aclIntArray *dim, bool keepdim, aclTensor *out, P1);
aclnnStatus aclnnNanToNumGetWorkspaceSize(const aclTensor *self, float nan, float posInf, float negInf, aclTensor *out, P1);
aclnnStatus aclnnMaxDimGetWorkspaceSize(const aclTensor *self, int64_t dim, bool keepdim, aclTensor *out, aclTensor *indices, P1);
aclnnStatus aclnnArgMaxGetWorkspaceSize(const aclTensor *self, int64_t dim, bool keepdim, aclTensor *out, P1);
aclnnStatus aclnnPermuteGetWorkspaceSize(const aclTensor *self, const aclIntArray *dims, aclTensor *out, P1);
aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor *selfRef, const aclTensor *src, P1);
aclnnStatus aclnnCatGetWorkspaceSize(const aclTensorList *tensors, int64_t dim, aclTensor *out, P1);
aclnnStatus aclnnSumGetWorkspaceSize(const aclTensorList *tensors, aclTensor *out, P1);
aclnnStatus aclnnInplaceZeroGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceOneGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnRepeatGetWorkspaceSize(const aclTensor *self, const aclIntArray *repeats, aclTensor *out, P1);
aclnnStatus aclnnLogGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnExpGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnNegGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnSqrtGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnAbsGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnInplaceFillScalarGetWorkspaceSize(aclTensor *selfRef, const aclScalar *value, P1);
aclnnStatus aclnnArangeGetWorkspaceSize(const aclScalar *start, const aclScalar *end, const aclScalar *step, aclTensor *out, P1);
aclnnStatus aclnnTrilGetWorkspaceSize(const aclTensor *self, int64_t diagonal, aclTensor *out, P1);
aclnnStatus aclnnTriuGetWorkspaceSize(const aclTensor *self, int64_t diagonal, aclTensor *out, P1);
aclnnStatus aclnnInplaceTrilGetWorkspaceSize(aclTensor *selfRef, int64_t diagonal, P1);
aclnnStatus aclnnInplaceTriuGetWorkspaceSize(aclTensor *selfRef, int64_t diagonal, P1);
aclnnStatus aclnnLogicalNotGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnEqTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnEqScalarGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out, P1);
aclnnStatus aclnnNeTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnNeScalarGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out, P1);
aclnnStatus aclnnGtTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnGtScalarGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out, P1);
aclnnStatus aclnnGeTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnGeScalarGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out, P1);
aclnnStatus aclnnLtTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnLtScalarGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out, P1);
aclnnStatus aclnnLeTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnLeScalarGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out, P1);
aclnnStatus aclnnInplaceLogicalNotGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnBitwiseNotGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnInplaceFillTensorGetWorkspaceSize(aclTensor *selfRef, const aclTensor *value, P1);
aclnnStatus aclnnInplaceMaskedFillScalarGetWorkspaceSize(aclTensor *selfRef, const aclTensor *mask, const aclScalar *value, P1);
aclnnStatus aclnnInplaceMaskedFillTensorGetWorkspaceSize(aclTensor *selfRef, const aclTensor *mask, const aclTensor *value, P1);
aclnnStatus aclnnAddcdivGetWorkspaceSize(const aclTensor *self, const aclTensor *tensor1, const aclTensor *tensor2, const aclScalar *value, aclTensor *out, P1);
aclnnStatus aclnnInplaceAddcdivGetWorkspaceSize(aclTensor *selfRef, const aclTensor *tensor1, const aclTensor *tensor2, const aclScalar *value, P1);
aclnnStatus aclnnAddcmulGetWorkspaceSize(const aclTensor *self, const aclTensor *tensor1, const aclTensor *tensor2, const aclScalar *value, aclTensor *out, P1);
aclnnStatus aclnnInplaceAddcmulGetWorkspaceSize(aclTensor *selfRef, const aclTensor *tensor1, const aclTensor *tensor2, const aclScalar *value, P1);
aclnnStatus aclnnDropoutGenMaskV2GetWorkspaceSize(const aclIntArray *shape, double prob, int64_t seed, int64_t offset, aclDataType probDataType, aclTensor *out, P1);
aclnnStatus aclnnDropoutDoMaskGetWorkspaceSize(const aclTensor *self, const aclTensor *mask, double prob, aclTensor *out, P1);
aclnnStatus aclnnDropoutGetWorkspaceSize(const aclTensor *input, double p, bool train, int64_t seed, int64_t offset, aclTensor *out, aclTensor *maskOut, P1);

/* Optimisers, foreach */
aclnnStatus aclnnApplyAdamWGetWorkspaceSize(aclTensor *varRef, aclTensor *mRef, aclTensor *vRef, const aclTensor *beta1Power, const aclTensor *beta2Power, const aclTensor *lr, const aclTensor *weightDecay, const aclTensor *beta1, const aclTensor *beta2, const aclTensor *eps, const aclTensor *grad, const aclTensor *maxGradNormOptional, bool amsgrad, bool maximize, P1);
aclnnStatus aclnnApplyAdamWV2GetWorkspaceSize(aclTensor *varRef, aclTensor *mRef, aclTensor *vRef, aclTensor *maxGradNormOptionalRef, const aclTensor *grad, const aclTensor *step, float lr, float beta1, float beta2, float weightDecay, float eps, bool amsgrad, bool maximize, P1);
aclnnStatus aclnnForeachMulScalarV2GetWorkspaceSize(const aclTensorList *x, const aclScalar *scalar, aclTensorList *out, P1);
aclnnStatus aclnnForeachAddScalarV2GetWorkspaceSize(const aclTensorList *x, const aclScalar *scalar, aclTensorList *out, P1);
aclnnStatus aclnnForeachDivScalarV2GetWorkspaceSize(const aclTensorList *x, const aclScalar *scalar, aclTensorList *out, P1);
aclnnStatus aclnnForeachMaximumScalarV2GetWorkspaceSize(const aclTensorList *x, const aclScalar *scalar, aclTensorList *out, P1);
aclnnStatus aclnnForeachMinimumScalarV2GetWorkspaceSize(const aclTensorList *x, const aclScalar *scalar, aclTensorList *out, P1);
aclnnStatus aclnnForeachMaximumScalarGetWorkspaceSize(const aclTensorList *x, const aclTensor *scalar, aclTensorList *out, P1);
aclnnStatus aclnnForeachMinimumScalarGetWorkspaceSize(const aclTensorList *x, const aclTensor *scalar, aclTensorList *out, P1);
aclnnStatus aclnnForeachNonFiniteCheckAndUnscaleGetWorkspaceSize(const aclTensorList *scaledGrads, const aclTensor *foundInfRef, const aclTensor *invScale, P1);
aclnnStatus aclnnAmpUpdateScaleGetWorkspaceSize(const aclTensor *currentScale, const aclTensor *growthTracker, const aclTensor *foundInf, double growthFactor, double backoffFactor, int64_t growthInterval, const aclTensor *updatedScaleOut, const aclTensor *updatedGrowthTrackerOut, P1);
aclnnStatus aclnnForeachAddScalarListGetWorkspaceSize(const aclTensorList *x, const aclScalarList *scalars, aclTensorList *out, P1);
aclnnStatus aclnnForeachMulScalarListGetWorkspaceSize(const aclTensorList *x, const aclScalarList *scalars, aclTensorList *out, P1);
aclnnStatus aclnnForeachDivScalarListGetWorkspaceSize(const aclTensorList *x, const aclScalarList *scalars, aclTensorList *out, P1);
aclnnStatus aclnnForeachAddListV2GetWorkspaceSize(const aclTensorList *x1, const aclTensorList *x2, const aclScalar *alpha, aclTensorList *out, P1);
aclnnStatus aclnnForeachMulListGetWorkspaceSize(const aclTensorList *x1, const aclTensorList *x2, aclTensorList *out, P1);
aclnnStatus aclnnForeachDivListGetWorkspaceSize(const aclTensorList *x1, const aclTensorList *x2, aclTensorList *out, P1);
aclnnStatus aclnnForeachLerpScalarGetWorkspaceSize(const aclTensorList *x1, const aclTensorList *x2, const aclScalar *weight, aclTensorList *out, P1);
aclnnStatus aclnnForeachAddcmulScalarV2GetWorkspaceSize(const aclTensorList *x1, const aclTensorList *x2, const aclTensorList *x3, const aclScalar *scalar, aclTensorList *out, P1);
aclnnStatus aclnnForeachAddcdivScalarV2GetWorkspaceSize(const aclTensorList *x1, const aclTensorList *x2, const aclTensorList *x3, const aclScalar *scalar, aclTensorList *out, P1);
aclnnStatus aclnnForeachSqrtGetWorkspaceSize(const aclTensorList *x, aclTensorList *out, P1);

/* Convolution, batch norm, pooling */
aclnnStatus aclnnConvolutionGetWorkspaceSize(const aclTensor *input, const aclTensor *weight, const aclTensor *bias, const aclIntArray *stride, const aclIntArray *padding, const aclIntArray *dilation, bool transposed, const aclIntArray *outputPadding, const int64_t groups, aclTensor *output, int8_t cubeMathType, P1);
aclnnStatus aclnnConvolutionBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *input, const aclTensor *weight, const aclIntArray *biasSizes, const aclIntArray *stride, const aclIntArray *padding, const aclIntArray *dilation, bool transposed, const aclIntArray *outputPadding, int groups, const aclBoolArray *outputMask, int8_t cubeMathType, aclTensor *gradInput, aclTensor *gradWeight, aclTensor *gradBias, P1);
aclnnStatus aclnnBatchNormGetWorkspaceSize(const aclTensor *input, const aclTensor *weight, const aclTensor *bias, aclTensor *runningMean, aclTensor *runningVar, bool training, double momentum, double eps, aclTensor *output, aclTensor *saveMean, aclTensor *saveInvstd, P1);
aclnnStatus aclnnBatchNormBackwardGetWorkspaceSize(const aclTensor *gradOut, const aclTensor *input, const aclTensor *weight, const aclTensor *runningMean, const aclTensor *runningVar, const aclTensor *saveMean, const aclTensor *saveInvstd, bool training, double eps, const aclBoolArray *outputMask, aclTensor *gradInput, aclTensor *gradWeight, aclTensor *gradBias, P1);
aclnnStatus aclnnMaxPool2dWithMaskGetWorkspaceSize(const aclTensor *self, const aclIntArray *kernelSize, const aclIntArray *stride, const aclIntArray *padding, const aclIntArray *dilation, bool ceilMode, aclTensor *out, aclTensor *indices, P1);
aclnnStatus aclnnMaxPool2dWithIndicesGetWorkspaceSize(const aclTensor *self, const aclIntArray *kernelSize, const aclIntArray *stride, const aclIntArray *padding, const aclIntArray *dilation, bool ceilMode, aclTensor *out, aclTensor *indices, P1);
aclnnStatus aclnnMaxPool2dWithMaskBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *indices, const aclIntArray *kernelSize, const aclIntArray *stride, const aclIntArray *padding, const aclIntArray *dilation, bool ceilMode, aclTensor *gradInput, P1);
aclnnStatus aclnnMaxPool2dWithIndicesBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *indices, const aclIntArray *kernelSize, const aclIntArray *stride, const aclIntArray *padding, const aclIntArray *dilation, bool ceilMode, aclTensor *gradInput, P1);
aclnnStatus aclnnAvgPool2dGetWorkspaceSize(const aclTensor *self, const aclIntArray *kernelSize, const aclIntArray *strides, const aclIntArray *paddings, bool ceilMode, bool countIncludePad, int64_t divisorOverride, int8_t cubeMathType, aclTensor *out, P1);
aclnnStatus aclnnAvgPool2dBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclIntArray *kernelSize, const aclIntArray *stride, const aclIntArray *padding, bool ceilMode, bool countIncludePad, int64_t divisorOverride, int8_t cubeMathType, aclTensor *gradInput, P1);
aclnnStatus aclnnAdaptiveAvgPool2dGetWorkspaceSize(const aclTensor *self, const aclIntArray *outputSize, aclTensor *out, P1);
aclnnStatus aclnnAdaptiveAvgPool2dBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnUpsampleNearest2dGetWorkspaceSize(const aclTensor *self, const aclIntArray *outputSize, aclTensor *out, P1);
aclnnStatus aclnnUpsampleNearest2dV2GetWorkspaceSize(const aclTensor *self, const aclIntArray *outputSize, float scalesH, float scalesW, aclTensor *out, P1);
aclnnStatus aclnnUpsampleNearest2dBackwardGetWorkspaceSize(const aclTensor *gradOut, const aclIntArray *outputSize, const aclIntArray *inputSize, double scalesH, double scalesW, aclTensor *gradInput, P1);
aclnnStatus aclnnUpsampleBilinear2dGetWorkspaceSize(const aclTensor *self, const aclIntArray *outputSize, bool alignCorners, double scalesH, double scalesW, aclTensor *out, P1);
aclnnStatus aclnnUpsampleBilinear2dBackwardGetWorkspaceSize(const aclTensor *gradOut, const aclIntArray *outputSize, const aclIntArray *inputSize, bool alignCorners, double scalesH, double scalesW, aclTensor *out, P1);
aclnnStatus aclnnUpsampleBilinear2dBackwardV2GetWorkspaceSize(const aclTensor *gradOut, const aclIntArray *outputSize, const aclIntArray *inputSize, bool alignCorners, double scalesH, double scalesW, aclTensor *out, P1);
aclnnStatus aclnnReflectionPad1dGetWorkspaceSize(const aclTensor *self, const aclIntArray *padding, aclTensor *out, P1);
aclnnStatus aclnnReflectionPad1dBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclIntArray *padding, aclTensor *gradInput, P1);
aclnnStatus aclnnReflectionPad2dGetWorkspaceSize(const aclTensor *self, const aclIntArray *padding, aclTensor *out, P1);
aclnnStatus aclnnReflectionPad2dBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclIntArray *padding, aclTensor *gradInput, P1);
aclnnStatus aclnnReplicationPad1dGetWorkspaceSize(const aclTensor *self, const aclIntArray *padding, aclTensor *out, P1);
aclnnStatus aclnnReplicationPad1dBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclIntArray *padding, aclTensor *gradInput, P1);
aclnnStatus aclnnReplicationPad2dGetWorkspaceSize(const aclTensor *self, const aclIntArray *padding, aclTensor *out, P1);
aclnnStatus aclnnReplicationPad2dBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclIntArray *padding, aclTensor *gradInput, P1);

/* Along a dimension; remainder, lerp, mse backward (torch_npu's sort/topk/cumsum/scatter/var/... paths) */
aclnnStatus aclnnMinDimGetWorkspaceSize(const aclTensor *self, int64_t dim, bool keepdim, aclTensor *out, aclTensor *indices, P1);
aclnnStatus aclnnArgMinGetWorkspaceSize(const aclTensor *self, int64_t dim, bool keepdim, aclTensor *out, P1);
aclnnStatus aclnnCumsumGetWorkspaceSize(const aclTensor *self, int64_t dim, aclDataType dtype, aclTensor *out, P1);
aclnnStatus aclnnCumprodGetWorkspaceSize(const aclTensor *input, const aclScalar *dim, aclDataType dtype, aclTensor *out, P1);
aclnnStatus aclnnSortGetWorkspaceSize(const aclTensor *self, bool stable, int64_t dim, bool descending, aclTensor *valuesOut, aclTensor *indicesOut, P1);
aclnnStatus aclnnTopkGetWorkspaceSize(const aclTensor *self, int64_t k, int64_t dim, bool largest, bool sorted, aclTensor *valuesOut, aclTensor *indicesOut, P1);
aclnnStatus aclnnFlipGetWorkspaceSize(const aclTensor *self, const aclIntArray *dims, aclTensor *out, P1);
aclnnStatus aclnnRollGetWorkspaceSize(const aclTensor *x, const aclIntArray *shifts, const aclIntArray *dims, aclTensor *out, P1);
aclnnStatus aclnnScatterGetWorkspaceSize(const aclTensor *self, int64_t dim, const aclTensor *index, const aclTensor *src, int64_t reduce, aclTensor *out, P1);
aclnnStatus aclnnInplaceScatterGetWorkspaceSize(aclTensor *selfRef, int64_t dim, const aclTensor *index, const aclTensor *src, int64_t reduce, P1);
aclnnStatus aclnnScatterValueGetWorkspaceSize(const aclTensor *self, int64_t dim, const aclTensor *index, const aclScalar *value, int64_t reduce, aclTensor *out, P1);
aclnnStatus aclnnInplaceScatterValueGetWorkspaceSize(aclTensor *selfRef, int64_t dim, const aclTensor *index, const aclScalar *value, int64_t reduce, P1);
aclnnStatus aclnnScatterAddGetWorkspaceSize(const aclTensor *self, int64_t dim, const aclTensor *index, const aclTensor *src, aclTensor *out, P1);
aclnnStatus aclnnVarCorrectionGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, int64_t correction, bool keepdim, aclTensor *out, P1);
aclnnStatus aclnnStdGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, int64_t correction, bool keepdim, aclTensor *out, P1);
aclnnStatus aclnnProdGetWorkspaceSize(const aclTensor *self, aclDataType dtype, aclTensor *out, P1);
aclnnStatus aclnnProdDimGetWorkspaceSize(const aclTensor *self, int64_t dim, bool keepDim, aclDataType dtype, aclTensor *out, P1);
aclnnStatus aclnnLogSumExpGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepDim, aclTensor *out, P1);
aclnnStatus aclnnLerpGetWorkspaceSize(const aclTensor *self, const aclTensor *end, const aclTensor *weight, aclTensor *out, P1);
aclnnStatus aclnnLerpsGetWorkspaceSize(const aclTensor *self, const aclTensor *end, const aclScalar *weight, aclTensor *out, P1);
aclnnStatus aclnnInplaceLerpGetWorkspaceSize(aclTensor *selfRef, const aclTensor *end, const aclTensor *weight, P1);
aclnnStatus aclnnInplaceLerpsGetWorkspaceSize(aclTensor *selfRef, const aclTensor *end, const aclScalar *weight, P1);
aclnnStatus aclnnMseLossBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *target, int64_t reduction, aclTensor *out, P1);
aclnnStatus aclnnRemainderTensorTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnRemainderTensorScalarGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out, P1);
aclnnStatus aclnnInplaceRemainderTensorTensorGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other, P1);
aclnnStatus aclnnInplaceRemainderTensorScalarGetWorkspaceSize(aclTensor *selfRef, const aclScalar *other, P1);
aclnnStatus aclnnFmodTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnFmodScalarGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out, P1);
aclnnStatus aclnnInplaceFmodTensorGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other, P1);
aclnnStatus aclnnInplaceFmodScalarGetWorkspaceSize(aclTensor *selfRef, const aclScalar *other, P1);
aclnnStatus aclnnFloorDivideGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnFloorDividesGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out, P1);
aclnnStatus aclnnInplaceFloorDivideGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other, P1);
aclnnStatus aclnnInplaceFloorDividesGetWorkspaceSize(aclTensor *selfRef, const aclScalar *other, P1);
aclnnStatus aclnnAtan2GetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnInplaceAtan2GetWorkspaceSize(aclTensor *selfRef, const aclTensor *other, P1);
aclnnStatus aclnnDivModGetWorkspaceSize(const aclTensor *self, const aclTensor *other, int mode, aclTensor *out, P1);
aclnnStatus aclnnDivModsGetWorkspaceSize(const aclTensor *self, const aclScalar *other, int mode, aclTensor *out, P1);
aclnnStatus aclnnInplaceDivModGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other, int mode, P1);
aclnnStatus aclnnInplaceDivModsGetWorkspaceSize(aclTensor *selfRef, const aclScalar *other, int mode, P1);
aclnnStatus aclnnNonzeroGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnNonzeroV2GetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnMaskedSelectGetWorkspaceSize(const aclTensor *self, const aclTensor *mask, aclTensor *out, P1);
aclnnStatus aclnnUniqueGetWorkspaceSize(const aclTensor *self, bool sorted, bool returnInverse, aclTensor *valueOut, aclTensor *inverseOut, P1);
aclnnStatus aclnnUnique2GetWorkspaceSize(const aclTensor *self, bool sorted, bool returnInverse, bool returnCounts, aclTensor *valueOut, aclTensor *inverseOut, aclTensor *countsOut, P1);
aclnnStatus aclnnUniqueConsecutiveGetWorkspaceSize(const aclTensor *self, bool returnInverse, bool returnCounts, int64_t dim, aclTensor *valueOut, aclTensor *inverseOut, aclTensor *countsOut, P1);
/* math and activations from a probe of common torch ops on torch_npu (expm1 … elu and their backward kernels) */
aclnnStatus aclnnExpm1GetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnErfinvGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnLog1pGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnLog2GetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnLog10GetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnCeilGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnTanGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnAtanGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnAsinGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnAcosGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnSinhGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnCoshGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnHardswishGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnMishGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnLogSigmoidGetWorkspaceSize(const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnHardswishBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, aclTensor *out, P1);
aclnnStatus aclnnMishBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, aclTensor *gradInput, P1);
aclnnStatus aclnnLogSigmoidForwardGetWorkspaceSize(const aclTensor *self, aclTensor *out, aclTensor *buffer, P1);
aclnnStatus aclnnLogSigmoidBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *buffer, aclTensor *gradInput, P1);
aclnnStatus aclnnLeakyReluGetWorkspaceSize(const aclTensor *self, const aclScalar *negativeSlope, aclTensor *out, P1);
aclnnStatus aclnnLeakyReluBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclScalar *negativeSlope, bool selfIsResult, aclTensor *out, P1);
aclnnStatus aclnnHardtanhGetWorkspaceSize(const aclTensor *self, const aclScalar *clipValueMin, const aclScalar *clipValueMax, aclTensor *out, P1);
aclnnStatus aclnnHardtanhBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclScalar *min, const aclScalar *max, aclTensor *out, P1);
aclnnStatus aclnnSoftplusGetWorkspaceSize(const aclTensor *self, const aclScalar *beta, const aclScalar *threshold, aclTensor *out, P1);
aclnnStatus aclnnSoftplusBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclScalar *beta, const aclScalar *threshold, aclTensor *gradInput, P1);
aclnnStatus aclnnEluGetWorkspaceSize(const aclTensor *self, const aclScalar *alpha, const aclScalar *scale, const aclScalar *inputScale, aclTensor *out, P1);
aclnnStatus aclnnEluBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclScalar *alpha, const aclScalar *scale, const aclScalar *inputScale, bool isResult, const aclTensor *selfOrResult, aclTensor *gradInput, P1);
aclnnStatus aclnnPowScalarTensorGetWorkspaceSize(const aclScalar *self, const aclTensor *exponent, aclTensor *out, P1);
aclnnStatus aclnnRemainderScalarTensorGetWorkspaceSize(const aclScalar *self, const aclTensor *other, aclTensor *out, P1);
aclnnStatus aclnnInplaceLeakyReluGetWorkspaceSize(aclTensor *selfRef, const aclScalar *negativeSlope, P1);
aclnnStatus aclnnInplaceHardtanhGetWorkspaceSize(aclTensor *selfRef, const aclScalar *clipValueMin, const aclScalar *clipValueMax, P1);
aclnnStatus aclnnInplaceHardswishGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceMishGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceEluGetWorkspaceSize(aclTensor *selfRef, const aclScalar *alpha, const aclScalar *scale, const aclScalar *inputScale, P1);
aclnnStatus aclnnInplaceSigmoidGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceTanhGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceExpGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceSqrtGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceLogGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceRsqrtGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceReciprocalGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceSinGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceCosGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceErfGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceFloorGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceRoundGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceTruncGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceCeilGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceExpm1GetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceErfinvGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplaceNormalGetWorkspaceSize(const aclTensor *selfRef, float mean, float std, int64_t seed, int64_t offset, P1);
aclnnStatus aclnnInplaceRandomGetWorkspaceSize(const aclTensor *selfRef, int64_t from, int64_t to, int64_t seed, int64_t offset, P1);
aclnnStatus aclnnInplaceUniformGetWorkspaceSize(const aclTensor *selfRef, double from, double to, uint64_t seed, uint64_t offset, P1);
aclnnStatus aclnnInplaceLog1pGetWorkspaceSize(aclTensor *selfRef, P1);
aclnnStatus aclnnInplacePowTensorScalarGetWorkspaceSize(aclTensor *selfRef, const aclScalar *exponent, P1);
aclnnStatus aclnnGroupNormGetWorkspaceSize(const aclTensor *self, const aclTensor *gammaOptional, const aclTensor *betaOptional, int64_t N, int64_t C, int64_t HxW, int64_t group, double eps, aclTensor *out, aclTensor *meanOut, aclTensor *rstdOut, P1);
aclnnStatus aclnnGroupNormBackwardGetWorkspaceSize(const aclTensor *gradOut, const aclTensor *input, const aclTensor *mean, const aclTensor *rstd, const aclTensor *gamma, int64_t N, int64_t C, int64_t HxW, int64_t group, const aclBoolArray *outputMask, aclTensor *gradInput, aclTensor *gradGammaOut, aclTensor *gradBetaOut, P1);
/* losses (F.binary_cross_entropy(_with_logits), smooth_l1_loss, l1_loss, kl_div) and their backward */
aclnnStatus aclnnBinaryCrossEntropyGetWorkspaceSize(const aclTensor *self, const aclTensor *target, const aclTensor *weight, int64_t reduction, aclTensor *out, P1);
aclnnStatus aclnnBinaryCrossEntropyBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *target, const aclTensor *weightOptional, int64_t reduction, aclTensor *out, P1);
aclnnStatus aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(const aclTensor *self, const aclTensor *target, const aclTensor *weightOptional, const aclTensor *posWeightOptional, int64_t reduction, aclTensor *out, P1);
aclnnStatus aclnnBinaryCrossEntropyWithLogitsBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *target, const aclTensor *weightOptional, const aclTensor *posWeightOptional, int64_t reduction, aclTensor *out, P1);
aclnnStatus aclnnSmoothL1LossGetWorkspaceSize(const aclTensor *self, const aclTensor *target, int64_t reduction, float beta, aclTensor *result, P1);
aclnnStatus aclnnSmoothL1LossBackwardGetWorkspaceSize(const aclTensor *gradOut, const aclTensor *self, const aclTensor *target, int64_t reduction, float beta, aclTensor *gradInput, P1);
aclnnStatus aclnnL1LossGetWorkspaceSize(const aclTensor *self, const aclTensor *target, int64_t reduction, aclTensor *out, P1);
aclnnStatus aclnnL1LossBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *target, int64_t reduction, aclTensor *gradInput, P1);
aclnnStatus aclnnKlDivGetWorkspaceSize(const aclTensor *self, const aclTensor *target, int64_t reduction, bool logTarget, aclTensor *out, P1);
aclnnStatus aclnnKlDivBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, const aclTensor *target, int64_t reduction, bool logTarget, aclTensor *out, P1);
aclnnStatus aclnnIndexGetWorkspaceSize(const aclTensor *self, const aclTensorList *indices, aclTensor *out, P1);
aclnnStatus aclnnIndexPutImplGetWorkspaceSize(aclTensor *selfRef, const aclTensorList *indices, const aclTensor *values, const bool accumulate, const bool unsafe, P1);

/* Attention */
aclnnStatus aclnnFlashAttentionScoreGetWorkspaceSize(const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *realShiftOptional, const aclTensor *dropMaskOptional, const aclTensor *paddingMaskOptional, const aclTensor *attenMaskOptional, const aclIntArray *prefixOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char *inputLayout, int64_t innerPrecise, int64_t sparseMode, const aclTensor *softmaxMaxOut, const aclTensor *softmaxSumOut, const aclTensor *softmaxOutOut, const aclTensor *attentionOutOut, P1);
aclnnStatus aclnnFlashAttentionScoreGradGetWorkspaceSize(const aclTensor *query, const aclTensor *keyIn, const aclTensor *value, const aclTensor *dy, const aclTensor *pseShiftOptional, const aclTensor *dropMaskOptional, const aclTensor *paddingMaskOptional, const aclTensor *attenMaskOptional, const aclTensor *softmaxMaxOptional, const aclTensor *softmaxSumOptional, const aclTensor *softmaxInOptional, const aclTensor *attentionInOptional, const aclIntArray *prefixOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char *inputLayout, int64_t innerPrecise, int64_t sparseMode, const aclTensor *dqOut, const aclTensor *dkOut, const aclTensor *dvOut, const aclTensor *dpseOut, P1);

#undef P1
#endif
