#include "decoder/image.h"
#include "decoder/x86.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

/* qsort, which must not be given a NULL array even when it is empty. */
static void sort_n(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

/* Sections libipt keeps mapped between uses (LRU beyond this). */
#define ISCACHE_LIMIT (512ull << 20)
/* The longest x86 instruction. */
#define MAX_INSN_BYTES 15
/* Zero runs at least this long in a blob snapshot are not code: see
 * add_blob. */
#define ZERO_RUN 32

enum { EV_END = 0, EV_ADD = 1, EV_PATCH = 2 };  /* order at equal times */

typedef struct change {
    uint64_t tsc;
    uint32_t type, idx;
} change;

/* A call-site resolution patch, by site (model.h). */
typedef struct site_ent {
    uint64_t site;
    uint32_t idx;            /* patch index; ties in patch (time) order */
} site_ent;

typedef struct extent {
    uint64_t off, size, vaddr;
    bool own_bytes;           /* in the model's own bytes (dm_patch.own_bytes), not the code file */
} extent;

struct di_cache {
    const dm_model *m;
    struct pt_image_section_cache *iscache;
    GArray *ext;              /* extent of each section, by isid */
    GArray *blob_isids;       /* sections of all blobs, bottom layer first */
    GArray *code_isids;       /* sections of code version i: code_first[i] .. code_first[i+1] */
    uint32_t *code_first;
    int *patch_isid;
    change *changes;
    size_t nchanges;
    site_ent *sites;          /* sorted by site, then patch index */
    size_t nsites;
    uint64_t site_bits[1024]; /* a bit per hash of every site: most lookups end here */
    GHashTable *by_granule;   /* address >> GRANULE_BITS -> GArray of patch indices (time order) */
    /* Tiles: the address space cut where no two sections of the model, of
     * any time, overlap (see materialize). Sorted by address; the sections
     * of tile t are tile_sec[tile_first[t] .. tile_first[t + 1]). */
    uint32_t ntiles;
    uint64_t *tile_lo, *tile_hi;
    const uint8_t *code;      /* the code file, mapped (NULL if it could not be) */
    size_t code_size;
    uint32_t *tile_first, *tile_sec, *tile_of;  /* tile_of: by isid */
};

/* Patches by address, for di_cache_patches_in: every granule a patch
 * touches lists it. */
#define GRANULE_BITS 6

/* A section cache of one decoder's own, with its own isids, made as its
 * images first need each section (mine[shared isid]). */
struct di_store {
    struct pt_image_section_cache *isc;
    int *mine;
    size_t nmine;
};

/* What libipt hands the read-memory callback of one pt_image. */
typedef struct lazy_ctx {
    di_image *im;
    struct pt_image *img;
} lazy_ctx;

struct di_image {
    di_cache *c;
    /* Where the image's sections live: the shared cache (store NULL), or a
     * store (see di_image_new_resolved) that the image may own. */
    struct pt_image_section_cache *isc;
    di_store *store;
    bool own_store;
    struct pt_image *img, *retired;
    lazy_ctx *ctx, *retired_ctx;
    /* The sections the image shows, in the order they were put in (seq, by
     * isid; 0: not in it), and the tiles whose sections are in the pt_image
     * (done): a section goes into libipt only once its tile is needed. */
    uint32_t *seq, next_seq;
    uint8_t *done;
    int fill_error;           /* the libipt error a tile's filling met (sticky) */
    size_t cursor;            /* next change to apply */
    uint64_t tsc;
    uint8_t *live;            /* per code version */
    uint8_t *early;           /* per patch: applied ahead of its time (a resolution) */
    GArray *early_log;        /* uint32_t: those patches, in the order applied */
    GArray *states;           /* uint32_t: the made-up states among them (model.h) */
    di_stats st;
};

static int cmp_change(const void *a, const void *b)
{
    const change *x = a, *y = b;
    if (x->tsc != y->tsc)
        return x->tsc < y->tsc ? -1 : 1;
    if (x->type != y->type)
        return x->type < y->type ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static uint32_t site_hash(uint64_t ip)
{
    return (uint32_t)((ip * 0x9E3779B97F4A7C15ull) >> 48);   /* 16 bits */
}

static int cmp_site(const void *a, const void *b)
{
    const site_ent *x = a, *y = b;
    if (x->site != y->site)
        return x->site < y->site ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static const char *extent_path(const dm_model *m, bool own_bytes)
{
    return own_bytes ? m->made_up_path : m->code_path;
}

static int add_file_of(di_cache *c, bool own_bytes, uint64_t off, uint64_t size, uint64_t vaddr,
                       char *err, size_t errlen)
{
    const char *path = extent_path(c->m, own_bytes);
    int isid = pt_iscache_add_file(c->iscache, path, off, size, vaddr);
    if (isid > 0) {
        if ((guint)isid >= c->ext->len)
            g_array_set_size(c->ext, (guint)isid + 1);
        g_array_index(c->ext, extent, isid) = (extent){ off, size, vaddr, own_bytes };
    }
    if (isid < 0)
        snprintf(err, errlen, "%s: offset %llu: libipt refuses the %llu-byte section at "
                 "0x%llx: %s", path, (unsigned long long)off,
                 (unsigned long long)size, (unsigned long long)vaddr,
                 pt_errstr(pt_errcode(isid)));
    return isid;
}

static int add_file(di_cache *c, uint64_t off, uint64_t size, uint64_t vaddr, char *err,
                    size_t errlen)
{
    return add_file_of(c, false, off, size, vaddr, err, errlen);
}

/* A blob is a snapshot of a whole code-heap area, including space that
 * held no code yet (zeros) and was filled later by code the metadata may
 * not describe (HotSpot fills its signature-handler buffer on demand, for
 * one; its "native signature handlers" stub is reported while still mostly
 * empty). Decoding such zeros would invent instructions; leaving them out
 * of the image makes execution there an honest "no code" gap. So each blob
 * or code version becomes one section per stretch between zero runs.
 *
 * An instruction may end in zero bytes, though (a jump's rel32 with a zero
 * top byte, a movabs of a small constant). The watcher records the bytes
 * of a patch that changed, so where it filled code into a zero run (an
 * inline-cache transition stub into the emptied InlineCacheBuffer), the
 * zeros after the patch may be the rest of its last instruction. libipt
 * reads an instruction on into the next section but fails where none is
 * mapped: each patch that ends inside a zero run (patch_ends, sorted) keeps
 * MAX_INSN_BYTES - 1 of the zeros after it mapped. */
typedef struct zero_keep {
    uint64_t *patch_ends;
    size_t n;
} zero_keep;

/* A blob's or code version's snapshot: size bytes at offset off of the code
 * file, the code at vaddr. */
typedef struct snapshot {
    uint64_t off, size, vaddr;
} snapshot;

/* Maps [lo, hi) of snapshot s (offsets in it) as one section. */
static int add_stretch(di_cache *c, const snapshot *s, uint64_t lo, uint64_t hi, GArray *out,
                       char *err, size_t errlen)
{
    int isid = add_file(c, s->off + lo, hi - lo, s->vaddr + lo, err, errlen);
    if (isid >= 0)
        g_array_append_val(out, isid);
    return isid;
}

/* The zeros of the run [lo, hi) that may complete an instruction: those
 * after a patch that ends inside the run. */
static int add_patch_tails(di_cache *c, const snapshot *s, uint64_t lo, uint64_t hi,
                           const zero_keep *zk, GArray *out, char *err, size_t errlen)
{
    const uint64_t vaddr = s->vaddr;
    size_t a = 0, b = zk->n;
    while (a < b) {             /* first end in the run */
        size_t mid = (a + b) / 2;
        if (zk->patch_ends[mid] < vaddr + lo)
            a = mid + 1;
        else
            b = mid;
    }
    uint64_t from = 0, to = 0;  /* the tail being built, relative to vaddr */
    for (; a < zk->n && zk->patch_ends[a] < vaddr + hi; a++) {
        uint64_t e = zk->patch_ends[a] - vaddr;
        uint64_t end = e + MAX_INSN_BYTES - 1 < hi ? e + MAX_INSN_BYTES - 1 : hi;
        if (to && e <= to) {
            to = end > to ? end : to;
            continue;
        }
        if (to && add_stretch(c, s, from, to, out, err, errlen) < 0)
            return -1;
        from = e;
        to = end;
    }
    if (to && add_stretch(c, s, from, to, out, err, errlen) < 0)
        return -1;
    return 0;
}

/* Maps snapshot s (code: the code file's bytes, NULL if they could not be
 * read: one section) as its stretches between zero runs. */
static int add_extents(di_cache *c, const snapshot *s, const uint8_t *code, const zero_keep *zk,
                       GArray *out, char *err, size_t errlen)
{
    if (!code) {
        int isid = add_file(c, s->off, s->size, s->vaddr, err, errlen);
        if (isid >= 0)
            g_array_append_val(out, isid);
        return isid;
    }
    const uint8_t *p = code + s->off;
    uint64_t i = 0, n = s->size;
    while (i < n) {
        uint64_t run = i;               /* a zero run: [run, start) */
        while (i < n && !p[i])
            i++;
        uint64_t start = i, zeros = 0, end = i;
        for (; i < n; i++) {
            if (p[i]) {
                zeros = 0;
                end = i + 1;
            } else if (++zeros >= ZERO_RUN) {
                break;
            }
        }
        if (start > run && add_patch_tails(c, s, run, start, zk, out, err, errlen) < 0)
            return -1;
        if (end > start) {
            if (add_stretch(c, s, start, end, out, err, errlen) < 0)
                return -1;
            i = end;            /* the zeros after it are the next run */
        }
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void free_granule(gpointer v) { g_array_free(v, TRUE); }

typedef struct by_vaddr {
    uint64_t vaddr;
    uint32_t isid;
} by_vaddr;

static int cmp_by_vaddr(const void *a, const void *b)
{
    const by_vaddr *x = a, *y = b;
    if (x->vaddr != y->vaddr)
        return x->vaddr < y->vaddr ? -1 : 1;
    return x->isid < y->isid ? -1 : x->isid > y->isid;
}

/* Cuts the sections of every time into tiles: maximal address ranges that
 * sections overlapping each other (directly or through others) span. No
 * section of one tile overlaps one of another, so what an image shows in a
 * tile depends on that tile's sections only. */
static void make_tiles(di_cache *c)
{
    guint n = c->ext->len;
    by_vaddr *v = g_new(by_vaddr, n ? n : 1);
    uint32_t m = 0;
    for (guint i = 1; i < n; i++)
        if (g_array_index(c->ext, extent, i).size)
            v[m++] = (by_vaddr){ g_array_index(c->ext, extent, i).vaddr, i };
    sort_n(v, m, sizeof *v, cmp_by_vaddr);
    uint32_t *order = g_new(uint32_t, m ? m : 1);
    for (uint32_t i = 0; i < m; i++)
        order[i] = v[i].isid;
    g_free(v);
    c->tile_lo = g_new(uint64_t, m + 1);
    c->tile_hi = g_new(uint64_t, m + 1);
    c->tile_first = g_new(uint32_t, m + 2);
    c->tile_of = g_new0(uint32_t, n + 1);
    c->tile_sec = order;
    uint32_t t = 0;
    for (uint32_t i = 0; i < m; i++) {
        const extent *e = &g_array_index(c->ext, extent, order[i]);
        uint64_t end = e->vaddr + e->size < e->vaddr ? UINT64_MAX : e->vaddr + e->size;
        if (t && e->vaddr < c->tile_hi[t - 1]) {
            if (end > c->tile_hi[t - 1])
                c->tile_hi[t - 1] = end;
        } else {
            c->tile_lo[t] = e->vaddr;
            c->tile_hi[t] = end;
            c->tile_first[t++] = i;
        }
        c->tile_of[order[i]] = t - 1;
    }
    c->tile_first[t] = m;
    c->ntiles = t;
}

/* How many tiles begin at or below ip. */
static uint32_t tiles_upto(const di_cache *c, uint64_t ip)
{
    uint32_t lo = 0, hi = c->ntiles;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (c->tile_lo[mid] <= ip)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The tile holding address ip, or UINT32_MAX. */
static uint32_t tile_at(const di_cache *c, uint64_t ip)
{
    uint32_t k = tiles_upto(c, ip);
    return k && ip < c->tile_hi[k - 1] ? k - 1 : UINT32_MAX;
}

di_cache *di_cache_new(const dm_model *m, char *err, size_t errlen)
{
    di_cache *c = g_new0(di_cache, 1);
    c->m = m;
    c->iscache = pt_iscache_alloc("jvm");
    if (!c->iscache) {
        snprintf(err, errlen, "cannot allocate a libipt section cache");
        g_free(c);
        return NULL;
    }
    pt_iscache_set_limit(c->iscache, ISCACHE_LIMIT);
    c->ext = g_array_new(FALSE, TRUE, sizeof(extent));
    c->blob_isids = g_array_new(FALSE, FALSE, sizeof(int));
    c->code_isids = g_array_new(FALSE, FALSE, sizeof(int));
    c->code_first = g_new0(uint32_t, m->ncodes + 1);
    c->patch_isid = g_new0(int, m->npatches + 1);
    const uint8_t *code = NULL;
    int fd = open(m->code_path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && m->code_size) {
        void *p = mmap(NULL, m->code_size, PROT_READ, MAP_PRIVATE, fd, 0);
        code = p == MAP_FAILED ? NULL : p;
    }
    if (fd >= 0)
        close(fd);
    int rc = 0;
    zero_keep zk = { g_new(uint64_t, m->npatches ? m->npatches : 1), 0 };
    for (size_t i = 0; i < m->npatches; i++)
        if (!m->patches[i].made_up)
            zk.patch_ends[zk.n++] = m->patches[i].vaddr + m->patches[i].size;
    sort_n(zk.patch_ends, zk.n, sizeof *zk.patch_ends, cmp_u64);
    for (size_t i = 0; i < m->nblobs && rc >= 0; i++) {
        const dm_blob *b = &m->blobs[i];
        const snapshot s = { b->code_offset, b->size, b->vaddr };
        rc = add_extents(c, &s, code, &zk, c->blob_isids, err, errlen);
    }
    for (size_t i = 0; i < m->ncodes && rc >= 0; i++) {
        const dm_code *k = &m->codes[i];
        const snapshot s = { k->code_offset, k->size, k->vaddr };
        c->code_first[i] = c->code_isids->len;
        rc = add_extents(c, &s, code, &zk, c->code_isids, err, errlen);
    }
    g_free(zk.patch_ends);
    c->code_first[m->ncodes] = c->code_isids->len;
    c->code = code;           /* kept: read_shown copies from it */
    c->code_size = code ? m->code_size : 0;
    if (code)                 /* the scan's pages need not stay resident */
        madvise((void *)code, m->code_size, MADV_DONTNEED);
    if (rc < 0)
        goto fail;
    GArray *ch = g_array_new(FALSE, FALSE, sizeof(change));
    for (size_t i = 0; i < m->ncodes; i++) {
        const dm_code *k = &m->codes[i];
        change a = { k->start_tsc, EV_ADD, (uint32_t)i };
        g_array_append_val(ch, a);
        if (k->end_tsc != DM_TSC_NEVER) {
            change e = { k->end_tsc, EV_END, (uint32_t)i };
            g_array_append_val(ch, e);
        }
    }
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *p = &m->patches[i];
        if ((c->patch_isid[i] = add_file_of(c, p->own_bytes, p->code_offset, p->size, p->vaddr, err,
                                            errlen)) < 0) {
            g_array_free(ch, TRUE);
            goto fail;
        }
        if (p->made_up)
            continue;            /* never applies by time (rebuild) */
        change a = { p->start_tsc, EV_PATCH, (uint32_t)i };
        g_array_append_val(ch, a);
    }
    make_tiles(c);
    c->nchanges = ch->len;
    sort_n(ch->data, ch->len, sizeof(change), cmp_change);
    c->changes = (change *)(void *)g_array_free(ch, FALSE);
    c->sites = g_new(site_ent, m->call_site_patches ? m->call_site_patches : 1);
    for (size_t i = 0; i < m->npatches; i++)
        if (m->patches[i].site && c->nsites < m->call_site_patches)
            c->sites[c->nsites++] = (site_ent){ m->patches[i].site, (uint32_t)i };
    sort_n(c->sites, c->nsites, sizeof(site_ent), cmp_site);
    for (size_t i = 0; i < c->nsites; i++) {
        uint32_t h = site_hash(c->sites[i].site);
        c->site_bits[h >> 6] |= 1ull << (h & 63);
    }
    c->by_granule = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, free_granule);
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *p = &m->patches[i];
        if (!p->size || p->size > ((uint64_t)1 << 20) || p->made_up)
            continue;            /* (no later version of anything) */
        for (uint64_t g = p->vaddr >> GRANULE_BITS; g <= (p->vaddr + p->size - 1) >> GRANULE_BITS;
             g++) {
            GArray *v = g_hash_table_lookup(c->by_granule, &g);
            if (!v) {
                uint64_t *key = g_new(uint64_t, 1);
                *key = g;
                v = g_array_new(FALSE, FALSE, sizeof(uint32_t));
                g_hash_table_insert(c->by_granule, key, v);
            }
            uint32_t idx = (uint32_t)i;
            g_array_append_val(v, idx);
        }
    }
    return c;
fail:
    di_cache_free(c);
    return NULL;
}

void di_cache_free(di_cache *c)
{
    if (!c)
        return;
    pt_iscache_free(c->iscache);
    if (c->code)
        munmap((void *)c->code, c->code_size);
    if (c->ext)
        g_array_free(c->ext, TRUE);
    if (c->blob_isids)
        g_array_free(c->blob_isids, TRUE);
    if (c->code_isids)
        g_array_free(c->code_isids, TRUE);
    g_free(c->code_first);
    g_free(c->patch_isid);
    g_free(c->changes);
    g_free(c->sites);
    if (c->by_granule)
        g_hash_table_destroy(c->by_granule);
    g_free(c->tile_lo);
    g_free(c->tile_hi);
    g_free(c->tile_first);
    g_free(c->tile_sec);
    g_free(c->tile_of);
    g_free(c);
}

struct pt_image_section_cache *di_cache_iscache(di_cache *c) { return c->iscache; }

di_store *di_store_new(const di_cache *c)
{
    di_store *s = g_new0(di_store, 1);
    s->isc = pt_iscache_alloc("jvm");
    if (!s->isc) {
        g_free(s);
        return NULL;
    }
    pt_iscache_set_limit(s->isc, ISCACHE_LIMIT);
    s->nmine = c->ext->len + 1;
    s->mine = g_new0(int, s->nmine);
    return s;
}

void di_store_free(di_store *s)
{
    if (!s)
        return;
    pt_iscache_free(s->isc);
    g_free(s->mine);
    g_free(s);
}

/* Section isid of the shared cache as an isid of the image's section cache. */
static int own_isid(di_image *im, int isid)
{
    const di_cache *c = im->c;
    if (isid <= 0 || (guint)isid >= c->ext->len)
        return -pte_internal;
    if (!im->store)
        return isid;
    di_store *st = im->store;
    if ((size_t)isid >= st->nmine)
        return -pte_internal;
    if (!st->mine[isid]) {
        const extent *e = &g_array_index(c->ext, extent, isid);
        int mine = pt_iscache_add_file(st->isc, extent_path(c->m, e->own_bytes), e->off, e->size,
                                       e->vaddr);
        if (mine < 0)
            return mine;
        st->mine[isid] = mine;
    }
    return st->mine[isid];
}

static int add_cached(di_image *im, int isid)
{
    int own = own_isid(im, isid);
    if (own < 0)
        return own;
    int rc = pt_image_add_cached(im->img, im->isc, own, NULL);
    if (rc >= 0)
        im->st.sections_added++;
    return rc;
}

/* Hands libipt the sections the image shows in tile t, in the order they
 * were put in. Until then the tile is absent from the pt_image: libipt's
 * pt_image_add walks every section it holds, so an image holding all of a
 * large JIT run's code costs quadratic time to make, while a stretch of
 * trace touches a small part of it. */
static int materialize(di_image *im, uint32_t t)
{
    const di_cache *c = im->c;
    uint32_t a = c->tile_first[t], b = c->tile_first[t + 1];
    uint64_t small[32];
    uint64_t *v = b - a <= 32 ? small : g_new(uint64_t, b - a);
    size_t n = 0;
    for (uint32_t i = a; i < b; i++) {
        uint32_t isid = c->tile_sec[i];
        if (im->seq[isid])
            v[n++] = (uint64_t)im->seq[isid] << 32 | isid;
    }
    sort_n(v, n, sizeof *v, cmp_u64);
    im->done[t] = 1;
    int rc = 0;
    for (size_t i = 0; i < n && rc >= 0; i++)
        rc = add_cached(im, (int)(uint32_t)v[i]);
    if (v != small)
        g_free(v);
    if (rc < 0)
        im->fill_error = rc;  /* the tile may show too little: say so on every read */
    return rc;
}

/* Makes every tile meeting [lo, hi] present in the pt_image. */
static int materialize_range(di_image *im, uint64_t lo, uint64_t hi)
{
    const di_cache *c = im->c;
    uint32_t u = tiles_upto(c, lo);
    if (u && lo < c->tile_hi[u - 1])
        u--;
    for (; u < c->ntiles && c->tile_lo[u] <= hi; u++)
        if (!im->done[u]) {
            int rc = materialize(im, u);
            if (rc < 0)
                return rc;
        }
    return 0;
}

/* Puts section isid on top of what the image shows (into libipt if its
 * tile is there already). */
static int put(di_image *im, int isid)
{
    const di_cache *c = im->c;
    if (isid <= 0 || (guint)isid >= c->ext->len)
        return -pte_internal;
    if (!g_array_index(c->ext, extent, isid).size)
        return 0;
    im->seq[isid] = ++im->next_seq;
    return im->done[c->tile_of[isid]] ? add_cached(im, isid) : 0;
}

/* Up to size bytes at ip as the image shows them in tile t: from the
 * section put in last that holds ip, up to where one put in later begins. */
static int read_shown(di_image *im, uint32_t t, uint8_t *buf, size_t size, uint64_t ip)
{
    const di_cache *c = im->c;
    uint32_t top = 0, top_seq = 0;
    for (uint32_t i = c->tile_first[t]; i < c->tile_first[t + 1]; i++) {
        uint32_t isid = c->tile_sec[i];
        const extent *e = &g_array_index(c->ext, extent, isid);
        if (im->seq[isid] > top_seq && e->vaddr <= ip && ip - e->vaddr < e->size) {
            top = isid;
            top_seq = im->seq[isid];
        }
    }
    if (!top)
        return -pte_nomap;
    const extent *te = &g_array_index(c->ext, extent, top);
    uint64_t limit = te->size - (ip - te->vaddr);
    for (uint32_t i = c->tile_first[t]; i < c->tile_first[t + 1]; i++) {
        uint32_t isid = c->tile_sec[i];
        const extent *e = &g_array_index(c->ext, extent, isid);
        if (im->seq[isid] > top_seq && e->vaddr > ip && e->vaddr - ip < limit)
            limit = e->vaddr - ip;
    }
    if (limit > size)
        limit = size;
    const uint8_t *from = te->own_bytes ? c->m->made_up_bytes : c->code;
    uint64_t from_size = te->own_bytes ? c->m->made_up_size : c->code_size;
    if (from && te->off <= from_size && from_size - te->off >= te->size) {
        memcpy(buf, from + te->off + (ip - te->vaddr), limit);
        return (int)limit;
    }
    int own = own_isid(im, (int)top);
    if (own < 0)
        return own;
    return pt_iscache_read(im->isc, buf, limit, own, ip);
}

/* libipt's read-memory callback: it runs when no section libipt holds has
 * ip, that is on the first instruction decoded in a tile (after which the
 * tile's sections serve, with libipt's block cache) and where no code is. */
static int read_lazily(uint8_t *buffer, size_t size, const struct pt_asid *asid, uint64_t ip,
                       void *context)
{
    (void)asid;
    const lazy_ctx *x = context;
    di_image *im = x->im;
    if (x->img != im->img)
        return -pte_nomap;       /* a replaced pt_image: its decoder moves on */
    if (im->fill_error)
        return im->fill_error;
    const di_cache *c = im->c;
    uint32_t t = tile_at(c, ip);
    if (t == UINT32_MAX || im->done[t])
        return -pte_nomap;
    int rc = materialize(im, t);
    if (rc < 0)
        return rc;
    int n = read_shown(im, t, buffer, size, ip);
    if (n <= 0)
        return n;
    /* libipt gives every instruction read here isid 0 and ends a block
     * only where the isid changes: were the next instruction read here too,
     * one block would join two tiles. Within a block execution goes on
     * without trace, so only to the next instruction or a direct branch's
     * target: their tiles are made present now. */
    uint64_t target;
    rc = materialize_range(im, ip + 1, ip + MAX_INSN_BYTES);
    if (rc >= 0 && x86_direct_target(buffer, (size_t)n, ip, &target))
        rc = materialize_range(im, target, target);
    return rc < 0 ? rc : n;
}

int di_image_read(di_image *im, uint8_t *buf, size_t size, uint64_t ip)
{
    uint32_t t = tile_at(im->c, ip);
    return t == UINT32_MAX ? -pte_nomap : read_shown(im, t, buf, size, ip);
}

static int add_code(di_image *im, uint32_t idx)
{
    const di_cache *c = im->c;
    for (uint32_t k = c->code_first[idx]; k < c->code_first[idx + 1]; k++) {
        int rc = put(im, g_array_index(c->code_isids, int, k));
        if (rc < 0)
            return rc;
    }
    return 0;
}

static bool patch_applies(const di_image *im, uint32_t idx)
{
    int64_t owner = im->c->m->patches[idx].owner;
    return owner < 0 || im->live[owner];
}

/* A fresh pt_image for time tsc: the live set at tsc first, then the sections
 * in the order they arrived. */
static int rebuild(di_image *im, uint64_t tsc)
{
    di_cache *c = im->c;
    const dm_model *m = c->m;
    struct pt_image *img = pt_image_alloc("jvm");
    if (!img)
        return -pte_nomem;
    lazy_ctx *ctx = g_new(lazy_ctx, 1);
    *ctx = (lazy_ctx){ im, img };
    pt_image_set_callback(img, read_lazily, ctx);
    /* The image replaced stays until its decoder has been given the new
     * one (di_image_advance's caller does that). */
    pt_image_free(im->retired);
    g_free(im->retired_ctx);
    im->retired = im->img;
    im->retired_ctx = im->ctx;
    im->img = img;
    im->ctx = ctx;
    memset(im->seq, 0, c->ext->len * sizeof *im->seq);
    im->next_seq = 0;
    memset(im->done, 0, c->ntiles + 1);
    im->fill_error = 0;
    im->st.rebuilds++;
    memset(im->live, 0, m->ncodes + 1);
    size_t end = 0;
    while (end < c->nchanges && c->changes[end].tsc <= tsc) {
        const change *ch = &c->changes[end++];
        if (ch->type == EV_ADD)
            im->live[ch->idx] = 1;
        else if (ch->type == EV_END)
            im->live[ch->idx] = 0;
    }
    for (guint i = 0; i < c->blob_isids->len; i++) {
        int rc = put(im, g_array_index(c->blob_isids, int, i));
        if (rc < 0)
            return rc;
    }
    for (size_t i = 0; i < end; i++) {
        const change *ch = &c->changes[i];
        int rc = 0;
        if (ch->type == EV_ADD && im->live[ch->idx])
            rc = add_code(im, ch->idx);
        else if (ch->type == EV_PATCH && patch_applies(im, ch->idx)) {
            rc = put(im, c->patch_isid[ch->idx]);
            im->st.patches_applied++;
        }
        if (rc < 0)
            return rc;
    }
    /* Resolutions this decoder applied ahead of their record time stay;
     * made-up states too, until the resolution they precede applies. */
    for (size_t i = end; i < c->nchanges; i++) {
        const change *ch = &c->changes[i];
        if (ch->type == EV_PATCH && im->early[ch->idx] && patch_applies(im, ch->idx)) {
            int rc = put(im, c->patch_isid[ch->idx]);
            if (rc < 0)
                return rc;
        }
    }
    for (guint i = 0; i < im->early_log->len; i++) {
        uint32_t idx = g_array_index(im->early_log, uint32_t, i);
        const dm_patch *p = &m->patches[idx];
        if (p->made_up && p->start_tsc > tsc && !im->early[p->state_of] && patch_applies(im, idx)) {
            int rc = put(im, c->patch_isid[idx]);
            if (rc < 0)
                return rc;
        }
    }
    im->cursor = end;
    im->tsc = tsc;
    return 0;
}

di_image *di_image_new(di_cache *c, uint64_t tsc, char *err, size_t errlen)
{
    return di_image_new_resolved(c, tsc, NULL, 0, false, err, errlen);
}

di_image *di_image_new_resolved(di_cache *c, uint64_t tsc, const uint32_t *early, size_t nearly,
                                bool own_cache, char *err, size_t errlen)
{
    di_store *st = NULL;
    if (own_cache && !(st = di_store_new(c))) {
        snprintf(err, errlen, "cannot allocate a libipt section cache");
        return NULL;
    }
    di_image *im = di_image_new_in(c, st, tsc, early, nearly, err, errlen);
    if (im)
        im->own_store = own_cache;
    else
        di_store_free(st);
    return im;
}

di_image *di_image_new_in(di_cache *c, di_store *store, uint64_t tsc, const uint32_t *early,
                          size_t nearly, char *err, size_t errlen)
{
    di_image *im = g_new0(di_image, 1);
    im->c = c;
    im->store = store;
    im->isc = store ? store->isc : c->iscache;
    im->live = g_new0(uint8_t, c->m->ncodes + 1);
    im->seq = g_new0(uint32_t, c->ext->len + 1);
    im->done = g_new0(uint8_t, c->ntiles + 1);
    im->early = g_new0(uint8_t, c->m->npatches + 1);
    im->early_log = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    im->states = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    for (size_t i = 0; i < nearly; i++)
        if (early[i] < c->m->npatches && !im->early[early[i]] &&
            (c->m->patches[early[i]].start_tsc > tsc || c->m->patches[early[i]].fixup_states)) {
            im->early[early[i]] = 1;
            g_array_append_val(im->early_log, early[i]);
            if (c->m->patches[early[i]].made_up)
                g_array_append_val(im->states, early[i]);
        }
    int rc = rebuild(im, tsc);
    if (rc < 0) {
        snprintf(err, errlen, "%s: cannot build the code image: %s", c->m->code_path,
                 pt_errstr(pt_errcode(rc)));
        di_image_free(im);
        return NULL;
    }
    return im;
}

void di_image_free(di_image *im)
{
    if (!im)
        return;
    pt_image_free(im->img);
    pt_image_free(im->retired);
    g_free(im->ctx);
    g_free(im->retired_ctx);
    if (im->own_store)
        di_store_free(im->store);
    g_free(im->live);
    g_free(im->seq);
    g_free(im->done);
    g_free(im->early);
    g_array_free(im->early_log, TRUE);
    g_array_free(im->states, TRUE);
    g_free(im);
}

/* Whether q's bytes all lie within p's. */
static bool within(const dm_patch *q, const dm_patch *p)
{
    return p->vaddr <= q->vaddr && q->vaddr + q->size <= p->vaddr + p->size;
}

/* After patch idx applied by its time: the call-site resolutions this
 * decoder applied ahead of their time over the same bytes are later than it
 * (the thread went through the resolver to them), so they go back on top.
 * On luindex JDK 25 a site resolved early to its callee's C2 code was
 * otherwise sent back to its resolver by the record of an earlier state
 * (the site cleaned when the callee's C1 version was made not entrant) until
 * the C2 state's record. Other patches applied early (a kept retry's) are
 * weaker evidence, and an inline-cache site goes back and forth between
 * states: keeping those too lost 30,265 instructions in place on a luindex
 * JDK 17 recording, in its transition stubs. But where an earlier record of
 * the same call re-pointed leaves some of the later one's bytes (the
 * watcher records the bytes that changed), the call's displacement is a mix
 * of two states that calls nowhere, so the later one goes back on top
 * there too (xalan JDK 17: a `ZipFile$Source.checkAndAddEntry` site sent
 * into unmapped memory 2,126 times). */
static int keep_later_states(di_image *im, uint32_t idx)
{
    const dm_model *m = im->c->m;
    const dm_patch *p = &m->patches[idx];
    const uint64_t p_call = p->site ? p->site : p->call_at;
    for (guint i = 0; i < im->early_log->len; i++) {
        uint32_t e = g_array_index(im->early_log, uint32_t, i);
        const dm_patch *q = &m->patches[e];
        if (!im->early[e] || q->start_tsc <= p->start_tsc ||
            q->vaddr >= p->vaddr + p->size || p->vaddr >= q->vaddr + q->size ||
            !patch_applies(im, e))
            continue;
        if (!q->site && !(q->call_to && q->call_at == p_call && !within(q, p)))
            continue;
        if (put(im, im->c->patch_isid[e]) < 0)
            return -1;
    }
    return 0;
}

int di_image_advance(di_image *im, uint64_t tsc)
{
    di_cache *c = im->c;
    if (tsc <= im->tsc)
        return 0;
    bool dirty = false;
    size_t i = im->cursor;
    for (; i < c->nchanges && c->changes[i].tsc <= tsc; i++) {
        const change *ch = &c->changes[i];
        if (ch->type == EV_END) {
            im->live[ch->idx] = 0;
            dirty = true;
        } else if (dirty) {
            continue;   /* the rebuild below adds it */
        } else if (ch->type == EV_ADD) {
            im->live[ch->idx] = 1;
            if (add_code(im, ch->idx) < 0)
                return -1;
        } else if (im->early[ch->idx]) {
            continue;   /* in the image since the thread resolved the call */
        } else if (patch_applies(im, ch->idx)) {
            if (put(im, c->patch_isid[ch->idx]) < 0 || keep_later_states(im, ch->idx) < 0)
                return -1;
            im->st.patches_applied++;
        }
    }
    im->cursor = i;
    im->tsc = tsc;
    if (!dirty)
        return 0;
    return rebuild(im, tsc) < 0 ? -1 : 1;
}

struct pt_image *di_image_get(di_image *im) { return im->img; }

struct pt_image_section_cache *di_image_iscache(di_image *im) { return im->isc; }

/* Bytes of a static call stub (mov rbx, imm64; jmp rel32) and then some. */
#define STUB_SPAN 16

static int apply_early(di_image *im, uint32_t idx)
{
    if (put(im, im->c->patch_isid[idx]) < 0)
        return -1;
    im->early[idx] = 1;
    g_array_append_val(im->early_log, idx);
    if (im->c->m->patches[idx].made_up)
        g_array_append_val(im->states, idx);
    im->st.patches_applied++;
    im->st.patches_resolved++;
    return 0;
}

/* Whether a made-up state of recorded patch idx holds (di_image_has_patch). */
static bool state_holds(const di_image *im, uint32_t idx)
{
    const dm_model *m = im->c->m;
    for (guint i = 0; i < im->states->len; i++) {
        uint32_t s = g_array_index(im->states, uint32_t, i);
        if (m->patches[s].state_of == idx && di_image_has_patch(im, s))
            return true;
    }
    return false;
}

int di_image_apply_early(di_image *im, uint32_t idx)
{
    const dm_model *m = im->c->m;
    if (idx >= m->npatches || im->early[idx] || !patch_applies(im, idx))
        return 0;
    /* A record whose time has come applies again over a made-up state of
     * its call that a retry put in its place (dm_patch.fixup_states). */
    if (m->patches[idx].start_tsc <= im->tsc && !state_holds(im, idx))
        return 0;
    return apply_early(im, idx) < 0 ? -1 : 1;
}

const uint32_t *di_image_early_log(const di_image *im, size_t *n)
{
    *n = im->early_log->len;
    return (const uint32_t *)(void *)im->early_log->data;
}

bool di_image_applied_early(const di_image *im, uint32_t idx)
{
    return idx < im->c->m->npatches && im->early[idx];
}

bool di_image_has_patch(const di_image *im, uint32_t idx)
{
    const dm_model *m = im->c->m;
    if (idx >= m->npatches)
        return false;
    const dm_patch *p = &m->patches[idx];
    if (p->made_up)              /* until the resolution it precedes applies */
        return im->early[idx] && p->start_tsc > im->tsc && !im->early[p->state_of];
    return im->early[idx] || p->start_tsc <= im->tsc;
}

size_t di_cache_patches_in(const di_cache *c, uint64_t lo, uint64_t hi, uint64_t after,
                           uint32_t *out, size_t max)
{
    size_t n = 0;
    if (!c->by_granule || hi <= lo || hi - lo > ((uint64_t)1 << 20))
        return 0;
    for (uint64_t g = lo >> GRANULE_BITS; g <= (hi - 1) >> GRANULE_BITS; g++) {
        GArray *v = g_hash_table_lookup(c->by_granule, &g);
        for (guint i = 0; v && i < v->len; i++) {
            uint32_t idx = g_array_index(v, uint32_t, i);
            const dm_patch *p = &c->m->patches[idx];
            if (p->start_tsc <= after || p->vaddr >= hi || p->vaddr + p->size <= lo)
                continue;
            bool dup = false;
            for (size_t j = 0; j < n && !dup; j++)
                dup = out[j] == idx;
            if (dup)
                continue;
            /* keep the max earliest (insertion into a small sorted array) */
            size_t at = n < max ? n : max;
            while (at > 0 && c->m->patches[out[at - 1]].start_tsc > p->start_tsc)
                at--;
            if (at >= max)
                continue;
            size_t last = n < max ? n : max - 1;
            memmove(out + at + 1, out + at, (last - at) * sizeof *out);
            out[at] = idx;
            if (n < max)
                n++;
        }
    }
    return n;
}

/* First entry for site in the sorted table, or nsites. */
static size_t site_lower(const di_cache *c, uint64_t site)
{
    size_t lo = 0, hi = c->nsites;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->sites[mid].site < site)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool di_cache_call_site(const di_cache *c, uint64_t ip)
{
    uint32_t h = site_hash(ip);
    if (!(c->site_bits[h >> 6] & (1ull << (h & 63))))
        return false;
    size_t k = site_lower(c, ip);
    return k < c->nsites && c->sites[k].site == ip;
}

/* The earliest resolution of site not yet in the image, if it replaced a
 * call to target and applies now; else UINT32_MAX. */
static uint32_t pending_resolution(const di_image *im, uint64_t site, uint64_t target)
{
    const di_cache *c = im->c;
    const dm_model *m = c->m;
    for (size_t k = site_lower(c, site); k < c->nsites && c->sites[k].site == site; k++) {
        uint32_t idx = c->sites[k].idx;
        const dm_patch *p = &m->patches[idx];
        /* In the image already (its time has come, or resolved earlier)? */
        if (im->early[idx] || p->start_tsc <= im->tsc)
            continue;
        return p->old_target == target && patch_applies(im, idx) ? idx : UINT32_MAX;
    }
    return UINT32_MAX;
}

/* Applies patch idx, a call site's new state, ahead of its time, with the
 * static call stub it now calls, if any (a stub of its own method: load the
 * callee, jump to its c2i entry), which HotSpot filled before pointing the
 * call at it; until then the stub holds a jump to itself. The stub's
 * earliest change not yet in the image is that fill. */
static int apply_site_state(di_image *im, uint32_t idx)
{
    const dm_model *m = im->c->m;
    const dm_patch *p = &m->patches[idx];
    if (apply_early(im, idx) < 0)
        return -1;
    /* A static call stub lies past the version's last PC record; a target
     * with a scope is a method's entry (a recursive call to its own
     * version), whose next change is no fill but its not-entrant mark. */
    uint64_t t = p->new_target;
    const dm_frame *scope;
    if (p->owner < 0 || dm_inline_at(m, &m->codes[p->owner], t, &scope))
        return 1;
    for (size_t q = 0; q < m->npatches; q++) {
        const dm_patch *f = &m->patches[q];
        if (f->owner != p->owner || f->made_up || im->early[q] || f->start_tsc <= im->tsc ||
            f->vaddr >= t + STUB_SPAN || t >= f->vaddr + f->size)
            continue;
        if (apply_early(im, (uint32_t)q) < 0)
            return -1;
        break;
    }
    return 1;
}

int di_image_resolve_call(di_image *im, uint64_t site, uint64_t target)
{
    uint32_t idx = pending_resolution(im, site, target);
    if (idx == UINT32_MAX)
        return 0;
    if (im->c->m->patches[idx].nstates)
        return 2;                /* which state: di_image_resolve_to */
    return apply_site_state(im, idx);
}

int di_image_resolve_to(di_image *im, uint64_t site, uint64_t target, uint64_t dest)
{
    uint32_t idx = pending_resolution(im, site, target);
    if (idx == UINT32_MAX)
        return 0;
    const dm_patch *p = &im->c->m->patches[idx];
    if (dest != p->new_target)
        for (uint32_t k = p->first_state; k < p->first_state + p->nstates; k++)
            if (im->c->m->patches[k].stub_to == dest) {
                im->st.states_made_up++;
                return apply_site_state(im, k);
            }
    return apply_site_state(im, idx);
}

int di_image_ic_miss(di_image *im, uint64_t site)
{
    /* The newest made-up state applied at site decides. A retry may have
     * put it over its resolution, applied earlier: then the image shows it
     * until the next rebuild, though it no longer holds (di_image_has_patch). */
    const dm_model *m = im->c->m;
    const int *isid = im->c->patch_isid;
    for (guint i = im->early_log->len; i-- > 0;) {
        uint32_t s = g_array_index(im->early_log, uint32_t, i);
        const dm_patch *p = &m->patches[s];
        if (!p->made_up || !p->direct || p->vaddr != site + 1)
            continue;
        uint32_t r = p->state_of;
        if (!im->early[r])
            return di_image_apply_early(im, r);
        if (im->seq[isid[s]] <= im->seq[isid[r]])
            return 0;            /* the resolution shows already */
        return put(im, isid[r]) < 0 ? -1 : 1;
    }
    return 0;
}

#define STUB_JMP 10          /* mov rbx, imm64; then the jmp */
uint32_t di_image_stub_exit(di_image *im, uint64_t ip)
{
    /* Called per block: states superseded for good (their resolution
     * applied, or its time came) are dropped as they are met. */
    const dm_model *m = im->c->m;
    for (guint i = 0; i < im->states->len;) {
        uint32_t s = g_array_index(im->states, uint32_t, i);
        if (!di_image_has_patch(im, s)) {
            g_array_remove_index_fast(im->states, i);
            continue;
        }
        if (!m->patches[s].direct && m->patches[s].new_target + STUB_JMP == ip)
            return s;
        i++;
    }
    return UINT32_MAX;
}

uint32_t di_image_stub_fixup(di_image *im, uint64_t call_ip, uint64_t ip, uint64_t end_ip)
{
    if (!call_ip || end_ip != ip + STUB_JMP)
        return UINT32_MAX;
    uint32_t idx[8];
    size_t n = di_cache_patches_in(im->c, call_ip + 1, call_ip + 5, im->tsc, idx, 8);
    for (size_t i = 0; i < n; i++) {
        const dm_patch *p = &im->c->m->patches[idx[i]];
        if (im->early[idx[i]] || p->made_up)
            continue;
        /* the call's next change: from this stub, or the rule does not apply */
        if (p->site || p->call_to)
            return p->call_from == ip && !p->site && patch_applies(im, idx[i]) ? idx[i]
                                                                             : UINT32_MAX;
    }
    return UINT32_MAX;
}

uint32_t di_image_resolver_state(di_image *im, uint64_t call_ip, uint64_t ip)
{
    const dm_model *m = im->c->m;
    if (!call_ip)
        return UINT32_MAX;
    for (guint i = 0; i < im->states->len; i++) {
        uint32_t s = g_array_index(im->states, uint32_t, i);
        const dm_patch *p = &m->patches[s];
        if (p->at_resolver && p->vaddr == call_ip + 1 && p->new_target == ip &&
            di_image_has_patch(im, s))
            return s;
    }
    return UINT32_MAX;
}

uint64_t di_image_next_change(const di_image *im)
{
    return im->cursor < im->c->nchanges ? im->c->changes[im->cursor].tsc : UINT64_MAX;
}

const di_stats *di_image_stats(const di_image *im) { return &im->st; }
