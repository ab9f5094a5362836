/* The agent's record queue.
 *
 * Event callbacks run on application threads (and on the JVM's compiler and
 * service threads); they must never block on I/O. They build a record in a
 * malloc'd node and push it on a Treiber stack (one compare-and-swap). A
 * single writer thread takes the whole stack with one atomic exchange,
 * reverses it (so records of one thread keep the order they were pushed in)
 * and writes them with jm_write. Records of different threads interleave in
 * the file; each carries its own TSC, so readers sort by it where it matters.
 *
 * Memory is bounded by a byte budget over the records still waiting. A
 * producer over the budget sleeps in short steps for at most QUEUE_WAIT_MS
 * (the writer normally catches up long before) and then drops its record;
 * every drop is counted and reported in the JM_STATS record at shutdown, so
 * nothing is lost silently. */
#include "jvm-agent/queue.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_DEFAULT_BUDGET (256ull << 20)
#define QUEUE_WAIT_MS 200        /* longest a producer waits for room */
#define WRITER_POLL_MS 5         /* writer looks for records this often */
#define NODE_OVERHEAD 64         /* malloc + node header, counted in the budget */

struct node {
    struct node *next;
    uint64_t tsc;
    uint64_t code_len;
    uint32_t len;
    uint16_t type;
    uint8_t data[];              /* payload, then code bytes */
};

static struct {
    _Atomic(struct node *) head;
    _Atomic uint64_t pending;    /* bytes of queued nodes */
    _Atomic uint64_t max_pending;
    _Atomic uint64_t enqueued, dropped, dropped_bytes, late, waits;
    _Atomic uint64_t written, write_errors, warnings;
    _Atomic int active;          /* producers inside jq_emit */
    _Atomic bool closed;         /* no new records accepted */
    _Atomic bool stop;           /* writer: drain and exit */
    _Atomic bool writer_done;
    _Atomic uint32_t wake;       /* futex word */
    _Atomic int sleeping;        /* writer waits on `wake` */
    uint64_t budget;
    bool started, shut_down;
    jm_writer *w;
    pthread_t thread;
    int log_fd;
    pthread_mutex_t log_lock;
    pthread_mutex_t shutdown_lock;
} q = {
    .log_fd = -1,
    .log_lock = PTHREAD_MUTEX_INITIALIZER,
    .shutdown_lock = PTHREAD_MUTEX_INITIALIZER,
};

static void sleep_ms(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static void wake_writer(void)
{
    /* Only a sleeping writer needs the system call; seq_cst ordering with the
     * writer's "sleeping = 1, then look at head" makes the check sufficient.
     * Ordinary pushes do not call this: the writer polls every
     * WRITER_POLL_MS, which batches records and spares the application one
     * futex wake-up (and context switch) per event. Only a queue filling up
     * wakes it early. */
    if (atomic_load(&q.sleeping)) {
        atomic_fetch_add(&q.wake, 1);
        syscall(SYS_futex, &q.wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}

static void note_max(uint64_t v)
{
    uint64_t m = atomic_load_explicit(&q.max_pending, memory_order_relaxed);
    while (v > m && !atomic_compare_exchange_weak(&q.max_pending, &m, v)) {
    }
}

/* A record larger than the whole budget still goes through once the queue
 * is empty (the interpreter's code blob is a few MiB). */
static bool over_budget(uint64_t cost)
{
    uint64_t p = atomic_load(&q.pending);
    return p > 0 && p + cost > q.budget;
}

void jq_emit(uint16_t type, uint64_t tsc, const void *payload, uint32_t len,
             const void *code, uint64_t code_len)
{
    if (!q.started)
        return;
    atomic_fetch_add(&q.active, 1);
    if (atomic_load(&q.closed)) {
        /* After shutdown began (events still in flight on other threads). */
        atomic_fetch_add(&q.late, 1);
        atomic_fetch_sub(&q.active, 1);
        return;
    }
    uint64_t cost = sizeof(struct node) + len + code_len + NODE_OVERHEAD;
    if (len > JM_MAX_RECORD_SIZE || code_len > JM_MAX_RECORD_SIZE) {
        atomic_fetch_add(&q.dropped, 1);
        atomic_fetch_add(&q.dropped_bytes, len + code_len);
        atomic_fetch_sub(&q.active, 1);
        return;
    }
    if (over_budget(cost)) {
        atomic_fetch_add(&q.waits, 1);
        wake_writer();
        for (unsigned waited = 0; over_budget(cost) && waited < QUEUE_WAIT_MS &&
                                  !atomic_load(&q.closed) && !atomic_load(&q.writer_done);
             waited++)
            sleep_ms(1);
        if (over_budget(cost)) {
            atomic_fetch_add(&q.dropped, 1);
            atomic_fetch_add(&q.dropped_bytes, len + code_len);
            atomic_fetch_sub(&q.active, 1);
            return;
        }
    }
    struct node *n = malloc(sizeof *n + len + code_len);
    if (!n) {
        atomic_fetch_add(&q.dropped, 1);
        atomic_fetch_add(&q.dropped_bytes, len + code_len);
        atomic_fetch_sub(&q.active, 1);
        return;
    }
    n->type = type;
    n->tsc = tsc;
    n->len = len;
    n->code_len = code_len;
    if (len)
        memcpy(n->data, payload, len);
    if (code_len)
        memcpy(n->data + len, code, code_len);
    note_max(atomic_fetch_add(&q.pending, cost) + cost);
    struct node *h = atomic_load_explicit(&q.head, memory_order_relaxed);
    do {
        n->next = h;
    } while (!atomic_compare_exchange_weak_explicit(&q.head, &h, n, memory_order_release,
                                                    memory_order_relaxed));
    atomic_fetch_add_explicit(&q.enqueued, 1, memory_order_relaxed);
    if (atomic_load_explicit(&q.pending, memory_order_relaxed) > q.budget / 8)
        wake_writer();
    atomic_fetch_sub(&q.active, 1);
}

void jq_emit_buf(uint16_t type, uint64_t tsc, const jm_buf *b, const void *code,
                 uint64_t code_len)
{
    if (b->failed) {
        /* The payload could not be built (out of memory): count it as dropped. */
        if (q.started) {
            atomic_fetch_add(&q.dropped, 1);
            atomic_fetch_add(&q.dropped_bytes, b->len + code_len);
        }
        return;
    }
    jq_emit(type, tsc, b->data, (uint32_t)b->len, code, code_len);
}

static void log_line(const char *prefix, const char *text)
{
    pthread_mutex_lock(&q.log_lock);
    if (q.log_fd >= 0) {
        char line[1200];
        int n = snprintf(line, sizeof line, "%s%s\n", prefix, text);
        if (n > (int)sizeof line - 1)
            n = (int)sizeof line - 1;
        if (n > 0 && write(q.log_fd, line, (size_t)n) < 0) {
            /* Nowhere left to report it; the JM_WARNING record still carries it. */
        }
    }
    pthread_mutex_unlock(&q.log_lock);
}

void jq_warn(const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    atomic_fetch_add(&q.warnings, 1);
    fprintf(stderr, "jpt: %s\n", text);
    log_line("warning: ", text);
    jm_buf b;
    jm_buf_init(&b);
    jm_put_str(&b, text);
    jq_emit_buf(JM_WARNING, jq_rdtsc(), &b, NULL, 0);
    jm_buf_free(&b);
}

void jq_note(const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    log_line("", text);
}

uint64_t jq_warnings(void)
{
    return atomic_load(&q.warnings);
}

int jq_running(void)
{
    return q.started && !atomic_load(&q.closed);
}

/* Disk full or similar: records are lost; say so once, count them all. */
static void report_write_error(int rc, const char *what)
{
    if (atomic_fetch_add(&q.write_errors, 1) == 0) {
        char text[200];
        snprintf(text, sizeof text, "cannot write the metadata stream: %s (%s)",
                 strerror(-rc), what);
        fprintf(stderr, "jpt: %s\n", text);
        log_line("warning: ", text);
        atomic_fetch_add(&q.warnings, 1);
    }
}

/* Writes one node and frees it. */
static void write_node(struct node *n)
{
    uint64_t cost = sizeof(struct node) + n->len + n->code_len + NODE_OVERHEAD;
    int rc = jm_write(q.w, n->type, n->tsc, n->data, n->len,
                      n->code_len ? n->data + n->len : NULL, n->code_len);
    if (rc < 0) {
        report_write_error(rc, jm_type_name(n->type));
        atomic_fetch_add(&q.dropped, 1);
        atomic_fetch_add(&q.dropped_bytes, n->len + n->code_len);
    } else {
        atomic_fetch_add_explicit(&q.written, 1, memory_order_relaxed);
    }
    atomic_fetch_sub(&q.pending, cost);
    free(n);
}

/* Takes everything queued and writes it oldest first. Returns false if the
 * queue was empty. */
static bool drain_once(void)
{
    struct node *n = atomic_exchange_explicit(&q.head, NULL, memory_order_acquire);
    if (!n)
        return false;
    struct node *rev = NULL;
    while (n) {
        struct node *next = n->next;
        n->next = rev;
        rev = n;
        n = next;
    }
    while (rev) {
        struct node *next = rev->next;
        write_node(rev);
        rev = next;
    }
    return true;
}

static void *writer_main(void *arg)
{
    (void)arg;
    for (;;) {
        if (drain_once())
            continue;
        if (atomic_load(&q.stop) && atomic_load(&q.active) == 0) {
            /* The closer waited for producers; one last look. */
            while (drain_once()) {
            }
            break;
        }
        /* Idle: put the staged records on disk before sleeping, so a crash
         * of the JVM loses at most what arrived since. */
        int frc = jm_writer_flush(q.w);
        if (frc < 0)
            report_write_error(frc, "staged records");
        uint32_t seen = atomic_load(&q.wake);
        atomic_store(&q.sleeping, 1);
        if (atomic_load(&q.head) == NULL && !atomic_load(&q.stop)) {
            struct timespec ts = { 0, WRITER_POLL_MS * 1000000L };
            syscall(SYS_futex, &q.wake, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
        }
        atomic_store(&q.sleeping, 0);
    }
    atomic_store(&q.writer_done, true);
    return NULL;
}

int jq_start(const char *jvm_dir, uint64_t start_tsc, uint64_t budget_bytes, char *err,
             size_t errlen)
{
    if (q.started) {
        snprintf(err, errlen, "already started");
        return -1;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/agent.log", jvm_dir);
    q.log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (q.log_fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    q.w = jm_writer_open(jvm_dir, start_tsc, (uint32_t)getpid(), err, errlen);
    if (!q.w) {
        close(q.log_fd);
        q.log_fd = -1;
        return -1;
    }
    q.budget = budget_bytes ? budget_bytes : QUEUE_DEFAULT_BUDGET;
    /* The writer must not receive the JVM's signals (it never runs Java code,
     * and HotSpot expects its own handlers to run on threads it knows). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&q.thread, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the writer thread: %s", strerror(rc));
        jm_writer_close(q.w);
        q.w = NULL;
        close(q.log_fd);
        q.log_fd = -1;
        return -1;
    }
    pthread_setname_np(q.thread, "jpt-writer");
    q.started = true;
    return 0;
}

void jq_shutdown(const char *const *names, const uint64_t *values, size_t n,
                 unsigned timeout_ms)
{
    pthread_mutex_lock(&q.shutdown_lock);
    if (!q.started || q.shut_down) {
        pthread_mutex_unlock(&q.shutdown_lock);
        return;
    }
    q.shut_down = true;
    uint64_t stop_tsc = jq_rdtsc();
    atomic_store(&q.closed, true);
    /* Producers that passed the `closed` check finish their push quickly
     * (at most one bounded budget wait). */
    for (unsigned i = 0; atomic_load(&q.active) > 0 && i < QUEUE_WAIT_MS + 100; i++)
        sleep_ms(1);
    atomic_store(&q.stop, true);
    atomic_fetch_add(&q.wake, 1);
    syscall(SYS_futex, &q.wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);

    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    if (pthread_timedjoin_np(q.thread, NULL, &dl) != 0) {
        /* The writer still owns the stream: leave it to finish on its own and
         * do not touch the writer object from here. */
        char text[200];
        snprintf(text, sizeof text,
                 "metadata writer did not drain within %u ms; the stream ends without END",
                 timeout_ms);
        fprintf(stderr, "jpt: %s\n", text);
        log_line("warning: ", text);
        pthread_mutex_unlock(&q.shutdown_lock);
        return;
    }
    /* The writer is gone: this thread owns the stream now. */
    static const char *const qnames[] = {
        "queue_records_written", "queue_records_dropped", "queue_bytes_dropped",
        "queue_records_after_shutdown", "queue_budget_waits", "queue_max_pending_bytes",
        "queue_write_errors", "warnings",
    };
    uint64_t qvals[] = {
        atomic_load(&q.written), atomic_load(&q.dropped), atomic_load(&q.dropped_bytes),
        atomic_load(&q.late), atomic_load(&q.waits), atomic_load(&q.max_pending),
        atomic_load(&q.write_errors), atomic_load(&q.warnings),
    };
    size_t nq = sizeof qvals / sizeof qvals[0];
    jm_buf b;
    jm_buf_init(&b);
    jm_put_u32(&b, (uint32_t)(n + nq));
    for (size_t i = 0; i < n; i++) {
        jm_put_str(&b, names[i]);
        jm_put_u64(&b, values[i]);
    }
    for (size_t i = 0; i < nq; i++) {
        jm_put_str(&b, qnames[i]);
        jm_put_u64(&b, qvals[i]);
    }
    if (qvals[1]) {
        char text[200];
        snprintf(text, sizeof text,
                 "%llu records (%llu bytes) were dropped (queue over its budget, oversized "
                 "or unwritable; see queue_* in the STATS record)",
                 (unsigned long long)qvals[1], (unsigned long long)qvals[2]);
        fprintf(stderr, "jpt: %s\n", text);
        log_line("warning: ", text);
    }
    int rc = b.failed ? -ENOMEM : jm_write(q.w, JM_STATS, stop_tsc, b.data, (uint32_t)b.len, NULL, 0);
    jm_buf_free(&b);
    if (rc == 0)
        rc = jm_write(q.w, JM_END, jq_rdtsc(), NULL, 0, NULL, 0);
    int crc = jm_writer_close(q.w);
    q.w = NULL;
    if (rc < 0 || crc < 0) {
        char text[200];
        snprintf(text, sizeof text, "cannot finish the metadata stream: %s",
                 strerror(-(rc < 0 ? rc : crc)));
        fprintf(stderr, "jpt: %s\n", text);
        log_line("warning: ", text);
    }
    jq_note("stream closed: %llu records written, %llu dropped, %llu after shutdown",
            (unsigned long long)qvals[0], (unsigned long long)qvals[1],
            (unsigned long long)qvals[3]);
    pthread_mutex_lock(&q.log_lock);
    if (q.log_fd >= 0)
        close(q.log_fd);
    q.log_fd = -1;
    pthread_mutex_unlock(&q.log_lock);
    pthread_mutex_unlock(&q.shutdown_lock);
}
