/* The emulated backend: the command runs under qemu-x86_64 with the TCG
 * plugin libptemu.so, which encodes what the guest executes as Intel PT into
 * DIR/pt/. The plugin starts with a filter from its arguments and takes a new
 * one on its control socket (`filter 0xLO 0xHI\n`, answered by `ok\n`). */
#include "collector/ptrec.h"
#include "collector/percpu.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "common/jerr.h"

#ifndef JPT_LIBDIR
#define JPT_LIBDIR "/usr/local/lib"
#endif

/* The agent waits 5 s for its reply; the plugin must answer well before. */
#define PLUGIN_REPLY_TIMEOUT_MS 3500
/* A test run of qemu with the plugin on /bin/true: generous for slow CI. */
#define PREFLIGHT_TIMEOUT_MS 30000

typedef struct emu {
    char *qemu, *plugin;
    pr_ctl ctl;            /* the command's own: ptrec's end */
    int plugin_end;        /* the plugin's end (inherited by qemu), -1 once closed */
    char *tree_plugin;     /* process tree: the -plugin argument less out= and ctl= */
    pr_perf_info hw;       /* --cpus: info.json describes a per-CPU recording */
} emu;

static bool is_exec_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* qemu's option parser splits at commas and reads ",," as a literal comma. */
static void append_escaped(GString *s, const char *v)
{
    for (; *v; v++) {
        if (*v == ',') g_string_append_c(s, ',');
        g_string_append_c(s, *v);
    }
}

/* The -plugin argument but for out= and ctl=, which name one recording. */
static GString *plugin_opts(const emu *e, const pr_opts *o)
{
    GString *s = g_string_new(NULL);
    append_escaped(s, e->plugin);
    switch (o->filter) {
    case PR_FILTER_CODECACHE: g_string_append(s, ",filter=none"); break;
    case PR_FILTER_ALL: g_string_append(s, ",filter=all"); break;
    case PR_FILTER_RANGE:
        g_string_append_printf(s, ",filter=0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER "x",
                               (guint64)o->range_lo, (guint64)o->range_hi);
        break;
    }
    g_string_append_printf(s, ",psb_period=%" G_GUINT64_FORMAT, (guint64)o->psb_period);
    if (o->aux_size) g_string_append_printf(s, ",aux_size=%" G_GUINT64_FORMAT, (guint64)o->aux_size);
    if (o->drain_rate)
        g_string_append_printf(s, ",drain_rate=%" G_GUINT64_FORMAT, (guint64)o->drain_rate);
    if (o->keep_lossless) g_string_append(s, ",keep_lossless=on");
    if (o->test_log) g_string_append(s, ",testlog=on");
    return s;
}

static char *plugin_arg(const emu *e, const pr_opts *o, const char *out, int ctl_fd)
{
    GString *s = plugin_opts(e, o);
    g_string_append(s, ",out=");
    append_escaped(s, out);
    g_string_append_printf(s, ",ctl=%d", ctl_fd);
    return g_string_free(s, FALSE);
}

static char *find_plugin(const pr_opts *o, char *err, size_t errlen)
{
    if (o->plugin) {
        if (is_file(o->plugin)) return g_canonicalize_filename(o->plugin, NULL);
        snprintf(err, errlen, "the emulation plugin %s does not exist (--plugin)", o->plugin);
        return NULL;
    }
    const char *env = getenv("JPT_PTEMU");
    if (env && *env) {
        if (is_file(env)) return g_canonicalize_filename(env, NULL);
        snprintf(err, errlen, "the emulation plugin %s does not exist (JPT_PTEMU)", env);
        return NULL;
    }
    /* Next to the binary covers the build tree (build/collector/ptrec and
     * build/collector/ptemu/libptemu.so); then the installed copies. */
    char *cands[] = {
        g_build_filename(pr_self_dir(), "ptemu", "libptemu.so", NULL),
        g_build_filename(JPT_LIBDIR, "jpt", "libptemu.so", NULL),
        g_build_filename(JPT_LIBDIR, "libptemu.so", NULL),
    };
    char *found = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(cands); i++) {
        if (!found && is_file(cands[i])) found = g_strdup(cands[i]);
    }
    if (!found)
        snprintf(err, errlen, "cannot find the emulation plugin libptemu.so (looked in %s, %s "
                 "and %s; use --plugin PATH or set JPT_PTEMU)", cands[0], cands[1], cands[2]);
    for (size_t i = 0; i < G_N_ELEMENTS(cands); i++) g_free(cands[i]);
    return found;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* Runs `qemu -plugin ARG /bin/true` so a plugin qemu cannot load (wrong file,
 * wrong API version, an argument it refuses) is reported with qemu's own
 * message before anything else happens, rather than as the command's
 * failure after it. The test run writes into a scratch directory. */
static int preflight(emu *e, const pr_opts *o, char *err, size_t errlen)
{
    const char *probe = "/bin/true";
    if (!is_exec_file(probe)) return 0;   /* nothing to test with: skip */
    char *tmpl = g_build_filename(g_get_tmp_dir(), "ptrec-probe-XXXXXX", NULL);
    char *tmp = g_mkdtemp(tmpl);
    if (!tmp) { g_free(tmpl); return 0; }
    int ctl[2], errp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) {
        rmdir(tmp);
        g_free(tmpl);
        return 0;
    }
    if (pipe2(errp, O_CLOEXEC) != 0) {
        close(ctl[0]);
        close(ctl[1]);
        rmdir(tmp);
        g_free(tmpl);
        return 0;
    }
    char *arg = plugin_arg(e, o, tmp, ctl[1]);
    pid_t pid = fork();
    if (pid == 0) {
        int fl = fcntl(ctl[1], F_GETFD);
        fcntl(ctl[1], F_SETFD, fl & ~FD_CLOEXEC);
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) { dup2(nul, 0); dup2(nul, 1); }
        dup2(errp[1], 2);
        execl(e->qemu, e->qemu, "-plugin", arg, probe, (char *)NULL);
        dprintf(2, "cannot run %s: %s\n", e->qemu, strerror(errno));
        _exit(127);
    }
    close(errp[1]);
    close(ctl[1]);
    g_free(arg);
    int rc = 0;
    if (pid < 0) {
        close(errp[0]); close(ctl[0]);
        nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        g_free(tmpl);
        return 0;
    }
    GString *msg = g_string_new(NULL);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool timed_out = false;
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long spent = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (spent >= PREFLIGHT_TIMEOUT_MS) { timed_out = true; break; }
        struct pollfd pfd = { .fd = errp[0], .events = POLLIN };
        int n = poll(&pfd, 1, (int)(PREFLIGHT_TIMEOUT_MS - spent));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { timed_out = n == 0; break; }
        char buf[512];
        ssize_t r = read(errp[0], buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (msg->len < 4096) g_string_append_len(msg, buf, r);
    }
    if (timed_out) kill(pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    close(errp[0]);
    close(ctl[0]);
    if (timed_out) {
        snprintf(err, errlen, "qemu with the plugin %s did not finish a test run of %s in %d s",
                 e->plugin, probe, PREFLIGHT_TIMEOUT_MS / 1000);
        rc = PR_EXIT_USAGE;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        /* qemu says "qemu-x86_64: Could not load plugin X: reason", and the
         * plugin may have said why before it: join the lines into one. */
        GString *one = g_string_new(NULL);
        char **lines = g_strsplit(msg->str, "\n", -1);
        for (size_t i = 0; lines[i]; i++) {
            char *l = g_strstrip(lines[i]);
            if (!*l) continue;
            if (one->len) g_string_append(one, "; ");
            g_string_append(one, l);
        }
        g_strfreev(lines);
        for (char *c = one->str; *c; c++)
            if ((unsigned char)*c < 0x20) *c = ' ';
        const char *line = one->str;
        if (*line)
            snprintf(err, errlen, "qemu refused the plugin %s: %s", e->plugin, line);
        else if (WIFSIGNALED(st))
            snprintf(err, errlen, "qemu with the plugin %s died of signal %d on a test run",
                     e->plugin, WTERMSIG(st));
        else
            snprintf(err, errlen, "qemu with the plugin %s failed a test run (exit %d)",
                     e->plugin, WEXITSTATUS(st));
        rc = PR_EXIT_USAGE;
        g_string_free(one, TRUE);
    }
    g_string_free(msg, TRUE);
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    g_free(tmpl);
    return rc;
}

static int emu_prepare(pr_backend *b, const pr_opts *o, char ***exec_argv,
                       char *err, size_t errlen)
{
    emu *e = g_new0(emu, 1);
    e->ctl.fd = e->plugin_end = -1;
    b->priv = e;
    if (o->qemu) {
        if (!is_exec_file(o->qemu)) {
            snprintf(err, errlen, "qemu-x86_64 not found at %s (--qemu); install the Debian "
                     "package qemu-user", o->qemu);
            return PR_EXIT_USAGE;
        }
        e->qemu = g_strdup(o->qemu);
    } else if (!(e->qemu = pr_find_in_path("qemu-x86_64"))) {
        snprintf(err, errlen, "qemu-x86_64 not found on PATH; install the Debian package "
                 "qemu-user (or use --qemu PATH)");
        return PR_EXIT_USAGE;
    }
    if (!(e->plugin = find_plugin(o, err, errlen))) return PR_EXIT_USAGE;
    int rc = preflight(e, o, err, errlen);
    if (rc) return rc;
    if (o->cpus) {
        /* What the hardware backend records, as far as it applies: PT
         * configured as the plugin encodes it, and a TSC <-> perf time
         * conversion like the kernel's (percpu.h). */
        pr_perf_info *hw = &e->hw;
        perf_time_conv tc;
        pc_host_time_conv(&tc);
        hw->pt = hw->tsc = hw->noretcomp = hw->branch = true;
        hw->psb_period = o->psb_period;
        hw->time_valid = tc.valid;
        hw->time_zero = tc.time_zero;
        hw->time_mult = tc.time_mult;
        hw->time_shift = tc.time_shift;
        hw->ncpus = o->cpus;
        hw->aux_size = o->aux_size;
        hw->num_address_ranges = 1;
        hw->ip_filter = o->filter == PR_FILTER_ALL ? "none" : "set";
        b->perf = hw;
    }

    GPtrArray *av = g_ptr_array_new();
    if (o->tree) {
        /* The command runs natively; libjptexec.so runs its JVMs under qemu. */
        e->tree_plugin = g_string_free(plugin_opts(e, o), FALSE);
        b->tree_qemu = e->qemu;
        b->tree_plugin = e->tree_plugin;
    } else {
        int ctl[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) {
            snprintf(err, errlen, "socketpair: %s", strerror(errno));
            g_ptr_array_free(av, TRUE);
            return 1;
        }
        e->ctl.fd = ctl[0];
        e->plugin_end = ctl[1];
        g_ptr_array_add(av, g_strdup(e->qemu));
        g_ptr_array_add(av, g_strdup("-plugin"));
        g_ptr_array_add(av, plugin_arg(e, o, o->out_dir, e->plugin_end));
    }
    /* qemu-user does not search PATH: give it the resolved program. */
    g_ptr_array_add(av, g_strdup(o->resolved));
    for (size_t i = 1; o->command[i]; i++) g_ptr_array_add(av, g_strdup(o->command[i]));
    g_ptr_array_add(av, NULL);
    *exec_argv = (char **)g_ptr_array_free(av, FALSE);
    return 0;
}

static size_t emu_child_fds(pr_backend *b, int *fds, size_t max)
{
    emu *e = b->priv;
    if (max < 1 || e->plugin_end < 0) return 0;
    fds[0] = e->plugin_end;
    return 1;
}

static int emu_start(pr_backend *b, pid_t child, char *err, size_t errlen)
{
    (void)child; (void)err; (void)errlen;
    emu *e = b->priv;
    /* Only qemu keeps the plugin's end: EOF on ours then means qemu is gone. */
    if (e->plugin_end >= 0) close(e->plugin_end);
    e->plugin_end = -1;
    return 0;
}

static int emu_on_filter(pr_backend *b, pr_ctl *c, uint64_t lo, uint64_t hi, char *err,
                         size_t errlen)
{
    emu *e = b->priv;
    if (!c) c = &e->ctl;
    if (c->fd < 0) {
        snprintf(err, errlen, "the plugin is not connected");
        return -1;
    }
    char cmd[64];
    int n = snprintf(cmd, sizeof cmd, "filter 0x%" G_GINT64_MODIFIER "x 0x%" G_GINT64_MODIFIER "x\n",
                     (guint64)lo, (guint64)hi);
    if (send(c->fd, cmd, (size_t)n, MSG_NOSIGNAL) != n) {
        snprintf(err, errlen, "cannot send the filter to the plugin: %s", strerror(errno));
        return -1;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        /* Complete lines already buffered? */
        char *nl = memchr(c->linebuf, '\n', c->linelen);
        while (nl) {
            size_t len = (size_t)(nl - c->linebuf);
            char line[sizeof c->linebuf];
            memcpy(line, c->linebuf, len);
            line[len] = '\0';
            memmove(c->linebuf, nl + 1, c->linelen - len - 1);
            c->linelen -= len + 1;
            if (strcmp(line, "ok") == 0) return 0;
            if (strncmp(line, "no", 2) == 0 || strncmp(line, "error", 5) == 0) {
                for (char *q = line; *q; q++)
                    if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e) *q = '?';
                snprintf(err, errlen, "the plugin refused the filter: %s", line);
                return -1;
            }
            /* Anything else is informational: keep waiting for the answer. */
            nl = memchr(c->linebuf, '\n', c->linelen);
        }
        if (c->linelen == sizeof c->linebuf) c->linelen = 0;   /* junk without newline */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long spent = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (spent >= PLUGIN_REPLY_TIMEOUT_MS) {
            snprintf(err, errlen, "the plugin did not acknowledge the filter within %d ms",
                     PLUGIN_REPLY_TIMEOUT_MS);
            return -1;
        }
        struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
        int r = poll(&pfd, 1, (int)(PLUGIN_REPLY_TIMEOUT_MS - spent));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;   /* the deadline check above ends the wait */
        ssize_t got = recv(c->fd, c->linebuf + c->linelen,
                           sizeof c->linebuf - c->linelen, MSG_DONTWAIT);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) {
            snprintf(err, errlen, "the plugin closed its control socket");
            return -1;
        }
        c->linelen += (size_t)got;
    }
}

/* The per-CPU conversion of a long recording takes a while: say how far. */
static void percpu_progress(uint64_t done, uint64_t total, void *ctx)
{
    (void)ctx;
    fprintf(stderr, "\rptrec: writing per-CPU streams: %3u%%",
            total ? (unsigned)(100.0 * (double)done / (double)total) : 100u);
    if (done >= total) fputc('\n', stderr);
}

/* Per-CPU conversion (--cpus) and the streams of one trace directory; own:
 * the trace directory itself, whose info.json follows e->hw. */
static void finish_dir(pr_backend *b, const char *dir, bool own, pr_summary *sum)
{
    emu *e = b->priv;
    if (b->opts->cpus) {
        pc_params p = {
            .ncpus = b->opts->cpus,
            .keep_threads = b->opts->keep_lossless,
            .time = { .valid = e->hw.time_valid, .time_zero = e->hw.time_zero,
                      .time_mult = e->hw.time_mult, .time_shift = e->hw.time_shift },
            .progress = !b->opts->quiet && isatty(STDERR_FILENO) ? percpu_progress : NULL,
        };
        pc_result r;
        char err[1024];
        if (pc_convert(dir, &p, &r, err, sizeof err) != 0) {
            jerr_error("per-CPU conversion of %s failed, the trace stays per thread: %s", dir,
                       err);
            /* The final info.json must describe what stays: per-thread
             * streams whose sideband times are TSC values. pr_session.perf
             * points at e->hw (copied after prepare), so clearing b->perf
             * alone would not reach it: rewrite hw too. A later JVM's
             * directory shares e->hw: the failure is only reported. */
            if (own) {
                e->hw.ncpus = 0;
                e->hw.time_valid = false;
                e->hw.time_zero = 0;
                e->hw.time_mult = 1;
                e->hw.time_shift = 0;
                b->perf = NULL;
            }
        } else if (r.delayed)
            jerr_warn("%u CPUs: %" PRIu64 " of %" PRIu64 " stretches waited for a CPU (up to %"
                      PRIu64 " TSC ticks); their thread's time is shifted by the wait",
                      b->opts->cpus, r.delayed, r.stretches, r.max_delay);
    }
    pr_scan_streams(dir, sum);
}

static int emu_finish(pr_backend *b, pr_summary *sum)
{
    finish_dir(b, b->opts->out_dir, true, sum);
    return 0;
}

static void emu_finish_dir(pr_backend *b, const char *dir, pr_summary *sum)
{
    finish_dir(b, dir, false, sum);
}

static void emu_destroy(pr_backend *b)
{
    emu *e = b->priv;
    if (!e) return;
    if (e->ctl.fd >= 0) close(e->ctl.fd);
    if (e->plugin_end >= 0) close(e->plugin_end);
    g_free(e->tree_plugin);
    g_free(e->qemu);
    g_free(e->plugin);
    g_free(e);
    b->priv = NULL;
}

const pr_backend_ops pr_emulated_ops = {
    .name = "emulated",
    .prepare = emu_prepare,
    .child_fds = emu_child_fds,
    .start = emu_start,
    .on_filter = emu_on_filter,
    .finish = emu_finish,
    .finish_dir = emu_finish_dir,
    .destroy = emu_destroy,
};
