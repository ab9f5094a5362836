#include "decoder/trinfo.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <glib.h>

#include "common/fileio.h"

#define MAX_DEPTH 32
#define MAX_INFO_BYTES (16u << 20)

/* A recursive-descent walk over any JSON value, calling `scalar` with the
 * dotted path of each string/number/literal ("cpu.family", "streams.0.name").
 * Strings are passed raw (escapes undecoded): the keys we need are plain. */
typedef struct scan {
    const char *base, *p, *end;
    char path[256];
    const char *error;
    dc_json_scalar scalar;
    void *ctx;
} scan;

static void ws(scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static bool fail(scan *s, const char *what)
{
    if (!s->error)
        s->error = what;
    return false;
}

/* Leaves p after the closing quote; [*b, *e) is the raw content. */
static bool string(scan *s, const char **b, const char **e)
{
    if (s->p >= s->end || *s->p != '"')
        return fail(s, "expected a string");
    *b = ++s->p;
    while (s->p < s->end && *s->p != '"') {
        if (*s->p == '\\' && s->p + 1 < s->end)
            s->p++;
        s->p++;
    }
    if (s->p >= s->end)
        return fail(s, "unterminated string");
    *e = s->p++;
    return true;
}

static bool value(scan *s, int depth);

static bool push_path(scan *s, size_t at, const char *seg, size_t n)
{
    if (at + 1 + n + 1 > sizeof s->path)
        return fail(s, "key path too long");
    size_t w = at;
    if (w)
        s->path[w++] = '.';
    memcpy(s->path + w, seg, n);
    s->path[w + n] = '\0';
    return true;
}

static bool container(scan *s, int depth, bool object)
{
    char close = object ? '}' : ']';
    size_t at = strlen(s->path);
    s->p++;
    ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return true;
    }
    for (unsigned idx = 0;; idx++) {
        ws(s);
        if (object) {
            const char *kb, *ke;
            if (!string(s, &kb, &ke))
                return false;
            ws(s);
            if (s->p >= s->end || *s->p != ':')
                return fail(s, "expected ':'");
            s->p++;
            if (!push_path(s, at, kb, (size_t)(ke - kb)))
                return false;
        } else {
            char num[16];
            int n = snprintf(num, sizeof num, "%u", idx);
            if (!push_path(s, at, num, (size_t)n))
                return false;
        }
        if (!value(s, depth + 1))
            return false;
        s->path[at] = '\0';
        ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return true;
        }
        return fail(s, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool value(scan *s, int depth)
{
    if (depth > MAX_DEPTH)
        return fail(s, "nested too deeply");
    ws(s);
    if (s->p >= s->end)
        return fail(s, "unexpected end of file");
    char c = *s->p;
    if (c == '{' || c == '[')
        return container(s, depth, c == '{');
    if (c == '"') {
        const char *b, *e;
        if (!string(s, &b, &e))
            return false;
        s->scalar(s->path, b, (size_t)(e - b), true, s->ctx);
        return true;
    }
    const char *b = s->p;
    while (s->p < s->end && (g_ascii_isalnum(*s->p) || *s->p == '-' || *s->p == '+' ||
                             *s->p == '.'))
        s->p++;
    if (s->p == b)
        return fail(s, "unexpected character");
    s->scalar(s->path, b, (size_t)(s->p - b), false, s->ctx);
    return true;
}

int dc_json_scan(const char *text, size_t len, const char *name, dc_json_scalar scalar,
                 void *ctx, char *err, size_t errlen)
{
    scan s = { .base = text, .p = text, .end = text + len, .scalar = scalar, .ctx = ctx };
    bool ok = value(&s, 0);
    if (ok) {
        ws(&s);
        if (s.p != s.end)
            ok = fail(&s, "trailing data after the JSON value");
    }
    if (!ok) {
        snprintf(err, errlen, "%s: offset %zu: %s", name, (size_t)(s.p - s.base), s.error);
        return -1;
    }
    return 0;
}

bool dc_json_int(const char *v, size_t len, long long *out)
{
    char buf[32];
    if (!len || len >= sizeof buf)
        return false;
    memcpy(buf, v, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (*end || errno)
        return false;
    *out = x;
    return true;
}

static void on_scalar(const char *path, const char *v, size_t len, bool is_str, void *ctx)
{
    dc_trace_info *o = ctx;
    long long x;
    if (is_str && !strcmp(path, "backend")) {
        size_t n = len < sizeof o->backend - 1 ? len : sizeof o->backend - 1;
        memcpy(o->backend, v, n);
        o->backend[n] = '\0';
    } else if (is_str && !strcmp(path, "cpu.vendor")) {
        o->cpu.vendor = (len == 12 && !memcmp(v, "GenuineIntel", 12)) ? pcv_intel : pcv_unknown;
    } else if (!is_str && !strcmp(path, "cpu.family") && dc_json_int(v, len, &x) && x >= 0 &&
               x <= UINT16_MAX) {
        o->cpu.family = (uint16_t)x;
    } else if (!is_str && !strcmp(path, "cpu.model") && dc_json_int(v, len, &x) && x >= 0 &&
               x <= UINT8_MAX) {
        o->cpu.model = (uint8_t)x;
    } else if (!is_str && !strcmp(path, "cpu.stepping") && dc_json_int(v, len, &x) && x >= 0 &&
               x <= UINT8_MAX) {
        o->cpu.stepping = (uint8_t)x;
    }
}

int dc_parse_info(const char *text, size_t len, const char *name, dc_trace_info *out,
                  char *err, size_t errlen)
{
    dc_trace_info got;
    memset(&got, 0, sizeof got);
    if (dc_json_scan(text, len, name, on_scalar, &got, err, errlen) < 0)
        return -1;
    /* Without a known Intel CPU libipt applies no errata workarounds, which
     * is right for the emulator and for unknown models alike. */
    if (got.cpu.vendor != pcv_intel)
        memset(&got.cpu, 0, sizeof got.cpu);
    got.have_info = true;
    *out = got;
    return 0;
}

int dc_read_info(const char *dir, dc_trace_info *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char *path = g_build_filename(dir, "info.json", NULL);
    char *text = NULL;
    size_t len = 0;
    int rc = 1;
    struct stat st;
    if (lstat(path, &st) == 0) {
        rc = jpt_read_small_file(path, MAX_INFO_BYTES, &text, &len, err, errlen);
        if (rc == 0)
            rc = dc_parse_info(text, len, path, out, err, errlen);
    }
    free(text);
    g_free(path);
    return rc;
}
