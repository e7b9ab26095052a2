/* A CANN client exercising every kind of entry point libmsprobe wraps, through one of three paths:
 *
 *   all_entries linked|dlsym|both ROOTFILE [1]
 *
 * - linked: every CANN function is called by its name (PLT, resolved at link time against the
 *   CANN libraries, as torch_npu does for aclop, the descriptor and attribute calls and HCCL);
 * - dlsym: every CANN function is looked up with dlopen + dlsym on the library that defines it;
 * - both: the two alternate call by call, so objects made through one path are used through the
 *   other (a tensor created by name is launched through a looked-up phase 2, and so on).
 *
 * Rank 0 (no third argument) spawns rank 1 (this program, argument "1", RANK_ID=1) and writes the
 * HCCL root info to ROOTFILE; both ranks run the HCCL part (every collective, and Send/Recv).
 * Rank 0 also runs aclnn ops (plain, in-place, a repeatable executor re-bound between two
 * launches, a tensor list, an int array, a tensor whose address is re-bound after phase 1), aclop
 * executions through every execute variant and aclopCast (attributes of every type, a host-placed
 * input, a const input, a host-placed axes input) and one launch the library rejects (op type
 * "NoSuchOp", 100024). Prints "ok" on success.
 *
 * PEER_RUNNER=/path/to/emulator (e.g. qemu-aarch64, for the aarch64 build under user-mode
 * emulation without binfmt_misc) runs rank 1 as `PEER_RUNNER <this program> ...`.
 */
#include <dlfcn.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
typedef void *P;
typedef const void *CP;
enum { ACL_FLOAT = 0, ACL_FLOAT16 = 1, ACL_INT64 = 9, ACL_FORMAT_ND = 2, H2D = 1, D2H = 2, N = 8 };
enum { HCCL_FP32 = 4, HCCL_SUM = 0 };

/* The CANN functions used, declared as this program links them. */
int aclInit(const char *);
int aclrtSetDevice(int32_t);
int aclrtCreateStream(P *);
int aclrtMalloc(P *, size_t, int);
int aclrtMemcpy(P, size_t, const void *, size_t, int);
int aclrtSynchronizeStream(P);
P aclCreateTensor(const int64_t *, uint64_t, int, const int64_t *, int64_t, int, const int64_t *, uint64_t, P);
P aclCreateScalar(P, int);
P aclCreateIntArray(const int64_t *, uint64_t);
P aclCreateFloatArray(const float *, uint64_t);
P aclCreateBoolArray(const uint8_t *, uint64_t);
P aclCreateTensorList(const P *, uint64_t);
int aclDestroyTensor(CP);
int aclDestroyScalar(CP);
int aclDestroyIntArray(CP);
int aclDestroyFloatArray(CP);
int aclDestroyBoolArray(CP);
int aclDestroyTensorList(CP);
int aclSetAclOpExecutorRepeatable(P);
int aclDestroyAclOpExecutor(P);
int aclSetInputTensorAddr(P, size_t, P, P);
int aclSetOutputTensorAddr(P, size_t, P, P);
int aclSetRawTensorAddr(P, P);
int aclnnAddGetWorkspaceSize(P, P, P, P, uint64_t *, P *);
int aclnnAdd(P, uint64_t, P, P);
int aclnnInplaceAddGetWorkspaceSize(P, P, P, uint64_t *, P *);
int aclnnInplaceAdd(P, uint64_t, P, P);
int aclnnMulGetWorkspaceSize(P, P, P, uint64_t *, P *);
int aclnnMul(P, uint64_t, P, P);
int aclnnReduceSumGetWorkspaceSize(P, P, _Bool, int, P, uint64_t *, P *);
int aclnnReduceSum(P, uint64_t, P, P);
int aclnnCatGetWorkspaceSize(P, int64_t, P, uint64_t *, P *);
int aclnnCat(P, uint64_t, P, P);
int aclnnReluGetWorkspaceSize(P, P, uint64_t *, P *);
int aclnnRelu(P, uint64_t, P, P);
P aclCreateTensorDesc(int, int, const int64_t *, int);
void aclDestroyTensorDesc(CP);
int aclSetTensorPlaceMent(P, int);
int aclSetTensorConst(P, P, size_t);
P aclCreateDataBuffer(P, size_t);
P aclopCreateAttr(void);
void aclopDestroyAttr(CP);
int aclopSetAttrBool(P, const char *, uint8_t);
int aclopSetAttrInt(P, const char *, int64_t);
int aclopSetAttrFloat(P, const char *, float);
int aclopSetAttrString(P, const char *, const char *);
int aclopSetAttrDataType(P, const char *, int);
int aclopSetAttrListBool(P, const char *, int, const uint8_t *);
int aclopSetAttrListInt(P, const char *, int, const int64_t *);
int aclopSetAttrListFloat(P, const char *, int, const float *);
int aclopSetAttrListString(P, const char *, int, const char **);
int aclopSetAttrListDataType(P, const char *, int, const int *);
int aclopSetAttrListListInt(P, const char *, int, const int *, const int64_t *const *);
int aclopExecute(const char *, int, P *, P *, int, P *, P *, P, P);
int aclopExecuteV2(const char *, int, P *, P *, int, P *, P *, P, P);
int aclopCompileAndExecute(const char *, int, P *, P *, int, P *, P *, P, int, int, const char *, P);
int aclopCompileAndExecuteV2(const char *, int, P *, P *, int, P *, P *, P, int, int, const char *, P);
int aclopCast(P, P, P, P, uint8_t, P);
int HcclGetRootInfo(P);
int HcclCommInitRootInfo(uint32_t, CP, uint32_t, P *);
int HcclAllReduce(P, P, uint64_t, int, int, P, P);
int HcclReduce(P, P, uint64_t, int, int, uint32_t, P, P);
int HcclBroadcast(P, uint64_t, int, uint32_t, P, P);
int HcclAllGather(P, P, uint64_t, int, P, P);
int HcclReduceScatter(P, P, uint64_t, int, int, P, P);
int HcclSend(P, uint64_t, int, uint32_t, P, P);
int HcclRecv(P, uint64_t, int, uint32_t, P, P);
int HcclAlltoAll(P, uint64_t, int, P, uint64_t, int, P, P);
int HcclAlltoAllV(P, P, P, int, P, P, P, int, P, P);
int HcclBarrier(P, P);

static int mode; /* 0 linked, 1 dlsym, 2 both */
static unsigned calls;
static void *libs[5];
static const char *lib_names[5] = {"libascendcl.so", "libnnopbase.so", "libopapi.so", "libacl_op_compiler.so",
                                   "libhccl.so"};

/* The function to call: the linked one, or the one dlsym finds in the library that defines it. */
static void *pick(const char *name, void *linked) {
    int use_dlsym = mode == 1 || (mode == 2 && (calls++ & 1));
    if (!use_dlsym) return linked;
    int lib = !strncmp(name, "aclnn", 5) ? 2 : !strncmp(name, "Hccl", 4) ? 4 : !strncmp(name, "aclop", 5) ? 3 : 1;
    if (!strncmp(name, "aclrt", 5) || !strcmp(name, "aclInit") || strstr(name, "TensorDesc") ||
        strstr(name, "DataBuffer") || !strncmp(name, "aclSetTensorPl", 14) || !strcmp(name, "aclSetTensorConst"))
        lib = 0;
    void *f = dlsym(libs[lib], name);
    if (!f) {
        fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
        exit(2);
    }
    return f;
}
#define C(name) ((__typeof__(&name))pick(#name, (void *)&name))
#define CHECK(expr)                                                 \
    do {                                                            \
        int rc_ = (expr);                                           \
        if (rc_ != 0) {                                             \
            fprintf(stderr, "%s: %d (line %d)\n", #expr, rc_, __LINE__); \
            exit(1);                                                \
        }                                                           \
    } while (0)

static P stream;

static P dev(const float *v, size_t n) {
    P d;
    CHECK(C(aclrtMalloc)(&d, n * sizeof(float), 0));
    if (v) CHECK(C(aclrtMemcpy)(d, n * sizeof(float), v, n * sizeof(float), H2D));
    return d;
}
/* A device workspace of the size phase 1 asked for (NULL for none). */
static P wsbuf(uint64_t ws) {
    P d = NULL;
    if (ws) CHECK(C(aclrtMalloc)(&d, ws, 0));
    return d;
}
static P tensor(const int64_t *dims, int nd, int dtype, P addr) {
    int64_t strides[4] = {1, 1, 1, 1};
    for (int i = nd - 2; i >= 0; i--) strides[i] = strides[i + 1] * dims[i + 1];
    P t = C(aclCreateTensor)(dims, nd, dtype, strides, 0, ACL_FORMAT_ND, dims, nd, addr);
    if (!t) exit(3);
    return t;
}

static void aclnn_part(void) {
    float a[N], b[N];
    for (int i = 0; i < N; i++) a[i] = (float)i - 2.5f, b[i] = 0.5f * (float)(i % 3) + 1.0f;
    int64_t dims[1] = {N}, dims2[1] = {2 * N}, none[1] = {1};
    P da = dev(a, N), db = dev(b, N), dc = dev(NULL, N), dd = dev(NULL, N), de = dev(NULL, 2 * N), ds = dev(NULL, 1);
    P ta = tensor(dims, 1, ACL_FLOAT, da), tb = tensor(dims, 1, ACL_FLOAT, db), tc = tensor(dims, 1, ACL_FLOAT, dc);
    P td = tensor(dims, 1, ACL_FLOAT, dd), te = tensor(dims2, 1, ACL_FLOAT, de), ts = tensor(none, 1, ACL_FLOAT, ds);
    float one = 1.0f, half = 0.5f;
    P alpha = C(aclCreateScalar)(&one, ACL_FLOAT), alpha2 = C(aclCreateScalar)(&half, ACL_FLOAT);
    uint64_t ws;
    P ex;
    /* Add: c = a + b */
    CHECK(C(aclnnAddGetWorkspaceSize)(ta, tb, alpha, tc, &ws, &ex));
    CHECK(C(aclnnAdd)(wsbuf(ws), ws, ex, stream));
    /* InplaceAdd: c += 0.5 * a (c is written: copied after the launch) */
    CHECK(C(aclnnInplaceAddGetWorkspaceSize)(tc, ta, alpha2, &ws, &ex));
    CHECK(C(aclnnInplaceAdd)(wsbuf(ws), ws, ex, stream));
    /* Mul with a repeatable executor, launched twice: input 0 re-bound to c, output to a fresh buffer. */
    CHECK(C(aclnnMulGetWorkspaceSize)(ta, tb, td, &ws, &ex));
    CHECK(C(aclSetAclOpExecutorRepeatable)(ex));
    CHECK(C(aclnnMul)(wsbuf(ws), ws, ex, stream));
    P df = dev(NULL, N);
    CHECK(C(aclSetInputTensorAddr)(ex, 0, ta, dc));
    CHECK(C(aclSetOutputTensorAddr)(ex, 0, td, df));
    CHECK(C(aclnnMul)(wsbuf(ws), ws, ex, stream));
    CHECK(C(aclDestroyAclOpExecutor)(ex));
    /* ReduceSum over dim 0 with an int array */
    int64_t dim0[1] = {0};
    P dims_arr = C(aclCreateIntArray)(dim0, 1);
    CHECK(C(aclnnReduceSumGetWorkspaceSize)(tb, dims_arr, 0, ACL_FLOAT, ts, &ws, &ex));
    CHECK(C(aclnnReduceSum)(wsbuf(ws), ws, ex, stream));
    /* Cat of a tensor list */
    P pair[2] = {tensor(dims, 1, ACL_FLOAT, da), tensor(dims, 1, ACL_FLOAT, db)};
    P list = C(aclCreateTensorList)(pair, 2);
    CHECK(C(aclnnCatGetWorkspaceSize)(list, 0, te, &ws, &ex));
    CHECK(C(aclnnCat)(wsbuf(ws), ws, ex, stream));
    /* Relu whose input is re-bound (aclSetRawTensorAddr) between phase 1 and phase 2 */
    P tr = tensor(dims, 1, ACL_FLOAT, da), to = tensor(dims, 1, ACL_FLOAT, dd);
    CHECK(C(aclnnReluGetWorkspaceSize)(tr, to, &ws, &ex));
    CHECK(C(aclSetRawTensorAddr)(tr, dc));
    CHECK(C(aclnnRelu)(wsbuf(ws), ws, ex, stream));
    /* Arrays no launch uses: created and destroyed through the same entry points */
    float fv[2] = {1.5f, -2.0f};
    uint8_t bv[2] = {1, 0};
    P fa = C(aclCreateFloatArray)(fv, 2), ba = C(aclCreateBoolArray)(bv, 2);
    CHECK(C(aclrtSynchronizeStream)(stream));
    CHECK(C(aclDestroyFloatArray)(fa));
    CHECK(C(aclDestroyBoolArray)(ba));
    CHECK(C(aclDestroyIntArray)(dims_arr));
    CHECK(C(aclDestroyTensorList)(list));
    CHECK(C(aclDestroyScalar)(alpha));
    CHECK(C(aclDestroyScalar)(alpha2));
    P ts_all[8] = {ta, tb, tc, td, te, ts, tr, to};
    for (int i = 0; i < 8; i++) CHECK(C(aclDestroyTensor)(ts_all[i]));
}

static P desc(int dtype, int nd, const int64_t *dims) {
    P d = C(aclCreateTensorDesc)(dtype, nd, dims, ACL_FORMAT_ND);
    if (!d) exit(3);
    return d;
}
static P buf(P addr, size_t size) { return C(aclCreateDataBuffer)(addr, size); }

static void aclop_part(void) {
    float a[N], b[N], scalar = 3.25f;
    for (int i = 0; i < N; i++) a[i] = 0.25f * (float)i - 1.0f, b[i] = (float)(N - i);
    int64_t dims[1] = {N}, one[1] = {1}, m2[2] = {2, N / 2}, two[1] = {2};
    P da = dev(a, N), db = dev(b, N), dy = dev(NULL, N), dz = dev(NULL, N), dr = dev(NULL, 2), dh;
    CHECK(C(aclrtMalloc)(&dh, N * 2, 0));
    P attr = C(aclopCreateAttr)();
    const int64_t l0[2] = {1, 2}, l1[1] = {3};
    const int64_t *ll[2] = {l0, l1};
    int ll_n[2] = {2, 1};
    const uint8_t lb[2] = {1, 0};
    const int64_t li[3] = {4, -5, 6};
    const float lf[2] = {0.5f, -1.25f};
    const char *ls[2] = {"x", "yz"};
    const int ld[2] = {ACL_FLOAT, ACL_FLOAT16};
    CHECK(C(aclopSetAttrBool)(attr, "a_bool", 1));
    CHECK(C(aclopSetAttrInt)(attr, "a_int", -7));
    CHECK(C(aclopSetAttrFloat)(attr, "a_float", 2.5f));
    CHECK(C(aclopSetAttrString)(attr, "a_str", "NCHW"));
    CHECK(C(aclopSetAttrDataType)(attr, "a_dtype", ACL_FLOAT16));
    CHECK(C(aclopSetAttrListBool)(attr, "l_bool", 2, lb));
    CHECK(C(aclopSetAttrListInt)(attr, "l_int", 3, li));
    CHECK(C(aclopSetAttrListFloat)(attr, "l_float", 2, lf));
    CHECK(C(aclopSetAttrListString)(attr, "l_str", 2, ls));
    CHECK(C(aclopSetAttrListDataType)(attr, "l_dtype", 2, ld));
    CHECK(C(aclopSetAttrListListInt)(attr, "l_list_int", 2, ll_n, ll));
    /* Add with a host-placed scalar input (as torch_npu passes scalars) */
    P host_d = desc(ACL_FLOAT, 1, one);
    CHECK(C(aclSetTensorPlaceMent)(host_d, 1));
    P in_d[2] = {desc(ACL_FLOAT, 1, dims), host_d}, in_b[2] = {buf(da, sizeof a), buf(&scalar, sizeof scalar)};
    P out_d[1] = {desc(ACL_FLOAT, 1, dims)}, out_b[1] = {buf(dy, sizeof a)};
    CHECK(C(aclopExecuteV2)("Add", 2, in_d, in_b, 1, out_d, out_b, attr, stream));
    scalar = -100.0f; /* the call took the value: changing it now changes nothing */
    /* Mul through aclopExecute (V1) */
    P mul_d[2] = {desc(ACL_FLOAT, 1, dims), desc(ACL_FLOAT, 1, dims)}, mul_b[2] = {buf(dy, sizeof a), buf(db, sizeof b)};
    P mo_d[1] = {desc(ACL_FLOAT, 1, dims)}, mo_b[1] = {buf(dz, sizeof a)};
    CHECK(C(aclopExecute)("Mul", 2, mul_d, mul_b, 1, mo_d, mo_b, NULL, stream));
    /* ReduceSum of a 2x4 view with const axes, through aclopCompileAndExecute */
    P kd = C(aclopCreateAttr)();
    CHECK(C(aclopSetAttrBool)(kd, "keep_dims", 0));
    int64_t axes = 1;
    P axes_d = desc(ACL_INT64, 1, one);
    CHECK(C(aclSetTensorConst)(axes_d, &axes, sizeof axes));
    axes = 0; /* const data was copied at aclSetTensorConst */
    P rs_d[2] = {desc(ACL_FLOAT, 2, m2), axes_d}, rs_b[2] = {buf(dz, sizeof a), buf(NULL, 0)};
    P ro_d[1] = {desc(ACL_FLOAT, 1, two)}, ro_b[1] = {buf(dr, 2 * sizeof(float))};
    CHECK(C(aclopCompileAndExecute)("ReduceSum", 2, rs_d, rs_b, 1, ro_d, ro_b, kd, 0, 0, NULL, stream));
    /* ReduceSum with host-placed axes, through aclopCompileAndExecuteV2 */
    int64_t haxes = 0;
    P haxes_d = desc(ACL_INT64, 1, one);
    CHECK(C(aclSetTensorPlaceMent)(haxes_d, 1));
    P rs2_d[2] = {desc(ACL_FLOAT, 2, m2), haxes_d}, rs2_b[2] = {buf(dy, sizeof a), buf(&haxes, sizeof haxes)};
    P ro2_d[1] = {desc(ACL_FLOAT, 1, two)};
    int64_t four[1] = {N / 2};
    ro2_d[0] = desc(ACL_FLOAT, 1, four);
    P ro2_b[1] = {buf(dz, N / 2 * sizeof(float))};
    CHECK(C(aclopCompileAndExecuteV2)("ReduceSum", 2, rs2_d, rs2_b, 1, ro2_d, ro2_b, kd, 0, 0, NULL, stream));
    /* aclopCast float32 -> float16 */
    CHECK(C(aclopCast)(desc(ACL_FLOAT, 1, dims), buf(db, sizeof b), desc(ACL_FLOAT16, 1, dims), buf(dh, N * 2), 0,
                       stream));
    /* A launch the library rejects: an op type it does not know (100024); inputs are recorded */
    P bad_o[1] = {buf(dy, sizeof a)};
    int rc = C(aclopExecuteV2)("NoSuchOp", 2, mul_d, mul_b, 1, mo_d, bad_o, attr, stream);
    if (rc != 100024) {
        fprintf(stderr, "NoSuchOp returned %d\n", rc);
        exit(1);
    }
    CHECK(C(aclrtSynchronizeStream)(stream));
    C(aclopDestroyAttr)(attr);
    C(aclopDestroyAttr)(kd);
    C(aclDestroyTensorDesc)(host_d);
}

static void hccl_part(uint32_t rank, const char *rootfile) {
    char root[4108];
    if (rank == 0) {
        CHECK(HcclGetRootInfo(root));
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", rootfile);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(root, 1, sizeof root, f) != sizeof root) exit(4);
        fclose(f);
        if (rename(tmp, rootfile) != 0) exit(4);
    } else {
        FILE *f = NULL;
        for (int i = 0; i < 3000 && !f; i++) {
            f = fopen(rootfile, "rb");
            if (!f) usleep(10000);
        }
        if (!f || fread(root, 1, sizeof root, f) != sizeof root) exit(4);
        fclose(f);
    }
    P comm;
    CHECK(C(HcclCommInitRootInfo)(2, root, rank, &comm));
    float v[2 * N];
    for (int i = 0; i < 2 * N; i++) v[i] = (float)(rank * 100 + i) * 0.5f;
    P s = dev(v, 2 * N), r = dev(NULL, 2 * N), g = dev(NULL, 2 * N);
    CHECK(C(HcclAllReduce)(s, r, N, HCCL_FP32, HCCL_SUM, comm, stream));
    CHECK(C(HcclReduce)(s, r, N, HCCL_FP32, HCCL_SUM, 0, comm, stream));
    CHECK(C(HcclBroadcast)(r, N, HCCL_FP32, 0, comm, stream));
    CHECK(C(HcclAllGather)(s, g, N, HCCL_FP32, comm, stream));
    CHECK(C(HcclReduceScatter)(g, r, N, HCCL_FP32, HCCL_SUM, comm, stream));
    CHECK(C(HcclAlltoAll)(s, N, HCCL_FP32, g, N, HCCL_FP32, comm, stream));
    uint64_t counts[2] = {4, 4}, sdispls[2] = {0, 4}, rdispls[2] = {1, 6};
    CHECK(C(HcclAlltoAllV)(s, counts, sdispls, HCCL_FP32, g, counts, rdispls, HCCL_FP32, comm, stream));
    if (rank == 0) {
        CHECK(C(HcclSend)(s, N, HCCL_FP32, 1, comm, stream));
        CHECK(C(HcclRecv)(r, N, HCCL_FP32, 1, comm, stream));
    } else {
        CHECK(C(HcclRecv)(r, N, HCCL_FP32, 0, comm, stream));
        CHECK(C(HcclSend)(g, N, HCCL_FP32, 0, comm, stream));
    }
    CHECK(C(HcclBarrier)(comm, stream));
    CHECK(C(aclrtSynchronizeStream)(stream));
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    mode = !strcmp(argv[1], "dlsym") ? 1 : !strcmp(argv[1], "both") ? 2 : 0;
    uint32_t rank = argc > 3 ? (uint32_t)atoi(argv[3]) : 0;
    for (int i = 0; i < 5; i++) {
        libs[i] = dlopen(lib_names[i], RTLD_NOW | RTLD_LOCAL);
        if (!libs[i]) {
            fprintf(stderr, "dlopen %s: %s\n", lib_names[i], dlerror());
            return 2;
        }
    }
    pid_t peer = 0;
    if (rank == 0) {
        setenv("RANK_ID", "1", 1);
        char *runner = getenv("PEER_RUNNER");
        if (runner && *runner) {
            static char self[4096];
            ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
            if (n <= 0) return 5;
            self[n] = 0;
            char *args[] = {runner, self, argv[1], argv[2], "1", NULL};
            if (posix_spawnp(&peer, runner, NULL, NULL, args, environ) != 0) return 5;
        } else {
            char *args[] = {argv[0], argv[1], argv[2], "1", NULL};
            if (posix_spawn(&peer, "/proc/self/exe", NULL, NULL, args, environ) != 0) return 5;
        }
        setenv("RANK_ID", "0", 1);
    }
    int rc = C(aclInit)(NULL);
    if (rc != 0 && rc != 100002) return 1;
    CHECK(C(aclrtSetDevice)(0));
    CHECK(C(aclrtCreateStream)(&stream));
    hccl_part(rank, argv[2]);
    if (rank == 0) {
        aclnn_part();
        aclop_part();
        int st = 0;
        if (waitpid(peer, &st, 0) != peer || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank 1 failed (%d)\n", st);
            return 6;
        }
    }
    printf("ok\n");
    return 0;
}
