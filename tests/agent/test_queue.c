/* Units for the agent's record queue (queue.c), code patch watcher (patch.c)
 * and runtime image reader (jimage.c), without a JVM: records go through the
 * real writer thread to a real stream, which is read back with the jmeta
 * reader. Criterion runs each test in its own process, so the queue's
 * process-wide state starts fresh. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/jmeta.h"
#include "jvm-agent/agent.h"
#include "jvm-agent/queue.h"

static char dir[] = "/tmp/jpt-queue-test-XXXXXX";

static void setup(void)
{
    strcpy(dir, "/tmp/jpt-queue-test-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    (void)system(cmd);
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Finds a counter in the stream's STATS record; -1 if absent. */
static int64_t stat_value(jm_reader *r, const jm_record *rec, const char *name)
{
    (void)r;
    jm_cur c;
    jm_cur_init(&c, rec->payload, rec->size);
    uint32_t n = jm_get_u32(&c);
    for (uint32_t i = 0; i < n && jm_cur_ok(&c); i++) {
        jm_slice s = jm_get_bytes(&c);
        uint64_t v = jm_get_u64(&c);
        if (s.len == strlen(name) && memcmp(s.p, name, s.len) == 0)
            return (int64_t)v;
    }
    return -1;
}

#define THREADS 4
#define PER_THREAD 20000

static void *producer(void *arg)
{
    uint32_t id = (uint32_t)(uintptr_t)arg;
    for (uint64_t seq = 0; seq < PER_THREAD; seq++) {
        uint8_t p[12];
        memcpy(p, &id, 4);
        memcpy(p + 4, &seq, 8);
        jq_emit(JM_METHOD_ENTRY, jq_rdtsc(), p, sizeof p, NULL, 0);
    }
    return NULL;
}

Test(queue, many_producers_keep_per_thread_order, .init = setup, .fini = teardown)
{
    char err[256];
    cr_assert_eq(jq_start(dir, jq_rdtsc(), 0, err, sizeof err), 0, "%s", err);
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, producer, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    const char *names[] = { "test_counter" };
    uint64_t vals[] = { 42 };
    jq_shutdown(names, vals, 1, 10000);

    jm_reader *r = jm_reader_open(dir, err, sizeof err);
    cr_assert_not_null(r, "%s", err);
    uint64_t next[THREADS] = { 0 };
    jm_record rec;
    int rc, stats = 0, end = 0, after_end = 0;
    while ((rc = jm_reader_next(r, &rec)) == 1) {
        if (end)
            after_end++;
        if (rec.type == JM_METHOD_ENTRY) {
            cr_assert_eq(rec.size, 12);
            uint32_t id = (uint32_t)le(rec.payload, 4);
            uint64_t seq = le(rec.payload + 4, 8);
            cr_assert_lt(id, THREADS);
            cr_assert_eq(seq, next[id], "thread %u: record %lu after %lu", id,
                         (unsigned long)seq, (unsigned long)next[id]);
            next[id]++;
        } else if (rec.type == JM_STATS) {
            stats++;
            cr_assert_eq(stat_value(r, &rec, "test_counter"), 42);
            cr_assert_eq(stat_value(r, &rec, "queue_records_written"), THREADS * PER_THREAD);
            cr_assert_eq(stat_value(r, &rec, "queue_records_dropped"), 0);
        } else if (rec.type == JM_END) {
            end++;
        }
    }
    cr_assert_eq(rc, 0, "%s", jm_reader_error(r));
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(next[i], PER_THREAD, "thread %d: %lu records", i, (unsigned long)next[i]);
    cr_assert_eq(stats, 1);
    cr_assert_eq(end, 1);
    cr_assert_eq(after_end, 0, "END is the last record");
    jm_reader_close(r);
}

Test(queue, unwritable_record_is_counted_not_silent, .init = setup, .fini = teardown)
{
    char err[256];
    cr_assert_eq(jq_start(dir, jq_rdtsc(), 0, err, sizeof err), 0, "%s", err);
    uint8_t small[8] = { 0 };
    /* Over the format's record limit: refused before anything is copied. */
    jq_emit(JM_METHOD, jq_rdtsc(), small, JM_MAX_RECORD_SIZE + 1u, NULL, 0);
    jq_emit(JM_METHOD_ENTRY, jq_rdtsc(), small, 8, NULL, 0);
    jq_shutdown(NULL, NULL, 0, 10000);
    /* Records emitted after shutdown are counted too (nothing to write them to). */
    jq_emit(JM_METHOD_ENTRY, jq_rdtsc(), small, 8, NULL, 0);

    jm_reader *r = jm_reader_open(dir, err, sizeof err);
    cr_assert_not_null(r, "%s", err);
    jm_record rec;
    int64_t dropped = -1;
    while (jm_reader_next(r, &rec) == 1)
        if (rec.type == JM_STATS)
            dropped = stat_value(r, &rec, "queue_records_dropped");
    cr_assert_eq(dropped, 1);
    jm_reader_close(r);
}

Test(queue, start_fails_cleanly_without_directory, .init = setup, .fini = teardown)
{
    char err[256] = "", path[300];
    snprintf(path, sizeof path, "%s/missing/jvm", dir);
    cr_assert_eq(jq_start(path, 0, 0, err, sizeof err), -1);
    cr_assert(strstr(err, "missing") != NULL, "error names the path: %s", err);
    /* Every entry point stays harmless. */
    jq_emit(JM_METHOD_ENTRY, 0, "x", 1, NULL, 0);
    jq_warn("nothing to write %d", 1);
    jq_shutdown(NULL, NULL, 0, 100);
    cr_assert_eq(jq_running(), 0);
}

/* ---- patch watcher ---------------------------------------------------------- */

struct patch_rec {
    uint64_t vaddr, size;
    uint8_t bytes[64];
};

static int read_patches(struct patch_rec *out, int max)
{
    char err[256];
    jm_reader *r = jm_reader_open(dir, err, sizeof err);
    cr_assert_not_null(r, "%s", err);
    jm_record rec;
    int n = 0;
    while (jm_reader_next(r, &rec) == 1) {
        if (rec.type != JM_CODE_PATCH)
            continue;
        cr_assert_lt(n, max);
        out[n].vaddr = le(rec.payload, 8);
        out[n].size = le(rec.payload + 8, 8);
        uint64_t off = le(rec.payload + 16, 8);
        const uint8_t *code = jm_reader_code(r, off, out[n].size, err, sizeof err);
        cr_assert_not_null(code, "%s", err);
        memcpy(out[n].bytes, code, out[n].size < 64 ? out[n].size : 64);
        n++;
    }
    jm_reader_close(r);
    return n;
}

Test(patch, changed_spans_are_recorded_and_merged, .init = setup, .fini = teardown)
{
    char err[256];
    cr_assert_eq(jq_start(dir, jq_rdtsc(), 0, err, sizeof err), 0, "%s", err);
    size_t len = 16384;
    uint8_t *code = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(code != MAP_FAILED && gone != MAP_FAILED);
    for (size_t i = 0; i < len; i++)
        code[i] = (uint8_t)(i * 7);
    cr_assert(pw_register((uintptr_t)code, len, code));
    cr_assert(!pw_register((uintptr_t)code, len, code), "a repeated load is refused");
    cr_assert(pw_register((uintptr_t)gone, 4096, gone));
    pw_unregister((uintptr_t)gone);

    /* Two changes 17 bytes apart (one record), one far away (another), and
     * a change in an unregistered range (no record). */
    code[100] ^= 0xff;
    code[101] ^= 0xff;
    code[117] ^= 0xff;
    code[9000] ^= 0x5a;
    gone[10] ^= 0xff;
    pw_stop(); /* final scan */
    jq_shutdown(NULL, NULL, 0, 10000);

    struct patch_rec p[8];
    int n = read_patches(p, 8);
    cr_assert_eq(n, 2, "%d patch records", n);
    struct patch_rec *a = p[0].vaddr < p[1].vaddr ? &p[0] : &p[1];
    struct patch_rec *b = a == &p[0] ? &p[1] : &p[0];
    cr_assert_eq(a->vaddr, (uintptr_t)code + 100);
    cr_assert_eq(a->size, 18);
    cr_assert_eq(memcmp(a->bytes, code + 100, 18), 0, "patch carries the new bytes");
    cr_assert_eq(b->vaddr, (uintptr_t)code + 9000);
    cr_assert_eq(b->size, 1);
    cr_assert_eq(b->bytes[0], code[9000]);
    munmap(code, len);
    munmap(gone, 4096);
}

/* Polls the watcher's counters until cond holds or five seconds pass. */
#define WAIT_STATS(st, cond)                                                  \
    do {                                                                       \
        for (int waited_ = 0; waited_ < 5000; waited_++) {                     \
            pw_get_stats(&(st));                                               \
            if (cond)                                                          \
                break;                                                         \
            usleep(1000);                                                      \
        }                                                                      \
    } while (0)

Test(patch, no_change_no_record, .init = setup, .fini = teardown)
{
    char err[256];
    cr_assert_eq(jq_start(dir, jq_rdtsc(), 0, err, sizeof err), 0, "%s", err);
    static uint8_t code[4096];
    memset(code, 0x90, sizeof code);
    cr_assert(pw_register((uintptr_t)code, sizeof code, code));
    cr_assert_eq(pw_start(5, 0, false, err, sizeof err), 0, "%s", err);
    pw_stats st;
    WAIT_STATS(st, st.scans >= 2);
    pw_stop();
    pw_get_stats(&st);
    jq_shutdown(NULL, NULL, 0, 10000);
    cr_assert_geq(st.scans, 2, "%lu scans", (unsigned long)st.scans);
    cr_assert_eq(st.patches, 0);
    struct patch_rec p[2];
    cr_assert_eq(read_patches(p, 2), 0);
}

Test(patch, scans_take_at_most_a_tenth_of_a_cpu, .init = setup, .fini = teardown)
{
    char err[256];
    cr_assert_eq(jq_start(dir, jq_rdtsc(), 0, err, sizeof err), 0, "%s", err);
    size_t len = 32u << 20; /* a scan takes milliseconds: longer than the interval */
    uint8_t *code = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(code != MAP_FAILED);
    memset(code, 0x90, len);
    cr_assert(pw_register((uintptr_t)code, len, code));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(pw_start(1, 0, false, err, sizeof err), 0, "%s", err);
    /* Until the third scan and the waits the bound owes after it: a first
     * scan that touches fresh memory can take a tenth of a second or more.
     * Scans that did not wait would never let the wall time catch up. */
    pw_stats st;
    double wall_ns;
    do {
        usleep(50000);
        pw_get_stats(&st);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        wall_ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    } while ((st.scans < 3 || wall_ns < 10.0 * (double)st.scan_ns_total) && wall_ns < 30e9);
    double share = (double)st.scan_ns_total / wall_ns;
    cr_assert_geq(st.scans, 3, "%lu scans in %.0f ms, the longest %.1f ms of CPU",
                  (unsigned long)st.scans, wall_ns / 1e6, (double)st.scan_ns_max / 1e6);
    /* 10% by design; without the bound a 1 ms interval would give ~90% */
    cr_assert_leq(share, 0.2, "scans took %.0f%% of a CPU (%lu scans, %.1f ms each)",
                  share * 100, (unsigned long)st.scans,
                  (double)st.scan_ns_total / 1e6 / (double)st.scans);
    pw_stop();
    jq_shutdown(NULL, NULL, 0, 10000);
    munmap(code, len);
}

Test(patch, unmapped_range_is_skipped_not_fatal, .init = setup, .fini = teardown)
{
    char err[256];
    cr_assert_eq(jq_start(dir, jq_rdtsc(), 0, err, sizeof err), 0, "%s", err);
    uint8_t *a = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *b = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(a != MAP_FAILED && b != MAP_FAILED);
    cr_assert(pw_register((uintptr_t)a, 4096, a));
    cr_assert(pw_register((uintptr_t)b, 4096, b));
    munmap(a, 4096); /* gone without an unload: must not crash the scan */
    b[5] = 0x77;
    pw_stop();
    pw_stats st;
    pw_get_stats(&st);
    jq_shutdown(NULL, NULL, 0, 10000);
    cr_assert_geq(st.unreadable, 1);
    struct patch_rec p[2];
    cr_assert_eq(read_patches(p, 2), 1, "the readable range is still compared");
    cr_assert_eq(p[0].vaddr, (uintptr_t)b + 5);
    munmap(b, 4096);
}

Test(patch, a_patched_site_is_read_again_at_the_close_interval, .init = setup,
     .fini = teardown)
{
    char err[256];
    cr_assert_eq(jq_start(dir, jq_rdtsc(), 0, err, sizeof err), 0, "%s", err);
    uint8_t *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(code != MAP_FAILED);
    volatile uint8_t *live = code;
    cr_assert(pw_register((uintptr_t)code, 4096, code));
    cr_assert_eq(pw_start(1000, 1, false, err, sizeof err), 0, "%s", err);
    live[200] = 0xe8; /* a call site's first change: found by the full scan */
    pw_stats st;
    WAIT_STATS(st, st.patches >= 1);
    cr_assert_eq(st.patches, 1);
    live[201] = 0x11; /* the same site again, and a change far from it */
    live[3000] = 0x22;
    WAIT_STATS(st, st.patches >= 2);
    cr_assert_eq(st.close_changes, 1, "the site's second change came from the close scan");
    cr_assert_eq(st.scans, 1, "before the next full scan");
    pw_stop();
    pw_get_stats(&st);
    jq_shutdown(NULL, NULL, 0, 10000);
    cr_assert_eq(st.patches, 3, "the far change waited for the final scan");
    cr_assert_eq(st.close_changes, 1);
    struct patch_rec p[4];
    cr_assert_eq(read_patches(p, 4), 3);
    cr_assert_eq(p[1].vaddr, (uintptr_t)code + 201);
    cr_assert_eq(p[1].bytes[0], 0x11);
    munmap(code, 4096);
}

Test(patch, a_change_in_a_pinned_area_brings_the_full_scan_forward, .init = setup,
     .fini = teardown)
{
    char err[256];
    cr_assert_eq(jq_start(dir, jq_rdtsc(), 0, err, sizeof err), 0, "%s", err);
    uint8_t *stubs = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(stubs != MAP_FAILED && code != MAP_FAILED);
    volatile uint8_t *live_stubs = stubs, *live_code = code;
    cr_assert(pw_register((uintptr_t)stubs, 4096, stubs));
    cr_assert(pw_register((uintptr_t)code, 4096, code));
    pw_watch_closely((uintptr_t)stubs + 512, 256);
    cr_assert_eq(pw_start(3000, 1, false, err, sizeof err), 0, "%s", err);
    pw_stats st;
    WAIT_STATS(st, st.close_scans >= 2);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    live_code[100] = 0xe8; /* a site re-pointed at the stub it just filled */
    live_stubs[600] = 0x48;
    WAIT_STATS(st, st.patches >= 2);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    cr_assert_eq(st.close_changes, 1, "the stub's fill came from the close scan");
    cr_assert_eq(st.scans, 1, "then one full scan, which found the site");
    cr_assert_lt(ms, 2500, "%.0f ms: sooner than the 3000 ms interval", ms);
    pw_stop();
    jq_shutdown(NULL, NULL, 0, 10000);
    munmap(stubs, 4096);
    munmap(code, 4096);
}

Test(patch, an_unloaded_site_leaves_the_close_list, .init = setup, .fini = teardown)
{
    char err[256];
    cr_assert_eq(jq_start(dir, jq_rdtsc(), 0, err, sizeof err), 0, "%s", err);
    uint8_t *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(code != MAP_FAILED);
    ((volatile uint8_t *)code)[0] = 0;
    cr_assert(pw_register((uintptr_t)code, 4096, code));
    cr_assert_eq(pw_start(100, 1, false, err, sizeof err), 0, "%s", err);
    ((volatile uint8_t *)code)[40] = 0xe8;
    pw_stats st;
    WAIT_STATS(st, st.patches >= 1);
    pw_unregister((uintptr_t)code);
    munmap(code, 4096);
    uint64_t before = st.close_scans;
    WAIT_STATS(st, st.close_scans >= before + 5);
    pw_stop();
    pw_get_stats(&st);
    jq_shutdown(NULL, NULL, 0, 10000);
    cr_assert_geq(st.close_scans, before + 5);
    cr_assert_eq(st.unreadable, 0, "the unmapped site was no longer read");
}

/* The runtime image reader degrades to "not from the image" on anything
 * missing (its use inside a JVM is tested by agent_test.py, case classes). */
Test(jimage, a_home_without_an_image_gives_no_reader)
{
    char home[] = "/tmp/jpt-jimage-XXXXXX";
    cr_assert_not_null(mkdtemp(home));
    cr_assert_null(ji_open(home));
    cr_assert_null(ji_open(""));
    cr_assert_null(ji_open(NULL));
    rmdir(home);
}

Test(jimage, no_reader_no_class)
{
    size_t len = 7;
    cr_assert_null(ji_class_bytes(NULL, "java/lang/String", &len));
    cr_assert_eq(len, 7, "the length is left alone");
    ji_close(NULL);
}
