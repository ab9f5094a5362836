/* Checks decoding of an emulated trace against the emulator's own record of
 * what ran: emucheck TRACE.DIR [--opcodes FILE] [--min-match PCT] [--where N].
 *
 * With --test-log, the emulator writes eval/code.bin (JPTCODE1, then records
 * u64 ip | u8 len | bytes, numbered from 1) and eval/tid-<TID>.log (u32 pairs
 * {first id, count}: a run of consecutive code ids executed; {0xffffffff,
 * type} is followed by two u64 offsets of a marker). That gives the exact
 * sequence of executed instruction addresses of each thread.
 *
 * Every block the decoder returns must lie on that sequence: its first
 * instruction at the current position and its last `ninsn - 1` positions
 * later. A block that does not fit there (after a gap: code the metadata
 * lacks, trace lost) is looked for in its own time: among the executed
 * positions from just before the last PSB (the log's PSB markers with their
 * TSC) not after the block's TSC to a few PSBs after it, the first fit at
 * or after the current position, else the first before it. The window
 * follows the block's time, not the last match, so a block that once
 * fitted a wrong loop iteration cannot leave the blocks after it behind,
 * and it reaches back no further than the block's time allows, so a wrong
 * block (a stale stub a call went into) that also fits an earlier pass of
 * the thread over the same code cannot move the position back to that
 * pass, where the right blocks after it would fit as long as that pass ran
 * the same code; after a loss it reaches back no further than the PSB the
 * collector restarted with (the loop before the loss ran the same code, and
 * the block's time, that PSB's, would allow a fit there); an index of the positions of
 * every address makes a block that fits nowhere cheap. A block that fits a
 * few instructions on is placed there first; one that does not is held,
 * and so are a few more in a row, until one fits within a few instructions
 * of the current position: the held ones stood in for what ran there (a
 * call through a stale stub) and are misplaced, and the position stays
 * where the right blocks are (not for the interpreter's templates, which
 * follow one another in every loop). Executed positions
 * are counted as decoded once, however often blocks land on them. Blocks of
 * compiled code whose inner path the decoder recovers (decoder/jitpath.h)
 * must have exactly the executed path; a wrong one counts as a misplaced
 * block. Prints per thread: instructions executed, instructions decoded in
 * place, blocks, blocks that do not fit, instructions not decoded, the
 * decoder's gaps and those from the collector's losses. Exits 0 if every
 * block fits and at least PCT percent
 * (default 50) of all executed instructions were decoded. --opcodes writes
 * the bytecode events' mnemonics of every thread, one per line ("# tid N"
 * headers). --where N prints, per thread, where the instructions that were
 * not decoded in place are: their runs grouped by the code the first
 * instruction of each lies in (a codelet, a stub, a compiled method's
 * version at that time), the N largest groups. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "decoder/bytecodes.h"
#include "decoder/decode.h"
#include "decoder/jitpath.h"

/* Where a block is looked for, from its time: up to PSB_LAG PSBs after the
 * last PSB whose TSC is not above the block's (libipt reports a PSB's time
 * only once a later query consumed it, so a block's time may lag by a PSB
 * or two), and back to LEAD instructions before that PSB (a block's time
 * never leads its place, but for the blocks decoded just before a PSB: the
 * query that ends a block may read the PSB+ after it). */
#define PSB_LAG 3
#define LEAD 1024
/* How far past blocks that do not fit the next one may fit for them to
 * count as standing in for what ran, and how many of them in a row at most
 * (on_block): a stale static call stub is two blocks (`mov rbx`, `jmp`). */
#define SUBSTITUTE_SPAN 64
#define HELD_MAX 4

typedef struct code_tab {
    uint64_t *ip;            /* by id - 1 */
    size_t n;
} code_tab;

static bool load_codes(const char *dir, code_tab *t)
{
    char *path = g_build_filename(dir, "eval", "code.bin", NULL);
    gchar *data;
    gsize len;
    bool ok = g_file_get_contents(path, &data, &len, NULL) && len >= 8 &&
              !memcmp(data, "JPTCODE1", 8);
    if (!ok) {
        fprintf(stderr, "emucheck: %s: missing or not a JPTCODE1 file\n", path);
        g_free(path);
        return false;
    }
    GArray *ips = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    size_t p = 8;
    while (p + 9 <= len) {
        uint64_t ip;
        memcpy(&ip, data + p, 8);
        uint8_t n = (uint8_t)data[p + 8];
        g_array_append_val(ips, ip);
        p += 9u + n;
    }
    t->n = ips->len;
    t->ip = (uint64_t *)(void *)g_array_free(ips, FALSE);
    g_free(data);
    g_free(path);
    return true;
}

/* A PSB of the written stream: at which executed position it lies, its TSC. */
typedef struct psb_mark {
    size_t pos;
    uint64_t tsc;
    uint64_t off;            /* in the written stream */
} psb_mark;

/* The TSC packet of the PSB+ at offset off of the stream; 0 if none. */
static uint64_t psb_tsc(const uint8_t *pt, size_t len, uint64_t off)
{
    if (off >= len || len - off < 16)
        return 0;
    for (size_t k = 0; k < 16; k += 2)
        if (pt[off + k] != 0x02 || pt[off + k + 1] != 0x82)
            return 0;
    for (size_t p = off + 16; p + 8 <= len && p < off + 64; p++)
        if (pt[p] == 0x19) {
            uint64_t t = 0;
            for (int k = 6; k >= 0; k--)
                t = t << 8 | pt[p + 1 + (size_t)k];
            return t;
        }
    return 0;
}

/* The executed instruction addresses of one thread; psbs gets the PSB
 * markers whose TSC could be read. */
static GArray *load_log(const char *dir, uint32_t tid, const code_tab *t, GArray *psbs)
{
    char ptname[64];
    snprintf(ptname, sizeof ptname, "tid-%u.pt", tid);
    char *ptpath = g_build_filename(dir, "pt", ptname, NULL);
    gchar *pt = NULL;
    gsize ptlen = 0;
    if (!g_file_get_contents(ptpath, &pt, &ptlen, NULL))
        ptlen = 0;
    g_free(ptpath);
    char name[64];
    snprintf(name, sizeof name, "tid-%u.log", tid);
    char *path = g_build_filename(dir, "eval", name, NULL);
    gchar *data;
    gsize len;
    if (!g_file_get_contents(path, &data, &len, NULL)) {
        g_free(path);
        return NULL;
    }
    GArray *seq = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    size_t p = 0;
    while (p + 8 <= len) {
        uint32_t r[2];
        memcpy(r, data + p, 8);
        p += 8;
        if (r[0] == 0xffffffffu) {
            uint64_t off;       /* where the PSB went in the written stream (~0: lost) */
            if (p + 16 <= len && r[1] == 1) {
                memcpy(&off, data + p + 8, 8);
                psb_mark mk = { seq->len, psb_tsc((const uint8_t *)pt, ptlen, off), off };
                if (mk.tsc)
                    g_array_append_val(psbs, mk);
            }
            p += 16;
            continue;
        }
        for (uint32_t i = 0; i < r[1]; i++) {
            uint64_t id = (uint64_t)r[0] + i;
            uint64_t ip = id >= 1 && id <= t->n ? t->ip[id - 1] : 0;
            g_array_append_val(seq, ip);
        }
    }
    g_free(data);
    g_free(pt);
    g_free(path);
    return seq;
}

/* Where each address occurs in a thread's executed sequence: for address
 * slot k (by first appearance), the positions at[first[k]] .. at[first[k + 1]]
 * in increasing order. */
typedef struct pos_index {
    GHashTable *slot;        /* address -> slot + 1 */
    uint32_t *first;         /* nslots + 1 */
    uint32_t *at;            /* n */
} pos_index;

static void index_build(pos_index *x, const uint64_t *seq, size_t n)
{
    x->slot = g_hash_table_new(g_int64_hash, g_int64_equal);
    uint32_t *slot_of = g_new(uint32_t, n);
    GArray *count = g_array_new(FALSE, TRUE, sizeof(uint32_t));
    for (size_t q = 0; q < n; q++) {
        gpointer v = g_hash_table_lookup(x->slot, &seq[q]);
        uint32_t k;
        if (v) {
            k = (uint32_t)GPOINTER_TO_UINT(v) - 1;
        } else {
            k = count->len;
            g_array_set_size(count, k + 1);
            g_hash_table_insert(x->slot, (gpointer)&seq[q], GUINT_TO_POINTER(k + 1));
        }
        slot_of[q] = k;
        g_array_index(count, uint32_t, k)++;
    }
    x->first = g_new(uint32_t, count->len + 1);
    uint32_t sum = 0;
    for (guint k = 0; k < count->len; k++) {
        x->first[k] = sum;
        sum += g_array_index(count, uint32_t, k);
        g_array_index(count, uint32_t, k) = x->first[k];
    }
    x->first[count->len] = sum;
    x->at = g_new(uint32_t, n ? n : 1);
    for (size_t q = 0; q < n; q++)
        x->at[g_array_index(count, uint32_t, slot_of[q])++] = (uint32_t)q;
    g_array_free(count, TRUE);
    g_free(slot_of);
}

static void index_free(pos_index *x)
{
    g_hash_table_destroy(x->slot);
    g_free(x->first);
    g_free(x->at);
}

typedef struct check {
    const uint64_t *seq;
    const pos_index *where;
    size_t n, pos;
    const psb_mark *psb;
    size_t npsb;
    uint64_t *covered;          /* a bit per executed position decoded */
    uint64_t blocks, bad_blocks, matched;
    uint64_t paths, bad_paths;  /* compiled-code blocks whose inner path was recovered */
    const dm_model *m;
    jp_cache *jp;
    FILE *ops;
    struct pt_block held[HELD_MAX];   /* blocks in a row that did not fit, until one does */
    uint64_t held_tsc[HELD_MAX];
    size_t nheld;
    bool after_gap;
    size_t floor;               /* no block lies before: the PSB decoding resumed at after a loss */
} check;

/* Positions [at, at + n) were decoded: counted once however often a block
 * lands on them. */
static void cover(check *c, size_t at, size_t n)
{
    for (size_t q = at; q < at + n; q++) {
        uint64_t bit = 1ull << (q & 63);
        if (!(c->covered[q >> 6] & bit)) {
            c->covered[q >> 6] |= bit;
            c->matched++;
        }
    }
}

/* A recovered inner path must be exactly what ran. */
static void check_path(check *c, const struct pt_block *b, uint64_t tsc, size_t at)
{
    const dm_code *v = dm_code_at(c->m, b->ip, tsc);
    const uint64_t *path;
    if (!v || v->kind != DM_CODE_NMETHOD || b->ninsn <= 2 ||
        !jp_path(c->jp, v, b->ip, b->end_ip, b->ninsn, &path))
        return;
    c->paths++;
    if (memcmp(path, c->seq + at, b->ninsn * sizeof(uint64_t))) {
        if (c->bad_paths < 5)
            fprintf(stderr, "emucheck: inner path of block 0x%" PRIx64 "..0x%" PRIx64
                    " differs from what ran\n", b->ip, b->end_ip);
        c->bad_paths++;
    }
}

static bool fits_at(const check *c, const struct pt_block *b, size_t q)
{
    return q + b->ninsn <= c->n && c->seq[q] == b->ip && c->seq[q + b->ninsn - 1] == b->end_ip;
}

static void place(check *c, const struct pt_block *b, uint64_t tsc, size_t q)
{
    check_path(c, b, tsc, q);
    cover(c, q, b->ninsn);
    c->pos = q + b->ninsn;
}

static void misplaced(check *c, const struct pt_block *b, uint64_t tsc)
{
    if (c->bad_blocks < 5)
        fprintf(stderr, "emucheck: block 0x%" PRIx64 "..0x%" PRIx64 " (%zu insns, at %" PRIu64
                " as ptdecode events shows it) does not fit the executed sequence at position %zu"
                " (0x%" PRIx64 ")\n", b->ip, b->end_ip, (size_t)b->ninsn,
                tsc >= c->m->start_tsc ? tsc - c->m->start_tsc : 0, c->pos, c->pos < c->n ? c->seq[c->pos] : 0);
    c->bad_blocks++;
}

/* A block that does not fit at the current position (after a gap: code the
 * metadata lacks, trace lost) is placed where it fits in its own time,
 * found from the PSB markers (PSB_LAG, LEAD). The first fit at or after the
 * current position wins, else the first one before it: the window follows
 * the block's time, not the last match, so a block that once fitted a wrong
 * loop iteration cannot leave the blocks after it behind. */
static void place_in_window(check *c, const struct pt_block *b, uint64_t tsc)
{
    size_t lo = 0, hi = c->npsb;
    while (lo < hi) {           /* first PSB whose TSC is above the block's */
        size_t mid = (lo + hi) / 2;
        if (c->psb[mid].tsc <= tsc)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t start = lo ? c->psb[lo - 1].pos : 0;
    start = start > LEAD ? start - LEAD : 0;
    if (start < c->floor)
        start = c->floor;
    size_t limit = lo + PSB_LAG < c->npsb ? c->psb[lo + PSB_LAG].pos : c->n;
    gpointer v = g_hash_table_lookup(c->where->slot, &b->ip);
    if (!v) {
        misplaced(c, b, tsc);
        return;
    }
    uint32_t slot = (uint32_t)GPOINTER_TO_UINT(v) - 1;
    size_t from = c->where->first[slot], to = c->where->first[slot + 1];
    while (from < to) {         /* first occurrence in the window */
        size_t mid = (from + to) / 2;
        if (c->where->at[mid] < start)
            from = mid + 1;
        else
            to = mid;
    }
    size_t fit = SIZE_MAX;
    for (size_t e = from; e < c->where->first[slot + 1]; e++) {
        size_t q = c->where->at[e];
        if (q >= limit || q + b->ninsn > c->n)
            break;
        if (c->seq[q + b->ninsn - 1] != b->end_ip)
            continue;
        if (q >= c->pos) {
            fit = q;
            break;
        }
        if (fit == SIZE_MAX)
            fit = q;
    }
    if (fit != SIZE_MAX)
        place(c, b, tsc, fit);
    else
        misplaced(c, b, tsc);
}

/* Whether block b lies in an interpreter codelet. */
static bool in_interpreter(const check *c, const struct pt_block *b, uint64_t tsc)
{
    return dm_lookup(c->m, b->ip, tsc).kind == DM_AT_CODELET;
}

/* Places the held blocks in their windows, in order. */
static void release_held(check *c)
{
    for (size_t i = 0; i < c->nheld; i++)
        place_in_window(c, &c->held[i], c->held_tsc[i]);
    c->nheld = 0;
}

/* A block that fits neither at the current position nor within
 * SUBSTITUTE_SPAN instructions after it is held, and so are up to
 * HELD_MAX in a row, until one comes that fits within SUBSTITUTE_SPAN
 * instructions of the current position: then the held blocks stood in for
 * what ran there (a call through a stale stub: the wrong stub's
 * instructions, then the right path again) and are misplaced; the position
 * does not leap to wherever a wrong block happens to fit later, leaving
 * the right blocks after it to fit that later pass or none. Otherwise, and
 * for blocks of the interpreter (whose templates follow one another in
 * every loop, so that the next block fits near the position whatever went
 * wrong: the decoder skipping a template after lost trace), the held
 * blocks are placed in their windows. After a gap the blocks resume
 * elsewhere, so the first one goes to its window at once. */
static void on_block(const struct pt_block *b, uint64_t tsc, void *vp)
{
    check *c = vp;
    c->blocks++;
    bool resync = c->after_gap;
    c->after_gap = false;
    if (c->nheld) {
        bool interpreter = false;
        for (size_t i = 0; i < c->nheld && !interpreter; i++)
            interpreter = in_interpreter(c, &c->held[i], c->held_tsc[i]);
        for (size_t d = 0; d <= SUBSTITUTE_SPAN && !interpreter; d++)
            if (fits_at(c, b, c->pos + d)) {
                for (size_t i = 0; i < c->nheld; i++)
                    misplaced(c, &c->held[i], c->held_tsc[i]);
                c->nheld = 0;
                place(c, b, tsc, c->pos + d);
                return;
            }
        if (interpreter || resync || c->nheld == HELD_MAX)
            release_held(c);
    }
    if (resync) {
        place_in_window(c, b, tsc);
        return;
    }
    for (size_t d = 0; d <= SUBSTITUTE_SPAN && !c->nheld; d++)
        if (fits_at(c, b, c->pos + d)) {  /* the instructions before it not decoded */
            place(c, b, tsc, c->pos + d);
            return;
        }
    c->held[c->nheld] = *b;
    c->held_tsc[c->nheld++] = tsc;
}

/* A group of --where: the runs of positions not decoded that begin in one
 * piece of code. */
typedef struct where_group {
    char *code;
    uint64_t insns, runs;
} where_group;

static int cmp_where(const void *a, const void *b)
{
    const where_group *x = a, *y = b;
    return x->insns != y->insns ? (x->insns < y->insns ? 1 : -1) : strcmp(x->code, y->code);
}

/* What is at ip at time tsc, named for --where. */
static char *code_name(const dm_model *m, uint64_t ip, uint64_t tsc)
{
    dm_where at = dm_lookup(m, ip, tsc);
    char buf[512];
    switch (at.kind) {
    case DM_AT_CODELET:
        return g_strdup_printf("codelet %s", at.codelet->desc);
    case DM_AT_CODE:
        if (at.code->kind == DM_CODE_NMETHOD)
            return g_strdup_printf("compiled %s", dm_method_str(m, at.code->method_id, buf,
                                                                 sizeof buf));
        return g_strdup_printf("stub %s", at.code->name ? at.code->name : "?");
    case DM_AT_BLOB:
        return g_strdup_printf("blob %s", at.blob->name ? at.blob->name : "?");
    default:
        return g_strdup("no code");
    }
}

static void print_where(const check *c, uint32_t tid, size_t top)
{
    GHashTable *by = g_hash_table_new(g_str_hash, g_str_equal);
    GArray *groups = g_array_new(FALSE, FALSE, sizeof(where_group));
    size_t psb = 0;
    for (size_t q = 0; q < c->n;) {
        if (c->covered[q >> 6] & (1ull << (q & 63))) {
            q++;
            continue;
        }
        size_t end = q;
        while (end < c->n && !(c->covered[end >> 6] & (1ull << (end & 63))))
            end++;
        while (psb + 1 < c->npsb && c->psb[psb + 1].pos <= q)
            psb++;
        char *name = code_name(c->m, c->seq[q], c->npsb ? c->psb[psb].tsc : 0);
        gpointer v = g_hash_table_lookup(by, name);
        if (!v) {
            where_group g = { name, 0, 0 };
            g_array_append_val(groups, g);
            v = GUINT_TO_POINTER(groups->len);
            g_hash_table_insert(by, name, v);
        } else {
            g_free(name);
        }
        where_group *g = &g_array_index(groups, where_group, GPOINTER_TO_UINT(v) - 1);
        g->insns += end - q;
        g->runs++;
        q = end;
    }
    g_array_sort(groups, cmp_where);
    for (guint i = 0; i < groups->len; i++) {
        where_group *g = &g_array_index(groups, where_group, i);
        if (i < top)
            printf("tid %u: not decoded %" PRIu64 " in %" PRIu64 " runs from %s\n", tid, g->insns,
                   g->runs, g->code);
        g_free(g->code);
    }
    g_hash_table_destroy(by);
    g_array_free(groups, TRUE);
}

/* Where the thread ran when the stream resumed at offset off after a loss:
 * the collector restarts with a PSB, the first one written at or after off. */
static size_t resume_position(const check *c, uint64_t off)
{
    size_t lo = 0, hi = c->npsb;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->psb[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->npsb ? c->psb[lo].pos : c->n;
}

static int on_event(const dc_event *ev, void *vp)
{
    check *c = vp;
    if (ev->kind == DC_GAP) {
        release_held(c);
        c->after_gap = true;
        if (ev->reason == DC_GAP_LOST)
            c->floor = resume_position(c, ev->end_offset);
    }
    if (c->ops && ev->kind == DC_BYTECODE)
        fprintf(c->ops, "%s\n", bc_name(ev->opcode));
    else if (c->ops && ev->kind == DC_METHOD_ENTRY)
        fprintf(c->ops, "(entry)\n");
    else if (c->ops && ev->kind == DC_GAP)
        fprintf(c->ops, "(gap)\n");
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *ops_path = NULL;
    double min_pct = 50;
    size_t where_top = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--opcodes") && i + 1 < argc)
            ops_path = argv[++i];
        else if (!strcmp(argv[i], "--min-match") && i + 1 < argc)
            min_pct = atof(argv[++i]);
        else if (!strcmp(argv[i], "--where") && i + 1 < argc)
            where_top = (size_t)strtoul(argv[++i], NULL, 10);
        else if (argv[i][0] == '-' || dir) {
            dir = NULL;        /* --help, an unknown option, or a second directory */
            break;
        } else
            dir = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "usage: emucheck TRACE.DIR [--opcodes FILE] [--min-match PCT] "
                "[--where N]\n(a trace recorded with ptrec --emulate --test-log)\n");
        return 2;
    }
    char err[1024];
    dm_model *m = dm_load(dir, err, sizeof err);
    if (!m) {
        fprintf(stderr, "emucheck: %s\n", err);
        return 1;
    }
    dc_trace_info info;
    dc_read_info(dir, &info, err, sizeof err);
    di_cache *cache = di_cache_new(m, err, sizeof err);
    code_tab codes = { 0 };
    if (!cache || !load_codes(dir, &codes))
        return 1;
    FILE *ops = ops_path ? fopen(ops_path, "w") : NULL;
    uint32_t *tids;
    size_t n = dc_list_thread_streams(dir, &tids, NULL);
    uint64_t total = 0, matched = 0, bad = 0, paths = 0;
    jp_cache *jp = jp_new(m);
    for (size_t i = 0; i < n; i++) {
        GArray *psbs = g_array_new(FALSE, FALSE, sizeof(psb_mark));
        GArray *seq = load_log(dir, tids[i], &codes, psbs);
        if (!seq) {
            g_array_free(psbs, TRUE);
            continue;
        }
        pos_index where;
        index_build(&where, (const uint64_t *)(void *)seq->data, seq->len);
        check c = { .seq = (const uint64_t *)(void *)seq->data, .n = seq->len, .ops = ops,
                    .where = &where,
                    .m = m, .jp = jp, .psb = (const psb_mark *)(void *)psbs->data,
                    .npsb = psbs->len, .covered = g_new0(uint64_t, seq->len / 64 + 1) };
        if (ops)
            fprintf(ops, "# tid %u\n", tids[i]);
        char pt[4096], idx[4096];
        snprintf(pt, sizeof pt, "%s/pt/tid-%u.pt", dir, tids[i]);
        snprintf(idx, sizeof idx, "%s/pt/tid-%u.idx", dir, tids[i]);
        dc_output out = { .sink = on_event, .block = on_block, .ctx = &c };
        dc_stats st;
        if (dc_decode_stream(&(dc_trace){ m, cache, &info }, pt, idx, &out, &st, err,
                             sizeof err) < 0) {
            fprintf(stderr, "emucheck: %s\n", err);
            bad++;
        }
        release_held(&c);
        uint64_t gaps = st.gaps[1] + st.gaps[2] + st.gaps[3] + st.gaps[4];
        printf("tid %u: executed %zu, decoded in place %" PRIu64 " (%.2f%%), blocks %" PRIu64
               ", misplaced blocks %" PRIu64 ", not decoded %" PRIu64 ", %" PRIu64 " gaps, "
               "lost gaps %" PRIu64 ", bytecodes %" PRIu64 "\n", tids[i], c.n, c.matched,
               c.n ? 100.0 * (double)c.matched / (double)c.n : 100.0, c.blocks, c.bad_blocks,
               c.n - c.matched, gaps, st.gaps[DC_GAP_LOST], st.events[DC_BYTECODE]);
        if (c.paths)
            printf("tid %u: compiled-code blocks with a recovered inner path %" PRIu64
                   ", wrong %" PRIu64 "\n", tids[i], c.paths, c.bad_paths);
        if (where_top)
            print_where(&c, tids[i], where_top);
        total += c.n;
        matched += c.matched;
        bad += c.bad_blocks + c.bad_paths;
        paths += c.paths;
        index_free(&where);
        g_free(c.covered);
        g_array_free(seq, TRUE);
        g_array_free(psbs, TRUE);
    }
    if (ops)
        fclose(ops);
    double pct = total ? 100.0 * (double)matched / (double)total : 0;
    printf("total: executed %" PRIu64 ", decoded %" PRIu64 " (%.2f%%), inner paths checked %"
           PRIu64 ", misplaced blocks %" PRIu64 "\n", total, matched, pct, paths, bad);
    g_free(tids);
    g_free(codes.ip);
    jp_free(jp);
    di_cache_free(cache);
    dm_free(m);
    return bad == 0 && total > 0 && pct >= min_pct ? 0 : 1;
}
