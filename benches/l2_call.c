/* Calls a trivial aclnnAdd (phase 2) resolved with dlopen + dlsym, like real clients, N times and
 * prints the mean ns per call (best of 5 rounds). Run with and without LD_PRELOAD=libmsprobe.so.
 * Built with -DLINKED it calls aclnnAdd, or with -DLINKED -DACLOP aclopExecuteV2, by name instead
 * (linked against libfakeop.so: under LD_PRELOAD the call reaches libmsprobe's export). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*phase2_fn)(void *, uint64_t, void *, void *);
int aclnnAdd(void *, uint64_t, void *, void *);
int aclopExecuteV2(const char *, int, void *, void *, int, void *, void *, void *, void *);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    const char *lib = argc > 1 ? argv[1] : "./libfakeop.so";
    long n = argc > 2 ? atol(argv[2]) : 20000000L;
#ifdef LINKED
    (void)lib;
#else
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    phase2_fn f = (phase2_fn)dlsym(h, "aclnnAdd");
    if (!f) return 1;
#endif
    double best = 1e30;
    volatile int sink = 0;
    for (int round = 0; round < 5; round++) {
        double t0 = now();
#if defined(LINKED) && defined(ACLOP)
        for (long i = 0; i < n; i++) sink += aclopExecuteV2("Add", 0, 0, 0, 0, 0, 0, 0, (void *)(uintptr_t)i);
#elif defined(LINKED)
        for (long i = 0; i < n; i++) sink += aclnnAdd(0, 0, (void *)(uintptr_t)i, 0);
#else
        for (long i = 0; i < n; i++) sink += f(0, 0, (void *)(uintptr_t)i, 0);
#endif
        double dt = (now() - t0) / (double)n;
        if (dt < best) best = dt;
    }
    printf("%.2f\n", best);
    return sink;
}
