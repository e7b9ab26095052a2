/*
 * capi_demo: a tiny host-side "training loop" that records its layers through libmsprobe's C ABI.
 * It shows the whole record flow a capture path uses: counters, records with tensor and value
 * leaves, stack and construct info, steps. Build and run: scripts/demo.sh.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/msprobe.h"

enum { B = 8, IN = 16, OUT = 4, ACL_FLOAT = 0 };

static void add_tensor(MsprobeRecord *r, const float *x, int64_t rows, int64_t cols, int grad) {
    int64_t shape[2] = {rows, cols};
    MsprobeTensor t = {ACL_FLOAT, 2, shape, NULL, 0, x, (uint64_t)(rows * cols * sizeof(float)), grad, NULL};
    if (msprobe_record_add_tensor(r, NULL, &t) < 0) fprintf(stderr, "add_tensor: %s\n", msprobe_last_error());
}

int main(int argc, char **argv) {
    const char *dump = argc > 1 ? argv[1] : "./dump_demo";
    char args[512];
    snprintf(args, sizeof args, "{\"task\": \"statistics\", \"level\": \"L1\", \"dump_path\": \"%s\"}", dump);
    if (msprobe_init(args) < 0) {
        fprintf(stderr, "msprobe_init: %s\n", msprobe_last_error());
        return 0; /* the job still runs, uncaptured */
    }
    static float x[B * IN], w[OUT * IN], y[B * OUT];
    srand(7);
    for (int i = 0; i < OUT * IN; i++) w[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int step = 0; step < 3; step++) {
        msprobe_start();
        for (int i = 0; i < B * IN; i++) x[i] = (float)rand() / RAND_MAX * 2 - 1;
        for (int b = 0; b < B; b++)
            for (int o = 0; o < OUT; o++) {
                float s = 0;
                for (int i = 0; i < IN; i++) s += x[b * IN + i] * w[o * IN + i];
                y[b * OUT + o] = s;
            }
        char name[128];
        snprintf(name, sizeof name, "Functional.linear.%lld.forward", (long long)msprobe_next_index("Functional.linear."));
        MsprobeRecord *r = msprobe_record_begin(name);
        msprobe_record_section(r, "input_args");
        add_tensor(r, x, B, IN, 0);
        add_tensor(r, w, OUT, IN, 1);
        msprobe_record_add_null(r, NULL); /* no bias */
        msprobe_record_section(r, "input_kwargs");
        msprobe_record_section(r, "output");
        add_tensor(r, y, B, OUT, 1);
        const char *frames[] = {"File capi_demo.c, line 50, in main, \n msprobe_record_begin(name);"};
        msprobe_record_set_stack(r, frames, 1);
        msprobe_record_end(r);

        for (int i = 0; i < B * OUT; i++) y[i] = y[i] > 0 ? y[i] : 0;
        snprintf(name, sizeof name, "Functional.relu.%lld.forward", (long long)msprobe_next_index("Functional.relu."));
        r = msprobe_record_begin(name);
        msprobe_record_section(r, "input_args");
        add_tensor(r, y, B, OUT, 1);
        msprobe_record_section(r, "input_kwargs");
        msprobe_record_add_bool(r, "inplace", NULL, 1);
        msprobe_record_section(r, "output");
        add_tensor(r, y, B, OUT, 1);
        msprobe_record_end(r);

        msprobe_stop();
        msprobe_step();
    }
    msprobe_finish();
    printf("capi_demo: wrote %s\n", dump);
    return 0;
}
