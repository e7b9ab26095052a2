/* A client that links CANN directly (PLT calls, as torch_npu does for aclopCompileAndExecute and
 * the aclopSetAttr* setters): adds two vectors with the aclop "Add" op on the device and prints
 * the result. Under LD_PRELOAD=libmsprobe.so the call must be captured without any dlsym. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct aclTensorDesc aclTensorDesc;
typedef struct aclDataBuffer aclDataBuffer;
typedef struct aclopAttr aclopAttr;
int aclInit(const char *);
int aclrtSetDevice(int);
int aclrtMalloc(void **, size_t, int);
int aclrtMemcpy(void *, size_t, const void *, size_t, int);
int aclrtSynchronizeStream(void *);
aclTensorDesc *aclCreateTensorDesc(int, int, const int64_t *, int);
aclDataBuffer *aclCreateDataBuffer(void *, size_t);
aclopAttr *aclopCreateAttr(void);
int aclopSetAttrInt(aclopAttr *, const char *, int64_t);
int aclopCompileAndExecute(const char *, int, const aclTensorDesc *const[], const aclDataBuffer *const[], int,
                           const aclTensorDesc *const[], aclDataBuffer *const[], const aclopAttr *, int, int,
                           const char *, void *);

int main(void) {
    enum { N = 8 };
    float a[N], b[N], y[N];
    for (int i = 0; i < N; i++) { a[i] = (float)i; b[i] = 0.5f * (float)i; }
    if (aclInit(NULL) != 0 && aclInit(NULL) != 100002) return 1;
    if (aclrtSetDevice(0) != 0) return 1;
    void *da, *db, *dy;
    aclrtMalloc(&da, sizeof a, 0); aclrtMalloc(&db, sizeof b, 0); aclrtMalloc(&dy, sizeof y, 0);
    aclrtMemcpy(da, sizeof a, a, sizeof a, 1); aclrtMemcpy(db, sizeof b, b, sizeof b, 1);
    int64_t dims[1] = {N};
    const aclTensorDesc *in_d[2] = {aclCreateTensorDesc(0, 1, dims, 2), aclCreateTensorDesc(0, 1, dims, 2)};
    const aclDataBuffer *in_b[2] = {aclCreateDataBuffer(da, sizeof a), aclCreateDataBuffer(db, sizeof b)};
    const aclTensorDesc *out_d[1] = {aclCreateTensorDesc(0, 1, dims, 2)};
    aclDataBuffer *out_b[1] = {aclCreateDataBuffer(dy, sizeof y)};
    aclopAttr *attr = aclopCreateAttr();
    aclopSetAttrInt(attr, "demo_attr", 7);
    int rc = aclopCompileAndExecute("Add", 2, in_d, in_b, 1, out_d, out_b, attr, 0, 0, NULL, NULL);
    aclrtSynchronizeStream(NULL);
    aclrtMemcpy(y, sizeof y, dy, sizeof y, 2);
    printf("rc %d y[7] %.2f\n", rc, y[7]);
    return rc == 0 && y[7] == 10.5f ? 0 : 1;
}
