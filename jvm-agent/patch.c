/* The code patch watcher.
 *
 * Every watched range keeps a shadow copy of the bytes last recorded for it.
 * A thread compares memory with the shadows every interval (the full scan)
 * and records each changed span as JM_CODE_PATCH (the new bytes from that TSC
 * on), merging spans closer than MERGE_GAP bytes into one record. Comparing
 * against the shadow costs the same memory bandwidth as hashing pages but
 * yields exact spans, so a patch record carries only the bytes that changed.
 *
 * Some code changes again soon after it changed once: an inline cache site
 * goes from one callee to a transition stub and on to the next callee within
 * a second, and the transition stubs of the InlineCacheBuffer are refilled
 * all the time. A change recorded a full interval late sends the decoder
 * down the old path meanwhile. So the watcher also keeps a short list of
 * close spans, compared every close interval (10 ms by default): the areas
 * named by pw_watch_closely (pinned) and the bytes around each recently
 * patched call site. A change in a pinned area means HotSpot just
 * re-pointed some site at it, and brings the next full scan forward.
 *
 * Safety of the reads: every range is read with process_vm_readv on our own
 * process, which fails with EFAULT instead of faulting, so a stale range can
 * never crash the JVM (where it is refused, as under qemu-user, hs_safe_read
 * copies through a pipe, which fails the same way). Besides, a compiled
 * method's range is read only while it is registered, under the lock the
 * unload callback takes (briefly, once per unload). HotSpot keeps code heap
 * memory for the life of the process, so even a method freed before its
 * (deferred) unload event arrives is readable; its bytes may then belong to
 * newer code, which is still the truth for that address range. Stub ranges
 * (hs_stub_ranges: non-nmethod code heaps) grow; their reserved but
 * uncommitted tail is simply not read. */
#include "jvm-agent/agent.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "jvm-agent/hotspot.h"
#include "jvm-agent/queue.h"

#define MERGE_GAP 64          /* spans closer than this become one record */
#define MAX_STUB_RANGES 16
#define BATCH_REGIONS 256     /* regions per read and per lock hold */
#define BATCH_BYTES (1u << 20)
#define CLOSE_MAX 64          /* close spans, pinned ones included */
#define CLOSE_PAD 16          /* bytes kept on each side of a patched span */
#define CLOSE_SPAN_MAX 64     /* longer patches are new code, not a site */
#define CLOSE_IDLE_MS 2000    /* a site span unchanged this long is dropped */
#define PINNED_MAX 4
#define FULL_SCAN_SHARE 10    /* percent of one CPU the full scans may take */

struct region {
    uint64_t vaddr, size;
    uint8_t *shadow;
    bool stub;                /* from hs_stub_ranges (may grow) */
};

/* Part of a region compared every close interval. */
struct close_span {
    struct region *r;
    uint64_t off, len;
    uint64_t changed_ms;      /* last change (or when added), monotonic */
    bool pinned;              /* from pw_watch_closely: never dropped */
};

static struct {
    pthread_mutex_t lock;     /* guards regs/n/cap and every region's shadow */
    struct region **regs;
    size_t n, cap;
    pthread_t thread;
    bool running, stub_ranges;
    unsigned interval_ms, close_ms;
    struct close_span close[CLOSE_MAX]; /* guarded by lock */
    size_t nclose;
    struct { uint64_t vaddr, size; } pinned[PINNED_MAX]; /* guarded by lock */
    size_t npinned;
    bool pins_stale;          /* a region or a pin was added since pinning */
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
    pw.pins_stale = true;
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
    for (size_t i = 0; gone && i < pw.nclose;) {
        if (pw.close[i].r == gone)
            pw.close[i] = pw.close[--pw.nclose];
        else
            i++;
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

/* Milliseconds on the monotonic clock: the watcher's schedule. */
static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Keeps [off, off+len) of region r (nmethod code) in the close list, as the
 * site of a patch just found. Under pw.lock. A full list gives up the span
 * that has been quiet longest. */
static void close_track(struct region *r, uint64_t off, uint64_t len, uint64_t now)
{
    uint64_t lo = off > CLOSE_PAD ? off - CLOSE_PAD : 0;
    uint64_t hi = off + len + CLOSE_PAD < r->size ? off + len + CLOSE_PAD : r->size;
    size_t victim = CLOSE_MAX;
    for (size_t i = 0; i < pw.nclose; i++) {
        struct close_span *c = &pw.close[i];
        if (c->r == r && c->off <= off && c->off + c->len >= off + len) {
            c->changed_ms = now;
            return;
        }
        if (!c->pinned && (victim == CLOSE_MAX || c->changed_ms < pw.close[victim].changed_ms))
            victim = i;
    }
    if (pw.nclose < CLOSE_MAX)
        victim = pw.nclose++;
    else if (victim == CLOSE_MAX)
        return;
    pw.close[victim] = (struct close_span){ r, lo, hi - lo, now, false };
}

/* Compares live bytes `cur` with the shadow of [off, off+len) of region r,
 * queues the changed spans and updates the shadow. Changed spans of compiled
 * code short enough to be a call site are kept in the close list when
 * `track`. Returns whether anything changed. Under pw.lock. */
static bool diff_span(struct region *r, uint64_t off, uint64_t len, const uint8_t *cur,
                      struct patch_list *out, bool track)
{
    const uint8_t *old = r->shadow + off;
    if (memcmp(cur, old, len) == 0)
        return false;
    uint64_t now = track ? mono_ms() : 0;
    uint64_t i = 0;
    while (i < len) {
        /* Skip equal 64-byte blocks with memcmp, then find the byte. */
        if (len - i >= 64 && memcmp(cur + i, old + i, 64) == 0) {
            i += 64;
            continue;
        }
        if (cur[i] == old[i]) {
            i++;
            continue;
        }
        uint64_t start = i, end = i + 1, j = i + 1;
        while (j < len && j - end < MERGE_GAP) {
            if (cur[j] != old[j])
                end = j + 1;
            j++;
        }
        push_patch(out, r->vaddr + off + start, cur + start, end - start);
        memcpy(r->shadow + off + start, cur + start, end - start);
        if (track && !r->stub && end - start <= CLOSE_SPAN_MAX)
            close_track(r, off + start, end - start, now);
        i = end;
    }
    return true;
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

/* CPU time of this thread: wall time would also count how long it waited
 * for a CPU. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Reads the k spans `remote` back to back into dst; ok[j] tells which came
 * whole. One process_vm_readv for all where it is allowed (it never faults,
 * and stops at the first unreadable span); what it did not bring is read
 * span by span through hotspot.c's checked fallback. */
static void read_spans(const struct iovec *remote, size_t k, uint8_t *dst, bool *ok)
{
    static bool no_vm_readv; /* refused here (seccomp; qemu-user lacks it) */
    uint64_t total = 0, off = 0;
    for (size_t j = 0; j < k; j++)
        total += remote[j].iov_len;
    size_t j = 0;
    if (!no_vm_readv) {
        struct iovec local = { dst, total };
        ssize_t got = process_vm_readv(getpid(), &local, 1, remote, (unsigned long)k, 0);
        no_vm_readv = got < 0 && (errno == ENOSYS || errno == EPERM);
        for (; j < k && got > 0 && off + remote[j].iov_len <= (uint64_t)got; j++) {
            ok[j] = true;
            off += remote[j].iov_len;
        }
    }
    for (; j < k; j++) {
        uint64_t len = remote[j].iov_len;
        ok[j] = hs_safe_read(dst + off, (uint64_t)(uintptr_t)remote[j].iov_base, len) == len;
        off += len;
    }
}

/* A buffer kept across scans: a fresh multi-megabyte one per scan would
 * cost page faults and page clearing every interval. */
static uint8_t *scratch_for(uint8_t **buf, uint64_t *cap, uint64_t len)
{
    if (*cap < len) {
        uint8_t *nb = realloc(*buf, len);
        if (!nb)
            return NULL;
        *buf = nb;
        *cap = len;
    }
    return *buf;
}

static void record_patches(struct patch_list *out)
{
    for (size_t i = 0; i < out->n; i++) {
        struct patch *p = &out->p[i];
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
    free(out->p);
}

/* The full scan: every watched region. Returns the CPU time it took, in
 * ns. */
static uint64_t scan(void)
{
    pthread_mutex_lock(&pw.scan_lock);
    uint64_t t0 = now_ns();
    struct patch_list out = { 0 };
    if (pw.stub_ranges)
        refresh_stub_ranges(&out);
    static uint8_t *scratch = NULL;
    static uint64_t scratch_len = 0;
    /* Regions are read in batches, then compared with their shadows, all
     * under the lock: an unload waits for at most one batch (BATCH_REGIONS
     * regions or BATCH_BYTES bytes). A swap-remove between batches may make
     * this pass skip one region; the next pass sees it. */
    struct iovec remote[BATCH_REGIONS];
    bool ok[BATCH_REGIONS];
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
        uint8_t *buf = scratch_for(&scratch, &scratch_len, total);
        if (!buf) {
            pthread_mutex_unlock(&pw.lock);
            break;
        }
        read_spans(remote, k, buf, ok);
        uint64_t off = 0;
        for (size_t j = 0; j < k; j++) {
            struct region *r = pw.regs[i + j];
            if (ok[j])
                diff_span(r, 0, r->size, buf + off, &out, true);
            else
                pw.st.unreadable++;
            off += r->size;
        }
        i += k;
        pthread_mutex_unlock(&pw.lock);
    }
    record_patches(&out);
    uint64_t dt = now_ns() - t0;
    pw.st.scans++;
    pw.st.scan_ns_total += dt;
    if (dt > pw.st.scan_ns_max)
        pw.st.scan_ns_max = dt;
    pthread_mutex_unlock(&pw.scan_lock);
    return dt;
}

/* Gives every pinned area a close span in each region it overlaps. Under
 * pw.lock. */
static void pin_spans(void)
{
    pw.pins_stale = false;
    for (size_t p = 0; p < pw.npinned; p++) {
        uint64_t a = pw.pinned[p].vaddr, b = a + pw.pinned[p].size;
        for (size_t i = 0; i < pw.n; i++) {
            struct region *r = pw.regs[i];
            uint64_t lo = a > r->vaddr ? a : r->vaddr;
            uint64_t hi = b < r->vaddr + r->size ? b : r->vaddr + r->size;
            if (lo >= hi)
                continue;
            bool have = false;
            for (size_t c = 0; c < pw.nclose && !have; c++)
                have = pw.close[c].r == r && pw.close[c].pinned &&
                       pw.close[c].off == lo - r->vaddr;
            if (have)
                continue;
            size_t slot = pw.nclose < CLOSE_MAX ? pw.nclose++ : CLOSE_MAX;
            for (size_t c = 0; slot == CLOSE_MAX && c < pw.nclose; c++)
                if (!pw.close[c].pinned)
                    slot = c;
            if (slot == CLOSE_MAX)
                return;
            pw.close[slot] = (struct close_span){ r, lo - r->vaddr, hi - lo, 0, true };
        }
    }
}

/* The close scan: the close spans only. Returns whether a pinned one
 * changed. */
static bool close_scan(void)
{
    pthread_mutex_lock(&pw.scan_lock);
    uint64_t t0 = now_ns();
    struct patch_list out = { 0 };
    static uint8_t *scratch = NULL;
    static uint64_t scratch_len = 0;
    struct iovec remote[CLOSE_MAX];
    bool ok[CLOSE_MAX], pinned_changed = false;
    uint64_t now = mono_ms();
    pthread_mutex_lock(&pw.lock);
    if (pw.pins_stale)
        pin_spans();
    for (size_t i = 0; i < pw.nclose;) {
        if (!pw.close[i].pinned && now - pw.close[i].changed_ms > CLOSE_IDLE_MS)
            pw.close[i] = pw.close[--pw.nclose];
        else
            i++;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < pw.nclose; i++) {
        remote[i].iov_base = (void *)(uintptr_t)(pw.close[i].r->vaddr + pw.close[i].off);
        remote[i].iov_len = pw.close[i].len;
        total += pw.close[i].len;
    }
    uint8_t *buf = scratch_for(&scratch, &scratch_len, total ? total : 1);
    if (buf && pw.nclose) {
        read_spans(remote, pw.nclose, buf, ok);
        uint64_t off = 0;
        for (size_t i = 0; i < pw.nclose; i++) {
            struct close_span *c = &pw.close[i];
            if (!ok[i]) {
                pw.st.unreadable++;
            } else if (diff_span(c->r, c->off, c->len, buf + off, &out, false)) {
                c->changed_ms = now;
                pinned_changed |= c->pinned;
                pw.st.close_changes++;
            }
            off += c->len;
        }
    }
    pthread_mutex_unlock(&pw.lock);
    record_patches(&out);
    uint64_t dt = now_ns() - t0;
    pw.st.close_scans++;
    pw.st.close_scan_ns_total += dt;
    pthread_mutex_unlock(&pw.scan_lock);
    return pinned_changed;
}

void pw_watch_closely(uint64_t vaddr, uint64_t size)
{
    pthread_mutex_lock(&pw.lock);
    if (pw.npinned < PINNED_MAX && size) {
        pw.pinned[pw.npinned].vaddr = vaddr;
        pw.pinned[pw.npinned].size = size;
        pw.npinned++;
        pw.pins_stale = true;
    }
    pthread_mutex_unlock(&pw.lock);
}

/* Waits on the condition until `ms` milliseconds from now or pw_stop. */
static void wait_ms(uint64_t ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)(ms / 1000);
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    dl.tv_sec += dl.tv_nsec / 1000000000L;
    dl.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&pw.wait_cond, &pw.wait_lock, &dl);
}

static void *watcher_main(void *arg)
{
    (void)arg;
    /* The watcher runs at the application's priority. Below it (it ran at
     * nice 15), it got a CPU only when the application left one idle, which
     * it seldom does while compiling, when code changes most: a tenth of the
     * changes were recorded more than 0.12 s after a thread first ran them,
     * and the decoder followed old code meanwhile. What bounds its cost instead is
     * FULL_SCAN_SHARE: the wait after a full scan is at least
     * (100 / FULL_SCAN_SHARE - 1) times the CPU time the scan took. A
     * change in a pinned area brings the next full scan forward, but never
     * closer than a fifth of the interval to the last one. */
    uint64_t min_gap = pw.interval_ms / 5 ? pw.interval_ms / 5 : 1;
    bool closely = pw.close_ms && pw.close_ms < pw.interval_ms;
    uint64_t rest = 0, last_full = mono_ms(), next_full = last_full + pw.interval_ms;
    pthread_mutex_lock(&pw.wait_lock);
    while (!pw.stop) {
        uint64_t now = mono_ms();
        uint64_t next = closely && now + pw.close_ms < next_full ? now + pw.close_ms : next_full;
        if (next > now)
            wait_ms(next - now);
        if (pw.stop)
            break;
        pthread_mutex_unlock(&pw.wait_lock);
        if (mono_ms() >= next_full) {
            /* in ns, rounded up: whole milliseconds first would let a scan
             * under 1 ms run every interval */
            rest = (scan() * (100 / FULL_SCAN_SHARE - 1) + 999999u) / 1000000u;
            last_full = mono_ms();
            next_full = last_full + (pw.interval_ms > rest ? pw.interval_ms : rest);
        } else if (closely && close_scan()) {
            uint64_t soon = last_full + (min_gap > rest ? min_gap : rest);
            if (soon < next_full)
                next_full = soon;
        }
        pthread_mutex_lock(&pw.wait_lock);
    }
    pthread_mutex_unlock(&pw.wait_lock);
    return NULL;
}

int pw_start(unsigned interval_ms, unsigned close_ms, bool stub_ranges, char *err,
             size_t errlen)
{
    pw.stub_ranges = stub_ranges;
    pw.interval_ms = interval_ms;
    pw.close_ms = close_ms;
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
