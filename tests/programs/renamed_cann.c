/* A client that opens CANN by an absolute path under a file name that is none of CANN's
 * (argv[1], e.g. a copy of the simulator library named libvendor-npu.so) and resolves every
 * function through dlsym on that handle, as frameworks do. It never looks up
 * aclrtSynchronizeStream, aclrtMemcpy or the aclop descriptor getters: the capture must find the
 * real ones itself. Runs a chain of kernels on one stream, each reading the previous one's output
 * (Mm -> Relu -> Add -> aclop Mul), then prints the result.
 *
 *   renamed_cann /path/libvendor-npu.so
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *P;
enum { ACL_FLOAT = 0, ACL_FORMAT_ND = 2, H2D = 1, D2H = 2, M = 4, K = 8, N = 6 };

static void *lib;
static void *sym(const char *name) {
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
        exit(2);
    }
    return f;
}
#define FN(ret, name, ...) ret (*name)(__VA_ARGS__) = (ret (*)(__VA_ARGS__))sym(#name)
#define CHECK(what, expr)                                        \
    do {                                                         \
        int rc_ = (expr);                                        \
        if (rc_ != 0) {                                          \
            fprintf(stderr, "%s failed with %d\n", what, rc_);   \
            return 1;                                            \
        }                                                        \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    FN(int, aclInit, const char *);
    FN(int, aclrtSetDevice, int32_t);
    FN(int, aclrtCreateStream, P *);
    FN(int, aclrtMalloc, P *, size_t, int);
    FN(int, aclrtMemcpyAsync, P, size_t, const void *, size_t, int, P);
    FN(int, aclrtSynchronizeDevice, void);
    FN(P, aclCreateTensor, const int64_t *, uint64_t, int, const int64_t *, int64_t, int, const int64_t *, uint64_t,
       P);
    FN(P, aclCreateScalar, P, int);
    FN(int, aclnnMmGetWorkspaceSize, P, P, P, int8_t, uint64_t *, P *);
    FN(int, aclnnMm, P, uint64_t, P, P);
    FN(int, aclnnReluGetWorkspaceSize, P, P, uint64_t *, P *);
    FN(int, aclnnRelu, P, uint64_t, P, P);
    FN(int, aclnnAddGetWorkspaceSize, P, P, P, P, uint64_t *, P *);
    FN(int, aclnnAdd, P, uint64_t, P, P);
    FN(P, aclCreateTensorDesc, int, int, const int64_t *, int);
    FN(P, aclCreateDataBuffer, P, size_t);
    FN(P, aclopCreateAttr, void);
    FN(int, aclopExecuteV2, const char *, int, P *, P *, int, P *, P *, P, P);

    int rc = aclInit(NULL);
    if (rc != 0 && rc != 100002) return 1;
    CHECK("aclrtSetDevice", aclrtSetDevice(0));
    P stream = NULL;
    CHECK("aclrtCreateStream", aclrtCreateStream(&stream));

    float x[M * K], w[K * N], y[M * N];
    for (int i = 0; i < M * K; i++) x[i] = (float)((i * 7) % 11) - 5.0f;
    for (int i = 0; i < K * N; i++) w[i] = (float)((i * 5) % 13) * 0.25f - 1.5f;
    P dx, dw, dh, da, ds, dy;
    CHECK("aclrtMalloc", aclrtMalloc(&dx, sizeof x, 0));
    CHECK("aclrtMalloc", aclrtMalloc(&dw, sizeof w, 0));
    CHECK("aclrtMalloc", aclrtMalloc(&dh, sizeof y, 0));
    CHECK("aclrtMalloc", aclrtMalloc(&da, sizeof y, 0));
    CHECK("aclrtMalloc", aclrtMalloc(&ds, sizeof y, 0));
    CHECK("aclrtMalloc", aclrtMalloc(&dy, sizeof y, 0));
    CHECK("aclrtMemcpyAsync", aclrtMemcpyAsync(dx, sizeof x, x, sizeof x, H2D, stream));
    CHECK("aclrtMemcpyAsync", aclrtMemcpyAsync(dw, sizeof w, w, sizeof w, H2D, stream));
    CHECK("aclrtSynchronizeDevice", aclrtSynchronizeDevice());

    int64_t sx[2] = {M, K}, sw[2] = {K, N}, sy[2] = {M, N};
    P X = aclCreateTensor(sx, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, sx, 2, dx);
    P W = aclCreateTensor(sw, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, sw, 2, dw);
    P H = aclCreateTensor(sy, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, sy, 2, dh);
    P A = aclCreateTensor(sy, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, sy, 2, da);
    P S = aclCreateTensor(sy, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, sy, 2, ds);
    float one = 1.0f;
    P alpha = aclCreateScalar(&one, ACL_FLOAT);

    uint64_t ws = 0;
    P ex = NULL, wsp = NULL;
    CHECK("aclnnMmGetWorkspaceSize", aclnnMmGetWorkspaceSize(X, W, H, 0, &ws, &ex));
    if (ws) CHECK("aclrtMalloc", aclrtMalloc(&wsp, ws, 0));
    CHECK("aclnnMm", aclnnMm(wsp, ws, ex, stream));
    CHECK("aclnnReluGetWorkspaceSize", aclnnReluGetWorkspaceSize(H, A, &ws, &ex));
    CHECK("aclnnRelu", aclnnRelu(NULL, 0, ex, stream));
    CHECK("aclnnAddGetWorkspaceSize", aclnnAddGetWorkspaceSize(A, H, alpha, S, &ws, &ex));
    CHECK("aclnnAdd", aclnnAdd(NULL, 0, ex, stream));
    /* aclop Mul: S * A -> Y (the capture reads the descriptors through the real getters). */
    P in_d[2] = {aclCreateTensorDesc(ACL_FLOAT, 2, sy, ACL_FORMAT_ND), aclCreateTensorDesc(ACL_FLOAT, 2, sy, ACL_FORMAT_ND)};
    P in_b[2] = {aclCreateDataBuffer(ds, sizeof y), aclCreateDataBuffer(da, sizeof y)};
    P out_d[1] = {aclCreateTensorDesc(ACL_FLOAT, 2, sy, ACL_FORMAT_ND)};
    P out_b[1] = {aclCreateDataBuffer(dy, sizeof y)};
    CHECK("aclopExecuteV2", aclopExecuteV2("Mul", 2, in_d, in_b, 1, out_d, out_b, aclopCreateAttr(), stream));

    CHECK("aclrtMemcpyAsync", aclrtMemcpyAsync(y, sizeof y, dy, sizeof y, D2H, stream));
    CHECK("aclrtSynchronizeDevice", aclrtSynchronizeDevice());
    double sum = 0;
    for (int i = 0; i < M * N; i++) sum += y[i];
    printf("sum %.4f\n", sum);
    return 0;
}
