/* Calling context tree (CCT) of a reconstructed flow (reconstruct/flow.h).
 *
 * Node 0 is the merged root ("all threads"); its children are one root per
 * native thread (method PF_NO_METHOD, site = tid); below them one node per
 * (parent, method, call site) where the call site is the caller's bci when
 * call sites are distinguished and -1 otherwise. Per node: calls (FL_CALL
 * events that entered it), bytecodes executed in it (sum of FL_BYTECODE
 * counts, and the number of FL_BYTECODE events), and time in TSC ticks: the
 * interval between two consecutive events of a thread goes to the node on
 * top of that thread's stack during it. Inclusive values are filled in by
 * pf_cct_finalize.
 *
 * Construction follows the flow's segments: a segment's events nest below
 * the path of its starting stack (materialized under the thread root, call
 * sites unknown), and a FL_RETURN at the thread root is ignored. Two trees
 * merge by union of paths and sum of metrics, which is associative and
 * commutative, so segments can be built into partial trees on any thread in
 * any order (ParCCT, pf_par_*) and give the tree the sequential builder
 * (pf_seq_*) gives.
 *
 * Events whose origin is excluded still move the stack (the structure of
 * the flow is kept) but add no calls, bytecodes or time; nodes reached only
 * through them have zero metrics. */
#ifndef JPT_PROFILE_CCT_H
#define JPT_PROFILE_CCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reconstruct/flow.h"

#define PF_NO_METHOD UINT64_MAX  /* method of the merged root and the thread roots */

/* How a node's frame ran, as far as the flow tells (pf_node.kinds, OR-ed
 * over its events; 0 when nothing told). */
#define PF_KIND_INTERPRETED 0x01 /* entered by an interpreted call, or ran interpreted bytecodes */
#define PF_KIND_COMPILED    0x02 /* entered as compiled code, or ran compiled bytecodes */
#define PF_KIND_INLINED     0x04 /* entered as an inlined frame of compiled code */
#define PF_KIND_NATIVE      0x08 /* a native method's call */
/* Found already running right at the thread root (FL_F_CONTEXT): the frames
 * below it are not in the trace. */
#define PF_KIND_TRUNCATED   0x10

typedef struct pf_cct_opts {
    bool call_sites;                 /* key nodes by the caller's bci too */
    bool include[FL_ORIGIN_COUNT];   /* origins whose events are counted */
} pf_cct_opts;

/* Call sites off, every origin included. */
pf_cct_opts pf_cct_default_opts(void);

typedef struct pf_node {
    int32_t parent;                  /* -1 for node 0 */
    int32_t first_child, next_sibling; /* -1 terminated */
    uint64_t method;                 /* PF_NO_METHOD for roots */
    int64_t site;                    /* caller bci or -1; tid for thread roots */
    uint64_t calls;
    uint64_t self_bytecodes, self_bc_events, self_time;
    /* inclusive, valid after pf_cct_finalize */
    uint64_t bytecodes, bc_events, time;
    uint32_t subtree;                /* nodes in the subtree, itself included (finalized) */
    uint32_t kinds;                  /* PF_KIND_* */
} pf_node;

typedef struct pf_cct {
    pf_cct_opts opts;
    pf_node *nodes;
    uint32_t count, cap;
    int32_t *slots;                  /* open-addressing index of (parent, method, site) */
    uint32_t slot_cap;
    bool finalized;                  /* preorder, inclusive values and subtree sizes set */
} pf_cct;

pf_cct *pf_cct_new(const pf_cct_opts *opts);
void pf_cct_free(pf_cct *t);
/* The child of parent keyed (method, site), created with zero metrics when
 * absent. Returns its index, or -1 when out of memory. */
int32_t pf_cct_child(pf_cct *t, int32_t parent, uint64_t method, int64_t site);
/* The existing child, or -1. */
int32_t pf_cct_find(const pf_cct *t, int32_t parent, uint64_t method, int64_t site);
int32_t pf_cct_thread_root(pf_cct *t, uint32_t tid);

/* Adds src's paths and metrics to dst (same call_sites option). With
 * collapse_threads the thread roots of src fold into dst's node 0: the
 * tree of contexts over all threads. Returns 0, -1 out of memory. */
int pf_cct_merge(pf_cct *dst, const pf_cct *src, bool collapse_threads);
/* A new tree: t's nodes in preorder (parent[i] < i), children ordered by
 * (method, site), inclusive metrics and subtree sizes filled. Canonical:
 * equal profiles give equal arrays. A finalized t is copied as it is. */
pf_cct *pf_cct_finalize(const pf_cct *t);
/* A new finalized tree: the union of two finalized trees a and b (same
 * options), metrics summed; what finalizing after pf_cct_merge gives, in
 * one sequential pass over both. NULL when out of memory or when either is
 * not finalized. */
pf_cct *pf_cct_merge_finalized(const pf_cct *a, const pf_cct *b);
/* True when two finalized trees are equal node by node; otherwise why in
 * why (may be NULL). */
bool pf_cct_equal(const pf_cct *a, const pf_cct *b, char *why, size_t whylen);

/* ---- building from events ------------------------------------------------ */

/* Where a segment is within a tree. */
typedef struct pf_cursor {
    int32_t node;
    uint64_t last_tsc;
    bool timed;                      /* last_tsc is set */
} pf_cursor;

/* Starts a segment of thread tid at tsc with its starting stack
 * (outermost first; sites may be NULL for unknown call sites). */
pf_cursor pf_cct_begin(pf_cct *t, uint32_t tid, uint64_t tsc, const uint64_t *methods,
                       const int64_t *sites, uint32_t depth);
/* The PF_KIND_* a frame entered by an FL_CALL with these flags gets, at
 * the thread root or below another frame. */
uint32_t pf_call_kind(uint32_t flags, bool at_thread_root);
/* Applies one FL_CALL / FL_RETURN / FL_BYTECODE event. Returns 0, -1 out
 * of memory. */
int pf_cct_apply(pf_cct *t, pf_cursor *c, const fl_event *ev);

/* Sequential builder: an fl_sink over a whole flow. */
typedef struct pf_seq pf_seq;
pf_seq *pf_seq_new(const pf_cct_opts *opts);
int pf_seq_sink(const fl_event *ev, void *seq);   /* fl_sink */
/* The tree built (owned by the caller) and frees the builder. NULL when
 * memory ran out. */
pf_cct *pf_seq_finish(pf_seq *s);

/* Parallel builder (ParCCT): the sink buffers each thread's events in
 * chunks of at most chunk_events events (each started from the stack the
 * previous one ended with; the segments that begin inside a chunk carry
 * their own starting stacks) and hands full ones to a pool of
 * nthreads workers; each worker builds into its own partial tree. At the
 * end the partial trees are finalized in parallel and merged in pairs
 * (pf_cct_merge_finalized), so pf_par_finish returns a finalized tree.
 * At most 2 * nthreads + 2 chunks are buffered at a time: the sink waits
 * for the workers beyond that. */
typedef struct pf_par pf_par;
pf_par *pf_par_new(const pf_cct_opts *opts, unsigned nthreads, uint32_t chunk_events);
int pf_par_sink(const fl_event *ev, void *par);   /* fl_sink */
pf_cct *pf_par_finish(pf_par *p);

#endif
