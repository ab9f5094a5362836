/* The pages of a cct-json document: the ring chart (ringchart.h) and the
 * flame graph (flamegraph.h) are one template each, filled the same way. */
#include "profile/flamegraph.h"
#include "profile/ringchart.h"

#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#define DATA_MARK "@JPT_CCT_JSON@"
#define TITLE_MARK "@JPT_TITLE@"

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const char *find(const char *hay, size_t n, const char *needle)
{
    return memmem(hay, n, needle, strlen(needle));
}

static bool put(FILE *out, const char *s, size_t n)
{
    return n == 0 || fwrite(s, 1, n, out) == n;
}

static bool put_html_escaped(FILE *out, const char *s)
{
    for (; *s; s++) {
        const char *rep = NULL;
        switch (*s) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        default: break;
        }
        if (rep ? fputs(rep, out) < 0 : putc(*s, out) == EOF)
            return false;
    }
    return true;
}

/* The JSON text with "</" -> "<\/" and "<!--" -> "\u003c!--". Outside
 * strings valid JSON has no '<', so both rewrites keep the value. */
static bool put_json_escaped(FILE *out, const char *s, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '<' || i + 1 >= n)
            continue;
        if (s[i + 1] == '/') {
            if (!put(out, s + start, i + 1 - start) || !put(out, "\\", 1))
                return false;
            start = i + 1;
        } else if (s[i + 1] == '!' && n - i >= 4 && memcmp(s + i, "<!--", 4) == 0) {
            if (!put(out, s + start, i - start) || !put(out, "\\u003c", 6))
                return false;
            start = i + 1;
        }
    }
    return put(out, s + start, n - start);
}

/* A kind of page: its template (tlen bytes), what names it in messages,
 * and its title when none is given. */
typedef struct page {
    const char *tpl;
    size_t tlen;
    const char *what;
    const char *default_title;
} page;

/* The page's template with its title and data marks replaced. */
static int page_write(FILE *out, const page *pg, const char *cct_json, size_t len,
                      const char *title, char *err, size_t errlen)
{
    const char *tpl = pg->tpl, *what = pg->what;
    const size_t tlen = pg->tlen;
    if (!out || !cct_json)
        return fail(err, errlen, "%s: no output or no input", what);
    size_t i = 0;
    while (i < len && (cct_json[i] == ' ' || cct_json[i] == '\t' || cct_json[i] == '\n' ||
                       cct_json[i] == '\r'))
        i++;
    if (i == len || cct_json[i] != '{')
        return fail(err, errlen, "%s: input is not a JSON object", what);
    if (memchr(cct_json, '\0', len))
        return fail(err, errlen, "%s: input contains a NUL byte", what);
    if (!find(cct_json, len, "\"jpt-cct\""))
        return fail(err, errlen, "%s: input is not cct-json (no \"format\":\"jpt-cct\")", what);

    const char *tmark = find(tpl, tlen, TITLE_MARK);
    const char *dmark = find(tpl, tlen, DATA_MARK);
    if (!tmark || !dmark || tmark > dmark)
        return fail(err, errlen, "%s: page template is damaged", what);
    const char *after_t = tmark + strlen(TITLE_MARK);
    const char *after_d = dmark + strlen(DATA_MARK);

    bool ok = put(out, tpl, (size_t)(tmark - tpl)) &&
              put_html_escaped(out, title ? title : pg->default_title) &&
              put(out, after_t, (size_t)(dmark - after_t)) &&
              put_json_escaped(out, cct_json + i, len - i) &&
              put(out, after_d, (size_t)(tpl + tlen - after_d)) && fflush(out) == 0 &&
              !ferror(out);
    return ok ? 0 : fail(err, errlen, "%s: write failed", what);
}

int pf_ringchart_write(FILE *out, const char *cct_json, size_t len, const char *title,
                       char *err, size_t errlen)
{
    const page pg = { pf_ringchart_template, pf_ringchart_template_len, "ringchart",
                      "Calling Context Ring Chart" };
    return page_write(out, &pg, cct_json, len, title, err, errlen);
}

int pf_flamegraph_write(FILE *out, const char *cct_json, size_t len, const char *title,
                        char *err, size_t errlen)
{
    const page pg = { pf_flamegraph_template, pf_flamegraph_template_len, "flamegraph",
                      "Flame graph" };
    return page_write(out, &pg, cct_json, len, title, err, errlen);
}
