/* A small streaming JSON writer: correct escaping and commas, nothing else.
 *
 *   json_w j; json_init(&j, stdout, true);
 *   json_obj(&j); json_key(&j, "n"); json_u64(&j, 3); json_end(&j);
 *   json_finish(&j);
 */
#ifndef JPT_COMMON_JSON_H
#define JPT_COMMON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 64

typedef struct json_w {
    FILE *f;
    bool pretty;
    int depth;
    bool first[JSON_MAX_DEPTH]; /* no element written yet at this depth */
    char close[JSON_MAX_DEPTH]; /* closing bracket of the container at this depth */
    bool after_key;
} json_w;

void json_init(json_w *j, FILE *f, bool pretty);
void json_obj(json_w *j);
void json_arr(json_w *j);
void json_end(json_w *j);                 /* closes the innermost object or array */
void json_key(json_w *j, const char *key);
void json_str(json_w *j, const char *s);  /* NULL writes null */
void json_strn(json_w *j, const char *s, size_t n); /* invalid UTF-8 becomes U+FFFD */
void json_u64(json_w *j, uint64_t v);
void json_i64(json_w *j, int64_t v);
void json_dbl(json_w *j, double v);       /* non-finite writes null */
void json_bool(json_w *j, bool v);
void json_null(json_w *j);
void json_hex(json_w *j, uint64_t v);     /* "0x..." string: addresses stay exact */
/* key + value shorthands */
void json_kstr(json_w *j, const char *k, const char *v);
void json_ku64(json_w *j, const char *k, uint64_t v);
void json_ki64(json_w *j, const char *k, int64_t v);
void json_kdbl(json_w *j, const char *k, double v);
void json_kbool(json_w *j, const char *k, bool v);
void json_khex(json_w *j, const char *k, uint64_t v);
/* A string as a JSON value, quoted and escaped, outside any writer: for
 * output written by hand */
void json_put_str(FILE *f, const char *s);
void json_put_strn(FILE *f, const char *s, size_t n);
void json_finish(json_w *j);              /* trailing newline */

#endif
