/* The trace's TSC frequency and time formatting (see timebase.h). */
#include "profile/timebase.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#define MAX_INFO_BYTES (16u << 20)
#define MAX_DEPTH 32
#define MIN_HZ 1e6
#define MAX_HZ 1e11

/* A walk over one JSON value that remembers the few scalars the timebase
 * needs, by their key path. Strings are kept raw (their escapes are not
 * decoded): the values read are plain words. */
typedef struct jscan {
    const char *base, *p, *end;
    const char *error;
    const char *keys[MAX_DEPTH + 1];  /* the key of each open object member */
    size_t keylen[MAX_DEPTH + 1];
    int depth;
    /* what was found */
    bool have_hz, emulated;
    const char *hz, *hz_source;
    size_t hz_len, hz_source_len;
} jscan;

static bool fail(jscan *s, const char *what)
{
    if (!s->error)
        s->error = what;
    return false;
}

static void ws(jscan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static bool string(jscan *s, const char **b, size_t *n)
{
    if (s->p >= s->end || *s->p != '"')
        return fail(s, "expected a string");
    const char *start = ++s->p;
    while (s->p < s->end && *s->p != '"') {
        if ((unsigned char)*s->p < 0x20)
            return fail(s, "control character in a string");
        if (*s->p == '\\' && s->p + 1 < s->end)
            s->p++;
        s->p++;
    }
    if (s->p >= s->end)
        return fail(s, "unterminated string");
    *b = start;
    *n = (size_t)(s->p - start);
    s->p++;
    return true;
}

/* Whether the open members are exactly the keys a, b (b may be NULL). */
static bool at(const jscan *s, const char *a, const char *b)
{
    int want = b ? 2 : 1;
    if (s->depth != want)
        return false;
    if (s->keylen[1] != strlen(a) || memcmp(s->keys[1], a, s->keylen[1]))
        return false;
    return !b || (s->keylen[2] == strlen(b) && !memcmp(s->keys[2], b, s->keylen[2]));
}

static void scalar(jscan *s, const char *v, size_t n, bool is_str)
{
    if (!is_str && at(s, "time", "tsc_hz")) {
        s->hz = v;
        s->hz_len = n;
        s->have_hz = true;
    } else if (is_str && at(s, "time", "tsc_hz_source")) {
        s->hz_source = v;
        s->hz_source_len = n;
    } else if (is_str && at(s, "backend", NULL)) {
        s->emulated = n == 8 && !memcmp(v, "emulated", 8);
    }
}

static bool value(jscan *s);

static bool container(jscan *s, bool object)
{
    char close = object ? '}' : ']';
    if (s->depth >= MAX_DEPTH)
        return fail(s, "nested too deeply");
    s->p++;
    s->depth++;
    s->keys[s->depth] = "";
    s->keylen[s->depth] = 0;
    ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        s->depth--;
        return true;
    }
    for (;;) {
        ws(s);
        if (object) {
            if (!string(s, &s->keys[s->depth], &s->keylen[s->depth]))
                return false;
            ws(s);
            if (s->p >= s->end || *s->p != ':')
                return fail(s, "expected ':'");
            s->p++;
        } else {
            s->keys[s->depth] = "[]";      /* array elements match no key path */
            s->keylen[s->depth] = 2;
        }
        if (!value(s))
            return false;
        ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == close) {
            s->p++;
            s->depth--;
            return true;
        }
        return fail(s, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool value(jscan *s)
{
    ws(s);
    if (s->p >= s->end)
        return fail(s, "unexpected end of file");
    char c = *s->p;
    if (c == '{' || c == '[')
        return container(s, c == '{');
    if (c == '"') {
        const char *b;
        size_t n;
        if (!string(s, &b, &n))
            return false;
        scalar(s, b, n, true);
        return true;
    }
    const char *b = s->p;
    while (s->p < s->end && (g_ascii_isalnum(*s->p) || *s->p == '-' || *s->p == '+' ||
                             *s->p == '.'))
        s->p++;
    if (s->p == b)
        return fail(s, "unexpected character");
    scalar(s, b, (size_t)(s->p - b), false);
    return true;
}

int pf_timebase_parse(const char *text, size_t len, const char *name, pf_timebase *tb,
                      char *err, size_t errlen)
{
    memset(tb, 0, sizeof *tb);
    jscan s = { .base = text, .p = text, .end = text + len };
    bool ok = value(&s);
    if (ok) {
        ws(&s);
        if (s.p != s.end)
            ok = fail(&s, "trailing data after the JSON value");
    }
    if (!ok) {
        snprintf(err, errlen, "%s: offset %zu: %s", name, (size_t)(s.p - s.base), s.error);
        return -1;
    }
    if (!s.have_hz)
        return 0;
    char num[40];
    double hz = 0;
    bool parsed = false;
    if (s.hz_len < sizeof num) {
        memcpy(num, s.hz, s.hz_len);
        num[s.hz_len] = '\0';
        char *end;
        errno = 0;
        hz = strtod(num, &end);
        parsed = !errno && *end == '\0' && end != num;
    }
    if (!parsed || !(hz >= MIN_HZ && hz <= MAX_HZ)) {
        snprintf(err, errlen, "%s: offset %zu: time.tsc_hz %.*s is not a TSC frequency "
                 "(1 MHz to 100 GHz)", name, (size_t)(s.hz - text),
                 (int)(s.hz_len < 32 ? s.hz_len : 32), s.hz);
        return -1;
    }
    tb->hz = hz;
    tb->emulated = s.emulated;
    size_t n = s.hz_source_len;
    if (n > 24)
        n = 24;
    snprintf(tb->source, sizeof tb->source, "info.json%s%.*s%s", n ? " (" : "", (int)n,
             s.hz_source ? s.hz_source : "", n ? ")" : "");
    return 0;
}

int pf_timebase_read(const char *dir, double override_hz, pf_timebase *tb, char *err,
                     size_t errlen)
{
    memset(tb, 0, sizeof *tb);
    int rc = 0;
    char *path = g_build_filename(dir, "info.json", NULL);
    if (g_file_test(path, G_FILE_TEST_EXISTS)) {
        gchar *text = NULL;
        gsize len = 0;
        GError *ge = NULL;
        if (!g_file_get_contents(path, &text, &len, &ge)) {
            snprintf(err, errlen, "%s: %s", path, ge->message);
            g_error_free(ge);
            rc = -1;
        } else if (len > MAX_INFO_BYTES) {
            snprintf(err, errlen, "%s: offset 0: implausible size %zu", path, (size_t)len);
            rc = -1;
        } else {
            rc = pf_timebase_parse(text, len, path, tb, err, errlen);
        }
        g_free(text);
    }
    g_free(path);
    if (override_hz > 0) {
        bool emulated = tb->emulated;
        memset(tb, 0, sizeof *tb);
        tb->hz = override_hz;
        tb->emulated = emulated;
        snprintf(tb->source, sizeof tb->source, "--tsc-hz");
    }
    return rc;
}

double pf_time_ns(const pf_timebase *tb, uint64_t ticks)
{
    return (double)ticks * 1e9 / tb->hz;
}

const char *pf_time_str(const pf_timebase *tb, uint64_t ticks, char *buf, size_t len)
{
    if (!(tb->hz > 0)) {
        snprintf(buf, len, "%" G_GUINT64_FORMAT " ticks", ticks);
        return buf;
    }
    double ns = pf_time_ns(tb, ticks);
    if (ns >= 1e9)
        snprintf(buf, len, "%.3f s", ns / 1e9);
    else if (ns >= 1e6)
        snprintf(buf, len, "%.3f ms", ns / 1e6);
    else if (ns >= 1e3)
        snprintf(buf, len, "%.3f us", ns / 1e3);
    else
        snprintf(buf, len, "%.0f ns", ns);
    return buf;
}

const char *pf_timebase_describe(const pf_timebase *tb, char *buf, size_t len)
{
    if (!(tb->hz > 0)) {
        snprintf(buf, len, "time in TSC ticks: the trace records no TSC frequency "
                 "(--tsc-hz HZ gives one)");
        return buf;
    }
    snprintf(buf, len, "time from the TSC at %.3f GHz, %s%s", tb->hz / 1e9, tb->source,
             tb->emulated ? "; an emulated run: the time it took under emulation, many times "
                            "the native time" : "");
    return buf;
}
