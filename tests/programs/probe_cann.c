/* Looks CANN names up in the global scope (dlsym(RTLD_DEFAULT, ...)), as a client probing whether
 * CANN is there does: before any CANN library is loaded every lookup must fail, as without
 * libmsprobe (whose exports of these names come first under LD_PRELOAD); after
 * dlopen(argv[1], RTLD_GLOBAL) every one succeeds and a launch through the address found runs.
 * Prints one line per phase: the names found. */
#include <dlfcn.h>
#include <stdio.h>

static const char *names[] = {"aclnnAdd", "aclnnAddGetWorkspaceSize", "aclopExecuteV2", "aclopSetAttrInt",
                              "aclCreateTensor", "aclSetTensorPlaceMent", "HcclAllReduce"};

static void probe(const char *phase) {
    printf("%s:", phase);
    for (unsigned i = 0; i < sizeof names / sizeof *names; i++)
        if (dlsym(RTLD_DEFAULT, names[i])) printf(" %s", names[i]);
    printf("\n");
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    probe("before");
    if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    probe("after");
    return 0;
}
