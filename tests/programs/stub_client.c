/* The client of tests/programs/stub_cann.c: opens the stub by path (argv[1]), uploads
 * x = [-4, -3, ..., 3] and runs Relu twice on one stream (x -> y -> z), then waits for the
 * kernels with the stub's own stubWaitAll. It never looks up aclrtSynchronizeStream, unless told
 * to synchronise with it at the end (argv[2] "sync"): then it prints what that returned. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *P;
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

int main(int argc, char **argv) {
    if (argc < 2 || !(lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL))) return 2;
    FN(int, aclrtMalloc, P *, size_t, int);
    FN(int, aclrtMemcpy, P, size_t, const void *, size_t, int);
    FN(P, aclCreateTensor, const int64_t *, uint64_t, int, const int64_t *, int64_t, int, const int64_t *, uint64_t,
       P);
    FN(int, aclnnReluGetWorkspaceSize, P, P, uint64_t *, P *);
    FN(int, aclnnRelu, P, uint64_t, P, P);
    FN(void, stubWaitAll, void);
    enum { N = 8 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)(i - 4);
    P dx, dy, dz;
    if (aclrtMalloc(&dx, sizeof x, 0) || aclrtMalloc(&dy, sizeof x, 0) || aclrtMalloc(&dz, sizeof x, 0)) return 1;
    if (aclrtMemcpy(dx, sizeof x, x, sizeof x, 1)) return 1;
    int64_t dims[1] = {N};
    P X = aclCreateTensor(dims, 1, 0, NULL, 0, 2, dims, 1, dx);
    P Y = aclCreateTensor(dims, 1, 0, NULL, 0, 2, dims, 1, dy);
    P Z = aclCreateTensor(dims, 1, 0, NULL, 0, 2, dims, 1, dz);
    uint64_t ws;
    P ex;
    if (aclnnReluGetWorkspaceSize(X, Y, &ws, &ex) || aclnnRelu(NULL, 0, ex, NULL)) return 1;
    if (aclnnReluGetWorkspaceSize(Y, Z, &ws, &ex) || aclnnRelu(NULL, 0, ex, NULL)) return 1;
    stubWaitAll();
    if (argc > 2) {
        FN(int, aclrtSynchronizeStream, P);
        printf("sync %d\n", aclrtSynchronizeStream(NULL));
    }
    printf("done\n");
    return 0;
}
