/* Units for the AUX record index writer and reader. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/auxidx.h"

static char path[] = "/tmp/jpt-auxidx-XXXXXX";

static int fresh(void)
{
    strcpy(path, "/tmp/jpt-auxidx-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    return fd;
}

Test(auxidx, roundtrip_and_totals)
{
    int fd = fresh();
    cr_assert_eq(auxidx_write_header(fd), 0);
    auxidx_rec a = { 0, 4096, 0, 10, 0 }, b = { 4096, 100, AUXIDX_TRUNCATED, 20, 777 },
               c = { 4196, 50, AUXIDX_TRUNCATED | AUXIDX_PARTIAL, 30, 23 };
    cr_assert_eq(auxidx_append(fd, &a), 0);
    cr_assert_eq(auxidx_append(fd, &b), 0);
    cr_assert_eq(auxidx_append(fd, &c), 0);
    close(fd);
    auxidx idx;
    char err[256];
    cr_assert_eq(auxidx_load(path, &idx, err, sizeof err), 0, "%s", err);
    cr_assert_eq(idx.n, 3);
    cr_assert_eq(idx.lost_bytes, 800);
    cr_assert_eq(idx.truncations, 2);
    cr_assert_eq(idx.recs[1].offset, 4096);
    cr_assert_eq(idx.recs[2].tsc, 30);
    auxidx_free(&idx);

    /* A partial last record is dropped with a message naming its offset. */
    cr_assert_eq(truncate(path, 16 + 3 * 40 - 1), 0);
    cr_assert_eq(auxidx_load(path, &idx, err, sizeof err), 1);
    cr_assert_eq(idx.n, 2);
    cr_assert(strstr(err, "offset 96: partial record (39 of 40 bytes)"), "%s", err);
    auxidx_free(&idx);
    unlink(path);
}

Test(auxidx, bad_headers)
{
    int fd = fresh();
    cr_assert_eq(write(fd, "JPTAUX\0\0\2\0\0\0\50\0\0\0", 16), 16);
    close(fd);
    auxidx idx;
    char err[256];
    cr_assert_eq(auxidx_load(path, &idx, err, sizeof err), -1);
    cr_assert(strstr(err, "offset 8: AUX index version 2"), "%s", err);
    fd = open(path, O_WRONLY | O_TRUNC);
    cr_assert_eq(write(fd, "garbage", 7), 7);
    close(fd);
    cr_assert_eq(auxidx_load(path, &idx, err, sizeof err), -1);
    cr_assert(strstr(err, "offset 0: not a jpt AUX index (too short)"), "%s", err);
    fd = open(path, O_WRONLY | O_TRUNC);
    cr_assert_eq(write(fd, "JPTAUX\0\0\1\0\0\0\377\377\0\0", 16), 16);
    close(fd);
    cr_assert_eq(auxidx_load(path, &idx, err, sizeof err), -1);
    cr_assert(strstr(err, "offset 12: record size 65535 is invalid"), "%s", err);
    unlink(path);
    cr_assert_eq(auxidx_load(path, &idx, err, sizeof err), -1);
    cr_assert(strstr(err, "cannot read"), "%s", err);
}

static size_t make_idx(uint8_t *buf, uint32_t rsize, int n)
{
    memcpy(buf, "JPTAUX\0\0", 8);
    memset(buf + 8, 0, 8);
    buf[8] = 1;
    buf[12] = (uint8_t)rsize;
    size_t off = 16;
    for (int i = 0; i < n; i++) {
        uint64_t f[5] = { (uint64_t)i * 100, 100, (uint64_t)(i & 1), 1000 + (uint64_t)i,
                          (i & 1) ? 250u : 0u };
        memcpy(buf + off, f, sizeof f); /* little-endian host */
        memset(buf + off + 40, 0xee, rsize - 40); /* fields of a later version */
        off += rsize;
    }
    return off;
}

Test(auxidx, later_version_records_and_coverage)
{
    uint8_t buf[1024];
    char err[256] = "";
    auxidx idx;
    size_t n = make_idx(buf, 56, 4);
    cr_assert_eq(auxidx_parse(buf, n, "x.idx", &idx, err, sizeof err), 0, "%s", err);
    cr_assert_eq(idx.n, 4);
    cr_assert_eq(idx.truncations, 2);
    cr_assert_eq(idx.lost_bytes, 500);
    cr_assert_eq(idx.covered_end, 400);
    auxidx_free(&idx);
}

Test(auxidx, bad_records_refuse_the_index)
{
    uint8_t buf[256];
    char err[256] = "";
    auxidx idx;
    struct { size_t field; uint64_t value; const char *why; } cases[] = {
        { 0, UINT64_MAX - 10, "offset 56: bad record 1 (offset 18446744073709551605, size 100, "
                              "flags 0x1, lost 250): range past 2^48" },
        { 0, 50, "offset 56: bad record 1 (offset 50, size 100, flags 0x1, lost 250): range "
                 "starts before the end of the record before it" },
        { 16, 0x10000, "offset 56: bad record 1 (offset 100, size 100, flags 0x10000, lost "
                       "250): flags are not the kernel's AUX flags" },
        { 16, 0, "offset 56: bad record 1 (offset 100, size 100, flags 0x0, lost 250): lost "
                 "bytes without TRUNCATED" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = make_idx(buf, 40, 3);
        memcpy(buf + 16 + 40 + cases[i].field, &cases[i].value, 8);
        cr_assert_eq(auxidx_parse(buf, n, "x.idx", &idx, err, sizeof err), -1);
        cr_assert(strstr(err, cases[i].why), "case %zu: %s", i, err);
        cr_assert_eq(idx.n, 0);
        cr_assert_null(idx.recs);
    }
}

/* The index written with 40-byte records read as 48-byte ones: records read
 * fields of two, which soon make a range no writer makes. */
Test(auxidx, wrong_record_size_is_caught)
{
    uint8_t buf[512];
    char err[256] = "";
    auxidx idx;
    size_t n = make_idx(buf, 40, 8);
    buf[12] = 48;
    cr_assert_eq(auxidx_parse(buf, n, "x.idx", &idx, err, sizeof err), -1);
    cr_assert(strstr(err, "x.idx: offset 112: bad record 2"), "%s", err);
}

Test(auxidx, extent_against_the_file)
{
    uint8_t buf[256];
    char err[256] = "";
    auxidx idx;
    size_t n = make_idx(buf, 40, 3);
    cr_assert_eq(auxidx_parse(buf, n, "x.idx", &idx, err, sizeof err), 0, "%s", err);
    auxidx_extent e = auxidx_extent_of(&idx, 300);
    cr_assert(e.decode == 300 && e.missing == 0 && e.unindexed == 0);
    e = auxidx_extent_of(&idx, 120);     /* the file was cut */
    cr_assert(e.decode == 120 && e.missing == 180 && e.unindexed == 0);
    e = auxidx_extent_of(&idx, 5000);    /* bytes no record delivered */
    cr_assert(e.decode == 300 && e.missing == 0 && e.unindexed == 4700);
    auxidx_free(&idx);
    auxidx none = { 0 };
    e = auxidx_extent_of(&none, 77);     /* a header and no record */
    cr_assert(e.decode == 0 && e.unindexed == 77);
}

Test(auxidx, not_a_regular_file)
{
    char dir[] = "/tmp/jpt-auxidx-fifo-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/x.idx", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    auxidx idx;
    char err[256] = "";
    cr_assert_eq(auxidx_load(fifo, &idx, err, sizeof err), -1);
    cr_assert(strstr(err, "x.idx: cannot read: not a regular file"), "%s", err);
    unlink(fifo);
    rmdir(dir);
}
