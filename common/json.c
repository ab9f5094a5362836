#include "common/json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include <glib.h>

void json_init(json_w *j, FILE *f, bool pretty)
{
    memset(j, 0, sizeof *j);
    j->f = f;
    j->pretty = pretty;
    j->first[0] = true;
}

static void newline_indent(json_w *j)
{
    if (!j->pretty)
        return;
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++)
        fputs("  ", j->f);
}

/* Separator and indentation before a value or a key. */
static void before_item(json_w *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (!j->first[j->depth])
        fputc(',', j->f);
    j->first[j->depth] = false;
    if (j->depth > 0)
        newline_indent(j);
}

static void open_container(json_w *j, char open, char close)
{
    before_item(j);
    fputc(open, j->f);
    /* Deeper nesting than JSON_MAX_DEPTH is a caller bug; stay at the last
     * level rather than overrun the arrays. */
    if (j->depth < JSON_MAX_DEPTH - 1)
        j->depth++;
    j->first[j->depth] = true;
    j->close[j->depth] = close;
}

void json_obj(json_w *j) { open_container(j, '{', '}'); }
void json_arr(json_w *j) { open_container(j, '[', ']'); }

void json_end(json_w *j)
{
    if (j->depth == 0)
        return;
    bool empty = j->first[j->depth];
    char close = j->close[j->depth];
    j->depth--;
    if (!empty)
        newline_indent(j);
    fputc(close, j->f);
}

void json_put_strn(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    const char *p = s, *end = s + n;
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        if (c >= 0x80) {
            gunichar u = g_utf8_get_char_validated(p, (gssize)(end - p));
            if (u == (gunichar)-1 || u == (gunichar)-2) {
                fputs("\\ufffd", f); /* not UTF-8: one replacement per byte */
                p++;
            } else {
                const char *nx = g_utf8_next_char(p);
                fwrite(p, 1, (size_t)(nx - p), f);
                p = nx;
            }
            continue;
        }
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (c < 0x20)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
        p++;
    }
    fputc('"', f);
}

void json_put_str(FILE *f, const char *s)
{
    json_put_strn(f, s, strlen(s));
}

void json_strn(json_w *j, const char *s, size_t n)
{
    before_item(j);
    json_put_strn(j->f, s, n);
}

void json_str(json_w *j, const char *s)
{
    if (!s) {
        json_null(j);
        return;
    }
    json_strn(j, s, strlen(s));
}

void json_key(json_w *j, const char *key)
{
    json_str(j, key);
    fputs(j->pretty ? ": " : ":", j->f);
    j->after_key = true;
}

void json_u64(json_w *j, uint64_t v) { before_item(j); fprintf(j->f, "%" PRIu64, v); }
void json_i64(json_w *j, int64_t v) { before_item(j); fprintf(j->f, "%" PRId64, v); }
void json_bool(json_w *j, bool v) { before_item(j); fputs(v ? "true" : "false", j->f); }
void json_null(json_w *j) { before_item(j); fputs("null", j->f); }

void json_dbl(json_w *j, double v)
{
    if (!isfinite(v)) {
        json_null(j);
        return;
    }
    before_item(j);
    fprintf(j->f, "%.6g", v);
}

void json_hex(json_w *j, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "0x%" PRIx64, v);
    json_str(j, b);
}

void json_kstr(json_w *j, const char *k, const char *v) { json_key(j, k); json_str(j, v); }
void json_ku64(json_w *j, const char *k, uint64_t v) { json_key(j, k); json_u64(j, v); }
void json_ki64(json_w *j, const char *k, int64_t v) { json_key(j, k); json_i64(j, v); }
void json_kdbl(json_w *j, const char *k, double v) { json_key(j, k); json_dbl(j, v); }
void json_kbool(json_w *j, const char *k, bool v) { json_key(j, k); json_bool(j, v); }
void json_khex(json_w *j, const char *k, uint64_t v) { json_key(j, k); json_hex(j, v); }

void json_finish(json_w *j)
{
    fputc('\n', j->f);
    fflush(j->f);
}
