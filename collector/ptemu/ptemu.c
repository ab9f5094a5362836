/* libptemu.so: a QEMU user-mode TCG plugin that encodes the guest's native control flow as
 * Intel PT packets, per thread, as PT hardware configured like perf (tsc=1, noretcomp,
 * branch=1, no MTC/CYC) with one IP filter range would.
 *
 * How it works. At translation, every instruction of a block that intersects the filter
 * range is classified with capstone and gets an execution callback; blocks outside the
 * range get one block-start callback. At execution each event is compared with the
 * previous in-range instruction's expected successor:
 *   conditional branch          -> TNT bit (taken iff the next IP is its target)
 *   indirect jump/call, return  -> TIP with the target
 *   leaving the range by branch -> TIP.PGD with the target
 *   leaving sequentially        -> FUP (first IP outside) + TIP.PGD
 *   entering the range          -> (TSC, MODE.Exec) TIP.PGE
 *   syscall-like far transfers  -> TIP.PGD, IP suppressed (the kernel is not traced)
 *   an impossible successor     -> a signal: FUP at the interrupted instruction + TIP.PGD
 * Nothing the hardware would not know reaches the stream: no code versions, no thread ids.
 *
 * The guest's threads are host threads in qemu-user, so all state is per host thread
 * (thread-local), never per vCPU index: QEMU reuses vCPU indices after a thread exits.
 *
 * Arguments, control protocol and output files are described in docs/FORMAT.md,
 * "Emulated backend". */
#include "qemu_api.h"
#include "ptemu.h"

#include "common/auxidx.h"
#include "common/fileio.h"

#include <capstone/capstone.h>
#include <intel-pt.h>
#include <linux/perf_event.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = PTEMU_QEMU_PLUGIN_VERSION;

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---------------------------------------------------------------------------------------
 * Configuration */

static qemu_plugin_id_t g_id;
static char g_out[4096];
static uint64_t g_psb_period = 4096;
static uint64_t g_aux_size;   /* 0: lossless */
static uint64_t g_drain_rate; /* bytes per 1000 TSC ticks, in millionths (fractions allowed) */
static bool g_loss;
static bool g_keep_lossless;
static bool g_testlog;
static int g_ctl_fd = -1;
static pid_t g_pid;

/* The filter in force: [g_lo, g_hi). Changed only inside the reset callback, when all vCPUs
 * are stopped and every translated block has been flushed. */
static uint64_t g_lo = 1, g_hi = 0;

/* Filter change requests come from the control thread (filterctl.c), g_reset_req telling a
 * vCPU thread to call qemu_plugin_reset. */
static atomic_int g_reset_inflight; /* QEMU refuses a second reset while one is pending */

static volatile int g_closing;      /* atexit ran: stop touching streams */
static volatile int g_forked_child; /* a fork child must not write into the parent's files */

/* Signal handler entry points registered by the guest (rt_sigaction), to recognise the
 * first block of a delivered signal even when it looks like a plausible branch target. */
#define MAX_HANDLERS 128
static uint64_t g_handlers[MAX_HANDLERS];
static atomic_int g_nhandlers;
static pthread_mutex_t g_handler_lock = PTHREAD_MUTEX_INITIALIZER;

void ptemu_warn(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    int n = snprintf(buf, sizeof buf, "ptemu: ");
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    size_t l = strlen(buf);
    if (l + 1 < sizeof buf) {
        buf[l] = '\n';
        buf[l + 1] = 0;
    }
    /* stderr, not qemu_plugin_outs: the latter goes nowhere without -d plugin. */
    ssize_t w = write(2, buf, strlen(buf));
    (void)w;
}

void ptemu_write_all(int fd, const void *p, size_t n)
{
    int rc = jpt_write_all(fd, p, n);
    if (rc < 0)
        ptemu_warn("write failed: %s", strerror(-rc));
}

/* ---------------------------------------------------------------------------------------
 * Instruction descriptors, created at translation and never freed: a thread may still
 * hold a pointer to the last instruction of a block that has since been flushed. */

enum kind {
    K_NB,   /* not a branch: successor is the next instruction */
    K_JMP,  /* direct jump */
    K_CALL, /* direct call */
    K_COND, /* jcc, loop*, j*cxz: TNT */
    K_IND,  /* indirect jump or call: TIP */
    K_RET,  /* near return (no return compression): TIP */
    K_SYS,  /* syscall, sysenter, int*: control goes to the (untraced) kernel */
    K_FAR,  /* other far transfers within user space: TIP */
};

#define F_LAST 1 /* last instruction of its translation block */

struct insn {
    uint64_t ip;
    uint64_t succ; /* expected successor: next IP, or the target of a direct branch */
    uint64_t next; /* fall-through IP */
    uint32_t cid;  /* code id in eval/code.bin (test mode) */
    uint8_t kind;
    uint8_t len;
    uint8_t flags;
};

struct arena {
    struct arena *prev;
    size_t used;
    struct insn slot[4096];
};
static struct arena *g_arena;

static struct insn *insn_alloc(void)
{
    if (!g_arena || g_arena->used == sizeof g_arena->slot / sizeof g_arena->slot[0]) {
        struct arena *a = calloc(1, sizeof *a);
        if (!a)
            abort();
        a->prev = g_arena;
        g_arena = a;
    }
    return &g_arena->slot[g_arena->used++];
}

/* ---------------------------------------------------------------------------------------
 * Per-thread streams */

enum mode {
    M_OFF,  /* PacketEn = 0 (outside the filter, or before the first entry) */
    M_EN,   /* PacketEn = 1; prev is the last in-range instruction, not yet confirmed */
    M_PEND, /* a signal interrupted the thread right after prev and what prev did is not
               known yet: decided when the thread re-enters the range */
};

#define LBUF_SIZE (256u << 10)
#define RBUF_SIZE (256u << 10)
#define LOGBUF_SIZE (64u << 10)

struct stream {
    pid_t tid;
    int mode;
    const struct insn *prev;

    uint64_t tnt;      /* pending TNT bits, oldest most significant */
    unsigned ntnt;
    uint64_t last_ip;  /* IP compression state */
    bool have_ip;
    bool psb_due;

    struct pt_encoder *enc;
    uint8_t *lbuf;     /* encoder output: the lossless stream */
    size_t lpos;
    uint64_t lbase;    /* lossless offset of lbuf[0] */
    uint64_t psb_off;  /* lossless offset of the last PSB */

    int fd_pt, fd_idx, fd_sb, fd_eval, fd_log;
    uint64_t roff;     /* bytes of pt/<stream>.pt on disk */
    uint64_t roff0, lbase0; /* where this thread's data starts (thread id reuse) */

    /* loss model */
    uint8_t *rbuf;
    size_t rlen;
    uint64_t fill;     /* bytes in the modelled AUX buffer */
    uint64_t dtsc;     /* TSC of the last drain update */
    uint64_t drain_rem; /* drained since then below one byte, in billionths of a byte */
    bool lost;
    uint64_t lost_start;
    uint64_t trunc_off, trunc_size, trunc_tsc; /* chunk whose idx record awaits lost_bytes */
    uint64_t last_real; /* real offset of the last packet written, or ~0 */

    /* test log */
    uint32_t run_first, run_n;
    uint8_t *logbuf;
    size_t loglen;

    /* statistics */
    uint64_t ninsn, nlost, nsig, novf, npge, npgd, npsb;

    bool done;
    struct stream *all_next;
};

static __thread struct stream *tls_stream __attribute__((tls_model("initial-exec")));
static pthread_mutex_t g_streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stream *g_streams;

static inline uint64_t tsc_now(void) { return __rdtsc(); }

static int open_out(const char *sub, pid_t tid, const char *ext, bool append)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s/tid-%d%s", g_out, sub, (int)tid, ext);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
    if (fd < 0)
        ptemu_warn("cannot create %s: %s", path, strerror(errno));
    return fd;
}

/* perf sample_id for sample_type TID|TIME|ID|CPU|IDENTIFIER: pid, tid, time, id, cpu, res,
 * identifier. */
static size_t sample_id(uint8_t *p, const struct stream *t, uint64_t time)
{
    uint32_t u32[2] = {(uint32_t)g_pid, (uint32_t)t->tid};
    uint64_t id = (uint64_t)t->tid;
    uint32_t cpu[2] = {0, 0};
    memcpy(p, u32, 8);
    memcpy(p + 8, &time, 8);
    memcpy(p + 16, &id, 8);
    memcpy(p + 24, cpu, 8);
    memcpy(p + 32, &id, 8);
    return 40;
}

static void sb_record(struct stream *t, uint32_t type, const void *body, size_t blen,
                      uint64_t time)
{
    uint8_t rec[256];
    struct perf_event_header h = {.type = type, .misc = 0, .size = 0};
    size_t n = sizeof h;
    memcpy(rec + n, body, blen);
    n += blen;
    n += sample_id(rec + n, t, time);
    h.size = (uint16_t)n;
    memcpy(rec, &h, sizeof h);
    if (t->fd_sb >= 0)
        ptemu_write_all(t->fd_sb, rec, n);
}

static void idx_record(struct stream *t, uint64_t off, uint64_t size, uint64_t flags,
                       uint64_t tsc, uint64_t lost)
{
    auxidx_rec r = {off, size, flags, tsc, lost};
    if (t->fd_idx >= 0)
        auxidx_append(t->fd_idx, &r);
}

/* One PERF_RECORD_AUX worth of trace: append it to pt/<stream>.pt and describe it. The idx
 * record of a TRUNCATED chunk waits until the amount lost is known. */
static void chunk_out(struct stream *t, const uint8_t *p, size_t n, uint64_t flags)
{
    uint64_t now = tsc_now();
    if (n && t->fd_pt >= 0)
        ptemu_write_all(t->fd_pt, p, n);
    uint64_t body[3] = {t->roff, n, flags};
    sb_record(t, PERF_RECORD_AUX, body, sizeof body, now);
    if (flags & PERF_AUX_FLAG_TRUNCATED) {
        t->trunc_off = t->roff;
        t->trunc_size = n;
        t->trunc_tsc = now;
    } else {
        idx_record(t, t->roff, n, flags, now, 0);
    }
    t->roff += n;
}

static void log_flush(struct stream *t)
{
    if (t->loglen && t->fd_log >= 0)
        ptemu_write_all(t->fd_log, t->logbuf, t->loglen);
    t->loglen = 0;
}

static void log_bytes(struct stream *t, const void *p, size_t n)
{
    if (t->loglen + n > LOGBUF_SIZE)
        log_flush(t);
    memcpy(t->logbuf + t->loglen, p, n);
    t->loglen += n;
}

static void log_run_flush(struct stream *t)
{
    if (t->run_n) {
        uint32_t r[2] = {t->run_first, t->run_n};
        log_bytes(t, r, sizeof r);
        t->run_n = 0;
    }
}

/* A confirmed executed instruction. */
static inline void log_insn(struct stream *t, const struct insn *p)
{
    t->ninsn++;
    if (!g_testlog)
        return;
    if (t->run_n && p->cid == t->run_first + t->run_n && t->run_n < 0x7fffffffu) {
        t->run_n++;
        return;
    }
    log_run_flush(t);
    t->run_first = p->cid;
    t->run_n = 1;
}

enum { LOGM_PSB = 1, LOGM_OVF = 2, LOGM_CUT = 3 };

static void log_marker(struct stream *t, uint32_t type, uint64_t loff, uint64_t roff)
{
    if (!g_testlog)
        return;
    log_run_flush(t);
    uint32_t h[2] = {0xffffffffu, type};
    uint64_t b[2] = {loff, roff};
    log_bytes(t, h, sizeof h);
    log_bytes(t, b, sizeof b);
}

/* ---------------------------------------------------------------------------------------
 * Packet output */

static void lflush(struct stream *t)
{
    if (!t->lpos)
        return;
    if (!g_loss)
        chunk_out(t, t->lbuf, t->lpos, 0);
    if (g_keep_lossless && t->fd_eval >= 0)
        ptemu_write_all(t->fd_eval, t->lbuf, t->lpos);
    t->lbase += t->lpos;
    t->lpos = 0;
    pt_enc_sync_set(t->enc, 0);
}

static void rflush(struct stream *t, uint64_t flags)
{
    chunk_out(t, t->rbuf, t->rlen, flags);
    t->rlen = 0;
}

/* The AUX buffer model: linear mode (perf's read-write mapping), drained continuously by
 * the consumer at drain_rate bytes per 1000 TSC ticks. When a packet does not fit, the
 * hardware stops writing and the kernel ends the record with PERF_AUX_FLAG_TRUNCATED;
 * tracing restarts (with PSB+) once the consumer has emptied the buffer. Returns whether
 * the packet reached the real stream. */
static bool account(struct stream *t, const uint8_t *pk, size_t n, uint64_t loff)
{
    uint64_t now = tsc_now();
    if (now > t->dtsc) {
        /* Packets come every few hundred ticks, often less than a byte's worth of drain:
         * the fraction carries over, or the buffer would drain slower than its rate. */
        unsigned __int128 d = (unsigned __int128)(now - t->dtsc) * g_drain_rate + t->drain_rem;
        unsigned __int128 bytes = d / 1000000000u;
        if (bytes >= t->fill) {
            t->fill = 0;
            t->drain_rem = 0; /* an empty buffer banks no drain */
        } else {
            t->fill -= (uint64_t)bytes;
            t->drain_rem = (uint64_t)(d % 1000000000u);
        }
        t->dtsc = now;
    }
    if (t->lost) {
        if (t->fill == 0)
            t->psb_due = true;
        return false;
    }
    if (t->fill + n > g_aux_size) {
        t->lost = true;
        t->lost_start = loff;
        rflush(t, PERF_AUX_FLAG_TRUNCATED);
        log_marker(t, LOGM_CUT, loff, t->roff);
        return false;
    }
    if (RBUF_SIZE - t->rlen < n)
        rflush(t, 0);
    t->last_real = t->roff + t->rlen;
    memcpy(t->rbuf + t->rlen, pk, n);
    t->rlen += n;
    t->fill += n;
    return true;
}

static void emit(struct stream *t, const struct pt_packet *p)
{
    if (LBUF_SIZE - t->lpos < 128)
        lflush(t);
    int n = pt_enc_next(t->enc, p);
    if (n <= 0) {
        ptemu_warn("tid %d: packet type %d not encoded: %s", (int)t->tid, (int)p->type,
             pt_errstr(pt_errcode(n)));
        return;
    }
    uint8_t *pk = t->lbuf + t->lpos;
    uint64_t loff = t->lbase + t->lpos;
    t->lpos += (size_t)n;
    if (loff + (uint64_t)n - t->psb_off >= g_psb_period)
        t->psb_due = true;
    if (g_loss)
        account(t, pk, (size_t)n, loff);
    else
        t->last_real = loff;
}

static void tnt_flush(struct stream *t)
{
    if (!t->ntnt)
        return;
    struct pt_packet p = {.type = ppt_tnt_8};
    p.payload.tnt.bit_size = (uint8_t)t->ntnt;
    p.payload.tnt.payload = t->tnt;
    t->tnt = 0;
    t->ntnt = 0;
    emit(t, &p);
}

static inline void tnt_bit(struct stream *t, unsigned taken)
{
    t->tnt = (t->tnt << 1) | taken;
    /* Short TNT holds 6 bits; hardware emits it when full (or before any IP packet). */
    if (++t->ntnt == 6)
        tnt_flush(t);
}

/* An IP packet with last-IP compression as hardware does it: the fewest bytes that
 * reconstruct the IP from the previous one, a full (sign-extended) IP after a reset. */
static void ip_packet(struct stream *t, enum pt_packet_type type, uint64_t ip, bool suppress)
{
    tnt_flush(t);
    struct pt_packet p = {.type = type};
    if (suppress) {
        p.payload.ip.ipc = pt_ipc_suppressed;
        p.payload.ip.ip = 0;
    } else {
        uint64_t x = ip ^ t->last_ip;
        bool canon = (uint64_t)((int64_t)(ip << 16) >> 16) == ip;
        if (t->have_ip && !(x >> 16))
            p.payload.ip.ipc = pt_ipc_update_16;
        else if (t->have_ip && !(x >> 32))
            p.payload.ip.ipc = pt_ipc_update_32;
        else if (canon)
            p.payload.ip.ipc = pt_ipc_sext_48;
        else if (t->have_ip && !(x >> 48))
            p.payload.ip.ipc = pt_ipc_update_48;
        else
            p.payload.ip.ipc = pt_ipc_full;
        p.payload.ip.ip = ip;
        t->last_ip = ip;
        t->have_ip = true;
    }
    emit(t, &p);
}

static void tsc_packet(struct stream *t)
{
    struct pt_packet p = {.type = ppt_tsc};
    p.payload.tsc.tsc = tsc_now() & ((1ull << 56) - 1);
    emit(t, &p);
}

static void mode_exec(struct stream *t)
{
    struct pt_packet p = {.type = ppt_mode};
    p.payload.mode.leaf = pt_mol_exec;
    p.payload.mode.bits.exec.csl = 1;
    p.payload.mode.bits.exec.csd = 0;
    emit(t, &p);
}

/* PSB+: PSB, TSC, MODE.Exec, FUP (only while PacketEn), PSBEND. Resets IP compression. A
 * PSB is also where a stream cut by the loss model resumes. */
static void psb(struct stream *t, const struct insn *cur)
{
    tnt_flush(t);
    t->psb_due = false;
    uint64_t loff = t->lbase + t->lpos;
    if (t->lost && t->fill == 0) {
        idx_record(t, t->trunc_off, t->trunc_size, PERF_AUX_FLAG_TRUNCATED, t->trunc_tsc,
                   loff - t->lost_start);
        t->nlost += loff - t->lost_start;
        t->lost = false;
    }
    t->psb_off = loff;
    t->have_ip = false;
    t->last_ip = 0;
    t->last_real = ~0ull;
    struct pt_packet p = {.type = ppt_psb};
    emit(t, &p);
    uint64_t real = t->last_real;
    t->npsb++;
    tsc_packet(t);
    mode_exec(t);
    if (cur)
        ip_packet(t, ppt_fup, cur->ip, false);
    p.type = ppt_psbend;
    emit(t, &p);
    t->psb_due = false;
    log_marker(t, LOGM_PSB, loff, real);
}

/* ---------------------------------------------------------------------------------------
 * Stream life cycle */

static void stream_end(struct stream *t);

static struct stream *stream_new(void)
{
    struct stream *t = calloc(1, sizeof *t);
    if (!t)
        abort();
    t->tid = (pid_t)syscall(SYS_gettid);
    t->lbuf = malloc(LBUF_SIZE);
    if (g_loss)
        t->rbuf = malloc(RBUF_SIZE);
    if (g_testlog)
        t->logbuf = malloc(LOGBUF_SIZE);
    struct pt_config cfg;
    pt_config_init(&cfg);
    cfg.begin = t->lbuf;
    cfg.end = t->lbuf + LBUF_SIZE;
    t->enc = pt_alloc_encoder(&cfg);
    if (!t->lbuf || !t->enc || (g_loss && !t->rbuf) || (g_testlog && !t->logbuf))
        abort();
    /* Linux reuses thread ids (pid_max is often 32768). A new thread with the id of one
     * that ended continues that stream's files: its data starts with ITRACE_START and
     * PSB+ after the earlier thread's EXIT, and the index goes on where it stopped. */
    const struct stream *earlier = NULL;
    pthread_mutex_lock(&g_streams_lock);
    for (struct stream *o = g_streams; o && !earlier; o = o->all_next) {
        if (o->tid == t->tid) {
            stream_end(o); /* normally done already: the thread is gone */
            earlier = o;
        }
    }
    pthread_mutex_unlock(&g_streams_lock);
    bool append = earlier != NULL;
    if (earlier) {
        t->roff = t->roff0 = earlier->roff;
        t->lbase = t->lbase0 = earlier->lbase;
        t->psb_off = t->lbase;
    }
    t->fd_pt = open_out("pt", t->tid, ".pt", append);
    t->fd_idx = open_out("pt", t->tid, ".idx", append);
    t->fd_sb = open_out("sideband", t->tid, ".sb", append);
    t->fd_eval = g_keep_lossless ? open_out("eval", t->tid, ".pt", append) : -1;
    t->fd_log = g_testlog ? open_out("eval", t->tid, ".log", append) : -1;
    if (t->fd_idx >= 0 && !append)
        auxidx_write_header(t->fd_idx);
    t->dtsc = tsc_now();
    t->mode = M_OFF;
    uint32_t body[2] = {(uint32_t)g_pid, (uint32_t)t->tid};
    sb_record(t, PERF_RECORD_ITRACE_START, body, sizeof body, t->dtsc);
    psb(t, NULL);

    pthread_mutex_lock(&g_streams_lock);
    t->all_next = g_streams;
    g_streams = t;
    pthread_mutex_unlock(&g_streams_lock);
    tls_stream = t;
    return t;
}

/* Async disable: the instruction at ip was interrupted (did not execute) or is the first
 * one outside the range after a sequential exit. */
static void async_disable(struct stream *t, uint64_t ip)
{
    ip_packet(t, ppt_fup, ip, false);
    ip_packet(t, ppt_tip_pgd, 0, true);
    t->npgd++;
    t->mode = M_OFF;
}

static void stream_end(struct stream *t)
{
    if (t->done)
        return;
    t->done = true;
    /* The last in-range instruction cannot be confirmed: end the trace before it. */
    if (t->mode == M_EN)
        async_disable(t, t->prev->ip);
    t->mode = M_OFF;
    tnt_flush(t);
    uint64_t loff = t->lbase + t->lpos;
    lflush(t);
    if (g_loss) {
        if (t->lost) {
            idx_record(t, t->trunc_off, t->trunc_size, PERF_AUX_FLAG_TRUNCATED, t->trunc_tsc,
                       loff - t->lost_start);
            t->nlost += loff - t->lost_start;
            t->lost = false;
        }
        if (t->rlen)
            rflush(t, 0);
    }
    log_run_flush(t);
    log_flush(t);
    uint64_t now = tsc_now();
    uint32_t body[4] = {(uint32_t)g_pid, (uint32_t)getppid(), (uint32_t)t->tid,
                        (uint32_t)t->tid};
    uint8_t b[24];
    memcpy(b, body, 16);
    memcpy(b + 16, &now, 8);
    sb_record(t, PERF_RECORD_EXIT, b, sizeof b, now);
    int *fds[] = {&t->fd_pt, &t->fd_idx, &t->fd_sb, &t->fd_eval, &t->fd_log};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
    pt_free_encoder(t->enc);
    t->enc = NULL;
    free(t->lbuf);
    free(t->rbuf);
    free(t->logbuf);
    t->lbuf = t->rbuf = t->logbuf = NULL;
}

/* ---------------------------------------------------------------------------------------
 * Event handling */

static void enable(struct stream *t, const struct insn *in)
{
    if (t->psb_due)
        psb(t, NULL);
    /* Hardware sends TSC and MODE.Exec ahead of TIP.PGE when PacketEn goes to 1. */
    tsc_packet(t);
    mode_exec(t);
    ip_packet(t, ppt_tip_pge, in->ip, false);
    t->npge++;
    t->mode = M_EN;
    t->prev = in;
}

static bool is_handler(uint64_t ip)
{
    int n = atomic_load_explicit(&g_nhandlers, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (g_handlers[i] == ip)
            return true;
    return false;
}

/* The thread comes back into the range at `in` after a signal interrupted it right after
 * p. Decide what p did from where it resumes, and say it the way hardware would have. */
static void decide(struct stream *t, const struct insn *in)
{
    const struct insn *p = t->prev;
    uint64_t r = in->ip;
    t->nsig++;
    if (r == p->ip) {
        /* Resumed at p itself: p faulted (or was interrupted) and is restarted. */
        async_disable(t, p->ip);
        enable(t, in);
        return;
    }
    switch (p->kind) {
    case K_COND:
        if (r == p->succ || r == p->next) {
            tnt_bit(t, r == p->succ);
            log_insn(t, p);
            async_disable(t, r);
            enable(t, in);
            return;
        }
        break;
    case K_JMP:
        if (r == p->succ) {
            log_insn(t, p);
            async_disable(t, r);
            enable(t, in);
            return;
        }
        break;
    case K_CALL:
    case K_NB:
        if (r == p->succ) {
            log_insn(t, p);
            async_disable(t, r);
        } else {
            /* Resumed elsewhere: a fault at p that the handler redirected. */
            async_disable(t, p->ip);
        }
        enable(t, in);
        return;
    case K_IND:
    case K_RET:
        if (is_handler(r)) {
            async_disable(t, p->ip);
        } else {
            log_insn(t, p);
            ip_packet(t, ppt_tip, r, false);
            async_disable(t, r);
        }
        enable(t, in);
        return;
    default:
        break;
    }
    /* Neither outcome of p fits where the thread resumed: say that trace was lost. */
    tnt_flush(t);
    uint64_t loff = t->lbase + t->lpos;
    t->last_real = ~0ull;
    struct pt_packet pk = {.type = ppt_ovf};
    emit(t, &pk);
    uint64_t real = t->last_real;
    t->have_ip = false;
    t->last_ip = 0;
    t->novf++;
    log_marker(t, LOGM_OVF, loff, real);
    ip_packet(t, ppt_fup, r, false);
    t->mode = M_EN;
    t->prev = in;
}

/* The thread is in M_EN with prev p and the next event is not p's plain expected
 * successor. in == NULL: the next block starts at x, outside the range. */
static void transition(struct stream *t, uint64_t x, const struct insn *in)
{
    const struct insn *p = t->prev;
    bool sig = is_handler(x);
    bool ok = false;
    if (!sig) {
        switch (p->kind) {
        case K_NB:
            if (x == p->ip && in) /* rep iteration or restarted instruction */
                return;
            ok = x == p->succ;
            break;
        case K_JMP:
        case K_CALL:
            ok = x == p->succ;
            break;
        case K_COND:
            ok = x == p->succ || x == p->next;
            break;
        default:
            ok = true;
            break;
        }
    } else if (p->kind == K_SYS) {
        ok = true; /* signal delivered on return from a system call */
    }
    if (ok) {
        log_insn(t, p);
        if (in) {
            switch (p->kind) {
            case K_COND:
                tnt_bit(t, x == p->succ);
                break;
            case K_IND:
            case K_RET:
            case K_FAR:
                ip_packet(t, ppt_tip, x, false);
                break;
            case K_SYS:
                ip_packet(t, ppt_tip_pgd, 0, true);
                t->npgd++;
                t->mode = M_OFF;
                enable(t, in);
                return;
            default:
                break;
            }
            t->prev = in;
            if (t->psb_due)
                psb(t, in);
        } else {
            /* Leaving the range. The SDM has hardware suppress the IP of a TIP.PGD after a
             * conditional branch (the direction follows from the filter); libipt 2.0.5
             * binds a suppressed TIP.PGD only to far transfers, so the target goes in:
             * the same information, in the form the decoder understands. */
            if (p->kind == K_NB)
                async_disable(t, x);
            else {
                ip_packet(t, ppt_tip_pgd, x, p->kind == K_SYS);
                t->npgd++;
                t->mode = M_OFF;
            }
        }
        return;
    }
    /* A signal. Faults happen inside blocks and asynchronous signals only between blocks,
     * so a non-branch that is not the last of its block can only have faulted. */
    if (p->kind == K_NB && !(p->flags & F_LAST)) {
        t->nsig++;
        async_disable(t, p->ip);
        if (in)
            enable(t, in);
        return;
    }
    t->mode = M_PEND;
    if (in)
        decide(t, in);
}

static void trigger_reset(void);

static void __attribute__((noinline)) insn_slow(const struct insn *in)
{
    if (atomic_load_explicit(&g_reset_req, memory_order_relaxed))
        trigger_reset();
    if (unlikely(g_closing || g_forked_child))
        return;
    struct stream *t = tls_stream;
    if (!t)
        t = stream_new();
    if (t->done)
        return;
    switch (t->mode) {
    case M_OFF:
        enable(t, in);
        return;
    case M_PEND:
        decide(t, in);
        return;
    default:
        transition(t, in->ip, in);
        return;
    }
}

/* The per-instruction callback: the common cases (sequential flow, direct branches,
 * conditional branches to either successor, indirect branches) stay in this function. */
static void on_insn(unsigned int vcpu, void *ud)
{
    (void)vcpu;
    const struct insn *in = ud;
    struct stream *t = tls_stream;
    if (unlikely(!t || t->mode != M_EN ||
                 atomic_load_explicit(&g_reset_req, memory_order_relaxed))) {
        insn_slow(in);
        return;
    }
    const struct insn *p = t->prev;
    uint64_t ip = in->ip;
    if (likely(ip == p->succ)) {
        if (p->kind == K_COND)
            tnt_bit(t, 1);
        else if (unlikely(p->kind >= K_IND))
            goto slow;
    } else if (p->kind == K_COND && ip == p->next) {
        tnt_bit(t, 0);
    } else {
        goto slow;
    }
    log_insn(t, p);
    t->prev = in;
    if (unlikely(t->psb_due))
        psb(t, in);
    return;
slow:
    transition(t, ip, in);
}

/* First instruction outside the range of a block (usually the block start). */
static void on_out(unsigned int vcpu, void *ud)
{
    (void)vcpu;
    if (unlikely(atomic_load_explicit(&g_reset_req, memory_order_relaxed)))
        trigger_reset();
    struct stream *t = tls_stream;
    if (likely(!t || t->mode != M_EN) || g_closing || g_forked_child)
        return;
    transition(t, (uint64_t)(uintptr_t)ud, NULL);
}

/* ---------------------------------------------------------------------------------------
 * Translation */

static csh g_cs;
static pthread_mutex_t g_trans_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_nphantom, g_nbad;

static bool classify(struct insn *d, const uint8_t *bytes, size_t size, uint64_t ip)
{
    cs_insn *ci = NULL;
    size_t cnt = cs_disasm(g_cs, bytes, size, ip, 1, &ci);
    if (cnt != 1 || ci->size != size) {
        if (cnt)
            cs_free(ci, cnt);
        return false;
    }
    d->ip = ip;
    d->len = (uint8_t)size;
    d->next = ip + size;
    d->succ = d->next;
    d->kind = K_NB;
    const cs_x86 *x = &ci->detail->x86;
    bool imm = x->op_count >= 1 && x->operands[0].type == X86_OP_IMM;
    switch (ci->id) {
    case X86_INS_JMP:
        d->kind = imm ? K_JMP : K_IND;
        break;
    case X86_INS_CALL:
        d->kind = imm ? K_CALL : K_IND;
        break;
    case X86_INS_RET:
        d->kind = K_RET;
        break;
    case X86_INS_SYSCALL:
    case X86_INS_SYSENTER:
    case X86_INS_INT:
    case X86_INS_INT1:
    case X86_INS_INT3:
    case X86_INS_INTO:
        d->kind = K_SYS;
        break;
    case X86_INS_LJMP:
    case X86_INS_LCALL:
    case X86_INS_RETF:
    case X86_INS_RETFQ:
    case X86_INS_IRET:
    case X86_INS_IRETD:
    case X86_INS_IRETQ:
    case X86_INS_SYSRET:
    case X86_INS_SYSEXIT:
        d->kind = K_FAR;
        break;
    default:
        if (cs_insn_group(g_cs, ci, CS_GRP_JUMP) && imm) /* jcc, loop*, jrcxz */
            d->kind = K_COND;
        break;
    }
    if ((d->kind == K_JMP || d->kind == K_CALL || d->kind == K_COND) && imm)
        d->succ = (uint64_t)x->operands[0].imm;
    cs_free(ci, cnt);
    return true;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    uint64_t lo = g_lo, hi = g_hi;
    /* Nothing to trace (filter=none, before the first range arrives): no instrumentation.
     * A pending filter change is then started by the syscall callbacks, which every JVM
     * thread reaches often. */
    if (lo >= hi)
        return;
    bool any = false;
    for (size_t i = 0; i < n && !any; i++) {
        uint64_t ip = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
        any = ip >= lo && ip < hi;
    }
    if (!any) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_out, QEMU_PLUGIN_CB_NO_REGS,
                                             (void *)(uintptr_t)qemu_plugin_tb_vaddr(tb));
        return;
    }
    pthread_mutex_lock(&g_trans_lock);
    struct insn *last = NULL;
    bool prev_in = false;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *qi = qemu_plugin_tb_get_insn(tb, i);
        uint64_t ip = qemu_plugin_insn_vaddr(qi);
        if (!(ip >= lo && ip < hi)) {
            if (i == 0 || prev_in)
                qemu_plugin_register_vcpu_insn_exec_cb(qi, on_out, QEMU_PLUGIN_CB_NO_REGS,
                                                       (void *)(uintptr_t)ip);
            prev_in = false;
            last = NULL;
            continue;
        }
        size_t size = qemu_plugin_insn_size(qi);
        const uint8_t *bytes = qemu_plugin_insn_data(qi);
        struct insn tmp;
        if (size == 0 || size > 15 || !classify(&tmp, bytes, size, ip)) {
            if (i == n - 1) {
                /* A block cut at a page boundary lists a truncated copy of the instruction
                 * that crosses it; the next block executes the real one. */
                g_nphantom++;
                break;
            }
            /* Undecodable: give it no callback; executing it raises SIGILL anyway. */
            g_nbad++;
            prev_in = true;
            continue;
        }
        struct insn *d = insn_alloc();
        *d = tmp;
        if (g_testlog)
            d->cid = code_id(ip, bytes, (uint8_t)size);
        qemu_plugin_register_vcpu_insn_exec_cb(qi, on_insn, QEMU_PLUGIN_CB_NO_REGS, d);
        last = d;
        prev_in = true;
    }
    if (last)
        last->flags |= F_LAST;
    pthread_mutex_unlock(&g_trans_lock);
}

/* ---------------------------------------------------------------------------------------
 * Syscalls, filter changes, exit */

/* Eleven arguments: the signature of QEMU's qemu_plugin_vcpu_syscall_cb_t. */
static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1,
                       uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
                       uint64_t a7, uint64_t a8)
{
    (void)id, (void)vcpu, (void)a1, (void)a3, (void)a4, (void)a5, (void)a6, (void)a7, (void)a8;
    if (atomic_load_explicit(&g_reset_req, memory_order_relaxed))
        trigger_reset();
    if (num == SYS_rt_sigaction && a2) {
        /* struct kernel_sigaction starts with the handler. Read it without trusting the
         * pointer: the guest may pass garbage and expect EFAULT. qemu-user on x86-64 maps
         * guest addresses 1:1 (checked at install). */
        uint64_t h = 0;
        struct iovec l = {&h, sizeof h}, r = {(void *)(uintptr_t)a2, sizeof h};
        if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)sizeof h && h > 1 &&
            !is_handler(h)) {
            pthread_mutex_lock(&g_handler_lock);
            int n = atomic_load(&g_nhandlers);
            if (n < MAX_HANDLERS && !is_handler(h)) {
                g_handlers[n] = h;
                atomic_store_explicit(&g_nhandlers, n + 1, memory_order_release);
            }
            pthread_mutex_unlock(&g_handler_lock);
        }
    } else if (num == SYS_exit) {
        /* Locked: a thread in a system call is not stopped by QEMU's exclusive sections,
         * so a filter change (reset_done) may be walking the streams meanwhile. */
        struct stream *t = tls_stream;
        if (t && !g_closing && !g_forked_child) {
            pthread_mutex_lock(&g_streams_lock);
            stream_end(t);
            pthread_mutex_unlock(&g_streams_lock);
        }
    }
}

static void on_syscall_ret(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, int64_t ret)
{
    (void)id, (void)vcpu, (void)num, (void)ret;
    if (atomic_load_explicit(&g_reset_req, memory_order_relaxed))
        trigger_reset();
}

static void at_exit(qemu_plugin_id_t id, void *ud);
static void reset_done(qemu_plugin_id_t id);

static void register_all(void)
{
    qemu_plugin_register_vcpu_tb_trans_cb(g_id, tb_trans);
    qemu_plugin_register_vcpu_syscall_cb(g_id, on_syscall);
    qemu_plugin_register_vcpu_syscall_ret_cb(g_id, on_syscall_ret);
    qemu_plugin_register_atexit_cb(g_id, at_exit, NULL);
}

/* qemu_plugin_reset must come from a vCPU thread: QEMU flushes every translated block in
 * an exclusive section scheduled on the calling vCPU. */
static void trigger_reset(void)
{
    if (atomic_exchange(&g_reset_inflight, 1))
        return;
    atomic_store(&g_reset_req, 0);
    qemu_plugin_reset(g_id, reset_done);
}

/* Runs with all vCPUs stopped after QEMU flushed all translated blocks and dropped all of
 * our callbacks: the new filter applies to everything translated from now on. */
static void reset_done(qemu_plugin_id_t id)
{
    (void)id;
    filter_apply(&g_lo, &g_hi);
    /* Changing the filter means perf stopping and restarting the event: every thread that
     * was being traced is cut off where it stands (its last instruction unconfirmed, like
     * an interrupt before it) and re-enters with TIP.PGE under the new range. No vCPU runs
     * translated code now, so other threads' streams may be touched. */
    pthread_mutex_lock(&g_streams_lock);
    for (struct stream *t = g_streams; t; t = t->all_next) {
        if (t->done)
            continue;
        if (t->mode == M_EN)
            async_disable(t, t->prev->ip);
        t->mode = M_OFF;
    }
    pthread_mutex_unlock(&g_streams_lock);
    register_all();
    atomic_store(&g_reset_inflight, 0);
    filter_recheck();
}

static void write_summary(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/eval/ptemu.json", g_out);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "{\n  \"psb_period\": %" PRIu64 ",\n  \"aux_size\": %" PRIu64
               ",\n  \"drain_rate\": %.6f,\n  \"phantom_insns\": %" PRIu64
               ",\n  \"undecodable_insns\": %" PRIu64 ",\n  \"code_records\": %u,\n"
               "  \"streams\": [",
            g_psb_period, g_aux_size, (double)g_drain_rate / 1e6, g_nphantom, g_nbad, code_store_count());
    bool first = true;
    for (struct stream *t = g_streams; t; t = t->all_next) {
        fprintf(f,
                "%s\n    {\"tid\": %d, \"insns\": %" PRIu64 ", \"bytes\": %" PRIu64
                ", \"lossless_bytes\": %" PRIu64 ", \"lost_bytes\": %" PRIu64
                ", \"psb\": %" PRIu64 ", \"pge\": %" PRIu64 ", \"pgd\": %" PRIu64
                ", \"signals\": %" PRIu64 ", \"ovf\": %" PRIu64 "}",
                first ? "" : ",", (int)t->tid, t->ninsn, t->roff - t->roff0, t->lbase - t->lbase0,
                t->nlost, t->npsb,
                t->npge, t->npgd, t->nsig, t->novf);
        first = false;
    }
    fprintf(f, "\n  ]\n}\n");
    fclose(f);
}

static void at_exit(qemu_plugin_id_t id, void *ud)
{
    (void)id, (void)ud;
    if (g_forked_child)
        return;
    g_closing = 1;
    pthread_mutex_lock(&g_streams_lock);
    for (struct stream *t = g_streams; t; t = t->all_next)
        stream_end(t);
    pthread_mutex_unlock(&g_streams_lock);
    pthread_mutex_lock(&g_trans_lock);
    code_flush();
    pthread_mutex_unlock(&g_trans_lock);
    write_summary();
}

static void atfork_child(void)
{
    /* The child of a fork shares the parent's files; its trace is not recorded. The forking
     * thread is the child's only thread: dropping its stream sends every callback to the
     * slow path, which checks g_forked_child. */
    g_forked_child = 1;
    tls_stream = NULL;
}

static int mkdir_p(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++) {
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    }
    if (mkdir(p, 0755) && errno != EEXIST)
        return -1;
    return 0;
}

static bool parse_u64(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    if (errno || end == v)
        return false;
    if (*end == 'k' || *end == 'K')
        x <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        x <<= 20, end++;
    if (*end)
        return false;
    *out = x;
    return true;
}

static bool parse_bool(const char *v, bool *out)
{
    if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
        *out = true;
    else if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
        *out = false;
    else
        return false;
    return true;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    g_id = id;
    if (info->version.cur < PTEMU_QEMU_PLUGIN_VERSION ||
        info->version.min > PTEMU_QEMU_PLUGIN_VERSION) {
        ptemu_warn("built for QEMU plugin API %d, this QEMU offers %d..%d: refusing to run",
             PTEMU_QEMU_PLUGIN_VERSION, info->version.min, info->version.cur);
        return -1;
    }
    if (info->system_emulation || !info->target_name ||
        strcmp(info->target_name, "x86_64")) {
        ptemu_warn("needs qemu-x86_64 (user mode), got %s%s",
             info->target_name ? info->target_name : "?",
             info->system_emulation ? " (system emulation)" : "");
        return -1;
    }
    bool have_out = false;
    for (int i = 0; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            ptemu_warn("argument '%s' is not key=value", argv[i]);
            return -1;
        }
        size_t kl = (size_t)(eq - argv[i]);
        const char *v = eq + 1;
        bool ok = true;
        uint64_t u;
#define KEY(k) (kl == strlen(k) && !strncmp(argv[i], k, kl))
        if (KEY("out")) {
            snprintf(g_out, sizeof g_out, "%s", v);
            have_out = true;
        } else if (KEY("filter")) {
            ok = filter_parse(v, &g_lo, &g_hi);
        } else if (KEY("ctl")) {
            ok = parse_u64(v, &u) && u < 1u << 20;
            g_ctl_fd = (int)u;
        } else if (KEY("psb_period")) {
            ok = parse_u64(v, &g_psb_period) && g_psb_period >= 256;
        } else if (KEY("aux_size")) {
            ok = parse_u64(v, &g_aux_size) && (g_aux_size == 0 || g_aux_size >= 4096);
        } else if (KEY("drain_rate")) {
            char *end;
            errno = 0;
            double r = strtod(v, &end);
            ok = !errno && end != v && !*end && r > 0 && r < 1e9;
            g_drain_rate = (uint64_t)(r * 1e6 + 0.5);
        } else if (KEY("keep_lossless")) {
            ok = parse_bool(v, &g_keep_lossless);
        } else if (KEY("testlog")) {
            ok = parse_bool(v, &g_testlog);
        } else {
            ptemu_warn("unknown argument '%s'", argv[i]);
            return -1;
        }
#undef KEY
        if (!ok) {
            ptemu_warn("bad value in '%s'", argv[i]);
            return -1;
        }
    }
    if (!have_out) {
        ptemu_warn("out=TRACEDIR is required");
        return -1;
    }
    g_loss = g_aux_size != 0;
    if (g_loss && !g_drain_rate) {
        ptemu_warn("aux_size needs drain_rate (bytes per 1000 TSC ticks)");
        return -1;
    }
    g_pid = getpid();
    char d[4200];
    const char *subs[] = {"", "/pt", "/sideband", "/eval"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        snprintf(d, sizeof d, "%s%s", g_out, subs[i]);
        if (mkdir_p(d)) {
            ptemu_warn("cannot create %s: %s", d, strerror(errno));
            return -1;
        }
    }
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &g_cs) != CS_ERR_OK) {
        ptemu_warn("capstone: cannot open x86-64");
        return -1;
    }
    cs_option(g_cs, CS_OPT_DETAIL, CS_OPT_ON);
    if (g_testlog) {
        snprintf(d, sizeof d, "%s/eval/code.bin", g_out);
        if (code_store_open(d) < 0) {
            ptemu_warn("cannot create %s: %s", d, strerror(errno));
            return -1;
        }
    }
    filter_init(g_lo, g_hi);
    pthread_atfork(NULL, NULL, atfork_child);
    register_all();
    if (g_ctl_fd >= 0 && filter_ctl_start(g_ctl_fd) < 0)
        return -1;
    return 0;
}
