/* Units for the AUX record index writer and reader. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
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

Test(auxidx, overflowing_range_stops)
{
    uint8_t buf[256];
    char err[256] = "";
    auxidx idx;
    size_t n = make_idx(buf, 40, 3);
    uint64_t big = UINT64_MAX - 10;
    memcpy(buf + 16 + 40, &big, 8);
    cr_assert_eq(auxidx_parse(buf, n, "x.idx", &idx, err, sizeof err), 1);
    cr_assert_str_eq(err, "x.idx: offset 56: AUX range overflows; 1 records kept");
    cr_assert_eq(idx.n, 1);
    auxidx_free(&idx);
}
