/* A trivial aclnn op and aclop execution for measuring the wrappers' per-call cost: they return at once. */
#include <stdint.h>
int aclnnAddGetWorkspaceSize(const void *self, const void *other, const void *alpha, void *out,
                             uint64_t *ws, void **executor) {
    (void)self; (void)other; (void)alpha; (void)out;
    *ws = 0;
    *executor = (void *)0;
    return 0;
}
int aclnnAdd(void *workspace, uint64_t size, void *executor, void *stream) {
    (void)workspace; (void)size; (void)executor; (void)stream;
    return 0;
}
int aclopExecuteV2(const char *op, int ni, void *id, void *in, int no, void *od, void *out, void *attr, void *stream) {
    (void)op; (void)ni; (void)id; (void)in; (void)no; (void)od; (void)out; (void)attr; (void)stream;
    return 0;
}
