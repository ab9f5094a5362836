/* Call-site state inference, internal to the model's loader (model.c):
 * patches cut into one piece per call site and dated by what HotSpot ties
 * them to (callsites.c), and the made-up states of sites the agent saw
 * change too late (sitestates.c). The patch fields they fill are documented
 * in model.h. */
#ifndef JPT_DECODER_CALLSITES_H
#define JPT_DECODER_CALLSITES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <glib.h>

#include "decoder/model.h"

#define MAX_SITE_PATCH 65536 /* bigger patches are not searched (a refilled blob area) */

/* qsort, which must not be given a NULL array even when it is empty. */
static inline void sort_n(void *base, size_t n, size_t size,
                          int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

/* Patch indices by owner, in time order within an owner: the patches of
 * patch i's owner before it are seq[first[i] .. pos[i]). */
typedef struct owner_order {
    uint32_t *seq, *first, *pos;
} owner_order;

/* model.c */
void dm_warn(dm_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int dm_cmp_patch(const void *a, const void *b);   /* by start time, then record time */

/* callsites.c */
owner_order dm_order_by_owner(const dm_model *m);
/* The bytes [lo, lo + n) of patch i's owner before patch i. */
void dm_bytes_before(const dm_model *m, const owner_order *o, const uint8_t *code, size_t i,
                     uint64_t lo, uint64_t n, uint8_t *out);
bool dm_is_stub_call_resolver_at(const dm_model *m, uint64_t addr, uint64_t tsc);
bool dm_is_virtual_call_resolver_at(const dm_model *m, uint64_t addr, uint64_t tsc);
/* Whether patch p writes a jump to wrong_method_stub (a not-entrant mark). */
bool dm_writes_not_entrant(const dm_model *m, const dm_patch *p, const uint8_t *code);
void dm_find_call_sites(dm_model *m, const uint8_t *code);
void dm_start_at_stub_fill(dm_model *m);
void dm_start_at_new_version(dm_model *m, const uint8_t *code);
void dm_start_at_callee_code(dm_model *m);

/* sitestates.c */
void dm_make_up_site_states(dm_model *m, const uint8_t *code, GHashTable *class_files);

#endif
