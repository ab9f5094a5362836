#include "ptrec_lib.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- command-line values -------------------------------------------------- */

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Parses digits of base 10 or 16 from s, at least one, stopping at the first
 * non-digit; refuses overflow. Returns the end or NULL. */
static const char *parse_digits(const char *s, unsigned base, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = s;
    for (;; p++) {
        int d = base == 16 ? hexval((unsigned char)*p)
                           : (*p >= '0' && *p <= '9' ? *p - '0' : -1);
        if (d < 0) break;
        if (v > (UINT64_MAX - (uint64_t)d) / base) return NULL;
        v = v * base + (uint64_t)d;
    }
    if (p == s) return NULL;
    *out = v;
    return p;
}

bool pr_parse_u64(const char *s, uint64_t *out)
{
    if (!s) return false;
    const char *end;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        end = parse_digits(s + 2, 16, out);
    else
        end = parse_digits(s, 10, out);
    return end && *end == '\0';
}

bool pr_parse_size(const char *s, uint64_t *out)
{
    if (!s) return false;
    uint64_t v;
    const char *p = parse_digits(s, 10, &v);
    if (!p) return false;
    unsigned shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    default: break;
    }
    /* "4M", "4MB" and "4MiB" all mean 4 * 2^20: buffer sizes are binary. */
    if (shift && p[0] == 'i' && p[1] == 'B') p += 2;
    else if (p[0] == 'B') p++;
    if (*p != '\0' || v == 0) return false;
    if (shift && v > (UINT64_MAX >> shift)) return false;
    *out = v << shift;
    return true;
}

bool pr_parse_range(const char *s, uint64_t *lo, uint64_t *hi)
{
    if (!s) return false;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2;
    const char *p = parse_digits(s, 16, lo);
    if (!p || *p != '-') return false;
    p++;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) p += 2;
    p = parse_digits(p, 16, hi);
    return p && *p == '\0' && *lo < *hi;
}

/* ---- the handshake -------------------------------------------------------- */

/* Highest user-space address with 5-level paging; anything above cannot be a
 * code cache of the process. */
#define USER_ADDR_LIMIT (1ull << 56)

/* Consumes `word` followed by exactly one space (or the end when last). */
static bool take_word(const char **p, const char *end, const char *word, bool last)
{
    size_t n = strlen(word);
    if ((size_t)(end - *p) < n || memcmp(*p, word, n) != 0) return false;
    *p += n;
    if (last) return *p == end;
    if (*p == end || **p != ' ') return false;
    (*p)++;
    return true;
}

static bool take_hex(const char **p, const char *end, uint64_t *v, bool last)
{
    const char *q = *p;
    if (end - q < 3 || q[0] != '0' || q[1] != 'x') return false;
    q += 2;
    uint64_t x = 0;
    int n = 0;
    while (q < end && hexval((unsigned char)*q) >= 0) {
        if (++n > 16) return false;
        x = (x << 4) | (uint64_t)hexval((unsigned char)*q);
        q++;
    }
    if (n == 0) return false;
    if (last ? q != end : (q == end || *q != ' ')) return false;
    *p = last ? q : q + 1;
    *v = x;
    return true;
}

bool pr_parse_handshake(const char *line, size_t len, pr_handshake *hs, const char **why)
{
    static const char *const bad = "not 'jpt 1 codecache 0x<low> 0x<high> pid <pid>'";
    if (len > PR_HANDSHAKE_MAX_LINE) { *why = "line too long"; return false; }
    if (memchr(line, '\0', len)) { *why = "NUL byte in the line"; return false; }
    const char *p = line, *end = line + len;
    if (!take_word(&p, end, "jpt", false)) { *why = bad; return false; }
    if (!take_word(&p, end, "1", false)) {
        *why = (p < end && isdigit((unsigned char)*p)) ? "unsupported handshake version" : bad;
        return false;
    }
    uint64_t lo, hi;
    if (!take_word(&p, end, "codecache", false) || !take_hex(&p, end, &lo, false) ||
        !take_hex(&p, end, &hi, false) || !take_word(&p, end, "pid", false)) {
        *why = bad;
        return false;
    }
    /* pid: positive decimal to the end of the line */
    long pid = 0;
    const char *q = p;
    while (q < end && *q >= '0' && *q <= '9') {
        pid = pid * 10 + (*q - '0');
        if (pid > INT_MAX) { *why = "pid out of range"; return false; }
        q++;
    }
    if (q == p || q != end) { *why = bad; return false; }
    if (pid <= 0) { *why = "pid out of range"; return false; }
    if (lo == 0 || lo >= hi) { *why = "empty or inverted code-cache range"; return false; }
    if (hi > USER_ADDR_LIMIT) { *why = "code-cache range outside user space"; return false; }
    hs->low = lo;
    hs->high = hi;
    hs->pid = pid;
    return true;
}


/* ---- /proc/cpuinfo -------------------------------------------------------- */

void pr_cpu_parse(const char *text, pr_cpu *cpu)
{
    memset(cpu, 0, sizeof *cpu);
    cpu->family = cpu->model = cpu->stepping = -1;
    int seen_processor = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (n == 0 && seen_processor) break;   /* end of the first block */
        const char *colon = memchr(line, ':', n);
        if (colon) {
            size_t klen = (size_t)(colon - line);
            while (klen && (line[klen - 1] == ' ' || line[klen - 1] == '\t')) klen--;
            const char *v = colon + 1;
            while (v < line + n && *v == ' ') v++;
            size_t vlen = (size_t)(line + n - v);
            char val[64];
            if (vlen >= sizeof val) vlen = sizeof val - 1;
            memcpy(val, v, vlen);
            val[vlen] = '\0';
#define KEY(k) (klen == sizeof(k) - 1 && memcmp(line, k, klen) == 0)
            if (KEY("processor")) {
                seen_processor = 1;
            } else if (KEY("vendor_id")) {
                snprintf(cpu->vendor, sizeof cpu->vendor, "%.31s", val);
            } else if (KEY("cpu family") || KEY("model") || KEY("stepping")) {
                char *e;
                long x = strtol(val, &e, 10);
                if (e != val && *e == '\0' && x >= 0 && x < 1 << 20) {
                    if (KEY("cpu family")) cpu->family = (int)x;
                    else if (KEY("model")) cpu->model = (int)x;
                    else cpu->stepping = (int)x;
                }
            }
#undef KEY
        }
        line = nl ? nl + 1 : NULL;
    }
}

/* ---- the traced command --------------------------------------------------- */

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

bool pr_is_java_launcher(const char *given, const char *resolved)
{
    if (given && strcmp(base_name(given), "java") == 0) return true;
    return resolved && strcmp(base_name(resolved), "java") == 0;
}

/* One option: "-agentpath:<path>[=<options>]" whose path ends in libjpt.so. */
static bool is_jpt_agent_option(const char *opt, size_t n)
{
    static const char pre[] = "-agentpath:";
    if (n < sizeof pre - 1 || memcmp(opt, pre, sizeof pre - 1) != 0) return false;
    const char *path = opt + sizeof pre - 1;
    size_t plen = n - (sizeof pre - 1);
    const char *eq = memchr(path, '=', plen);
    if (eq) plen = (size_t)(eq - path);
    static const char lib[] = "libjpt.so";
    const size_t ln = sizeof lib - 1;
    return plen >= ln && memcmp(path + plen - ln, lib, ln) == 0 &&
           (plen == ln || path[plen - ln - 1] == '/');
}

/* Splits like the JVM splits JAVA_TOOL_OPTIONS: white space separates options
 * except inside single or double quotes, which are removed. */
bool pr_has_jpt_agent_opts(const char *opts)
{
    if (!opts) return false;
    size_t cap = strlen(opts) + 1;
    char *tok = malloc(cap);
    if (!tok) return false;
    bool found = false;
    const char *p = opts;
    while (*p && !found) {
        while (*p && isspace((unsigned char)*p)) p++;
        if (!*p) break;
        size_t n = 0;
        char quote = 0;
        for (; *p && (quote || !isspace((unsigned char)*p)); p++) {
            if (quote && *p == quote) quote = 0;
            else if (!quote && (*p == '"' || *p == '\'')) quote = *p;
            else tok[n++] = *p;
        }
        found = is_jpt_agent_option(tok, n);
    }
    free(tok);
    return found;
}

bool pr_has_jpt_agent_argv(char *const argv[])
{
    for (size_t i = 0; argv && argv[i]; i++)
        if (is_jpt_agent_option(argv[i], strlen(argv[i]))) return true;
    return false;
}
