/*
 * msprobe.h — the C ABI of libmsprobe.so (msprobe-rs recorder).
 *
 * Capture paths (the Python layers, the L2 interposer, any C/C++ client) submit records here;
 * the library computes statistics, CRCs and tensor files and writes msprobe's dump layout:
 *   dump_path/step{N}/rank[{R}]/{dump.json, stack.json, construct.json, dump_tensor_data/}
 *
 * Conventions
 * - Functions returning int: 0 = OK, 1 = "already"/true, <0 = error; the reason is in
 *   msprobe_last_error() (per thread). No function aborts the process; panics are caught.
 * - Strings are UTF-8, NUL-terminated, borrowed for the duration of the call.
 * - A record handle is NULL when capture is off or the record is filtered out; every record
 *   function accepts NULL as a no-op, so callers can skip work early. A non-NULL handle is used
 *   by one thread at a time and released exactly once by msprobe_record_end or _abort.
 * - Tensor memory is only read during msprobe_record_add_tensor; statistics, CRC and the tensor
 *   file are complete when it returns.
 */
#ifndef MSPROBE_H
#define MSPROBE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSPROBE_OK 0
#define MSPROBE_ALREADY 1
#define MSPROBE_ERR_CONFIG (-1)
#define MSPROBE_ERR_ARG (-2)
#define MSPROBE_ERR_STATE (-3)
#define MSPROBE_ERR_PANIC (-4)

typedef struct MsprobeRecord MsprobeRecord;

/* A tensor view in host memory. dtype is an aclDataType number (ACL_FLOAT = 0, ACL_FLOAT16 = 1,
 * ACL_INT8 = 2, ACL_INT32 = 3, ACL_UINT8 = 4, ACL_INT16 = 6, ACL_UINT16 = 7, ACL_UINT32 = 8,
 * ACL_INT64 = 9, ACL_UINT64 = 10, ACL_DOUBLE = 11, ACL_BOOL = 12, ACL_COMPLEX64 = 16,
 * ACL_COMPLEX128 = 17, ACL_BF16 = 27). strides and offset are in elements; strides NULL means
 * row-major. data points at the storage base; storage_bytes bounds every read. */
typedef struct MsprobeTensor {
    int32_t dtype;
    int32_t ndim;
    const int64_t *shape;
    const int64_t *strides;
    int64_t offset;
    const void *data;
    uint64_t storage_bytes;
    int32_t requires_grad;  /* -1 omits the key (MindSpore), 0 false, 1 true */
    const char *type_name;  /* NULL = "torch.Tensor" / "mindspore.Tensor" per framework */
} MsprobeTensor;

/* Session. args_json: NULL or a JSON object of explicit arguments (config.json keys, plus
 * "config_path" and "framework": "pytorch" | "mindspore"), applied over MSPROBE_CONFIG and the
 * MSPROBE_* environment variables. Returns 0, 1 if already initialised, -1 on bad config. */
int msprobe_init(const char *args_json);
const char *msprobe_last_error(void);
int msprobe_start(void);          /* 1 capturing, 0 step/rank not selected */
int msprobe_stop(void);           /* capture off; JSON files of the step written in the background */
int msprobe_stop_wait(void);      /* capture off; returns when the JSON files and queued data are on disk */
int msprobe_step(void);           /* end the step: JSON written, counters reset, step + 1 */
int msprobe_flush(void);          /* JSON written and queued data on disk */
int msprobe_finish(void);         /* end the session (also run at exit), log the summary */
int msprobe_is_enabled(void);
int msprobe_steps_done(void);     /* 1 once past max(step) */
int64_t msprobe_current_step(void);
int msprobe_set_rank(int64_t rank);
int64_t msprobe_next_index(const char *counter_key);  /* per-step counter, from 0 */
int msprobe_construct_set(const char *name, const char *parent /* NULL = null */);

/* Records. Sections: "input_args", "input_kwargs", "output"; backward records "input",
 * "output". msprobe_record_section returns 1 if kept, 0 if data_mode drops it. */
MsprobeRecord *msprobe_record_begin(const char *name);
int msprobe_record_section(MsprobeRecord *r, const char *section);
int msprobe_record_open(MsprobeRecord *r, const char *key, int is_dict); /* key NULL in lists */
int msprobe_record_close(MsprobeRecord *r);
int msprobe_record_add_tensor(MsprobeRecord *r, const char *key, const MsprobeTensor *t);
/* Same, with t->data an Ascend device address: the view's span is copied with the real
 * aclrtMemcpy (the caller synchronises the producing stream first); storage_bytes is ignored. */
int msprobe_record_add_device_tensor(MsprobeRecord *r, const char *key, const MsprobeTensor *t);
int msprobe_record_add_null(MsprobeRecord *r, const char *key);
int msprobe_record_add_empty(MsprobeRecord *r, const char *key);
/* type_name NULL = "bool" / "int" / "float" / "str" / "slice"; value_key NULL = "value". */
int msprobe_record_add_bool(MsprobeRecord *r, const char *key, const char *type_name, int v);
int msprobe_record_add_int(MsprobeRecord *r, const char *key, const char *type_name, int64_t v);
int msprobe_record_add_float(MsprobeRecord *r, const char *key, const char *type_name, double v);
int msprobe_record_add_str(MsprobeRecord *r, const char *key, const char *type_name, const char *v,
                           const char *value_key);
int msprobe_record_add_ints(MsprobeRecord *r, const char *key, const char *type_name,
                            const int64_t *v, const uint8_t *is_null, size_t n);
/* {"type": type_name (NULL = "torch.ProcessGroup"), "group_ranks": [...], "group_id": md5 hex of
 * Python's str(ranks)}: msprobe's leaf for a process group. */
int msprobe_record_add_group(MsprobeRecord *r, const char *key, const char *type_name,
                             const int64_t *ranks, size_t n);
int msprobe_record_set_stack(MsprobeRecord *r, const char *const *frames, size_t n);
int msprobe_record_set_parent(MsprobeRecord *r, const char *parent /* NULL = null */);
int msprobe_record_end(MsprobeRecord *r);
void msprobe_record_abort(MsprobeRecord *r);

#ifdef __cplusplus
}
#endif
#endif /* MSPROBE_H */
