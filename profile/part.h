/* The partial result's data, shared by the files of sharded decoding:
 * pieces and their levels (part.c), building them (shard.c), joining and
 * merging them (partmerge.c), the file (partfile.c). Internal to profile/. */
#ifndef JPT_PROFILE_PART_H
#define JPT_PROFILE_PART_H

#include <glib.h>

#include "profile/shard.h"

/* The method of a level's root node (a child of node 0, site = level). */
#define PF_LEVEL_ROOT (UINT64_MAX - 1)
/* More levels than this in a piece is not a real stack. */
#define MAX_LEVELS (1u << 24)

typedef struct pf_level {
    uint64_t claim;          /* the method found running there; PF_NO_METHOD: none */
    uint32_t claim_flags;    /* its FL_CALL's flags */
    int32_t claim_bci;
    bool run_outer;          /* the outermost frame of the run of found frames */
} pf_level;

typedef struct pf_piece {
    uint32_t tid;
    uint64_t from, to;
    bool relative;           /* starts inside the stream: in an unknown context */
    bool started;            /* an event was applied */
    /* The first event continues the stretch of the piece before (no
     * segment of its own came first): the time from the previous piece's
     * last event to join_tsc goes to where that piece ended. */
    bool join, join_counted;
    uint64_t join_tsc;
    /* The segment a relative piece's reconstruction started with (not one
     * of the single decode): where the thread's time starts when nothing
     * came before. */
    bool has_start_tsc;
    uint64_t start_tsc;
    bool timed;
    uint64_t last_tsc;       /* the largest time seen */
    pf_cct *tree;            /* thread root (site tid) and level roots under node 0 */
    pf_level *levels;
    uint32_t nlevels;
    int32_t final;           /* where it ended; valid when started */
    /* Of a thread whose stream is split: the classes its flow showed objects
     * of and, of a relative piece, those its choices between call targets
     * took to have none (rp_classes); class name -> itself. */
    GHashTable *made, *assumed;
} pf_piece;

typedef struct part_method {
    uint32_t modifiers;
    char *klass, *name, *sig;
} part_method;

struct pf_part {
    uint32_t shards;
    bool whole_threads;
    uint8_t trace_id[32], plan_id[32];
    pf_cct_opts opts;
    pf_timebase tb;          /* the trace's TSC frequency */
    char *title;
    uint8_t *have;           /* bitmap of the shards held */
    pf_shard_piece *plan;
    size_t nplan;
    GPtrArray *pieces;       /* pf_piece *, by tid then from, adjacent ones joined */
    GHashTable *methods;     /* uint64_t * -> part_method * */
    GHashTable *threads;     /* tid -> char * */
    pf_part_stats st;
    pf_names *names;         /* made on demand */
};

/* class name -> itself */
GHashTable *pf_class_set_new(void);
void pf_class_set_add(GHashTable *set, const char *klass);
GHashTable *pf_class_set_copy(GHashTable *set);

pf_piece *pf_piece_new(const pf_cct_opts *opts, uint32_t tid, uint64_t from, uint64_t to);
void pf_piece_free(pf_piece *p);
int32_t pf_level_root(pf_piece *p, uint32_t j);
int64_t pf_level_of(const pf_cct *t, int32_t n);

pf_part *pf_part_new(void);
void pf_part_add_method(pf_part *p, uint64_t id, uint32_t modifiers, const char *klass,
                        const char *name, const char *sig);
bool pf_part_has_shard(const pf_part *p, uint32_t k);

/* The plan's id from its trace's id and its pieces. */
void pf_plan_identity(pf_shard_plan *p);

#endif
