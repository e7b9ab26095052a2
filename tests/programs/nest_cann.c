/* A stand-in CANN library whose launches make launches of their own through CANN's public names,
 * as real libraries do internally: aclopCompileAndExecute runs its op through aclopExecuteV2, and
 * HcclAllReduce (one rank) copies its buffer with an aclop "Identity" through aclopExecuteV2. The
 * calls go through the PLT (semantic interposition), so under LD_PRELOAD they reach libmsprobe's
 * exports: nested launches, which must pass through, be counted, and never be recorded inside (or
 * instead of) the outer launch. Device memory is host memory here; kernels run synchronously.
 *
 *   cc -shared -fPIC -o libnest_cann.so nest_cann.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int dtype, nd;
    int64_t dims[8];
} Desc;
typedef struct {
    void *addr;
    size_t size;
} Buf;

int aclrtSynchronizeStream(void *s) { (void)s; return 0; }
int aclrtMemcpy(void *dst, size_t dmax, const void *src, size_t n, int kind) {
    (void)kind;
    if (n > dmax) return 100000;
    memcpy(dst, src, n);
    return 0;
}
void *aclCreateTensorDesc(int dtype, int nd, const int64_t *dims, int format) {
    (void)format;
    Desc *d = calloc(1, sizeof *d);
    d->dtype = dtype;
    d->nd = nd;
    memcpy(d->dims, dims, sizeof(int64_t) * (size_t)nd);
    return d;
}
void *aclCreateDataBuffer(void *addr, size_t size) {
    Buf *b = malloc(sizeof *b);
    b->addr = addr;
    b->size = size;
    return b;
}
int aclGetTensorDescType(const Desc *d) { return d->dtype; }
size_t aclGetTensorDescNumDims(const Desc *d) { return (size_t)d->nd; }
int aclGetTensorDescDimV2(const Desc *d, size_t i, int64_t *v) { *v = d->dims[i]; return 0; }
void *aclGetDataBufferAddr(const Buf *b) { return b->addr; }
size_t aclGetDataBufferSizeV2(const Buf *b) { return b->size; }

static size_t numel(const Desc *d) {
    size_t n = 1;
    for (int i = 0; i < d->nd; i++) n *= (size_t)d->dims[i];
    return n;
}

/* "Add" (two float inputs) and "Identity" (one). */
int aclopExecuteV2(const char *op, int ni, Desc **id, Buf **in, int no, Desc **od, Buf **out, void *attr, void *s) {
    (void)od; (void)attr; (void)s;
    if (no != 1) return 100022;
    float *y = out[0]->addr;
    const float *a = in[0]->addr;
    size_t n = numel(id[0]);
    if (!strcmp(op, "Add") && ni == 2) {
        const float *b = in[1]->addr;
        for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
        return 0;
    }
    if (!strcmp(op, "Identity") && ni == 1) {
        memmove(y, a, n * sizeof(float));
        return 0;
    }
    return 100024;
}

int aclopCompileAndExecute(const char *op, int ni, Desc **id, Buf **in, int no, Desc **od, Buf **out, void *attr,
                           int engine, int flag, const char *path, void *s) {
    (void)engine; (void)flag; (void)path;
    return aclopExecuteV2(op, ni, id, in, no, od, out, attr, s); /* nested: through the PLT */
}

int HcclAllReduce(void *send, void *recv, uint64_t count, int dt, int op, void *comm, void *s) {
    (void)op; (void)comm;
    if (dt != 4) return 1; /* HCCL_DATA_TYPE_FP32 */
    int64_t dims[1] = {(int64_t)count};
    Desc *d = aclCreateTensorDesc(0, 1, dims, 2);
    Buf *bi = aclCreateDataBuffer(send, count * 4), *bo = aclCreateDataBuffer(recv, count * 4);
    int rc = aclopExecuteV2("Identity", 1, &d, &bi, 1, &d, &bo, NULL, s); /* nested: another kernel type */
    free(d); free(bi); free(bo);
    return rc ? 4 : 0;
}
int HcclGetRankSize(void *comm, uint32_t *n) { (void)comm; *n = 1; return 0; }
int HcclGetRankId(void *comm, uint32_t *r) { (void)comm; *r = 0; return 0; }
