/* The hardware backend's pure parts on synthetic input: the intel_pt PMU from
 * sysfs trees in data/ (a Skylake-class layout, one without IP filtering,
 * hostile ones), perf records of every type ptrec interprets, the AUX index
 * they produce, and ring draining with wrap-around. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include "collector/perf_pmu.h"
#include "collector/perf_records.h"
#include "collector/perf_ring.h"
#include "common/auxidx.h"

#ifndef PERF_TEST_DATA
#error "PERF_TEST_DATA must name tests/perf/data"
#endif

static char err[4096];

static const char *tree(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", PERF_TEST_DATA, name);
    return path;
}

/* ---- format and caps strings --------------------------------------------- */

Test(format, single_bit_and_range)
{
    perf_field f;
    const char *why;
    cr_assert(perf_parse_format("config:10\n", &f, &why));
    cr_assert(f.present && f.lo == 10 && f.hi == 10);
    cr_assert(perf_parse_format("config:14-17", &f, &why));
    cr_assert(f.lo == 14 && f.hi == 17);
    cr_assert(perf_parse_format("config:0-63", &f, &why));
}

Test(format, hostile)
{
    perf_field f;
    const char *why;
    const char *bad[] = {
        "", "config", "config:", "config:x", "config:1-", "config:64", "config:3-1",
        "config:1,3", "config:1\nconfig:2", "config:1 ", "config1:3", "config2:0-3", "event:1",
        "config:-1", "config:1000", "config:0-64", "CONFIG:1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect(!perf_parse_format(bad[i], &f, &why), "accepted '%s'", bad[i]);
        cr_expect(!f.present);
    }
}

Test(caps, values)
{
    uint32_t v;
    const char *why;
    cr_assert(perf_parse_cap("003f\n", true, &v, &why) && v == 0x3f);
    cr_assert(perf_parse_cap("249", true, &v, &why) && v == 0x249);
    cr_assert(perf_parse_cap("0x3fff", true, &v, &why) && v == 0x3fff);
    cr_assert(perf_parse_cap("2\n", false, &v, &why) && v == 2);
    cr_assert(!perf_parse_cap("", false, &v, &why));
    cr_assert(!perf_parse_cap("zz", true, &v, &why));
    cr_assert(!perf_parse_cap("1f", false, &v, &why));
    cr_assert(!perf_parse_cap("4294967296", false, &v, &why));
    cr_assert(!perf_parse_cap("-1", false, &v, &why));
    cr_assert(!perf_parse_cap("1\n\n", false, &v, &why));
}

/* ---- whole trees ----------------------------------------------------------- */

Test(pmu, skylake)
{
    perf_pmu pmu;
    cr_assert_eq(perf_pmu_load(tree("skylake"), &pmu, err, sizeof err), 0, "%s", err);
    cr_assert_eq(pmu.type, 8);
    cr_assert(pmu.pt.present && pmu.pt.lo == 0);
    cr_assert(pmu.cyc.lo == 1 && pmu.mtc.lo == 9 && pmu.tsc.lo == 10 && pmu.noretcomp.lo == 11);
    cr_assert(pmu.branch.lo == 13);
    cr_assert(pmu.mtc_period.lo == 14 && pmu.mtc_period.hi == 17);
    cr_assert(pmu.cyc_thresh.lo == 19 && pmu.cyc_thresh.hi == 22);
    cr_assert(pmu.psb_period.lo == 24 && pmu.psb_period.hi == 27);
    cr_assert(pmu.ip_filtering);
    cr_assert_eq(pmu.num_address_ranges, 2);
    cr_assert_eq(pmu.psb_periods, 0x3f);
    cr_assert_eq(pmu.mtc_periods, 0x249);
    cr_assert_eq(pmu.cycle_thresholds, 0x3fff);
    cr_assert(pmu.psb_cyc && pmu.mtc_cap);

    /* What ptrec asks for: TSC, no return compression, branches, PSB every
     * 4 KiB (encoding 1: 2^(1+11)). */
    perf_pt_request req = { .tsc = true, .noretcomp = true, .branch = true,
                            .psb_period_bytes = 4096 };
    uint64_t config, psb;
    cr_assert(perf_pmu_config(&pmu, &req, &config, &psb, err, sizeof err), "%s", err);
    cr_assert_eq(config, 1ull | 1ull << 10 | 1ull << 11 | 1ull << 13 | 1ull << 24,
                 "config 0x%llx", (unsigned long long)config);
    cr_assert_eq(psb, 4096);

    /* A period between two allowed ones rounds up; beyond the largest
     * allowed (encoding 5: 64 KiB) takes the largest. */
    req.psb_period_bytes = 5000;
    cr_assert(perf_pmu_config(&pmu, &req, &config, &psb, err, sizeof err));
    cr_assert_eq(psb, 8192);
    cr_assert_eq((config >> 24) & 0xf, 2);
    req.psb_period_bytes = 1u << 30;
    cr_assert(perf_pmu_config(&pmu, &req, &config, &psb, err, sizeof err));
    cr_assert_eq(psb, 65536);

    /* MTC: period encodings from caps/mtc_periods only (0x249: 0, 3, 6, 9). */
    req.psb_period_bytes = 4096;
    req.mtc_period = 3;
    cr_assert(perf_pmu_config(&pmu, &req, &config, &psb, err, sizeof err), "%s", err);
    cr_assert_eq((config >> 14) & 0xf, 3);
    cr_assert(config & (1ull << 9));
    req.mtc_period = 4;
    cr_assert(!perf_pmu_config(&pmu, &req, &config, &psb, err, sizeof err));
    cr_assert(strstr(err, "mtc_periods"), "%s", err);

    int cpus[64];
    cr_assert_eq(perf_online_cpus(tree("skylake"), cpus, 64, err, sizeof err), 8);
    cr_assert(cpus[0] == 0 && cpus[7] == 7);
}

Test(pmu, no_filter_no_psb_field)
{
    perf_pmu pmu;
    cr_assert_eq(perf_pmu_load(tree("no-filter"), &pmu, err, sizeof err), 0, "%s", err);
    cr_assert(!pmu.ip_filtering);
    cr_assert_eq(pmu.num_address_ranges, 0);
    cr_assert(!pmu.psb_period.present && !pmu.mtc.present && !pmu.cyc.present);
    perf_pt_request req = { .tsc = true, .noretcomp = true, .branch = true,
                            .psb_period_bytes = 4096 };
    uint64_t config, psb;
    cr_assert(perf_pmu_config(&pmu, &req, &config, &psb, err, sizeof err), "%s", err);
    cr_assert_eq(config, 1ull | 1ull << 10 | 1ull << 11 | 1ull << 13);
    cr_assert_eq(psb, 0, "hardware default");
    req.cyc = true;
    cr_assert(!perf_pmu_config(&pmu, &req, &config, &psb, err, sizeof err));
    cr_assert(strstr(err, "'cyc'"), "%s", err);
    int cpus[8];
    cr_assert_eq(perf_online_cpus(tree("no-filter"), cpus, 8, err, sizeof err), 3);
    cr_assert(cpus[0] == 0 && cpus[1] == 2 && cpus[2] == 3);
}

/* Each hostile tree: the load (or the config) fails with a message naming
 * the file and the problem. */
static void expect_load_error(const char *name, const char *file, const char *problem)
{
    perf_pmu pmu;
    err[0] = '\0';
    int rc = perf_pmu_load(tree(name), &pmu, err, sizeof err);
    cr_expect_eq(rc, -2, "%s: rc %d (%s)", name, rc, err);
    cr_expect(strstr(err, file) != NULL, "%s: message '%s' lacks '%s'", name, err, file);
    cr_expect(strstr(err, problem) != NULL, "%s: message '%s' lacks '%s'", name, err, problem);
    cr_expect(strchr(err, '\n') == NULL, "%s: message is not one line", name);
}

Test(pmu, hostile_trees)
{
    expect_load_error("hostile-garbage", "format/tsc", "'config:banana'");
    expect_load_error("hostile-range", "format/mtc_period", "beyond 63");
    expect_load_error("hostile-descending", "format/psb_period", "descending");
    expect_load_error("hostile-type", "intel_pt/type", "expected a decimal number");
    expect_load_error("hostile-caps", "caps/psb_periods", "hexadecimal");
    expect_load_error("hostile-ranges", "caps/num_address_ranges", "");
    expect_load_error("hostile-config1", "format/branch", "config1");
    expect_load_error("hostile-nopt", "format/pt", "missing");
    expect_load_error("hostile-long", "format/pt", "not a sysfs value");
    expect_load_error("hostile-nul", "format/pt", "NUL");

    /* Fields that overlap load but cannot make a config. */
    perf_pmu pmu;
    cr_assert_eq(perf_pmu_load(tree("hostile-overlap"), &pmu, err, sizeof err), 0, "%s", err);
    perf_pt_request req = { .tsc = true };
    uint64_t config, psb;
    cr_assert(!perf_pmu_config(&pmu, &req, &config, &psb, err, sizeof err));
    cr_assert(strstr(err, "overlap"), "%s", err);

    /* No PMU at all, and no sysfs at all. */
    cr_assert_eq(perf_pmu_load(tree("empty"), &pmu, err, sizeof err), -1);
    cr_assert(strstr(err, "intel_pt/type"), "%s", err);
    cr_assert_eq(perf_pmu_load(tree("no-such-tree"), &pmu, err, sizeof err), -1);

    int cpus[8];
    cr_assert_eq(perf_online_cpus(tree("hostile-garbage"), cpus, 8, err, sizeof err), -1);
    cr_assert(strstr(err, "cpu/online") && strstr(err, "'zero-one'"), "%s", err);
    cr_assert_eq(perf_online_cpus(tree("empty"), cpus, 8, err, sizeof err), -1);
    cr_assert(strstr(err, "cpu/online: no such file"), "%s", err);
}

Test(cpulist, parse)
{
    int cpus[16];
    const char *why;
    cr_assert_eq(perf_parse_cpulist("0\n", cpus, 16, &why), 1);
    cr_assert_eq(perf_parse_cpulist("0-3,5,8-9", cpus, 16, &why), 7);
    cr_assert(cpus[4] == 5 && cpus[6] == 9);
    const char *bad[] = { "", "\n", "a", "0-", "3-1", "1,1", "2,1", "0,,1", "0-3,", "0 1",
                          "-1", "0-99999" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(perf_parse_cpulist(bad[i], cpus, 16, &why), -1, "accepted '%s'", bad[i]);
    cr_assert_eq(perf_parse_cpulist("0-16", cpus, 16, &why), -1, "more than max");
}

Test(field, set_checks_width)
{
    perf_field f = { .present = true, .lo = 24, .hi = 27 };
    uint64_t c = 0;
    cr_assert(perf_field_set(&f, 15, &c) && c == 15ull << 24);
    cr_assert(!perf_field_set(&f, 16, &c));
    perf_field absent = { 0 };
    cr_assert(perf_field_set(&absent, 0, &c));
    cr_assert(!perf_field_set(&absent, 1, &c));
}

Test(filter, string)
{
    char buf[96];
    perf_filter_string(0x7f0000000000ull, 0x7f0010000000ull, buf, sizeof buf);
    cr_assert_str_eq(buf, "filter 0x7f0000000000/268435456");
}

Test(mlock, limits)
{
    uint64_t per_cpu = (4u << 20) + (512u << 10) + 4096;
    cr_assert(perf_mlock_fits(8, per_cpu, 516, 8u << 20, true, err, sizeof err), "CAP_IPC_LOCK");
    cr_assert(perf_mlock_fits(8, per_cpu, 516, UINT64_MAX, false, err, sizeof err));
    cr_assert(perf_mlock_fits(2, 256u << 10, 516, 0, false, err, sizeof err));
    cr_assert(!perf_mlock_fits(8, per_cpu, 516, 8u << 20, false, err, sizeof err));
    cr_assert(strstr(err, "perf_event_mlock_kb") && strstr(err, "--emulate"), "%s", err);
}

/* ---- perf records ------------------------------------------------------------ */

typedef struct rbuf {
    uint8_t b[8192];
    size_t n;
} rbuf;

static void put(rbuf *r, const void *p, size_t n)
{
    if (n) memcpy(r->b + r->n, p, n);
    r->n += n;
}

static void put32(rbuf *r, uint32_t v) { put(r, &v, 4); }
static void put64(rbuf *r, uint64_t v) { put(r, &v, 8); }

/* Appends one record: header, body, padding to 8, sample_id. */
static size_t rec(rbuf *r, uint32_t type, uint16_t misc, const void *body, size_t blen,
                  uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu)
{
    size_t start = r->n;
    size_t padded = (blen + 7) & ~(size_t)7;
    uint16_t size = (uint16_t)(8 + padded + 40);
    put32(r, type);
    put(r, &misc, 2);
    put(r, &size, 2);
    put(r, body, blen);
    for (size_t i = blen; i < padded; i++) r->b[r->n++] = 0;
    put32(r, pid);
    put32(r, tid);
    put64(r, time);
    put64(r, 0x77);                /* id */
    put32(r, cpu);
    put32(r, 0);
    put64(r, 0x77);                /* identifier */
    return start;
}

static long parse_at(const rbuf *r, size_t off, perf_rec *out)
{
    return perf_rec_parse(r->b + off, r->n - off, PERF_JPT_SAMPLE_TYPE, off, out, err,
                          sizeof err);
}

Test(records, every_type)
{
    rbuf r = { .n = 0 };
    perf_rec p;

    size_t o_sw = rec(&r, PERF_RECORD_SWITCH, PERF_RECORD_MISC_SWITCH_OUT, NULL, 0, 10, 11,
                      1000, 1);
    uint32_t cw[2] = { 20, 21 };
    size_t o_cw = rec(&r, PERF_RECORD_SWITCH_CPU_WIDE, 0, cw, 8, 10, 12, 1001, 1);
    uint32_t its[2] = { 10, 13 };
    size_t o_its = rec(&r, PERF_RECORD_ITRACE_START, 0, its, 8, 10, 13, 1002, 1);
    uint64_t aux[3] = { 4096, 512, PERF_AUX_FLAG_TRUNCATED | PERF_AUX_FLAG_COLLISION };
    size_t o_aux = rec(&r, PERF_RECORD_AUX, 0, aux, 24, 10, 13, 1003, 1);
    uint64_t lost[2] = { 0x77, 42 };
    size_t o_lost = rec(&r, PERF_RECORD_LOST, 0, lost, 16, 10, 13, 1004, 1);
    uint8_t comm[8 + 9] = { 0 };
    uint32_t ids[2] = { 10, 14 };
    memcpy(comm, ids, 8);
    memcpy(comm + 8, "worker-0", 9);
    size_t o_comm = rec(&r, PERF_RECORD_COMM, 0, comm, sizeof comm, 10, 14, 1005, 1);
    uint8_t m2[64 + 12] = { 0 };
    uint32_t m2ids[2] = { 10, 14 };
    uint64_t m2r[3] = { 0x7f0000001000ull, 0x2000, 0x1000 };
    uint32_t prot_flags[2] = { 5, 2 };
    memcpy(m2, m2ids, 8);
    memcpy(m2 + 8, m2r, 24);
    memcpy(m2 + 56, prot_flags, 8);
    memcpy(m2 + 64, "/lib/x.so", 10);
    size_t o_m2 = rec(&r, PERF_RECORD_MMAP2, 0, m2, sizeof m2, 10, 14, 1006, 1);

    cr_assert_gt(parse_at(&r, o_sw, &p), 0, "%s", err);
    cr_assert(p.type == PERF_RECORD_SWITCH && (p.misc & PERF_RECORD_MISC_SWITCH_OUT));
    cr_assert(p.has_sample_id && p.sid.pid == 10 && p.sid.tid == 11 && p.sid.time == 1000);
    cr_assert(p.sid.cpu == 1 && p.sid.id == 0x77 && p.sid.identifier == 0x77);

    cr_assert_gt(parse_at(&r, o_cw, &p), 0);
    cr_assert(p.u.switch_cpu_wide.next_prev_pid == 20 && p.u.switch_cpu_wide.next_prev_tid == 21);
    cr_assert_eq(p.sid.tid, 12);

    cr_assert_gt(parse_at(&r, o_its, &p), 0);
    cr_assert(p.u.itrace_start.pid == 10 && p.u.itrace_start.tid == 13);

    cr_assert_gt(parse_at(&r, o_aux, &p), 0);
    cr_assert(p.u.aux.offset == 4096 && p.u.aux.size == 512);
    cr_assert_eq(p.u.aux.flags, PERF_AUX_FLAG_TRUNCATED | PERF_AUX_FLAG_COLLISION);

    cr_assert_gt(parse_at(&r, o_lost, &p), 0);
    cr_assert(p.u.lost.id == 0x77 && p.u.lost.lost == 42);

    cr_assert_gt(parse_at(&r, o_comm, &p), 0);
    cr_assert(p.u.comm.pid == 10 && p.u.comm.tid == 14);
    cr_assert_str_eq(p.u.comm.comm, "worker-0");

    long n = parse_at(&r, o_m2, &p);
    cr_assert_gt(n, 0, "%s", err);
    cr_assert_eq((size_t)n, r.n - o_m2);
    cr_assert(p.u.mmap2.addr == 0x7f0000001000ull && p.u.mmap2.len == 0x2000);
    cr_assert(p.u.mmap2.pgoff == 0x1000 && p.u.mmap2.prot == 5 && p.u.mmap2.flags == 2);
    cr_assert_str_eq(p.u.mmap2.filename, "/lib/x.so");

    /* An incomplete record is "not yet", not an error. */
    cr_assert_eq(perf_rec_parse(r.b, 4, PERF_JPT_SAMPLE_TYPE, 0, &p, err, sizeof err), 0);
    cr_assert_eq(perf_rec_parse(r.b, 47, PERF_JPT_SAMPLE_TYPE, 0, &p, err, sizeof err), 0);
}

Test(records, hostile)
{
    perf_rec p;
    rbuf r = { .n = 0 };
    /* size 0 would loop forever; size 12 is not a multiple of 8 */
    put32(&r, PERF_RECORD_SWITCH);
    put32(&r, 0);
    cr_assert_eq(perf_rec_parse(r.b, r.n, PERF_JPT_SAMPLE_TYPE, 96, &p, err, sizeof err), -1);
    cr_assert(strstr(err, "offset 96"), "%s", err);
    r.n = 0;
    put32(&r, PERF_RECORD_SWITCH);
    put32(&r, 12u << 16);
    put32(&r, 0);
    cr_assert_eq(perf_rec_parse(r.b, r.n, PERF_JPT_SAMPLE_TYPE, 0, &p, err, sizeof err), -1);

    /* an AUX record too short for its fields and the sample_id */
    r.n = 0;
    uint64_t aux[2] = { 1, 2 };
    rec(&r, PERF_RECORD_AUX, 0, aux, 16, 1, 1, 1, 0);
    r.b[6] = 48;   /* size 48: header + 40 of sample_id, no room for the body */
    r.b[7] = 0;
    cr_assert_eq(perf_rec_parse(r.b, r.n, PERF_JPT_SAMPLE_TYPE, 8, &p, err, sizeof err), -1);
    cr_assert(strstr(err, "offset 8: PERF_RECORD_AUX of 48 bytes is too short"), "%s", err);

    /* a COMM without its NUL */
    r.n = 0;
    uint8_t comm[16];
    memset(comm, 'A', sizeof comm);
    rec(&r, PERF_RECORD_COMM, 0, comm, sizeof comm, 1, 1, 1, 0);
    cr_assert_eq(perf_rec_parse(r.b, r.n, PERF_JPT_SAMPLE_TYPE, 0, &p, err, sizeof err), -1);
    cr_assert(strstr(err, "COMM name is not terminated"), "%s", err);

    /* an AUX range that wraps the 64-bit space */
    r.n = 0;
    uint64_t wrap[3] = { UINT64_MAX - 1, 16, 0 };
    rec(&r, PERF_RECORD_AUX, 0, wrap, 24, 1, 1, 1, 0);
    cr_assert_eq(perf_rec_parse(r.b, r.n, PERF_JPT_SAMPLE_TYPE, 0, &p, err, sizeof err), -1);

    /* an unknown type is kept with its header */
    r.n = 0;
    rec(&r, 99, 0, NULL, 0, 1, 1, 1, 0);
    cr_assert_gt(perf_rec_parse(r.b, r.n, PERF_JPT_SAMPLE_TYPE, 0, &p, err, sizeof err), 0);
    cr_assert_eq(p.type, 99);
}

static char *tmp_file(int *fd)
{
    char *path = strdup("/tmp/jpt-perf-test-XXXXXX");
    *fd = mkstemp(path);
    cr_assert_geq(*fd, 0);
    return path;
}

static size_t file_bytes(const char *path, uint8_t *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* Records through the stream: raw bytes in .sb, AUX records in .idx with
 * their flags, losses counted, TRUNCATED asking for a re-enable. */
Test(stream, stores_records)
{
    int sb_fd, idx_fd, pt_fd;
    char *sb = tmp_file(&sb_fd), *idx = tmp_file(&idx_fd), *pt = tmp_file(&pt_fd);
    cr_assert_eq(auxidx_write_header(idx_fd), 0);
    perf_stream s = { .pt_fd = pt_fd, .idx_fd = idx_fd, .sb_fd = sb_fd,
                      .sample_type = PERF_JPT_SAMPLE_TYPE };
    /* time -> TSC: identity-like with time_zero 1000, mult 1 << 10, shift 10 */
    s.time = (perf_time_conv){ .valid = true, .time_zero = 1000, .time_mult = 1u << 10,
                               .time_shift = 10 };

    uint8_t ptbytes[3000];
    memset(ptbytes, 0x55, sizeof ptbytes);
    cr_assert_eq(perf_stream_pt(&s, ptbytes, sizeof ptbytes, err, sizeof err), 0);

    rbuf r = { .n = 0 };
    uint32_t its[2] = { 10, 13 };
    rec(&r, PERF_RECORD_ITRACE_START, 0, its, 8, 10, 13, 1100, 0);
    const uint64_t flags[] = { 0, PERF_AUX_FLAG_TRUNCATED, PERF_AUX_FLAG_PARTIAL,
                               PERF_AUX_FLAG_COLLISION };
    for (size_t i = 0; i < 4; i++) {
        uint64_t aux[3] = { 1000 * i, i == 1 ? 0 : 1000, flags[i] };
        if (i == 3) aux[1] = 0;
        rec(&r, PERF_RECORD_AUX, 0, aux, 24, 10, 13, 2000 + i, 0);
    }
    uint64_t lost[2] = { 0x77, 5 };
    rec(&r, PERF_RECORD_LOST, 0, lost, 16, 10, 13, 3000, 0);
    rec(&r, PERF_RECORD_SWITCH, 0, NULL, 0, 10, 13, 3001, 0);
    rec(&r, PERF_RECORD_SWITCH, PERF_RECORD_MISC_SWITCH_OUT, NULL, 0, 10, 13, 3002, 0);
    size_t whole = r.n;
    /* and half of one more record: stays pending */
    rec(&r, PERF_RECORD_SWITCH, 0, NULL, 0, 10, 13, 3003, 0);

    size_t used;
    cr_assert_eq(perf_stream_sideband(&s, r.b, whole + 20, &used, err, sizeof err), 0, "%s",
                 err);
    cr_assert_eq(used, whole);
    cr_assert(s.reenable, "TRUNCATED must ask for a re-enable");
    cr_assert_eq(s.st.aux_records, 4);
    cr_assert_eq(s.st.truncated, 1);
    cr_assert_eq(s.st.partial, 1);
    cr_assert_eq(s.st.collision, 1);
    cr_assert_eq(s.st.lost_records, 1);
    cr_assert_eq(s.st.lost_events, 5);
    cr_assert_eq(s.st.switches, 2);
    cr_assert_eq(s.st.itrace_starts, 1);
    cr_assert_eq(s.st.sb_bytes, whole);
    cr_assert_eq(s.st.pt_bytes, 3000);

    uint8_t back[8192];
    cr_assert_eq(file_bytes(sb, back, sizeof back), whole);
    cr_assert(memcmp(back, r.b, whole) == 0, "the .sb file holds the records as they came");

    auxidx x;
    cr_assert_eq(auxidx_load(idx, &x, err, sizeof err), 0, "%s", err);
    cr_assert_eq(x.n, 4);
    cr_assert_eq(x.truncations, 1);
    for (size_t i = 0; i < 4; i++) {
        cr_expect_eq(x.recs[i].offset, 1000 * i);
        cr_expect_eq(x.recs[i].flags, flags[i]);
        cr_expect_eq(x.recs[i].lost_bytes, 0, "unknown on hardware");
        /* (time - time_zero) << 10 / 2^10 */
        cr_expect_eq(x.recs[i].tsc, 1000 + i, "tsc %llu", (unsigned long long)x.recs[i].tsc);
    }
    auxidx_free(&x);

    /* garbage after good records: the good ones stay, the message names the
     * offset in the .sb stream */
    rbuf g = { .n = 0 };
    rec(&g, PERF_RECORD_SWITCH, 0, NULL, 0, 10, 13, 4000, 0);
    put32(&g, PERF_RECORD_SWITCH);
    put32(&g, 3u << 16);
    cr_assert_eq(perf_stream_sideband(&s, g.b, g.n, &used, err, sizeof err), -1);
    cr_assert_eq(used, g.n);
    char want[64];
    snprintf(want, sizeof want, "offset %zu:", whole + 48);
    cr_assert(strstr(err, want), "'%s' lacks '%s'", err, want);
    cr_assert_eq(s.st.sb_bytes, whole + 48);

    close(sb_fd); close(idx_fd); close(pt_fd);
    unlink(sb); unlink(idx); unlink(pt);
    free(sb); free(idx); free(pt);
}

Test(time, conversion)
{
    /* The kernel computes time = time_zero + (tsc * mult) >> shift. */
    perf_time_conv tc = { .valid = true, .time_zero = 123456789, .time_mult = 3355443200u,
                          .time_shift = 31 };
    for (uint64_t tsc = 1000; tsc < (1ull << 50); tsc = tsc * 7 + 3) {
        unsigned __int128 prod = (unsigned __int128)tsc * tc.time_mult;
        uint64_t t = tc.time_zero + (uint64_t)(prod >> tc.time_shift);
        uint64_t back = perf_time_to_tsc(&tc, t);
        cr_expect(back <= tsc && tsc - back <= 1, "tsc %llu -> %llu",
                  (unsigned long long)tsc, (unsigned long long)back);
    }
    perf_time_conv none = { 0 };
    cr_assert_eq(perf_time_to_tsc(&none, 77), 77);
}

Test(time, mmap_page_seqlock)
{
    static struct perf_event_mmap_page pg;
    memset(&pg, 0, sizeof pg);
    pg.lock = 4;
    pg.cap_user_time_zero = 1;
    pg.time_zero = 99;
    pg.time_mult = 5;
    pg.time_shift = 3;
    perf_time_conv tc;
    perf_read_time_conv(&pg, &tc);
    cr_assert(tc.valid && tc.time_zero == 99 && tc.time_mult == 5 && tc.time_shift == 3);
    pg.cap_user_time_zero = 0;
    perf_read_time_conv(&pg, &tc);
    cr_assert(!tc.valid);
    /* a count that stays odd (an update that never ends): gives up, invalid */
    pg.cap_user_time_zero = 1;
    pg.lock = 7;
    perf_read_time_conv(&pg, &tc);
    cr_assert(!tc.valid);
}

/* ---- rings ----------------------------------------------------------------------- */

typedef struct collect {
    uint8_t out[4096];
    size_t n;
    int pieces;
} collect;

static int sink(void *ctx, const uint8_t *p, size_t n)
{
    collect *c = ctx;
    memcpy(c->out + c->n, p, n);
    c->n += n;
    c->pieces++;
    return 0;
}

Test(ring, wrap_around)
{
    uint8_t ring[64];
    for (int i = 0; i < 64; i++) ring[i] = (uint8_t)i;
    collect c = { .n = 0 };
    /* positions 1000..1040: 1000 % 64 = 40, so 24 bytes to the end, then 16 */
    cr_assert_eq(perf_ring_drain(ring, 64, 1000, 1040, sink, &c, err, sizeof err), 0);
    cr_assert_eq(c.n, 40);
    cr_assert_eq(c.pieces, 2);
    for (size_t i = 0; i < 40; i++) cr_expect_eq(c.out[i], (uint8_t)((1000 + i) % 64));
    /* a full ring, starting exactly at the wrap point */
    c = (collect){ .n = 0 };
    cr_assert_eq(perf_ring_drain(ring, 64, 128, 192, sink, &c, err, sizeof err), 0);
    cr_assert(c.n == 64 && c.pieces == 1 && c.out[0] == 0 && c.out[63] == 63);
    /* nothing to do */
    c = (collect){ .n = 0 };
    cr_assert_eq(perf_ring_drain(ring, 64, 5, 5, sink, &c, err, sizeof err), 0);
    cr_assert_eq(c.pieces, 0);
}

Test(ring, impossible_positions)
{
    uint8_t ring[64] = { 0 };
    collect c = { .n = 0 };
    cr_assert_eq(perf_ring_drain(ring, 64, 10, 5, sink, &c, err, sizeof err), -2);
    cr_assert(strstr(err, "behind"), "%s", err);
    cr_assert_eq(perf_ring_drain(ring, 64, 0, 65, sink, &c, err, sizeof err), -2);
    cr_assert(strstr(err, "more than the ring's 64"), "%s", err);
    cr_assert_eq(perf_ring_drain(ring, 48, 0, 8, sink, &c, err, sizeof err), -2);
    cr_assert_eq(c.pieces, 0);
}

/* Records that straddle the end of the data area come out whole: drain into
 * a linear buffer, then frame. */
Test(ring, records_across_the_wrap)
{
    rbuf r = { .n = 0 };
    for (int i = 0; i < 6; i++) rec(&r, PERF_RECORD_SWITCH, 0, NULL, 0, 10, (uint32_t)(20 + i),
                                    (uint64_t)i, 0);
    /* 6 x 48 = 288 bytes written from position 200 of a 256-byte ring */
    uint8_t ring[256];
    uint64_t start = 200;
    for (size_t i = 0; i < r.n; i++) ring[(start + i) % 256] = r.b[i];
    collect c = { .n = 0 };
    /* all 288 at once cannot be: the producer would have overwritten unread data */
    cr_assert_eq(perf_ring_drain(ring, 256, start, start + 288, sink, &c, err, sizeof err), -2);
    /* the consumer reads 144 bytes (3 records, across the wrap), then the rest */
    for (size_t i = 0; i < 160; i++) ring[(start + i) % 256] = r.b[i];
    cr_assert_eq(perf_ring_drain(ring, 256, start, start + 144, sink, &c, err, sizeof err), 0);
    for (size_t i = 144; i < r.n; i++) ring[(start + i) % 256] = r.b[i];
    cr_assert_eq(perf_ring_drain(ring, 256, start + 144, start + 288, sink, &c, err,
                                 sizeof err), 0);
    cr_assert_eq(c.n, r.n);
    cr_assert(memcmp(c.out, r.b, r.n) == 0);
    size_t off = 0;
    for (int i = 0; i < 6; i++) {
        perf_rec p;
        long n = perf_rec_parse(c.out + off, c.n - off, PERF_JPT_SAMPLE_TYPE, off, &p, err,
                                sizeof err);
        cr_assert_eq(n, 48);
        cr_assert_eq(p.sid.tid, 20u + (unsigned)i);
        off += (size_t)n;
    }
}
