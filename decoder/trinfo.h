/* The few facts of trace.dir/info.json the decoder needs: the recording
 * backend and the CPU (libipt applies errata workarounds by family/model/
 * stepping). A minimal JSON scanner reads them: no JSON library is a
 * dependency, and only scalar values at known paths matter. */
#ifndef JPT_DECODER_TRINFO_H
#define JPT_DECODER_TRINFO_H

#include <stdbool.h>
#include <stddef.h>

#include <intel-pt.h>

typedef struct dc_trace_info {
    char backend[32];          /* "perf", "emulated", or "" if unknown */
    struct pt_cpu cpu;         /* vendor pcv_unknown if not recorded */
    bool have_info;            /* info.json was read */
} dc_trace_info;

/* Reads DIR/info.json. A missing file leaves defaults and returns 1 (traces
 * of the agent alone lack it); malformed JSON or a file that is not a
 * regular one returns -1 with "FILE: offset N: what" or "FILE: what" in
 * err (defaults kept); 0 on success. */
int dc_read_info(const char *dir, dc_trace_info *out, char *err, size_t errlen);
/* The same over a JSON text (tests); name stands for the file in messages. */
int dc_parse_info(const char *text, size_t len, const char *name, dc_trace_info *out,
                  char *err, size_t errlen);

/* The scanner itself: calls scalar for every string, number or literal
 * with its dotted path ("cpu.family", "streams.0.name"); strings raw, their
 * escapes undecoded. Returns 0, or -1 with "NAME: offset N: what" in err. */
typedef void (*dc_json_scalar)(const char *path, const char *val, size_t len, bool is_str,
                               void *ctx);
int dc_json_scan(const char *text, size_t len, const char *name, dc_json_scalar scalar,
                 void *ctx, char *err, size_t errlen);
/* A JSON integer scalar as dc_json_scan passes it. */
bool dc_json_int(const char *v, size_t len, long long *out);

#endif
