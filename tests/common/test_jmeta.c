/* Units for the metadata writer, reader and typed views. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/jmeta.h"
#include "common/jmrec.h"

static char dir[] = "/tmp/jpt-test-XXXXXX";

static void setup(void)
{
    strcpy(dir, "/tmp/jpt-test-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    (void)system(cmd);
}

/* Reads a whole file into memory. */
static uint8_t *slurp(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*len + 1);
    cr_assert_eq(fread(p, 1, *len, f), *len);
    fclose(f);
    return p;
}

static void write_sample(void)
{
    char err[256];
    jm_writer *w = jm_writer_open(dir, 77, 1234, err, sizeof err);
    cr_assert_not_null(w, "%s", err);
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, 0x1000);
    jm_put_u64(&b, 0x1010);
    jm_put_i32(&b, 96);
    jm_put_str(&b, "iadd");
    cr_assert_eq(jm_write(w, JM_CODELET, 100, b.data, (uint32_t)b.len, NULL, 0), 0);
    b.len = 0;
    const char code[] = "\x90\x90\xc3";
    jm_put_u64(&b, 0x5000);
    jm_put_u64(&b, 3);
    jm_put_u64(&b, 0xdeadbeef); /* replaced by the writer */
    jm_put_str(&b, "stub");
    cr_assert_eq(jm_write(w, JM_DYNAMIC_CODE, 101, b.data, (uint32_t)b.len, code, 3), 0);
    /* A code record whose size field disagrees with the bytes is refused. */
    cr_assert_lt(jm_write(w, JM_DYNAMIC_CODE, 102, b.data, (uint32_t)b.len, code, 2), 0);
    cr_assert_eq(jm_write(w, JM_END, 103, NULL, 0, NULL, 0), 0);
    cr_assert_eq(jm_writer_bytes(w), 32 + (16 + 28) + (16 + 32) + 16 + 3);
    jm_buf_free(&b);
    cr_assert_eq(jm_writer_close(w), 0);
}

TestSuite(jmeta, .init = setup, .fini = teardown);

Test(jmeta, roundtrip)
{
    write_sample();
    char err[512];
    jm_reader *r = jm_reader_open(dir, err, sizeof err);
    cr_assert_not_null(r, "%s", err);
    cr_assert_eq(jm_reader_header(r)->pid, 1234);
    cr_assert_eq(jm_reader_header(r)->start_tsc, 77);
    jm_record rec;
    jm_rec m;
    cr_assert_eq(jm_reader_next(r, &rec), 1);
    cr_assert_eq(rec.type, JM_CODELET);
    cr_assert_eq(rec.tsc, 100);
    cr_assert_eq(jm_parse(&rec, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(m.u.codelet.begin, 0x1000);
    cr_assert_eq(m.u.codelet.end, 0x1010);
    cr_assert_eq(m.u.codelet.bytecode, 96);
    cr_assert_eq(m.u.codelet.description.len, 4);
    cr_assert_eq(memcmp(m.u.codelet.description.p, "iadd", 4), 0);

    cr_assert_eq(jm_reader_next(r, &rec), 1);
    cr_assert_eq(jm_parse(&rec, &m, err, sizeof err), 0);
    cr_assert_eq(m.u.dynamic_code.code.vaddr, 0x5000);
    cr_assert_eq(m.u.dynamic_code.code.code_offset, 0);
    const uint8_t *code = jm_reader_code(r, 0, 3, err, sizeof err);
    cr_assert_not_null(code, "%s", err);
    cr_assert_eq(memcmp(code, "\x90\x90\xc3", 3), 0);
    cr_assert_null(jm_reader_code(r, 1, 3, err, sizeof err));
    cr_assert(strstr(err, "code.bin") && strstr(err, "offset 1"), "%s", err);

    cr_assert_eq(jm_reader_next(r, &rec), 1);
    cr_assert_eq(rec.type, JM_END);
    cr_assert_eq(jm_reader_next(r, &rec), 0);
    jm_reader_close(r);
}

static void rewrite(const uint8_t *p, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, JM_META_FILE);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(p, 1, len, f), len);
    fclose(f);
}

/* Reads to the end; returns the error message (or "" at a clean end) and
 * the number of records read. */
static const char *read_all(int *records)
{
    static char err[1024];
    err[0] = '\0';
    *records = 0;
    jm_reader *r = jm_reader_open(dir, err, sizeof err);
    if (!r)
        return err;
    jm_record rec;
    int rc;
    while ((rc = jm_reader_next(r, &rec)) == 1)
        (*records)++;
    if (rc < 0)
        snprintf(err, sizeof err, "%s", jm_reader_error(r));
    jm_reader_close(r);
    return err;
}

Test(jmeta, truncated_record_keeps_earlier_ones)
{
    write_sample();
    size_t len;
    uint8_t *p = slurp(JM_META_FILE, &len);
    rewrite(p, len - 5); /* cuts into the END record header */
    int n;
    const char *e = read_all(&n);
    cr_assert_eq(n, 2);
    cr_assert(strstr(e, "meta.jpt: offset 124: truncated record header"), "%s", e);
    rewrite(p, 32 + 16 + 10); /* cuts into the first payload */
    e = read_all(&n);
    cr_assert_eq(n, 0);
    cr_assert(strstr(e, "offset 32: truncated CODELET record"), "%s", e);
    free(p);
}

Test(jmeta, bad_magic_version_and_sizes)
{
    write_sample();
    size_t len;
    uint8_t *p = slurp(JM_META_FILE, &len);
    int n;
    uint8_t *q = malloc(len);

    memcpy(q, p, len);
    q[0] = 'X';
    rewrite(q, len);
    cr_assert(strstr(read_all(&n), "offset 0: not a jpt metadata file (bad magic)"));

    memcpy(q, p, len);
    q[8] = 2;
    rewrite(q, len);
    cr_assert(strstr(read_all(&n), "offset 8: format version 2.0"));

    memcpy(q, p, len);
    q[12] = 0xff;
    q[13] = 0xff;
    rewrite(q, len);
    cr_assert(strstr(read_all(&n), "offset 12: header size"));

    memcpy(q, p, len);
    q[32 + 4] = 0xff; /* first record size: 0x....ff */
    q[32 + 7] = 0x7f;
    rewrite(q, len);
    cr_assert(strstr(read_all(&n), "offset 32: record size"), "%s", read_all(&n));

    rewrite(p, 10);
    cr_assert(strstr(read_all(&n), "too short"));
    free(q);
    free(p);
}

Test(jmeta, parse_rejects_counts_past_payload)
{
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u64(&b, 0x1000);
    jm_put_u64(&b, 0);
    jm_put_u64(&b, 0);
    jm_put_u64(&b, 7);
    jm_put_i32(&b, 4);
    jm_put_u32(&b, 0x7fffffff); /* npcs */
    jm_record rec = { .type = JM_NMETHOD_LOAD, .size = (uint32_t)b.len, .payload = b.data,
                      .offset = 100 };
    jm_rec m;
    char err[256];
    cr_assert_eq(jm_parse(&rec, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "offset 156: NMETHOD_LOAD record: pc record count"), "%s", err);

    /* A pc record whose depth runs past the payload. */
    b.len -= 4;
    jm_put_u32(&b, 1);
    jm_put_u64(&b, 0x1004);
    jm_put_u32(&b, 1000);
    rec.size = (uint32_t)b.len;
    rec.payload = b.data;
    cr_assert_eq(jm_parse(&rec, &m, err, sizeof err), 0, "%s", err);
    uint64_t pc;
    uint32_t depth;
    jm_frame fr[4];
    cr_assert_eq(jm_pcs_next(&m.u.nmethod_load.pcs, &pc, &depth, fr, 4), -1);

    /* Truncated strings. */
    b.len = 0;
    jm_put_u64(&b, 1);
    jm_put_u64(&b, 2);
    jm_put_u32(&b, 50);
    rec.type = JM_METHOD;
    rec.size = (uint32_t)b.len;
    rec.payload = b.data;
    cr_assert_eq(jm_parse(&rec, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "offset 132: METHOD record: string"), "%s", err);
    jm_buf_free(&b);
}

Test(jmeta, classes_initialized)
{
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u32(&b, 2);
    jm_put_u64(&b, 41);
    jm_put_u64(&b, 42);
    jm_record rec = { .type = JM_CLASSES_INITIALIZED, .size = (uint32_t)b.len,
                      .payload = b.data, .offset = 200 };
    jm_rec m;
    char err[256];
    cr_assert_eq(jm_parse(&rec, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(m.u.classes_initialized.n, 2);
    jm_cur c = m.u.classes_initialized.ids;
    cr_assert_eq(jm_get_u64(&c), 41);
    cr_assert_eq(jm_get_u64(&c), 42);
    cr_assert(jm_cur_ok(&c));

    /* a count the payload cannot hold */
    b.data[0] = 3;
    cr_assert_eq(jm_parse(&rec, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "offset 220: CLASSES_INITIALIZED record: class count"), "%s", err);
    cr_assert_str_eq(jm_type_name(JM_CLASSES_INITIALIZED), "CLASSES_INITIALIZED");
    jm_buf_free(&b);
}

Test(jmeta, open_mem_and_cursor)
{
    uint8_t hdr[32] = "JPTMETA";
    hdr[8] = 1;
    hdr[12] = 32;
    char err[256];
    jm_reader *r = jm_reader_open_mem(hdr, sizeof hdr, NULL, 0, "mem", err, sizeof err);
    cr_assert_not_null(r, "%s", err);
    jm_record rec;
    cr_assert_eq(jm_reader_next(r, &rec), 0);
    cr_assert_null(jm_reader_code(r, 0, 1, err, sizeof err));
    jm_reader_close(r);

    jm_cur c;
    const uint8_t bytes[3] = { 1, 2, 3 };
    jm_cur_init(&c, bytes, 3);
    cr_assert_eq(jm_get_u16(&c), 0x0201);
    cr_assert(jm_cur_ok(&c));
    cr_assert_eq(jm_get_u32(&c), 0);
    cr_assert_not(jm_cur_ok(&c));
    cr_assert_eq(c.error_pos, 2);
    cr_assert_eq(jm_get_u8(&c), 0); /* sticky */
}

Test(jmeta, type_names)
{
    cr_assert_str_eq(jm_type_name(JM_NMETHOD_LOAD), "NMETHOD_LOAD");
    cr_assert_str_eq(jm_type_name(999), "UNKNOWN");
    cr_assert(jm_type_has_code(JM_CODE_PATCH));
    cr_assert_not(jm_type_has_code(JM_METHOD));
}
