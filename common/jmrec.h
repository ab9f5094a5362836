/* Typed views of jvm/meta.jpt records: the one place that knows each
 * payload's layout (docs/FORMAT.md). Strings and byte arrays point into the
 * mapped file; nothing is allocated. */
#ifndef JPT_COMMON_JMREC_H
#define JPT_COMMON_JMREC_H

#include "common/jmeta.h"

typedef struct jm_code {
    uint64_t vaddr, size, code_offset;
} jm_code;

typedef struct jm_heap {
    uint64_t low, high;
    jm_slice name;
} jm_heap;

/* Inline-stack records of an NMETHOD_LOAD, walked with jm_pcs_next. */
typedef struct jm_pcs {
    jm_cur cur;
    uint32_t left;
} jm_pcs;

typedef struct jm_frame {
    uint64_t method_id;
    int32_t bci;
} jm_frame;

typedef struct jm_rec {
    uint16_t type;
    uint64_t tsc;
    union {
        struct { jm_slice vm_name, vm_version, vm_vendor, java_home, options; uint32_t mode; } jvm_info;
        struct { uint64_t low, high; uint32_t nheaps; jm_cur heaps; } code_cache;
        struct { uint64_t begin, end; int32_t bytecode; jm_slice description; } codelet;
        struct { jm_code code; uint32_t kind; jm_slice name; } blob;
        struct { uint64_t method_id, class_id; jm_slice class_sig, name, sig; uint32_t modifiers; } method;
        struct { uint64_t class_id; jm_slice class_sig; uint32_t origin; jm_slice bytes; } class_file;
        struct { uint64_t class_id; jm_slice class_sig; uint32_t flags, nmethods; jm_cur methods; } class_prepare;
        struct { uint32_t n; jm_cur ids; } classes_initialized;
        struct { uint64_t method_id; int32_t max_stack, max_locals; jm_slice bytecode; } method_bytecode;
        struct { uint64_t class_id; uint32_t cp_count; jm_slice bytes; } constant_pool;
        struct { jm_code code; uint64_t method_id; int32_t level; uint32_t npcs; jm_pcs pcs; } nmethod_load;
        struct { uint64_t method_id, vaddr; } nmethod_unload;
        struct { jm_code code; jm_slice name; } dynamic_code;
        struct { jm_code code; } patch;
        struct { uint64_t java_tid; uint32_t native_tid; jm_slice name; } thread;
        struct { uint32_t native_tid; uint64_t method_id; int32_t bci; uint8_t by_exception; } ref;
        struct { jm_slice text; } warning;
        struct { uint32_t n; jm_cur items; } stats;
    } u;
} jm_rec;

/* Parses rec's payload. Returns 0; or -1 with "offset N: what" (N the file
 * offset of the bad field) in err. Unknown types parse as empty (0). */
int jm_parse(const jm_record *rec, jm_rec *out, char *err, size_t errlen);

/* Next heap of a CODE_CACHE record (left starts at nheaps): 1, 0 at the
 * end, -1 on bad data. */
int jm_heaps_next(jm_cur *c, uint32_t *left, jm_heap *h);
/* Next pc record of an NMETHOD_LOAD: fills pc and depth, and up to max
 * frames (innermost first); 1, 0 at the end, -1 on bad data. */
int jm_pcs_next(jm_pcs *it, uint64_t *pc, uint32_t *depth, jm_frame *frames, uint32_t max);
/* Next u64 of a CLASS_PREPARE method list: 1, 0 at the end, -1 on bad data. */
int jm_methods_next(jm_cur *c, uint32_t *left, uint64_t *method_id);
/* Next STATS item. */
int jm_stats_next(jm_cur *c, uint32_t *left, jm_slice *name, uint64_t *value);

#endif
