/* One link of a chain of libraries that all define `probe_value` (returning LEVEL), for
 * tests/programs/dlsym_threads.c: built twice, -DLEVEL=2 -DNAME=a (libnexta.so, needs libnextb.so) and
 * -DLEVEL=3 -DNAME=b (libnextb.so). `next_from_NAME` looks a name up with RTLD_NEXT from inside this
 * library, so the result depends on who the caller is: the dlsym trampoline must keep glibc seeing the
 * original caller. libnexta's constructor looks names up before libmsprobe's constructor has run
 * (needed libraries are initialised before the preloaded ones): the trampoline's resolver path. */
#define _GNU_SOURCE
#include <dlfcn.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

int probe_value(void) { return LEVEL; }

void *CAT(next_from_, NAME)(const char *name) { return dlsym(RTLD_NEXT, name); }

#if LEVEL == 2
void *early_next, *early_default;
__attribute__((constructor)) static void early(void) {
    early_next = dlsym(RTLD_NEXT, "probe_value");
    early_default = dlsym(RTLD_DEFAULT, "probe_value");
}
#endif
