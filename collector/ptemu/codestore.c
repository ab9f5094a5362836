/* The test mode code store of libptemu.so (eval/code.bin): one record per distinct
 * (ip, bytes) seen at translation, so a checker can decode each instruction with exactly
 * the bytes it ran with, even where the JIT reused an address. Retranslations of unchanged
 * code reuse the id. */
#include "ptemu.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

struct code_rec {
    uint64_t ip;
    uint8_t len;
    uint8_t bytes[16];
};
static struct code_rec *g_code;
static uint32_t g_ncode, g_capcode;
static uint32_t *g_code_hash; /* open addressing: ip -> latest id (0 empty) */
static uint32_t g_code_hash_cap;
static int g_code_fd = -1;
static uint8_t g_code_buf[1 << 16];
static size_t g_code_buflen;

static uint32_t hash_ip(uint64_t ip)
{
    ip ^= ip >> 29;
    ip *= 0xbf58476d1ce4e5b9ull;
    ip ^= ip >> 32;
    return (uint32_t)ip;
}

static void code_hash_put(uint64_t ip, uint32_t id);

static void code_hash_grow(void)
{
    uint32_t *old = g_code_hash, oldcap = g_code_hash_cap;
    g_code_hash_cap = oldcap ? oldcap * 2 : 1 << 16;
    g_code_hash = calloc(g_code_hash_cap, sizeof *g_code_hash);
    if (!g_code_hash)
        abort();
    for (uint32_t i = 0; i < oldcap; i++)
        if (old[i])
            code_hash_put(g_code[old[i] - 1].ip, old[i]);
    free(old);
}

static void code_hash_put(uint64_t ip, uint32_t id)
{
    uint32_t m = g_code_hash_cap - 1;
    for (uint32_t h = hash_ip(ip) & m;; h = (h + 1) & m) {
        if (!g_code_hash[h] || g_code[g_code_hash[h] - 1].ip == ip) {
            g_code_hash[h] = id;
            return;
        }
    }
}

static uint32_t code_hash_get(uint64_t ip)
{
    uint32_t m = g_code_hash_cap - 1;
    for (uint32_t h = hash_ip(ip) & m;; h = (h + 1) & m) {
        uint32_t id = g_code_hash[h];
        if (!id || g_code[id - 1].ip == ip)
            return id;
    }
}

void code_flush(void)
{
    if (g_code_fd >= 0 && g_code_buflen) {
        ptemu_write_all(g_code_fd, g_code_buf, g_code_buflen);
        g_code_buflen = 0;
    }
}

uint32_t code_id(uint64_t ip, const uint8_t *bytes, uint8_t len)
{
    if (!g_code_hash || (g_ncode + 1) * 2 > g_code_hash_cap)
        code_hash_grow();
    uint32_t id = code_hash_get(ip);
    if (id && g_code[id - 1].len == len && !memcmp(g_code[id - 1].bytes, bytes, len))
        return id;
    if (g_ncode == g_capcode) {
        g_capcode = g_capcode ? g_capcode * 2 : 1 << 16;
        g_code = realloc(g_code, (size_t)g_capcode * sizeof *g_code);
        if (!g_code)
            abort();
    }
    struct code_rec *r = &g_code[g_ncode++];
    r->ip = ip;
    r->len = len;
    memcpy(r->bytes, bytes, len);
    id = g_ncode;
    code_hash_put(ip, id);
    if (g_code_buflen + 9 + len > sizeof g_code_buf)
        code_flush();
    memcpy(g_code_buf + g_code_buflen, &ip, 8);
    g_code_buf[g_code_buflen + 8] = len;
    memcpy(g_code_buf + g_code_buflen + 9, bytes, len);
    g_code_buflen += 9u + len;
    return id;
}

int code_store_open(const char *path)
{
    g_code_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (g_code_fd < 0)
        return -1;
    ptemu_write_all(g_code_fd, "JPTCODE1", 8);
    return 0;
}

uint32_t code_store_count(void)
{
    return g_ncode;
}
