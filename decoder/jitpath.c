#include "decoder/jitpath.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <capstone/capstone.h>
#include <glib.h>

#include "decoder/x86.h"

#define MAX_WIDTH 64               /* candidate addresses per step */
#define CACHE_MAX_INSNS (8u << 20) /* addresses kept in the path cache */

/* Lazily decoded instructions of one version, by offset: 5 bytes per code
 * byte of the versions that run, dropped wholesale above TABS_MAX_BYTES. */
typedef struct vtab {
    uint64_t vaddr, size;
    const uint8_t *bytes;
    uint8_t *info;            /* 0: not decoded yet; BAD: undecodable; else len | kind << 4 */
    int32_t *target;          /* direct branch target offset, or NO_TARGET */
} vtab;

#define BAD 0x80
#define NO_TARGET INT32_MIN
#define TABS_MAX_BYTES (256u << 20)

static unsigned info_len(uint8_t i) { return i & 0x0f; }
static xfer info_kind(uint8_t i) { return (xfer)((i >> 4) & 0x07); }

typedef struct node {
    uint32_t off, pred;
    uint8_t count;            /* paths reaching it, saturated at 2 */
} node;

typedef struct pkey {
    uint32_t version, n;
    uint64_t ip, end;
} pkey;

struct jp_cache {
    const dm_model *m;
    const uint8_t *code;
    uint64_t code_size;
    csh cs;
    cs_insn *insn;
    GHashTable *tabs;         /* version index -> vtab */
    uint64_t tab_bytes;
    GHashTable *paths;        /* pkey -> uint64_t[n] (n == 0: no unique path) */
    size_t cached_insns;
    GArray *nodes;
    GArray *steps;            /* first node of each step */
    uint64_t *out;
};

static void vtab_free(gpointer p)
{
    vtab *t = p;
    g_free(t->info);
    g_free(t->target);
    g_free(t);
}

static guint pkey_hash(gconstpointer p)
{
    const pkey *k = p;
    uint64_t h = k->ip * 0x9e3779b97f4a7c15ull ^ k->end ^ ((uint64_t)k->n << 32) ^ k->version;
    return (guint)(h ^ (h >> 32));
}

static gboolean pkey_equal(gconstpointer a, gconstpointer b)
{
    return !memcmp(a, b, sizeof(pkey));
}

jp_cache *jp_new(const dm_model *m)
{
    if (!m->code_size)
        return NULL;
    int fd = open(m->code_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    void *map = mmap(NULL, m->code_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return NULL;
    jp_cache *jc = g_new0(jp_cache, 1);
    jc->m = m;
    jc->code = map;
    jc->code_size = m->code_size;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &jc->cs) != CS_ERR_OK) {
        munmap(map, m->code_size);
        g_free(jc);
        return NULL;
    }
    jc->insn = cs_malloc(jc->cs);
    jc->tabs = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, vtab_free);
    jc->paths = g_hash_table_new_full(pkey_hash, pkey_equal, g_free, g_free);
    jc->nodes = g_array_new(FALSE, FALSE, sizeof(node));
    jc->steps = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    jc->out = g_new(uint64_t, JP_MAX_INSNS);
    return jc;
}

void jp_free(jp_cache *jc)
{
    if (!jc)
        return;
    cs_free(jc->insn, 1);
    cs_close(&jc->cs);
    munmap((void *)jc->code, jc->code_size);
    g_hash_table_destroy(jc->tabs);
    g_hash_table_destroy(jc->paths);
    g_array_free(jc->nodes, TRUE);
    g_array_free(jc->steps, TRUE);
    g_free(jc->out);
    g_free(jc);
}

static vtab *tab_for(jp_cache *jc, const dm_code *v)
{
    vtab *t = g_hash_table_lookup(jc->tabs, GUINT_TO_POINTER(v->index + 1));
    if (t)
        return t;
    if (v->code_offset > jc->code_size || v->size > jc->code_size - v->code_offset ||
        v->size > (1u << 30) || v->size * 5 > TABS_MAX_BYTES)
        return NULL;
    if (jc->tab_bytes + v->size * 5 > TABS_MAX_BYTES) {
        g_hash_table_remove_all(jc->tabs);
        jc->tab_bytes = 0;
    }
    jc->tab_bytes += v->size * 5;
    t = g_new0(vtab, 1);
    t->vaddr = v->vaddr;
    t->size = v->size;
    t->bytes = jc->code + v->code_offset;
    t->info = g_new0(uint8_t, v->size);
    t->target = g_new0(int32_t, v->size);
    g_hash_table_insert(jc->tabs, GUINT_TO_POINTER(v->index + 1), t);
    return t;
}

/* Decodes the instruction at offset o once. False if it cannot be. */
static bool decode_at(jp_cache *jc, vtab *t, uint64_t o)
{
    if (t->info[o])
        return t->info[o] != BAD;
    const uint8_t *p = t->bytes + o;
    size_t avail = t->size - o < 15 ? (size_t)(t->size - o) : 15;
    uint64_t addr = t->vaddr + o;
    if (!cs_disasm_iter(jc->cs, &p, &avail, &addr, jc->insn) || !jc->insn->size ||
        jc->insn->size > 15) {
        t->info[o] = BAD;
        return false;
    }
    unsigned len = jc->insn->size;
    int64_t disp = 0;
    int direct = 0;
    xfer k = x86_classify(t->bytes + o, len, &disp, &direct);
    int64_t target = (int64_t)o + len + disp;
    t->info[o] = (uint8_t)(len | (unsigned)k << 4);
    t->target[o] = direct && target >= 0 && (uint64_t)target < t->size ? (int32_t)target
                                                                         : NO_TARGET;
    return true;
}

/* Appends successor s (an offset) of node `from` to the step being built
 * (nodes from `first` on). False when the step grows too wide. */
static bool add_succ(jp_cache *jc, uint32_t first, int64_t s, uint32_t from, uint8_t count,
                     uint64_t size)
{
    if (s < 0 || (uint64_t)s >= size)
        return true;              /* leaves the version: not inside this block */
    node *nodes = (node *)(void *)jc->nodes->data;
    for (uint32_t i = first; i < jc->nodes->len; i++) {
        if (nodes[i].off == (uint32_t)s) {
            nodes[i].count = nodes[i].count + count >= 2 ? 2 : 1;
            return true;
        }
    }
    if (jc->nodes->len - first >= MAX_WIDTH)
        return false;
    node n = { (uint32_t)s, from, count };
    g_array_append_val(jc->nodes, n);
    return true;
}

static size_t search(jp_cache *jc, vtab *t, uint64_t ip, uint64_t end_ip, uint32_t ninsn)
{
    g_array_set_size(jc->nodes, 0);
    g_array_set_size(jc->steps, 0);
    node start = { (uint32_t)(ip - t->vaddr), UINT32_MAX, 1 };
    g_array_append_val(jc->nodes, start);
    uint32_t first = 0;
    g_array_append_val(jc->steps, first);
    for (uint32_t k = 0; k + 1 < ninsn; k++) {
        uint32_t lo = g_array_index(jc->steps, uint32_t, k), hi = jc->nodes->len;
        g_array_append_val(jc->steps, hi);
        for (uint32_t j = lo; j < hi; j++) {
            node cur = g_array_index(jc->nodes, node, j);
            if (!decode_at(jc, t, cur.off))
                continue;
            uint8_t info = t->info[cur.off];
            int64_t next = (int64_t)cur.off + info_len(info);
            int64_t target = t->target[cur.off] == NO_TARGET ? -1 : t->target[cur.off];
            bool ok = true;
            switch (info_kind(info)) {
            case X_OTHER:
                ok = add_succ(jc, hi, next, j, cur.count, t->size);
                break;
            case X_COND:
                ok = add_succ(jc, hi, next, j, cur.count, t->size) &&
                     add_succ(jc, hi, target, j, cur.count, t->size);
                break;
            case X_JMP_DIRECT:
                ok = add_succ(jc, hi, target, j, cur.count, t->size);
                break;
            default:
                break;            /* calls, returns, indirect: only last in a block */
            }
            if (!ok)
                return 0;
        }
        if (jc->nodes->len == hi)
            return 0;
    }
    uint32_t lo = g_array_index(jc->steps, uint32_t, ninsn - 1);
    uint32_t end_off = (uint32_t)(end_ip - t->vaddr);
    const node *nodes = (const node *)(void *)jc->nodes->data;
    for (uint32_t j = lo; j < jc->nodes->len; j++) {
        if (nodes[j].off != end_off)
            continue;
        if (nodes[j].count != 1)
            return 0;
        /* unique: walk back */
        uint32_t at = j;
        for (uint32_t k = ninsn; k-- > 0;) {
            jc->out[k] = t->vaddr + nodes[at].off;
            at = nodes[at].pred;
        }
        return ninsn;
    }
    return 0;
}

size_t jp_path(jp_cache *jc, const dm_code *v, uint64_t ip, uint64_t end_ip, uint32_t ninsn,
               const uint64_t **path)
{
    *path = NULL;
    if (!jc || !ninsn || ninsn > JP_MAX_INSNS || ip < v->vaddr || ip - v->vaddr >= v->size ||
        end_ip < v->vaddr || end_ip - v->vaddr >= v->size)
        return 0;
    pkey key = { v->index, ninsn, ip, end_ip };
    uint64_t *hit;
    if (g_hash_table_lookup_extended(jc->paths, &key, NULL, (gpointer *)&hit)) {
        *path = hit;
        return hit ? ninsn : 0;
    }
    vtab *t = tab_for(jc, v);
    size_t n = t ? search(jc, t, ip, end_ip, ninsn) : 0;
    if (jc->cached_insns + n > CACHE_MAX_INSNS) {
        g_hash_table_remove_all(jc->paths);
        jc->cached_insns = 0;
    }
    uint64_t *copy = n ? g_memdup2(jc->out, n * sizeof(uint64_t)) : NULL;
    jc->cached_insns += n + 1;
    g_hash_table_insert(jc->paths, g_memdup2(&key, sizeof key), copy);
    *path = copy;
    return n;
}
