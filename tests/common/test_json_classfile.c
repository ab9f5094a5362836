/* Units for the JSON writer and the class-file header parser. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "decoder/classfile.h"

static char *render(void (*fn)(json_w *))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    json_w j;
    json_init(&j, f, false);
    fn(&j);
    fclose(f);
    return buf;
}

static void doc(json_w *j)
{
    json_obj(j);
    json_kstr(j, "s", "a\"b\\c\n\x01");
    json_ku64(j, "n", 18446744073709551615ull);
    json_key(j, "a");
    json_arr(j);
    json_i64(j, -3);
    json_bool(j, true);
    json_dbl(j, 1.0 / 0.0);
    json_obj(j);
    json_end(j);
    json_end(j);
    json_key(j, "bad");
    json_strn(j, "ok\xff\xc3\xa9", 5);
    json_khex(j, "h", 0xabc);
    json_end(j);
}

Test(json, escaping_and_nesting)
{
    char *s = render(doc);
    cr_assert_str_eq(s, "{\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"n\":18446744073709551615,"
                        "\"a\":[-3,true,null,{}],\"bad\":\"ok\\ufffd\xc3\xa9\",\"h\":\"0xabc\"}");
    free(s);
}

/* A string written by hand (no writer) escapes as the writer does. */
Test(json, a_string_outside_a_writer)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    json_put_str(f, "a\"b\\c\n\x01");
    fputc(',', f);
    json_put_strn(f, "ok\xff\xc3\xa9", 5);
    fclose(f);
    cr_assert_str_eq(buf, "\"a\\\"b\\\\c\\n\\u0001\",\"ok\\ufffd\xc3\xa9\"");
    free(buf);
}

static const unsigned char tiny[] = {
    0xCA, 0xFE, 0xBA, 0xBE, 0x00, 0x00, 0x00, 0x3D, 0x00, 0x05, 0x07, 0x00, 0x02, 0x01, 0x00,
    0x04, 'T', 'i', 'n', 'y', 0x07, 0x00, 0x04, 0x01, 0x00, 0x10, 'j', 'a', 'v', 'a', '/', 'l',
    'a', 'n', 'g', '/', 'O', 'b', 'j', 'e', 'c', 't', 0x00, 0x21, 0x00, 0x01, 0x00, 0x03,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

Test(classfile, header)
{
    cf_header h;
    char err[256];
    cr_assert_eq(cf_parse_header(tiny, sizeof tiny, &h, err, sizeof err), 0, "%s", err);
    cr_assert_eq(h.major, 61);
    cr_assert_eq(h.cp_count, 5);
    cr_assert_str_eq(h.this_class, "Tiny");
    cr_assert_eq(h.cp_end, 42);
}

Test(classfile, hostile)
{
    cf_header h;
    char err[256];
    unsigned char b[sizeof tiny];
    /* Every truncation fails cleanly with an offset. */
    for (size_t n = 0; n < 48; n++) {
        cr_assert_eq(cf_parse_header(tiny, n, &h, err, sizeof err), -1, "len %zu", n);
        cr_assert(strstr(err, "offset "), "%s", err);
    }
    memcpy(b, tiny, sizeof b);
    b[10] = 99; /* unknown tag */
    cr_assert_eq(cf_parse_header(b, sizeof b, &h, err, sizeof err), -1);
    cr_assert_str_eq(err, "offset 10: constant pool entry 1 has unknown tag 99");
    memcpy(b, tiny, sizeof b);
    b[45] = 2; /* this_class -> Utf8 */
    cr_assert_eq(cf_parse_header(b, sizeof b, &h, err, sizeof err), -1);
    cr_assert(strstr(err, "this_class 2 is not a Class constant"), "%s", err);
    memcpy(b, tiny, sizeof b);
    b[45] = 0x30; /* out of range */
    cr_assert_eq(cf_parse_header(b, sizeof b, &h, err, sizeof err), -1);
    memcpy(b, tiny, sizeof b);
    b[0] = 0;
    cr_assert_eq(cf_parse_header(b, sizeof b, &h, err, sizeof err), -1);
    cr_assert(strstr(err, "bad magic"));
}
