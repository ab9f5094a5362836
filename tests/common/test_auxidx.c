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
