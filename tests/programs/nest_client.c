/* Links libnest_cann.so (tests/programs/nest_cann.c) and calls, by name: aclopCompileAndExecute
 * ("Add", which the library runs through aclopExecuteV2), HcclAllReduce (which the library runs
 * through an aclop "Identity"), then aclopExecuteV2 ("Add") itself. Prints the results. */
#include <stdint.h>
#include <stdio.h>

typedef void *P;
P aclCreateTensorDesc(int, int, const int64_t *, int);
P aclCreateDataBuffer(P, size_t);
int aclopCompileAndExecute(const char *, int, P *, P *, int, P *, P *, P, int, int, const char *, P);
int aclopExecuteV2(const char *, int, P *, P *, int, P *, P *, P, P);
int HcclAllReduce(P, P, uint64_t, int, int, P, P);

int main(void) {
    enum { N = 4 };
    float a[N] = {1, 2, 3, 4}, b[N] = {0.5f, -1, 8, 2}, y[N], z[N], w[N];
    int64_t dims[1] = {N};
    P d = aclCreateTensorDesc(0, 1, dims, 2);
    P in_d[2] = {d, d}, out_d[1] = {d};
    P in_b[2] = {aclCreateDataBuffer(a, sizeof a), aclCreateDataBuffer(b, sizeof b)};
    P out_b[1] = {aclCreateDataBuffer(y, sizeof y)};
    int rc = aclopCompileAndExecute("Add", 2, in_d, in_b, 1, out_d, out_b, NULL, 0, 0, NULL, NULL);
    rc |= HcclAllReduce(y, z, N, 4, 0, (P)1, NULL);
    P in2_b[2] = {aclCreateDataBuffer(z, sizeof z), aclCreateDataBuffer(a, sizeof a)};
    P out2_b[1] = {aclCreateDataBuffer(w, sizeof w)};
    rc |= aclopExecuteV2("Add", 2, in_d, in2_b, 1, out_d, out2_b, NULL, NULL);
    printf("rc %d %g %g %g %g\n", rc, w[0], w[1], w[2], w[3]);
    return rc;
}
