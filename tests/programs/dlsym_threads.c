/* dlsym with RTLD_NEXT and RTLD_DEFAULT from several threads at once, through whatever `dlsym` the
 * process has (libmsprobe's trampoline under LD_PRELOAD, glibc's without). The main program, libnexta.so
 * and libnextb.so (tests/programs/next_lib.c) each define probe_value() returning 1, 2, 3, so ELF lookup
 * rules give the truth: RTLD_DEFAULT finds the program's (1); RTLD_NEXT finds the definition after the
 * caller's object: from the program libnexta's (2), from libnexta libnextb's (3), from libnextb none.
 *
 *   cc -o dlsym_threads dlsym_threads.c -rdynamic -L. -lnexta -lnextb -ldl -lpthread
 *   dlsym_threads [THREADS [ITERATIONS]]
 *
 * Prints where `dlsym` lives, the lookups made by libnexta's constructor, and "errors N" (lookups that
 * disagreed with the truth, over every thread); exits 1 if N > 0. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*ValueFn)(void);
int probe_value(void) { return 1; }
void *next_from_a(const char *);
void *next_from_b(const char *);
extern void *early_next, *early_default;

static int iterations = 2000;

static int value(void *f) { return f ? ((ValueFn)f)() : 0; }

static void *worker(void *arg) {
    long errors = 0;
    (void)arg;
    for (int i = 0; i < iterations; i++) {
        errors += value(dlsym(RTLD_DEFAULT, "probe_value")) != 1;
        errors += value(dlsym(RTLD_NEXT, "probe_value")) != 2;
        errors += value(next_from_a("probe_value")) != 3;
        errors += next_from_b("probe_value") != NULL;
        size_t (*len)(const char *) = (size_t (*)(const char *))dlsym(RTLD_DEFAULT, "strlen");
        errors += !len || len("aarch64") != 7;
        /* A failed lookup sets this thread's dlerror(). */
        dlerror();
        errors += dlsym(RTLD_NEXT, "no_such_symbol_anywhere") != NULL;
        errors += dlerror() == NULL;
    }
    return (void *)errors;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    if (argc > 2) iterations = atoi(argv[2]);
    if (threads < 1 || threads > 64 || iterations < 1) return 2;
    Dl_info info;
    const char *where = dladdr((void *)&dlsym, &info) && info.dli_fname ? info.dli_fname : "?";
    const char *base = strrchr(where, '/');
    printf("dlsym in %s\n", base ? base + 1 : where);
    printf("early next %d default %d\n", value(early_next), value(early_default));
    pthread_t t[64];
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) != 0) return 3;
    long errors = 0;
    for (int i = 0; i < threads; i++) {
        void *r;
        pthread_join(t[i], &r);
        errors += (long)r;
    }
    printf("lookups %ld errors %ld\n", (long)threads * iterations * 7, errors);
    return errors != 0;
}
