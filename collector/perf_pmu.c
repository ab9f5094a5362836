/* The intel_pt PMU from sysfs (perf_pmu.h). Every file is read as hostile:
 * a short read, garbage or a value out of range gives an error naming the
 * file, never a guess. */
#include "collector/perf_pmu.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* sysfs attribute files are one short line; anything longer is not one. */
#define SYSFS_VALUE_MAX 256

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool is_hex_digit(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static unsigned hex_value(char c)
{
    if (is_digit(c)) return (unsigned)(c - '0');
    if (c >= 'a' && c <= 'f') return (unsigned)(c - 'a' + 10);
    return (unsigned)(c - 'A' + 10);
}

/* Decimal, at most 2 digits beyond what a bit index needs. */
static const char *parse_bit(const char *p, unsigned *out)
{
    unsigned v = 0;
    int n = 0;
    while (is_digit(*p)) {
        if (++n > 3) return NULL;
        v = v * 10 + (unsigned)(*p++ - '0');
    }
    if (n == 0) return NULL;
    *out = v;
    return p;
}

/* A value ends with at most one newline and nothing after it. */
static bool at_end(const char *p)
{
    if (*p == '\n') p++;
    return *p == '\0';
}

bool perf_parse_format(const char *text, perf_field *f, const char **why)
{
    memset(f, 0, sizeof *f);
    if (strncmp(text, "config1:", 8) == 0 || strncmp(text, "config2:", 8) == 0) {
        *why = "field is in config1/config2, which ptrec does not use";
        return false;
    }
    if (strncmp(text, "config:", 7) != 0) {
        *why = "expected 'config:BIT' or 'config:LO-HI'";
        return false;
    }
    const char *p = parse_bit(text + 7, &f->lo);
    if (!p) {
        *why = "expected a bit number after 'config:'";
        return false;
    }
    f->hi = f->lo;
    if (*p == '-') {
        p = parse_bit(p + 1, &f->hi);
        if (!p) {
            *why = "expected a bit number after '-'";
            return false;
        }
    }
    if (*p == ',') {
        *why = "split fields (several bit ranges) are not supported";
        return false;
    }
    if (!at_end(p)) {
        *why = "trailing characters";
        return false;
    }
    if (f->hi > 63 || f->lo > 63) {
        *why = "bit number beyond 63";
        return false;
    }
    if (f->lo > f->hi) {
        *why = "descending bit range";
        return false;
    }
    f->present = true;
    return true;
}

bool perf_parse_cap(const char *text, bool hex, uint32_t *out, const char **why)
{
    const char *p = text;
    uint64_t v = 0;
    int n = 0;
    if (hex && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) p += 2;
    for (; hex ? is_hex_digit(*p) : is_digit(*p); p++) {
        v = hex ? v * 16 + hex_value(*p) : v * 10 + (uint64_t)(*p - '0');
        if (++n > 16 || v > UINT32_MAX) {
            *why = "value too large";
            return false;
        }
    }
    if (n == 0) {
        *why = hex ? "expected a hexadecimal bitmap" : "expected a decimal number";
        return false;
    }
    if (!at_end(p)) {
        *why = "trailing characters";
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

/* Reads a small sysfs file into buf. 0, -1 (absent), -2 (unreadable/too long). */
static int read_value(const char *path, char *buf, size_t len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return -1;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -2;
    }
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, len - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            close(fd);
            return -2;
        }
        if (r == 0) break;
        got += (size_t)r;
        if (got == len - 1) {
            snprintf(err, errlen, "%s: longer than %zu bytes, not a sysfs value", path, len - 1);
            close(fd);
            return -2;
        }
    }
    close(fd);
    buf[got] = '\0';
    if (memchr(buf, '\0', got)) {
        snprintf(err, errlen, "%s: contains a NUL byte", path);
        return -2;
    }
    return 0;
}

static void join(char *out, size_t len, const char *root, const char *rel)
{
    size_t n = strlen(root);
    bool slash = n > 0 && root[n - 1] == '/';
    snprintf(out, len, "%s%s%s", root, slash ? "" : "/", rel);
}

/* Keeps a value excerpt printable for messages. */
static void excerpt(const char *in, char *out, size_t len)
{
    size_t k = 0;
    for (; *in && k + 1 < len; in++) {
        if (*in == '\n') break;
        out[k++] = (*in >= 0x20 && *in < 0x7f) ? *in : '?';
    }
    out[k] = '\0';
}

static int load_field(const char *dir, const char *name, perf_field *f, char *err,
                      size_t errlen)
{
    char path[PATH_MAX + 64], buf[SYSFS_VALUE_MAX];
    snprintf(path, sizeof path, "%s/format/%s", dir, name);
    int rc = read_value(path, buf, sizeof buf, err, errlen);
    if (rc == -1) {
        memset(f, 0, sizeof *f);
        return 0;
    }
    if (rc < 0) return -2;
    const char *why;
    if (!perf_parse_format(buf, f, &why)) {
        char ex[64];
        excerpt(buf, ex, sizeof ex);
        snprintf(err, errlen, "%s: '%s': %s", path, ex, why);
        return -2;
    }
    return 0;
}

static int load_cap(const char *dir, const char *name, bool hex, uint32_t *out, char *err,
                    size_t errlen)
{
    char path[PATH_MAX + 64], buf[SYSFS_VALUE_MAX];
    snprintf(path, sizeof path, "%s/caps/%s", dir, name);
    *out = 0;
    int rc = read_value(path, buf, sizeof buf, err, errlen);
    if (rc == -1) return 0;
    if (rc < 0) return -2;
    const char *why;
    if (!perf_parse_cap(buf, hex, out, &why)) {
        char ex[64];
        excerpt(buf, ex, sizeof ex);
        snprintf(err, errlen, "%s: '%s': %s", path, ex, why);
        return -2;
    }
    return 0;
}

int perf_pmu_load(const char *root, perf_pmu *pmu, char *err, size_t errlen)
{
    memset(pmu, 0, sizeof *pmu);
    char dir[PATH_MAX], path[PATH_MAX + 64], buf[SYSFS_VALUE_MAX];
    join(dir, sizeof dir, root, PERF_PMU_DIR);
    snprintf(path, sizeof path, "%s/type", dir);
    int rc = read_value(path, buf, sizeof buf, err, errlen);
    if (rc == -1) {
        snprintf(err, errlen, "%s: no such file", path);
        return -1;
    }
    if (rc < 0) return -2;
    uint32_t type;
    const char *why;
    if (!perf_parse_cap(buf, false, &type, &why)) {
        char ex[64];
        excerpt(buf, ex, sizeof ex);
        snprintf(err, errlen, "%s: '%s': %s", path, ex, why);
        return -2;
    }
    pmu->type = type;

    struct { const char *name; perf_field *f; } fields[] = {
        { "pt", &pmu->pt }, { "tsc", &pmu->tsc }, { "mtc", &pmu->mtc },
        { "mtc_period", &pmu->mtc_period }, { "cyc", &pmu->cyc },
        { "cyc_thresh", &pmu->cyc_thresh }, { "noretcomp", &pmu->noretcomp },
        { "branch", &pmu->branch }, { "psb_period", &pmu->psb_period },
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (load_field(dir, fields[i].name, fields[i].f, err, errlen) != 0) return -2;

    uint32_t v;
    if (load_cap(dir, "ip_filtering", false, &v, err, errlen) != 0) return -2;
    pmu->ip_filtering = v != 0;
    if (load_cap(dir, "num_address_ranges", false, &pmu->num_address_ranges, err, errlen) != 0)
        return -2;
    if (load_cap(dir, "psb_periods", true, &pmu->psb_periods, err, errlen) != 0) return -2;
    if (load_cap(dir, "mtc_periods", true, &pmu->mtc_periods, err, errlen) != 0) return -2;
    if (load_cap(dir, "cycle_thresholds", true, &pmu->cycle_thresholds, err, errlen) != 0)
        return -2;
    if (load_cap(dir, "psb_cyc", false, &v, err, errlen) != 0) return -2;
    pmu->psb_cyc = v != 0;
    if (load_cap(dir, "mtc", false, &v, err, errlen) != 0) return -2;
    pmu->mtc_cap = v != 0;
    if (pmu->num_address_ranges > 16) {
        snprintf(err, errlen, "%s/caps/num_address_ranges: %" PRIu32 " is more than any PT "
                 "implementation has (16)", dir, pmu->num_address_ranges);
        return -2;
    }
    if (!pmu->pt.present) {
        snprintf(err, errlen, "%s/format/pt: missing (the PMU does not describe its enable bit)",
                 dir);
        return -2;
    }
    return 0;
}

bool perf_field_set(const perf_field *f, uint64_t value, uint64_t *config)
{
    if (!f->present) return value == 0;
    unsigned width = f->hi - f->lo + 1;
    uint64_t mask = width == 64 ? UINT64_MAX : ((1ull << width) - 1);
    if (value & ~mask) return false;
    *config = (*config & ~(mask << f->lo)) | (value << f->lo);
    return true;
}

/* Two fields sharing a bit would make the config mean something else than
 * asked: refuse such a PMU description. */
static bool overlaps(const perf_field *a, const perf_field *b)
{
    return a->present && b->present && a->lo <= b->hi && b->lo <= a->hi;
}

bool perf_pmu_config(const perf_pmu *pmu, const perf_pt_request *req, uint64_t *config,
                     uint64_t *psb_actual, char *err, size_t errlen)
{
    const struct { const char *name; const perf_field *f; } all[] = {
        { "pt", &pmu->pt }, { "tsc", &pmu->tsc }, { "mtc", &pmu->mtc },
        { "mtc_period", &pmu->mtc_period }, { "cyc", &pmu->cyc },
        { "cyc_thresh", &pmu->cyc_thresh }, { "noretcomp", &pmu->noretcomp },
        { "branch", &pmu->branch }, { "psb_period", &pmu->psb_period },
    };
    const size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n; i++)
        for (size_t k = i + 1; k < n; k++)
            if (overlaps(all[i].f, all[k].f)) {
                snprintf(err, errlen, "intel_pt format fields %s (config:%u-%u) and %s "
                         "(config:%u-%u) overlap", all[i].name, all[i].f->lo, all[i].f->hi,
                         all[k].name, all[k].f->lo, all[k].f->hi);
                return false;
            }
    uint64_t c = 0;
    if (!perf_field_set(&pmu->pt, 1, &c)) {
        snprintf(err, errlen, "intel_pt format field pt cannot hold 1");
        return false;
    }
    const struct { const char *name; const perf_field *f; bool want; } flags[] = {
        { "tsc", &pmu->tsc, req->tsc }, { "noretcomp", &pmu->noretcomp, req->noretcomp },
        { "branch", &pmu->branch, req->branch }, { "cyc", &pmu->cyc, req->cyc },
        { "mtc", &pmu->mtc, req->mtc_period != 0 },
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (!flags[i].want) continue;
        if (!flags[i].f->present) {
            snprintf(err, errlen, "this intel_pt PMU has no '%s' format field", flags[i].name);
            return false;
        }
        perf_field_set(flags[i].f, 1, &c);
    }
    if (req->mtc_period) {
        if (req->mtc_period > 31 || !(pmu->mtc_periods & (1u << req->mtc_period))) {
            snprintf(err, errlen, "MTC period %u is not in caps/mtc_periods (0x%" PRIx32 ")",
                     req->mtc_period, pmu->mtc_periods);
            return false;
        }
        if (!perf_field_set(&pmu->mtc_period, req->mtc_period, &c)) {
            snprintf(err, errlen, "MTC period %u does not fit format field mtc_period",
                     req->mtc_period);
            return false;
        }
    }
    /* PSB period encoding n means 2^(n+11) bytes. Without the field or the
     * cap the hardware default applies (2 KiB on current parts). */
    *psb_actual = 0;
    if (pmu->psb_period.present && pmu->psb_periods && req->psb_period_bytes) {
        int chosen = -1;
        for (unsigned e = 0; e < 32; e++) {
            if (!(pmu->psb_periods & (1u << e))) continue;
            if (e + 11 >= 64) break;
            chosen = (int)e;
            if ((1ull << (e + 11)) >= req->psb_period_bytes) break;
        }
        if (chosen < 0 || !perf_field_set(&pmu->psb_period, (uint64_t)chosen, &c)) {
            snprintf(err, errlen, "no PSB period in caps/psb_periods (0x%" PRIx32 ") fits "
                     "format field psb_period", pmu->psb_periods);
            return false;
        }
        *psb_actual = 1ull << ((unsigned)chosen + 11);
    }
    *config = c;
    return true;
}

int perf_parse_cpulist(const char *text, int *cpus, int max, const char **why)
{
    const char *p = text;
    int n = 0, last = -1;
    for (;;) {
        unsigned lo, hi;
        const char *q = parse_bit(p, &lo);   /* at most 3 digits: CPU numbers < 1000 */
        if (!q) {
            *why = "expected a CPU number";
            return -1;
        }
        hi = lo;
        if (*q == '-') {
            q = parse_bit(q + 1, &hi);
            if (!q) {
                *why = "expected a CPU number after '-'";
                return -1;
            }
        }
        if (hi < lo || (int)lo <= last) {
            *why = "CPU numbers not ascending";
            return -1;
        }
        for (unsigned c = lo; c <= hi; c++) {
            if (n >= max) {
                *why = "more CPUs than ptrec supports";
                return -1;
            }
            cpus[n++] = (int)c;
        }
        last = (int)hi;
        if (*q == ',') {
            p = q + 1;
            continue;
        }
        if (!at_end(q)) {
            *why = "trailing characters";
            return -1;
        }
        return n;
    }
}

int perf_online_cpus(const char *root, int *cpus, int max, char *err, size_t errlen)
{
    char path[PATH_MAX], buf[4096];
    join(path, sizeof path, root, PERF_CPU_ONLINE);
    int rc = read_value(path, buf, sizeof buf, err, errlen);
    if (rc == -1) snprintf(err, errlen, "%s: no such file", path);
    if (rc < 0) return -1;
    const char *why;
    int n = perf_parse_cpulist(buf, cpus, max, &why);
    if (n < 0) {
        char ex[64];
        excerpt(buf, ex, sizeof ex);
        snprintf(err, errlen, "%s: '%s': %s", path, ex, why);
    }
    return n;
}

void perf_filter_string(uint64_t lo, uint64_t hi, char *buf, size_t len)
{
    snprintf(buf, len, "filter 0x%" PRIx64 "/%" PRIu64, lo, hi - lo);
}

bool perf_mlock_fits(unsigned ncpus, uint64_t bytes_per_cpu, uint64_t mlock_kb,
                     uint64_t rlimit_memlock, bool ipc_lock, char *err, size_t errlen)
{
    if (ipc_lock) return true;
    /* Mirrors perf_mmap(): perf_event_mlock_kb per online CPU is free, the
     * rest counts against RLIMIT_MEMLOCK. */
    uint64_t need_kb = (uint64_t)ncpus * (bytes_per_cpu / 1024);
    uint64_t free_kb = mlock_kb * ncpus;
    if (need_kb <= free_kb) return true;
    uint64_t over_kb = need_kb - free_kb;
    if (rlimit_memlock == UINT64_MAX || over_kb <= rlimit_memlock / 1024) return true;
    snprintf(err, errlen, "the trace buffers need %" PRIu64 " KiB of locked memory (%u CPUs x %"
             PRIu64 " KiB) but perf_event_mlock_kb allows %" PRIu64 " KiB per CPU and "
             "RLIMIT_MEMLOCK %" PRIu64 " KiB more; use a smaller --aux-size, raise "
             "/proc/sys/kernel/perf_event_mlock_kb or ulimit -l, or run as root; or use "
             "--emulate", need_kb, ncpus, bytes_per_cpu / 1024, mlock_kb,
             rlimit_memlock / 1024);
    return false;
}
