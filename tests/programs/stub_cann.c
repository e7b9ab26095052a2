/* A stand-in CANN whose runtime can be made to fail the capture's own calls: "device" memory is
 * host memory, and aclnnRelu runs asynchronously (a thread that waits 50 ms, then writes its
 * output), so a copy made without synchronising the stream reads the output before the kernel
 * wrote it. Built with -DNO_SYNC it has no aclrtSynchronizeStream at all.
 *   STUB_SYNC_RC=<n>  aclrtSynchronizeStream waits for the kernels, then returns n
 *   STUB_D2H_RC=<n>   every device-to-host aclrtMemcpy fails with n
 *   STUB_TASK_RC=<n>  the first kernel fails once it ran (asynchronously: its launch returned 0);
 *                     the next aclrtSynchronizeStream returns n and clears it, as the simulator's
 * With -DEVENTS it also has events (aclrtCreateEvent/RecordEvent/SynchronizeEvent: the event
 * completes when the kernels launched before it are done; waiting for it reports no task error).
 * stubWaitAll() waits for the kernels (the client's own synchronisation). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    float *data;
    int64_t numel;
} Tensor;
typedef struct {
    Tensor *in, *out;
} Executor;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t pending[64];
static int n_pending;
static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER; /* kernels end while wait_all holds mu */
static int task_error, kernels_run;

static int env_rc(const char *name) {
    const char *v = getenv(name);
    return v ? atoi(v) : 0;
}

int aclrtMalloc(void **p, size_t size, int policy) {
    (void)policy;
    *p = calloc(1, size ? size : 1);
    return *p ? 0 : 207001;
}

int aclrtMemcpy(void *dst, size_t dest_max, const void *src, size_t count, int kind) {
    if (kind == 2 && env_rc("STUB_D2H_RC")) return env_rc("STUB_D2H_RC");
    if (count > dest_max) return 100000;
    memcpy(dst, src, count);
    return 0;
}

void *aclCreateTensor(const int64_t *dims, uint64_t n, int dtype, const int64_t *strides, int64_t offset, int format,
                      const int64_t *storage, uint64_t m, void *data) {
    (void)dtype, (void)strides, (void)offset, (void)format, (void)storage, (void)m;
    Tensor *t = malloc(sizeof *t);
    t->data = data;
    t->numel = 1;
    for (uint64_t i = 0; i < n; i++) t->numel *= dims[i];
    return t;
}

int aclDestroyTensor(void *t) {
    free(t);
    return 0;
}

int aclnnReluGetWorkspaceSize(void *self, void *out, uint64_t *ws, void **executor) {
    Executor *e = malloc(sizeof *e);
    e->in = self;
    e->out = out;
    *ws = 0;
    *executor = e;
    return 0;
}

static void *relu_kernel(void *arg) {
    Executor *e = arg;
    struct timespec d = {0, 50 * 1000 * 1000};
    nanosleep(&d, NULL);
    for (int64_t i = 0; i < e->in->numel; i++) e->out->data[i] = e->in->data[i] > 0 ? e->in->data[i] : 0.0f;
    free(e);
    pthread_mutex_lock(&err_mu);
    if (kernels_run++ == 0 && env_rc("STUB_TASK_RC")) task_error = env_rc("STUB_TASK_RC");
    pthread_mutex_unlock(&err_mu);
    return NULL;
}

/* Kernels run one after the other, like a stream: each waits for the previous one first. */
static void wait_all(void) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n_pending; i++) pthread_join(pending[i], NULL);
    n_pending = 0;
    pthread_mutex_unlock(&mu);
}

int aclnnRelu(void *ws, uint64_t ws_size, void *executor, void *stream) {
    (void)ws, (void)ws_size, (void)stream;
    wait_all();
    pthread_mutex_lock(&mu);
    int rc = n_pending < 64 ? pthread_create(&pending[n_pending++], NULL, relu_kernel, executor) : 1;
    pthread_mutex_unlock(&mu);
    return rc;
}

#ifndef NO_SYNC
int aclrtSynchronizeStream(void *stream) {
    (void)stream;
    wait_all();
    pthread_mutex_lock(&err_mu);
    int e = task_error;
    task_error = 0;
    pthread_mutex_unlock(&err_mu);
    return e ? e : env_rc("STUB_SYNC_RC");
}
#endif

#ifdef EVENTS
int aclrtCreateEvent(void **event) {
    *event = malloc(1);
    return *event ? 0 : 207001;
}
int aclrtRecordEvent(void *event, void *stream) {
    (void)event, (void)stream;
    return 0;
}
int aclrtSynchronizeEvent(void *event) {
    (void)event;
    wait_all();
    return 0;
}
#endif

void stubWaitAll(void) { wait_all(); }
