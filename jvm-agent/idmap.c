/* Small hash containers for the agent (the agent links libc only). Both are
 * touched once per method or class, not per executed instruction, so a
 * mutex per container is cheap enough and keeps them simple. */
#include "jvm-agent/agent.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix64(uint64_t x)
{
    /* splitmix64 finalizer: jmethodIDs are aligned pointers, spread them. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static bool set_put(uint64_t *slots, size_t cap, uint64_t key)
{
    size_t i = (size_t)mix64(key) & (cap - 1);
    while (slots[i]) {
        if (slots[i] == key)
            return false;
        i = (i + 1) & (cap - 1);
    }
    slots[i] = key;
    return true;
}

int u64set_add(u64set *s, uint64_t key)
{
    if (!key)
        return 0;
    pthread_mutex_lock(&s->lock);
    if ((s->n + 1) * 2 > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 1024;
        uint64_t *ns = calloc(ncap, sizeof *ns);
        if (!ns) {
            pthread_mutex_unlock(&s->lock);
            return -1;
        }
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i])
                set_put(ns, ncap, s->slots[i]);
        free(s->slots);
        s->slots = ns;
        s->cap = ncap;
    }
    int added = set_put(s->slots, s->cap, key);
    s->n += (size_t)added;
    pthread_mutex_unlock(&s->lock);
    return added;
}

bool u64set_has(u64set *s, uint64_t key)
{
    bool found = false;
    pthread_mutex_lock(&s->lock);
    if (s->cap) {
        size_t i = (size_t)mix64(key) & (s->cap - 1);
        while (s->slots[i]) {
            if (s->slots[i] == key) {
                found = true;
                break;
            }
            i = (i + 1) & (s->cap - 1);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

/* ---- classes ------------------------------------------------------------ */

struct cnode {
    struct cnode *next;
    uint64_t loader, hash;
    class_entry e;
    char sig[];
};

static struct {
    pthread_mutex_t lock;
    struct cnode **b;
    size_t nb, n;
    uint64_t next_id;
} classes = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 1 };

static uint64_t str_hash(const char *s, uint64_t seed)
{
    uint64_t h = 1469598103934665603ull ^ seed; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return mix64(h);
}

bool class_get(const char *sig, uint64_t loader, unsigned set_flags, class_entry *before)
{
    if (!sig)
        sig = "";
    uint64_t h = str_hash(sig, loader);
    pthread_mutex_lock(&classes.lock);
    if (classes.n + 1 > classes.nb) {
        size_t nnb = classes.nb ? classes.nb * 2 : 4096;
        struct cnode **nbk = calloc(nnb, sizeof *nbk);
        if (nbk) {
            for (size_t i = 0; i < classes.nb; i++) {
                for (struct cnode *c = classes.b[i], *next; c; c = next) {
                    next = c->next;
                    c->next = nbk[c->hash & (nnb - 1)];
                    nbk[c->hash & (nnb - 1)] = c;
                }
            }
            free(classes.b);
            classes.b = nbk;
            classes.nb = nnb;
        } else if (!classes.nb) {
            pthread_mutex_unlock(&classes.lock);
            return false;
        }
    }
    struct cnode **slot = &classes.b[h & (classes.nb - 1)];
    struct cnode *c = *slot;
    while (c && !(c->hash == h && c->loader == loader && strcmp(c->sig, sig) == 0))
        c = c->next;
    if (!c) {
        size_t l = strlen(sig);
        c = malloc(sizeof *c + l + 1);
        if (!c) {
            pthread_mutex_unlock(&classes.lock);
            return false;
        }
        memcpy(c->sig, sig, l + 1);
        c->loader = loader;
        c->hash = h;
        c->e.id = classes.next_id++;
        c->e.flags = 0;
        c->next = *slot;
        *slot = c;
        classes.n++;
    }
    if (before)
        *before = c->e;
    c->e.flags |= set_flags;
    pthread_mutex_unlock(&classes.lock);
    return true;
}

uint64_t class_count(void)
{
    pthread_mutex_lock(&classes.lock);
    uint64_t n = classes.n;
    pthread_mutex_unlock(&classes.lock);
    return n;
}
