/* The code patch watcher.
 *
 * Every watched range keeps a shadow copy of the bytes last recorded for it.
 * A low-priority thread compares memory with the shadows every interval and
 * records each changed span as JM_CODE_PATCH (the new bytes from that TSC
 * on), merging spans closer than MERGE_GAP bytes into one record. Comparing
 * against the shadow costs the same memory bandwidth as hashing pages but
 * yields exact spans, so a patch record carries only the bytes that changed.
 *
 * Safety of the reads: every range is read with process_vm_readv on our own
 * process, which fails with EFAULT instead of faulting, so a stale range can
 * never crash the JVM (where it is refused, as under qemu-user, hs_safe_read
 * copies through a pipe, which fails the same way). Besides, a compiled
 * method's range is read only while it is registered, under the lock the
 * unload callback takes (briefly, once per unload). HotSpot keeps code heap
 * memory for the life of the process, so even a method freed before its
 * (deferred) unload event arrives is readable; its bytes may then belong to
 * newer code, which is still the truth for that address range. Stub ranges (hs_stub_ranges: non-nmethod
 * code heaps) grow; their reserved but uncommitted tail is simply not read. */
#include "jvm-agent/agent.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "jvm-agent/hotspot.h"
#include "jvm-agent/queue.h"

#define MERGE_GAP 64          /* spans closer than this become one record */
#define MAX_STUB_RANGES 16
#define BATCH_REGIONS 256     /* regions per read and per lock hold */
#define BATCH_BYTES (1u << 20)

struct region {
    uint64_t vaddr, size;
    uint8_t *shadow;
    bool stub;                /* from hs_stub_ranges (may grow) */
};

static struct {
    pthread_mutex_t lock;     /* guards regs/n/cap and every region's shadow */
    struct region **regs;
    size_t n, cap;
    pthread_t thread;
    bool running, stub_ranges;
    unsigned interval_ms;
    pthread_mutex_t wait_lock;
    pthread_cond_t wait_cond;
    bool stop;
    pthread_mutex_t scan_lock; /* one scan at a time (thread and final scan) */
    pw_stats st;
} pw = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wait_lock = PTHREAD_MUTEX_INITIALIZER,
    .wait_cond = PTHREAD_COND_INITIALIZER,
    .scan_lock = PTHREAD_MUTEX_INITIALIZER,
};

static bool add_region(uint64_t vaddr, uint64_t size, const void *bytes, bool stub)
{
    struct region *r = malloc(sizeof *r);
    uint8_t *shadow = malloc(size ? size : 1);
    if (!r || !shadow) {
        free(r);
        free(shadow);
        return false;
    }
    memcpy(shadow, bytes, size);
    r->vaddr = vaddr;
    r->size = size;
    r->shadow = shadow;
    r->stub = stub;
    pthread_mutex_lock(&pw.lock);
    for (size_t i = 0; i < pw.n; i++) {
        if (pw.regs[i]->vaddr == vaddr && pw.regs[i]->size == size &&
            pw.regs[i]->stub == stub) {
            pthread_mutex_unlock(&pw.lock);
            free(shadow);
            free(r);
            return false;
        }
    }
    if (pw.n == pw.cap) {
        size_t ncap = pw.cap ? pw.cap * 2 : 256;
        struct region **nr = realloc(pw.regs, ncap * sizeof *nr);
        if (!nr) {
            pthread_mutex_unlock(&pw.lock);
            free(shadow);
            free(r);
            return false;
        }
        pw.regs = nr;
        pw.cap = ncap;
    }
    pw.regs[pw.n++] = r;
    pw.st.ranges++;
    pthread_mutex_unlock(&pw.lock);
    return true;
}

bool pw_register(uint64_t vaddr, uint64_t size, const void *bytes)
{
    return add_region(vaddr, size, bytes, false);
}

void pw_unregister(uint64_t vaddr)
{
    struct region *gone = NULL;
    pthread_mutex_lock(&pw.lock);
    for (size_t i = 0; i < pw.n; i++) {
        if (pw.regs[i]->vaddr == vaddr && !pw.regs[i]->stub) {
            gone = pw.regs[i];
            pw.regs[i] = pw.regs[--pw.n];
            break;
        }
    }
    pthread_mutex_unlock(&pw.lock);
    if (gone) {
        free(gone->shadow);
        free(gone);
    }
}

static bool safe_read(void *dst, uint64_t addr, uint64_t len)
{
    return hs_safe_read(dst, addr, len) == len;
}

/* A change found under the lock, recorded after it is released (recording
 * may wait for queue room and must not hold up the unload callback). */
struct patch {
    uint64_t vaddr, size;
    uint8_t *bytes;
};

struct patch_list {
    struct patch *p;
    size_t n, cap;
};

static void push_patch(struct patch_list *l, uint64_t vaddr, const uint8_t *src, uint64_t size)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 16;
        struct patch *np = realloc(l->p, ncap * sizeof *np);
        if (!np)
            return;
        l->p = np;
        l->cap = ncap;
    }
    uint8_t *b = malloc(size);
    if (!b)
        return;
    memcpy(b, src, size);
    l->p[l->n++] = (struct patch){ vaddr, size, b };
}

/* Compares live bytes `cur` with the region's shadow, queues the changed
 * spans and updates the shadow. */
static void diff_region(struct region *r, const uint8_t *cur, struct patch_list *out)
{
    if (memcmp(cur, r->shadow, r->size) == 0)
        return;
    uint64_t i = 0;
    while (i < r->size) {
        /* Skip equal 64-byte blocks with memcmp, then find the byte. */
        if (r->size - i >= 64 && memcmp(cur + i, r->shadow + i, 64) == 0) {
            i += 64;
            continue;
        }
        if (cur[i] == r->shadow[i]) {
            i++;
            continue;
        }
        uint64_t start = i, end = i + 1, j = i + 1;
        while (j < r->size && j - end < MERGE_GAP) {
            if (cur[j] != r->shadow[j])
                end = j + 1;
            j++;
        }
        push_patch(out, r->vaddr + start, cur + start, end - start);
        memcpy(r->shadow + start, cur + start, end - start);
        i = end;
    }
}

/* Brings the stub regions in line with hs_stub_ranges(): a heap whose
 * committed part grew gets its new tail recorded as a patch and watched. */
static void refresh_stub_ranges(struct patch_list *out)
{
    uint64_t rg[MAX_STUB_RANGES][2];
    size_t n = hs_stub_ranges(rg, MAX_STUB_RANGES);
    for (size_t k = 0; k < n; k++) {
        uint64_t lo = rg[k][0], hi = rg[k][1];
        if (hi <= lo || hi - lo > (1ull << 30))
            continue;
        uint64_t covered = lo;
        pthread_mutex_lock(&pw.lock);
        for (size_t i = 0; i < pw.n; i++) {
            struct region *r = pw.regs[i];
            if (r->stub && r->vaddr >= lo && r->vaddr <= covered && r->vaddr + r->size > covered)
                covered = r->vaddr + r->size;
        }
        pthread_mutex_unlock(&pw.lock);
        if (covered >= hi)
            continue;
        uint64_t len = hi - covered;
        uint8_t *buf = malloc(len);
        if (!buf)
            continue;
        if (safe_read(buf, covered, len)) {
            /* The first sighting of a heap is its baseline: its bytes were
             * recorded at VMInit as a JM_CODE_BLOB. Later growth is new code
             * that no record holds yet. */
            if (covered != lo)
                push_patch(out, covered, buf, len);
            add_region(covered, len, buf, true);
        } else {
            pw.st.unreadable++;
        }
        free(buf);
    }
}

/* CPU time of this thread: the watcher runs at low priority, so wall time
 * would mostly measure how long it waited for a CPU. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void scan(void)
{
    pthread_mutex_lock(&pw.scan_lock);
    uint64_t t0 = now_ns();
    struct patch_list out = { 0 };
    if (pw.stub_ranges)
        refresh_stub_ranges(&out);
    /* Kept across scans: a fresh multi-megabyte buffer per scan would cost
     * page faults and page clearing every interval. */
    static uint8_t *scratch = NULL;
    static uint64_t scratch_len = 0;
    /* Regions are read in batches with one process_vm_readv each (it fails
     * per region, never faults), then compared with their shadows, all under
     * the lock: an unload waits for at most one batch (BATCH_REGIONS regions
     * or BATCH_BYTES bytes). A swap-remove between batches may make this pass
     * skip one region; the next pass sees it. */
    struct iovec remote[BATCH_REGIONS];
    for (size_t i = 0;;) {
        pthread_mutex_lock(&pw.lock);
        if (i >= pw.n) {
            pthread_mutex_unlock(&pw.lock);
            break;
        }
        size_t k = 0;
        uint64_t total = 0;
        while (i + k < pw.n && k < BATCH_REGIONS &&
               (k == 0 || total + pw.regs[i + k]->size <= BATCH_BYTES)) {
            struct region *r = pw.regs[i + k];
            remote[k].iov_base = (void *)(uintptr_t)r->vaddr;
            remote[k].iov_len = r->size;
            total += r->size;
            k++;
        }
        if (scratch_len < total) {
            uint8_t *ns = realloc(scratch, total);
            if (!ns) {
                pthread_mutex_unlock(&pw.lock);
                break;
            }
            scratch = ns;
            scratch_len = total;
        }
        struct iovec local = { scratch, total };
        static bool no_vm_readv; /* refused here (seccomp; qemu-user lacks it) */
        ssize_t got = -1;
        if (!no_vm_readv) {
            got = process_vm_readv(getpid(), &local, 1, remote, (unsigned long)k, 0);
            no_vm_readv = got < 0 && (errno == ENOSYS || errno == EPERM);
        }
        if (no_vm_readv) {
            /* One region at a time through hotspot.c's checked fallback. */
            uint64_t off = 0;
            for (size_t j = 0; j < k; j++) {
                struct region *r = pw.regs[i + j];
                if (hs_safe_read(scratch + off, r->vaddr, r->size) == r->size)
                    diff_region(r, scratch + off, &out);
                else
                    pw.st.unreadable++;
                off += r->size;
            }
            i += k;
            pthread_mutex_unlock(&pw.lock);
            continue;
        }
        /* Transfers stop at the first unreadable region, never inside one. */
        uint64_t off = 0;
        size_t j = 0;
        for (; j < k && got > 0 && off + pw.regs[i + j]->size <= (uint64_t)got; j++) {
            diff_region(pw.regs[i + j], scratch + off, &out);
            off += pw.regs[i + j]->size;
        }
        if (j < k) {
            pw.st.unreadable++; /* region i+j: skipped this pass */
            j++;
        }
        i += j;
        pthread_mutex_unlock(&pw.lock);
    }
    for (size_t i = 0; i < out.n; i++) {
        struct patch *p = &out.p[i];
        jm_buf b;
        jm_buf_init(&b);
        jm_put_u64(&b, p->vaddr);
        jm_put_u64(&b, p->size);
        jm_put_u64(&b, 0); /* code_offset: filled in by the writer */
        jq_emit_buf(JM_CODE_PATCH, jq_rdtsc(), &b, p->bytes, p->size);
        jm_buf_free(&b);
        pw.st.patches++;
        pw.st.patch_bytes += p->size;
        free(p->bytes);
    }
    free(out.p);
    uint64_t dt = now_ns() - t0;
    pw.st.scans++;
    pw.st.scan_ns_total += dt;
    if (dt > pw.st.scan_ns_max)
        pw.st.scan_ns_max = dt;
    pthread_mutex_unlock(&pw.scan_lock);
}

static void *watcher_main(void *arg)
{
    (void)arg;
    /* Below the application: nice applies per thread on Linux. */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 15);
    pthread_mutex_lock(&pw.wait_lock);
    while (!pw.stop) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += (long)pw.interval_ms * 1000000L;
        dl.tv_sec += dl.tv_nsec / 1000000000L;
        dl.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&pw.wait_cond, &pw.wait_lock, &dl);
        if (pw.stop)
            break;
        pthread_mutex_unlock(&pw.wait_lock);
        scan();
        pthread_mutex_lock(&pw.wait_lock);
    }
    pthread_mutex_unlock(&pw.wait_lock);
    return NULL;
}

int pw_start(unsigned interval_ms, bool stub_ranges, char *err, size_t errlen)
{
    pw.stub_ranges = stub_ranges;
    pw.interval_ms = interval_ms;
    if (stub_ranges) {
        /* Baseline of the stub heaps now, right after their CODE_BLOBs. */
        struct patch_list out = { 0 };
        refresh_stub_ranges(&out);
        for (size_t i = 0; i < out.n; i++)
            free(out.p[i].bytes);
        free(out.p);
    }
    if (!interval_ms || pw.running)
        return 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&pw.thread, NULL, watcher_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the code patch watcher: %s", strerror(rc));
        return -1;
    }
    pthread_setname_np(pw.thread, "jpt-patches");
    pw.running = true;
    return 0;
}

void pw_stop(void)
{
    if (pw.running) {
        pthread_mutex_lock(&pw.wait_lock);
        pw.stop = true;
        pthread_cond_signal(&pw.wait_cond);
        pthread_mutex_unlock(&pw.wait_lock);
        pthread_join(pw.thread, NULL);
        pw.running = false;
    }
    scan();
}

void pw_get_stats(pw_stats *s)
{
    pthread_mutex_lock(&pw.scan_lock);
    pthread_mutex_lock(&pw.lock);
    *s = pw.st;
    s->ranges = pw.n;
    pthread_mutex_unlock(&pw.lock);
    pthread_mutex_unlock(&pw.scan_lock);
}
