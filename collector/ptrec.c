/* ptrec: records Intel PT of a command (normally a java command) into a trace
 * directory (docs/FORMAT.md).
 *
 * The front end runs the command through a backend (ptrec.h), adds the JVM
 * agent when the command is a java launcher, answers the agent's handshake so
 * tracing can be narrowed to the code cache before Java code runs, forwards
 * signals, and writes info.json when the command has exited. */
#include "collector/ptrec.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>

#include "collector/exec_rewrite.h"
#include "common/jerr.h"

#ifndef JPT_LIBDIR
#define JPT_LIBDIR "/usr/local/lib"
#endif

/* A peer that keeps sending garbage is not an agent: stop listening to it. */
#define MAX_BAD_HANDSHAKES 8

static void usage(FILE *f)
{
    fprintf(f,
"usage: ptrec [OPTIONS] -- COMMAND [ARGS...]\n"
"\n"
"Runs COMMAND and records Intel Processor Trace of it into a trace directory\n"
"(pt/, sideband/, jvm/, info.json) that ptdecode reads.\n"
"\n"
"ptrec follows COMMAND's processes: each java launcher among them (COMMAND\n"
"itself, or one a script or a JVM execs) runs with the jpt agent (libjpt.so)\n"
"added to its command line with -XX:+DebugNonSafepoints for exact JIT maps,\n"
"under emulation in qemu-x86_64 with the plugin; everything else runs\n"
"natively. The agent reports the JVM's code cache and ptrec limits tracing to\n"
"it (--filter). The first JVM is traced into DIR, the n-th into DIR/java-<n>/,\n"
"a trace directory of its own. The execs of statically linked programs are not\n"
"followed. A command that loads the agent itself (-agentpath:...libjpt.so on\n"
"its command line or in JAVA_TOOL_OPTIONS) is run as it is, and so is any\n"
"command with --filter all or a range: under emulation the command itself is\n"
"traced, and what it execs runs natively.\n"
"\n"
"Options:\n"
"  -o, --output DIR     trace directory (default ./" PR_DEFAULT_OUT "), in a directory\n"
"                       that exists; an existing non-empty one is only replaced\n"
"                       with --force\n"
"  -f, --force          replace DIR if it exists, only if it is a trace: nothing in\n"
"                       it but info.json, pt/, sideband/, jvm/ and eval/\n"
"      --emulate        record under emulation: run COMMAND in qemu-x86_64 with\n"
"                       the libptemu.so plugin (works on any x86-64 machine)\n"
"      --sideband-only  hardware backend without PT: record only the perf\n"
"                       sideband (context switches, comm, mmap) per CPU with a\n"
"                       software event; works on any Linux (for tests)\n"
"      --filter MODE    what to trace:\n"
"                         codecache  only the JVM's code cache (interpreter and\n"
"                                    JIT code), from the agent's handshake on\n"
"                                    (default)\n"
"                         all        all user-space code from the first\n"
"                                    instruction (JVM, libraries, Java)\n"
"                         0xLO-0xHI  one fixed address range\n"
"      --psb-period N   bytes of PT between PSB packets (default %u)\n"
"      --aux-size SIZE  trace buffer size, e.g. 512K, 4M: per CPU on hardware (a\n"
"                       power of two, default 4M); with --drain-rate it makes\n"
"                       the emulated buffer overflow like hardware does\n"
"      --drain-rate N   bytes the emulated buffer drains per 1000 TSC ticks\n"
"                       (default: drained instantly, nothing is lost)\n"
"      --keep-lossless  also keep the unabridged stream in DIR/eval/ (emulated;\n"
"                       for measuring what the loss model removed)\n"
"      --test-log       ask the plugin for its event log in DIR/eval/ (for tests)\n"
"      --cpus N         with --emulate: write the trace as the hardware backend\n"
"                       would for N CPUs (pt/cpu-K.pt, context switches in\n"
"                       sideband/cpu-K.sb), threads scheduled onto N virtual\n"
"                       CPUs; with --keep-lossless the per-thread streams stay\n"
"                       in DIR/eval/per-thread/. Example:\n"
"                         ptrec --emulate --cpus 2 -o t.trace -- java Threads\n"
"      --qemu PATH      qemu-x86_64 to use (default: the one on PATH)\n"
"      --plugin PATH    libptemu.so to use (default: $JPT_PTEMU, else next to\n"
"                       ptrec, else the installed one)\n"
"      --agent PATH     libjpt.so to load into java (default: $JPT_AGENT, else\n"
"                       next to ptrec, else the installed one)\n"
"  -q, --quiet          no summary line (warnings and errors still print)\n"
"  -h, --help           this help\n"
"  -V, --version        print the version\n"
"\n"
"Examples:\n"
"  # record a Java program under emulation, then look at it\n"
"  ptrec --emulate -o hello.trace -- java -cp samples/classes Hello\n"
"  ptdecode info hello.trace\n"
"\n"
"  # a script that starts java: its JVMs are traced, the rest runs natively\n"
"  ptrec --emulate -o x.trace -- bash -c 'java -cp samples/classes Hello'\n"
"\n"
"  # lose trace like a 256 KiB buffer drained at 4 bytes per 1000 TSC ticks\n"
"  ptrec --emulate --aux-size 256K --drain-rate 4 -o lossy.trace -- java Jit\n"
"\n"
"  # any program, every instruction in user space\n"
"  ptrec --emulate --filter all -o ls.trace -- ls /\n"
"\n"
"Environment: JPT_SYSFS_ROOT replaces / when the hardware backend reads\n"
"/sys/bus/event_source/devices/intel_pt and /sys/devices/system/cpu/online\n"
"(for testing with a copy of another machine's sysfs).\n"
"\n"
"ptrec prints one summary line when COMMAND exits and exits with COMMAND's\n"
"status (128+N if a signal N killed it). SIGINT and SIGTERM sent to ptrec are\n"
"passed on to COMMAND. ptrec's own failures exit with 2 (usage, setup), 126\n"
"(COMMAND not executable) or 127 (COMMAND not found).\n",
            PR_DEFAULT_PSB_PERIOD);
}

/* ---- small utilities ------------------------------------------------------ */

const char *pr_self_dir(void)
{
    static char *dir;
    if (!dir) {
        char *exe = g_file_read_link("/proc/self/exe", NULL);
        dir = exe ? g_path_get_dirname(exe) : g_strdup(".");
        g_free(exe);
    }
    return dir;
}

static bool is_exec_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

char *pr_find_in_path(const char *name)
{
    if (strchr(name, '/')) return is_exec_file(name) ? g_strdup(name) : NULL;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    char **dirs = g_strsplit(path, ":", -1);
    char *found = NULL;
    for (size_t i = 0; dirs[i] && !found; i++) {
        char *cand = g_build_filename(*dirs[i] ? dirs[i] : ".", name, NULL);
        if (is_exec_file(cand)) found = cand;
        else g_free(cand);
    }
    g_strfreev(dirs);
    return found;
}

static bool dir_is_empty(const char *path)
{
    GDir *d = g_dir_open(path, 0, NULL);
    if (!d) return false;
    bool empty = g_dir_read_name(d) == NULL;
    g_dir_close(d);
    return empty;
}

/* --force must not wipe a directory that was never a trace (a typo such as
 * "-o ~" or "-o ''" would otherwise be fatal): a trace holds nothing but what
 * ptrec and ptdecode write there (and the java-<n> traces of later JVMs), and
 * some of it. *stranger names the first
 * other entry (to be freed), if any. */
static bool looks_like_trace(const char *path, char **stranger)
{
    static const char *const names[] = { "info.json", "info.json.tmp", "pt", "sideband", "jvm",
                                         "eval" };
    *stranger = NULL;
    GDir *d = g_dir_open(path, 0, NULL);
    if (!d) return false;
    bool marked = false;
    const char *e;
    while ((e = g_dir_read_name(d)) && !*stranger) {
        bool known = false;
        for (size_t i = 0; i < G_N_ELEMENTS(names) && !known; i++)
            known = !strcmp(e, names[i]);
        /* a process tree's later JVMs (java-<n>) */
        if (!known && !strncmp(e, "java-", 5) && e[5] && strspn(e + 5, "0123456789") ==
            strlen(e + 5))
            known = true;
        if (known)
            marked = true;
        else
            *stranger = g_strdup(e);
    }
    g_dir_close(d);
    return marked && !*stranger;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag;
    if (ftw->level == 0) return 0;   /* keep the directory itself */
    if (remove(path) != 0 && errno != ENOENT) {
        jerr_error("cannot remove %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static bool has_bad_chars(const char *s)
{
    for (; *s; s++)
        if (*s == ',' || *s == '"' || *s == '\'' || (unsigned char)*s < 0x20) return true;
    return false;
}

/* Printable excerpt of untrusted bytes for a warning. */
static void sanitize(const char *in, size_t n, char *out, size_t outlen)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < outlen; i++)
        out[k++] = (in[i] >= 0x20 && in[i] < 0x7f) ? in[i] : '?';
    if (n > 0 && k + 4 >= outlen) { out[k++] = '.'; out[k++] = '.'; out[k++] = '.'; }
    out[k] = '\0';
}

static char *find_agent(const char *given, char *err, size_t errlen)
{
    if (given) {
        if (access(given, R_OK) == 0) return g_canonicalize_filename(given, NULL);
        snprintf(err, errlen, "the agent %s does not exist (--agent)", given);
        return NULL;
    }
    const char *env = getenv("JPT_AGENT");
    if (env && *env) {
        if (access(env, R_OK) == 0) return g_canonicalize_filename(env, NULL);
        snprintf(err, errlen, "the agent %s does not exist (JPT_AGENT)", env);
        return NULL;
    }
    /* Build tree: build/collector/ptrec and build/jvm-agent/libjpt.so. */
    char *cands[] = {
        g_build_filename(pr_self_dir(), "..", "jvm-agent", "libjpt.so", NULL),
        g_build_filename(JPT_LIBDIR, "libjpt.so", NULL),
        g_build_filename(JPT_LIBDIR, "jpt", "libjpt.so", NULL),
    };
    char *found = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(cands); i++)
        if (!found && access(cands[i], R_OK) == 0) found = g_canonicalize_filename(cands[i], NULL);
    if (!found)
        snprintf(err, errlen, "cannot find the JVM agent libjpt.so (looked in %s, %s and %s; "
                 "use --agent PATH or set JPT_AGENT)", cands[0], cands[1], cands[2]);
    for (size_t i = 0; i < G_N_ELEMENTS(cands); i++) g_free(cands[i]);
    return found;
}

/* ---- options ---------------------------------------------------------------- */

enum {
    OPT_EMULATE = 256, OPT_QEMU, OPT_PLUGIN, OPT_AGENT, OPT_FILTER, OPT_PSB, OPT_AUX,
    OPT_DRAIN, OPT_LOSSLESS, OPT_TESTLOG, OPT_SIDEBAND_ONLY, OPT_CPUS,
};

static const struct option long_opts[] = {
    { "output", required_argument, NULL, 'o' },
    { "force", no_argument, NULL, 'f' },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { "emulate", no_argument, NULL, OPT_EMULATE },
    { "qemu", required_argument, NULL, OPT_QEMU },
    { "plugin", required_argument, NULL, OPT_PLUGIN },
    { "agent", required_argument, NULL, OPT_AGENT },
    { "filter", required_argument, NULL, OPT_FILTER },
    { "psb-period", required_argument, NULL, OPT_PSB },
    { "aux-size", required_argument, NULL, OPT_AUX },
    { "drain-rate", required_argument, NULL, OPT_DRAIN },
    { "keep-lossless", no_argument, NULL, OPT_LOSSLESS },
    { "test-log", no_argument, NULL, OPT_TESTLOG },
    { "sideband-only", no_argument, NULL, OPT_SIDEBAND_ONLY },
    { "cpus", required_argument, NULL, OPT_CPUS },
    { NULL, 0, NULL, 0 },
};

static void parse_options(int argc, char **argv, pr_opts *o)
{
    o->out_dir = PR_DEFAULT_OUT;
    o->psb_period = PR_DEFAULT_PSB_PERIOD;
    o->filter = PR_FILTER_CODECACHE;
    opterr = 0;
    int c;
    /* '+': the first non-option starts COMMAND, whose options are its own. */
    while ((c = getopt_long(argc, argv, "+:o:fqhV", long_opts, NULL)) != -1) {
        switch (c) {
        case 'o': o->out_dir = optarg; break;
        case 'f': o->force = true; break;
        case 'q': o->quiet = true; break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("ptrec %s\n", JPT_VERSION); exit(0);
        case OPT_EMULATE: o->emulate = true; break;
        case OPT_QEMU: o->qemu = optarg; break;
        case OPT_PLUGIN: o->plugin = optarg; break;
        case OPT_AGENT: o->agent = optarg; break;
        case OPT_FILTER:
            if (strcmp(optarg, "codecache") == 0) o->filter = PR_FILTER_CODECACHE;
            else if (strcmp(optarg, "all") == 0) o->filter = PR_FILTER_ALL;
            else if (pr_parse_range(optarg, &o->range_lo, &o->range_hi)) o->filter = PR_FILTER_RANGE;
            else jerr_die(PR_EXIT_USAGE, "bad --filter '%s' (expected codecache, all or 0xLO-0xHI "
                          "with LO < HI)", optarg);
            break;
        case OPT_PSB:
            if (!pr_parse_size(optarg, &o->psb_period) || o->psb_period < 256 ||
                o->psb_period > (1u << 30))
                jerr_die(PR_EXIT_USAGE, "bad --psb-period '%s' (expected bytes between 256 and "
                         "1G, e.g. 4096 or 4K)", optarg);
            break;
        case OPT_AUX:
            if (!pr_parse_size(optarg, &o->aux_size) || o->aux_size < 4096 ||
                o->aux_size > (1ull << 40))
                jerr_die(PR_EXIT_USAGE, "bad --aux-size '%s' (expected a size of at least 4K, "
                         "e.g. 512K, 4M, 1G)", optarg);
            break;
        case OPT_DRAIN:
            if (!pr_parse_u64(optarg, &o->drain_rate) || o->drain_rate == 0)
                jerr_die(PR_EXIT_USAGE, "bad --drain-rate '%s' (expected a positive number of "
                         "bytes per 1000 TSC ticks)", optarg);
            break;
        case OPT_LOSSLESS: o->keep_lossless = true; break;
        case OPT_TESTLOG: o->test_log = true; break;
        case OPT_SIDEBAND_ONLY: o->sideband_only = true; break;
        case OPT_CPUS: {
            uint64_t n;
            if (!pr_parse_u64(optarg, &n) || n < 1 || n > 256)
                jerr_die(PR_EXIT_USAGE, "bad --cpus '%s' (expected a number of CPUs from 1 to "
                         "256)", optarg);
            o->cpus = (unsigned)n;
            break;
        }
        case ':':
            jerr_die(PR_EXIT_USAGE, "option '%s' needs a value (see ptrec --help)",
                     argv[optind - 1]);
        default:
            if (optopt && optopt < 256)
                jerr_die(PR_EXIT_USAGE, "unknown option '-%c' (see ptrec --help)", optopt);
            jerr_die(PR_EXIT_USAGE, "unknown option '%s' (see ptrec --help)", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        jerr_die(PR_EXIT_USAGE, "no command given (usage: ptrec [OPTIONS] -- COMMAND...)");
    o->command = argv + optind;
    if (o->drain_rate && !o->aux_size)
        jerr_die(PR_EXIT_USAGE, "--drain-rate needs --aux-size (the buffer that overflows)");
    /* The emulated buffer only overflows if it drains slower than it fills. */
    if (o->emulate && o->aux_size && !o->drain_rate)
        jerr_die(PR_EXIT_USAGE, "--aux-size needs --drain-rate under --emulate (how fast the "
                 "buffer drains, in bytes per 1000 TSC ticks)");
    if (!o->emulate && (o->keep_lossless || o->test_log || o->drain_rate))
        jerr_die(PR_EXIT_USAGE, "--keep-lossless, --test-log and --drain-rate need --emulate");
    if (o->cpus && !o->emulate)
        jerr_die(PR_EXIT_USAGE, "--cpus needs --emulate (the hardware backend traces every "
                 "online CPU)");
    if (o->emulate && o->sideband_only)
        jerr_die(PR_EXIT_USAGE, "--sideband-only is for the hardware backend, not --emulate");
}

/* ---- the handshake ------------------------------------------------------- */

typedef struct hs_state {
    int fd;                     /* -1 once closed */
    char buf[PR_HANDSHAKE_MAX_LINE + 1];
    size_t len;
    bool skipping;              /* discarding an overlong line up to its '\n' */
    int bad;
    pr_session *s;              /* the session the JVM's handshake fills in */
    pr_ctl *ctl;                /* its plugin's control connection; NULL: the command's */
    const char *decline;        /* not NULL: no filter for this JVM, and why */
} hs_state;

static void hs_reply(hs_state *h, const char *msg)
{
    /* Never block on a peer that does not read. */
    if (send(h->fd, msg, strlen(msg), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        jerr_warn("cannot answer the agent's handshake: %s", strerror(errno));
}

static void hs_close(hs_state *h)
{
    if (h->fd >= 0) close(h->fd);
    h->fd = -1;
}

static void hs_bad(hs_state *h, const char *why, const char *line, size_t n)
{
    char ex[100];
    sanitize(line, n, ex, sizeof ex);
    jerr_warn("bad handshake from the traced process (%s): '%s'", why, ex);
    hs_reply(h, "no bad-handshake\n");
    if (++h->bad >= MAX_BAD_HANDSHAKES) {
        jerr_warn("ignoring the handshake socket after %d bad lines", h->bad);
        hs_close(h);
    }
}

static void hs_line(hs_state *h, pr_backend *b, const char *line, size_t n)
{
    pr_session *s = h->s;
    pr_handshake hs;
    const char *why;
    if (!pr_parse_handshake(line, n, &hs, &why)) {
        hs_bad(h, why, line, n);
        return;
    }
    if (s->jvm_pid > 0) {
        jerr_warn("a second JVM (pid %ld) asked to be traced; only the first one (pid %ld) is",
                  hs.pid, s->jvm_pid);
        hs_reply(h, "no only-one-jvm\n");
        return;
    }
    s->jvm_pid = hs.pid;
    s->cc_lo = hs.low;
    s->cc_hi = hs.high;
    if (h->decline) {
        char reply[80];
        snprintf(reply, sizeof reply, "no %s\n", h->decline);
        s->handshake = "failed";
        hs_reply(h, reply);
        return;
    }
    if (s->opts->filter != PR_FILTER_CODECACHE) {
        /* The filter was fixed at start; tracing is on. */
        s->handshake = "ok";
        hs_reply(h, "ok\n");
        return;
    }
    char err[256];
    if (b->ops->on_filter(b, h->ctl, hs.low, hs.high, err, sizeof err) != 0) {
        jerr_warn("cannot trace the code cache: %s", err);
        s->handshake = "failed";
        hs_reply(h, "no filter-failed\n");
        return;
    }
    s->handshake = "ok";
    s->range_set = true;
    s->range_lo = hs.low;
    s->range_hi = hs.high;
    hs_reply(h, "ok\n");
}

static void hs_read(hs_state *h, pr_backend *b)
{
    ssize_t got = recv(h->fd, h->buf + h->len, sizeof h->buf - h->len, MSG_DONTWAIT);
    if (got < 0) {
        if (errno != EAGAIN && errno != EINTR) hs_close(h);
        return;
    }
    if (got == 0) {   /* every copy of the other end is closed */
        if (h->len && !h->skipping) hs_bad(h, "no newline before the end", h->buf, h->len);
        hs_close(h);
        return;
    }
    h->len += (size_t)got;
    for (;;) {
        char *nl = memchr(h->buf, '\n', h->len);
        if (!nl) {
            if (h->len == sizeof h->buf) {
                if (!h->skipping) hs_bad(h, "line too long", h->buf, h->len);
                h->skipping = true;
                h->len = 0;
            }
            return;
        }
        size_t n = (size_t)(nl - h->buf);
        if (!h->skipping) hs_line(h, b, h->buf, n);
        h->skipping = false;
        if (h->fd < 0) return;
        memmove(h->buf, nl + 1, h->len - n - 1);
        h->len -= n + 1;
    }
}

/* ---- the process tree ------------------------------------------------------ */

/* A command that is not a java launcher runs natively with libjptexec.so
 * preloaded; each java launcher exec'd in its tree asks ptrec, on a socket in
 * a private directory, where to write (exec_rewrite.h). The first JVM is
 * traced into the trace directory itself, so a script that runs one JVM
 * gives the same trace as the JVM run directly; the n-th (n >= 2) into
 * DIR/java-<n>/, a trace directory of its own. */

typedef struct tree_jvm {
    unsigned long index;
    char *dir, *rel;            /* rel: "java-<index>" (index >= 2) */
    pr_session own;             /* index >= 2: its info.json */
    hs_state hs;                /* the agent's handshake */
    pr_ctl ctl;                 /* the plugin's control connection (emulated) */
    bool ended;
} tree_jvm;

typedef struct tree {
    int listen_fd;
    char *sockdir, *sock;
    GPtrArray *jvms;            /* tree_jvm* in exec order */
    bool waiting_said;
} tree;

static char *find_exec_lib(char *err, size_t errlen)
{
    char *cands[] = {
        g_build_filename(pr_self_dir(), "libjptexec.so", NULL),
        g_build_filename(JPT_LIBDIR, "jpt", "libjptexec.so", NULL),
    };
    char *found = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(cands); i++)
        if (!found && access(cands[i], R_OK) == 0) found = g_canonicalize_filename(cands[i], NULL);
    if (!found)
        snprintf(err, errlen, "cannot find libjptexec.so, which follows the command's processes "
                 "to its java launchers (looked in %s and %s)", cands[0], cands[1]);
    for (size_t i = 0; i < G_N_ELEMENTS(cands); i++) g_free(cands[i]);
    return found;
}

static void tree_listen(tree *t)
{
    t->jvms = g_ptr_array_new();
    GError *ge = NULL;
    /* A directory only this user can enter: only the command's processes
     * (or the user's own) can connect. */
    t->sockdir = g_dir_make_tmp("ptrec-XXXXXX", &ge);
    if (!t->sockdir) jerr_die(1, "cannot create a private directory for ptrec's socket: %s",
                             ge->message);
    t->sock = g_build_filename(t->sockdir, "exec.sock", NULL);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(t->sock) >= sizeof sa.sun_path)
        jerr_die(1, "%s: path too long for a socket (set TMPDIR to a shorter directory)",
                 t->sock);
    strcpy(sa.sun_path, t->sock);
    t->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (t->listen_fd < 0 || bind(t->listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(t->listen_fd, 64) != 0)
        jerr_die(1, "cannot listen on %s: %s", t->sock, strerror(errno));
}

static void tree_unlisten(tree *t)
{
    if (t->listen_fd >= 0) close(t->listen_fd);
    t->listen_fd = -1;
    if (t->sock) unlink(t->sock);
    if (t->sockdir) rmdir(t->sockdir);
}

/* A request line: the library writes it right after connecting. */
static bool read_request(int fd, char *line, size_t cap, size_t *len)
{
    size_t n = 0;
    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r = poll(&p, 1, 2000);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        char c;
        ssize_t k = recv(fd, &c, 1, 0);   /* byte by byte: what follows is the agent's */
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        if (c == '\n') { *len = n; return true; }
        if (n + 1 >= cap) return false;
        line[n++] = c;
    }
}

static bool make_trace_dirs(const char *dir)
{
    static const char *const subdirs[] = { "pt", "sideband", "jvm" };
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return false;
    for (size_t i = 0; i < G_N_ELEMENTS(subdirs); i++) {
        char *p = g_build_filename(dir, subdirs[i], NULL);
        bool ok = mkdir(p, 0777) == 0 || errno == EEXIST;
        g_free(p);
        if (!ok) return false;
    }
    return true;
}

/* A new JVM of the tree, with its trace directory made; NULL on failure. */
static tree_jvm *tree_add_jvm(tree *t, pr_session *s, pr_backend *b)
{
    tree_jvm *j = g_new0(tree_jvm, 1);
    j->index = t->jvms->len + 1;
    j->ctl.fd = j->hs.fd = -1;
    if (j->index == 1) {
        j->dir = g_strdup(s->opts->out_dir);
        j->hs.s = s;
    } else {
        j->rel = g_strdup_printf("java-%lu", j->index);
        j->dir = g_build_filename(s->opts->out_dir, j->rel, NULL);
        j->own = *s;
        j->own.dir = j->dir;
        j->own.jvm_index = j->index;
        j->own.handshake = "none";
        j->own.jvm_pid = 0;
        j->own.range_set = false;
        j->own.no_exit_status = true;
        j->own.pid = 0;
        memset(&j->own.sum, 0, sizeof j->own.sum);
        clock_gettime(CLOCK_REALTIME, &j->own.start);
        pr_clock_now(&j->own.clock_start);
        j->hs.s = &j->own;
        char err[1024];
        if (!make_trace_dirs(j->dir) || pr_write_info(&j->own, err, sizeof err) != 0) {
            jerr_warn("cannot create %s (%s): JVM %lu runs untraced", j->dir, strerror(errno),
                      j->index);
            g_free(j->dir);
            g_free(j->rel);
            g_free(j);
            return NULL;
        }
        /* One PT filter serves every process on hardware: the first JVM's. */
        if (!s->opts->emulate && s->opts->filter == PR_FILTER_CODECACHE && !s->opts->sideband_only)
            j->hs.decline = "filter-taken-by-the-first-jvm";
    }
    j->hs.ctl = b->ops == &pr_emulated_ops ? &j->ctl : NULL;
    g_ptr_array_add(t->jvms, j);
    return j;
}

/* An exec request: the connection becomes the JVM's handshake. */
static void tree_new_jvm(tree *t, int fd, pr_session *s, pr_backend *b)
{
    tree_jvm *j = tree_add_jvm(t, s, b);
    if (!j) {
        send(fd, "no cannot-create-directory\n", 27, MSG_DONTWAIT | MSG_NOSIGNAL);
        close(fd);
        return;
    }
    j->hs.fd = fd;
    char *reply = g_strdup_printf("ok %lu %s\n", j->index, j->dir);
    if (send(fd, reply, strlen(reply), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        jerr_warn("cannot answer the exec of JVM %lu: %s", j->index, strerror(errno));
    g_free(reply);
}

static void tree_accept(tree *t, pr_session *s, pr_backend *b)
{
    int fd = accept4(t->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return;
    char line[64], ex[100];
    size_t len = 0;
    pr_exec_req req;
    unsigned long n;
    if (!read_request(fd, line, sizeof line, &len) ||
        !pr_parse_exec_request(line, len, &req, &n)) {
        sanitize(line, len, ex, sizeof ex);
        jerr_warn("bad request on %s from the traced processes: '%s'", t->sock, ex);
        close(fd);
        return;
    }
    if (req == PR_EXEC_REQ_EXEC) {
        tree_new_jvm(t, fd, s, b);
        return;
    }
    tree_jvm *j = n <= t->jvms->len ? g_ptr_array_index(t->jvms, n - 1) : NULL;
    if (!j || j->ctl.fd >= 0 || j->ended || b->ops != &pr_emulated_ops) {
        jerr_warn("a plugin connection for JVM %lu, which has none to make: ignored", n);
        close(fd);
        return;
    }
    j->ctl.fd = fd;
}

/* The JVM's plugin closed its connection: qemu has exited. */
static void tree_jvm_end(tree_jvm *j, pr_backend *b)
{
    if (j->ctl.fd >= 0) close(j->ctl.fd);
    j->ctl.fd = -1;
    if (j->ended || j->index == 1) {
        j->ended = true;
        return;
    }
    j->ended = true;
    j->own.finished = true;
    j->own.pid = (pid_t)j->own.jvm_pid;
    clock_gettime(CLOCK_REALTIME, &j->own.end);
    pr_clock_end(&j->own.clock_start, &j->own.clock_end);
    b->ops->finish_dir(b, j->dir, &j->own.sum);
    char err[1024];
    if (pr_write_info(&j->own, err, sizeof err) != 0) jerr_error("%s", err);
}

static void tree_ctl_read(tree_jvm *j, pr_backend *b)
{
    pr_ctl *c = &j->ctl;
    if (c->linelen == sizeof c->linebuf) c->linelen = 0;   /* nothing is waiting for it */
    ssize_t got = recv(c->fd, c->linebuf + c->linelen, sizeof c->linebuf - c->linelen,
                       MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (got <= 0) tree_jvm_end(j, b);
    else c->linelen += (size_t)got;
}

/* Emulated JVMs still running: their plugin is connected, or their exec
 * was answered and the connections it holds are open. */
static size_t tree_running(const tree *t)
{
    size_t n = 0;
    for (guint i = 0; t->jvms && i < t->jvms->len; i++) {
        const tree_jvm *j = g_ptr_array_index(t->jvms, i);
        n += j->hs.ctl && !j->ended && (j->ctl.fd >= 0 || j->hs.fd >= 0);
    }
    return n;
}

/* A JVM's exec is waiting to be answered. */
static bool tree_pending(const tree *t)
{
    struct pollfd p = { .fd = t->listen_fd, .events = POLLIN };
    return t->listen_fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

/* ---- main ----------------------------------------------------------------- */

/* One recording: the options, the session its info.json describes, the
 * backend, and what main's steps hand on to each other. */
typedef struct recorder {
    pr_opts o;
    const char *out_given;      /* -o as given */
    char *out;                  /* -o canonical */
    bool replace;               /* -o is a trace to replace (--force) */
    char *real;                 /* the command's file behind symlinks */
    bool has_agent;             /* the command brings its own agent */
    pr_session s;
    pr_backend b;
    char *agent, *exec_lib;     /* with a process tree */
    tree t;
    int hsp[2], ctlp[2];        /* handshake and control socket pairs */
    pr_exec_plan plan;          /* the exec of a command that is itself a JVM */
    int sfd;                    /* signalfd of the forwarded signals and SIGCHLD */
    sigset_t oldmask;
} recorder;

/* -o: an empty or trace directory to replace, or a new one in an existing
 * directory; dies with a usage error otherwise. */
static void check_out_dir(recorder *r)
{
    pr_opts *o = &r->o;
    r->out_given = o->out_dir;
    if (!*r->out_given)
        jerr_die(PR_EXIT_USAGE, "-o: the trace directory's name is empty");
    char *out = r->out = g_canonicalize_filename(o->out_dir, NULL);
    o->out_dir = out;
    if (has_bad_chars(out))
        jerr_die(PR_EXIT_USAGE, "the trace directory's path %s must not contain commas, quotes "
                 "or control characters (they separate the agent's and the plugin's options)",
                 out);
    struct stat st;
    if (stat(out, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            jerr_die(PR_EXIT_USAGE, "%s exists and is not a directory", r->out_given);
        if (!dir_is_empty(out)) {
            if (!o->force)
                jerr_die(PR_EXIT_USAGE, "%s exists (use --force to replace it)", r->out_given);
            char *stranger;
            if (!looks_like_trace(out, &stranger))
                jerr_die(PR_EXIT_USAGE, "%s is not empty and does not look like a trace "
                         "directory%s%s%s; not replacing it", out, stranger ? " (it holds " : "",
                         stranger ? stranger : "", stranger ? ")" : "");
            r->replace = true;
        }
    } else {
        /* A mistyped -o must not leave a tree of new directories. */
        char *parent = g_path_get_dirname(out);
        if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
            jerr_die(PR_EXIT_USAGE, "cannot create %s: %s is not a directory (create it first)",
                     r->out_given, parent);
        g_free(parent);
    }
}

/* The command: its file, whether it is a JVM, and whether to follow its
 * process tree. */
static void resolve_command(recorder *r)
{
    pr_opts *o = &r->o;
    pr_session *s = &r->s;
    /* qemu-user does not search PATH, and java detection wants the real
     * file behind symlinks such as /usr/bin/java. */
    o->resolved = pr_find_in_path(o->command[0]);
    if (!o->resolved) {
        if (strchr(o->command[0], '/') && access(o->command[0], F_OK) == 0)
            jerr_die(PR_EXIT_NOEXEC, "%s: not an executable file", o->command[0]);
        jerr_die(PR_EXIT_NOTFOUND, "%s: command not found", o->command[0]);
    }
    r->real = realpath(o->resolved, NULL);
    *s = (pr_session){ .opts = o, .handshake = "none" };
    /* A script named java (a version manager's shim) runs natively and
     * execs the real launcher, which is followed. */
    s->java = pr_is_java_launcher(o->command[0], r->real) && pr_is_elf_file(o->resolved);
    r->has_agent = pr_has_jpt_agent_argv(o->command + 1) ||
                   pr_has_jpt_agent_opts(getenv("JAVA_TOOL_OPTIONS")) ||
                   pr_has_jpt_agent_opts(getenv("JDK_JAVA_OPTIONS")) ||
                   pr_has_jpt_agent_opts(getenv("_JAVA_OPTIONS"));
    /* Follow the process tree to its JVMs, unless the command brings its own
     * agent or (not a JVM) is itself what --filter all or a range traces. */
    o->tree = !r->has_agent && (s->java || o->filter == PR_FILTER_CODECACHE);
    if (o->emulate && !o->tree) {
        /* qemu-user emulates one program; what a script execs runs natively. */
        FILE *f = fopen(o->resolved, "rb");
        char head[2] = { 0, 0 };
        if (f) {
            if (fread(head, 1, 2, f) != 2) head[0] = 0;
            fclose(f);
        }
        if (head[0] == '#' && head[1] == '!')
            jerr_die(PR_EXIT_USAGE, "%s is a script: with --filter other than codecache, "
                     "the command itself runs under emulation and the programs it starts run "
                     "untraced; give the program itself", o->command[0]);
    }
}

/* The backend prepared, and with a process tree the exec library and the
 * agent found. */
static void prepare_backend(recorder *r)
{
    pr_opts *o = &r->o;
    char err[1024];
    r->b = (pr_backend){ .ops = o->emulate ? &pr_emulated_ops : &pr_perf_ops, .opts = o };
    r->s.backend = r->b.ops->name;
    int rc = r->b.ops->prepare(&r->b, o, &r->s.exec_argv, err, sizeof err);
    if (rc) jerr_die(rc, "%s", err);
    r->s.perf = r->b.perf;
    if (o->tree && !(r->exec_lib = find_exec_lib(err, sizeof err)))
        jerr_die(PR_EXIT_USAGE, "%s", err);
    if (r->exec_lib && has_bad_chars(r->exec_lib))
        jerr_die(PR_EXIT_USAGE, "%s: the path must not contain commas, quotes or control "
                 "characters", r->exec_lib);
    if (o->tree) {
        if (!(r->agent = find_agent(o->agent, err, sizeof err)))
            jerr_die(PR_EXIT_USAGE, "%s", err);
        if (has_bad_chars(r->agent))
            jerr_die(PR_EXIT_USAGE, "the agent's path %s must not contain commas, quotes or "
                     "control characters", r->agent);
        r->s.agent_path = r->agent;
        r->s.agent_added = true;
    }
}

/* The trace directory, and a first info.json in it, so that a trace whose
 * recorder died is still described. */
static void make_trace(recorder *r)
{
    const char *out = r->out;
    char err[1024];
    if (r->replace) {
        /* Walk the real directory: nftw with FTW_PHYS would not enter DIR
         * itself when it is a symlink to a trace. */
        char *top = realpath(out, NULL);
        if (!top || nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            jerr_die(PR_EXIT_USAGE, "cannot replace %s", r->out_given);
        free(top);
    }
    if (!make_trace_dirs(out))
        jerr_die(PR_EXIT_USAGE, "cannot create %s and its pt/, sideband/, jvm/: %s", out,
                 strerror(errno));

    char *cpuinfo = NULL;
    if (g_file_get_contents("/proc/cpuinfo", &cpuinfo, NULL, NULL))
        pr_cpu_parse(cpuinfo, &r->s.cpu);
    else
        pr_cpu_parse("", &r->s.cpu);
    g_free(cpuinfo);
    clock_gettime(CLOCK_REALTIME, &r->s.start);
    pr_clock_now(&r->s.clock_start);
    if (pr_write_info(&r->s, err, sizeof err) != 0) jerr_die(PR_EXIT_USAGE, "%s", err);
}

/* The child's environment: the exec library and the tree's socket, or the
 * handshake descriptor; and the exec of a command that is itself a JVM. */
static void child_environment(recorder *r)
{
    pr_opts *o = &r->o;
    tree *t = &r->t;
    if (o->tree) {
        tree_listen(t);
        /* Only the JVMs get a handshake descriptor, their own. */
        unsetenv("JPT_HANDSHAKE_FD");
        unsetenv("JPT_TRACE_DIR");
        const char *pre = getenv("LD_PRELOAD");
        char *preload = pre && *pre ? g_strdup_printf("%s %s", r->exec_lib, pre)
                                    : g_strdup(r->exec_lib);
        setenv("LD_PRELOAD", preload, 1);
        g_free(preload);
        setenv(PR_EXEC_ENV_SOCK, t->sock, 1);
        setenv(PR_EXEC_ENV_AGENT, r->agent, 1);
        if (r->b.tree_qemu) {
            setenv(PR_EXEC_ENV_QEMU, r->b.tree_qemu, 1);
            setenv(PR_EXEC_ENV_PLUGIN, r->b.tree_plugin, 1);
        } else {
            unsetenv(PR_EXEC_ENV_QEMU);
            unsetenv(PR_EXEC_ENV_PLUGIN);
        }
    } else {
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, r->hsp) != 0)
            jerr_die(1, "socketpair: %s", strerror(errno));
        char fdstr[16];
        snprintf(fdstr, sizeof fdstr, "%d", r->hsp[1]);
        setenv("JPT_HANDSHAKE_FD", fdstr, 1);
        setenv("JPT_TRACE_DIR", r->out, 1);
    }
    /* The command is itself a JVM: the exec a JVM of the tree gets, with
     * the connections made here rather than asked for on the socket. */
    if (o->tree && r->s.java) {
        pr_exec_cfg cfg;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, r->hsp) != 0 ||
            (r->b.tree_qemu && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, r->ctlp) != 0))
            jerr_die(1, "socketpair: %s", strerror(errno));
        if (!pr_exec_cfg_get(&cfg, getenv) ||
            !pr_exec_plan_make(&cfg, o->resolved, o->command, environ, r->out, r->hsp[1],
                               r->ctlp[1], &r->plan))
            jerr_die(1, "cannot build the command's exec: out of memory");
        tree_jvm *j = tree_add_jvm(t, &r->s, &r->b);
        if (!j) jerr_die(1, "cannot trace the command");
        j->hs.fd = r->hsp[0];
        j->ctl.fd = r->ctlp[0];
        g_strfreev(r->s.exec_argv);
        r->s.exec_argv = g_strdupv(r->plan.argv);
    }
}

/* Forks and execs the command, attached to and traced by the backend;
 * signals to forward arrive on r->sfd. Dies when it cannot run. */
static void start_command(recorder *r)
{
    pr_session *s = &r->s;
    pr_backend *b = &r->b;
    char err[1024];
    sigset_t mask;
    sigemptyset(&mask);
    int fwd[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
    for (size_t i = 0; i < G_N_ELEMENTS(fwd); i++) sigaddset(&mask, fwd[i]);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, &r->oldmask);
    r->sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (r->sfd < 0) jerr_die(1, "signalfd: %s", strerror(errno));

    int inherit[8];
    size_t ninherit = b->ops->child_fds(b, inherit, G_N_ELEMENTS(inherit) - 1);
    if (r->hsp[1] >= 0) inherit[ninherit++] = r->hsp[1];
    if (r->ctlp[1] >= 0) inherit[ninherit++] = r->ctlp[1];
    int errp[2];
    if (pipe2(errp, O_CLOEXEC) != 0) jerr_die(1, "pipe: %s", strerror(errno));
    /* With an attach step the child waits on this pipe before its exec. */
    int gate[2] = { -1, -1 };
    if (b->ops->attach && pipe2(gate, O_CLOEXEC) != 0) jerr_die(1, "pipe: %s", strerror(errno));

    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) jerr_die(1, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* ptrec killed, even by SIGKILL, takes the command with it: nobody
         * would collect what it records, and its info.json already says
         * the recording did not finish. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(PR_EXIT_USAGE);
        if (gate[0] >= 0) {
            close(gate[1]);
            char go = 0;
            ssize_t g;
            while ((g = read(gate[0], &go, 1)) < 0 && errno == EINTR) {}
            /* ptrec failed or died: do not run the command untraced. */
            if (g != 1) _exit(PR_EXIT_USAGE);
        }
        for (size_t i = 0; i < ninherit; i++) {
            int fl = fcntl(inherit[i], F_GETFD);
            if (fl >= 0) fcntl(inherit[i], F_SETFD, fl & ~FD_CLOEXEC);
        }
        sigprocmask(SIG_SETMASK, &r->oldmask, NULL);
        if (r->plan.path) execve(r->plan.path, r->plan.argv, r->plan.envp);
        else execv(s->exec_argv[0], s->exec_argv);
        int e = errno;
        ssize_t w = write(errp[1], &e, sizeof e);
        (void)w;
        _exit(PR_EXIT_NOTFOUND);
    }
    s->pid = pid;
    close(errp[1]);
    if (r->hsp[1] >= 0) close(r->hsp[1]);
    if (r->ctlp[1] >= 0) close(r->ctlp[1]);
    pr_exec_plan_free(&r->plan);
    if (gate[0] >= 0) {
        close(gate[0]);
        if (b->ops->attach(b, pid, err, sizeof err) != 0) {
            close(gate[1]);
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            jerr_die(1, "%s", err);
        }
        ssize_t g;
        while ((g = write(gate[1], "g", 1)) < 0 && errno == EINTR) {}
        close(gate[1]);
    }
    int exec_errno = 0;
    ssize_t rd;
    while ((rd = read(errp[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {}
    close(errp[0]);
    if (rd == (ssize_t)sizeof exec_errno) {
        waitpid(pid, NULL, 0);
        jerr_die(exec_errno == ENOENT ? PR_EXIT_NOTFOUND : PR_EXIT_NOEXEC, "cannot run %s: %s",
                 s->exec_argv[0], strerror(exec_errno));
    }
    if (b->ops->start(b, pid, err, sizeof err) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        jerr_die(1, "%s", err);
    }
}

/* The signals of r->sfd: passed on to the command, or once it is gone to
 * the JVMs still traced; reaps the command. */
static void on_signals(recorder *r, bool *stop_waiting, int *signals_after)
{
    pr_session *s = &r->s;
    tree *t = &r->t;
    struct signalfd_siginfo si;
    while (read(r->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD) continue;
        /* A signal from the terminal already went to the whole
         * foreground process group, the child included. */
        if (si.ssi_code == SI_KERNEL) continue;
        if (!s->finished) {
            kill(s->pid, (int)si.ssi_signo);
            continue;
        }
        /* The command is gone: pass it on to the JVMs still traced. */
        for (guint i = 0; i < t->jvms->len; i++) {
            tree_jvm *j = g_ptr_array_index(t->jvms, i);
            if (j->ctl.fd >= 0 && j->hs.s->jvm_pid > 0)
                kill((pid_t)j->hs.s->jvm_pid, (int)si.ssi_signo);
        }
        /* A second one: stop waiting for JVMs that do not end. */
        *stop_waiting = ++*signals_after >= 2;
    }
    int wst;
    pid_t w = s->finished ? 0 : waitpid(s->pid, &wst, WNOHANG);
    if (w == s->pid) {
        s->finished = true;
        s->wait_status = wst;
    }
}

/* Serves the handshakes, the tree's connections and the signals until the
 * command and the JVMs of its tree have ended. */
static void wait_for_command(recorder *r)
{
    pr_session *s = &r->s;
    pr_backend *b = &r->b;
    tree *t = &r->t;
    hs_state hs = { .fd = r->o.tree ? -1 : r->hsp[0], .s = s };
    GArray *pfds = g_array_new(FALSE, TRUE, sizeof(struct pollfd));
    /* In a process tree, emulated JVMs may outlive the command: their
     * traces are complete when their plugin has closed its connection. */
    bool stop_waiting = false;
    int signals_after = 0;      /* signals passed on to JVMs after the command exited */
    while (!s->finished || (tree_running(t) && !stop_waiting) || tree_pending(t)) {
        g_array_set_size(pfds, 0);
        struct pollfd p = { .fd = r->sfd, .events = POLLIN };
        g_array_append_val(pfds, p);
        p.fd = t->listen_fd >= 0 ? t->listen_fd : hs.fd;
        g_array_append_val(pfds, p);
        for (guint i = 0; t->jvms && i < t->jvms->len; i++) {
            tree_jvm *j = g_ptr_array_index(t->jvms, i);
            p.fd = j->hs.fd;
            g_array_append_val(pfds, p);
            p.fd = j->ctl.fd;
            g_array_append_val(pfds, p);
        }
        struct pollfd *pf = (struct pollfd *)(void *)pfds->data;
        /* A JVM that was the command itself closes its connection at once;
         * say why ptrec waits only for the others. */
        int n = poll(pf, pfds->len, s->finished && !t->waiting_said ? 1000 : -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            jerr_die(1, "poll: %s", strerror(errno));
        }
        if (n == 0) {
            if (!r->o.quiet)
                fprintf(stderr, "ptrec: the command has exited; waiting for the %zu traced "
                        "JVMs it started that still run (SIGINT or SIGTERM: passed on to them; "
                        "twice: stop waiting)\n", tree_running(t));
            t->waiting_said = true;
            continue;
        }
        if (pf[0].revents & POLLIN)
            on_signals(r, &stop_waiting, &signals_after);
        /* Accept first: a JVM's plugin connects before its exec, so before
         * its agent's handshake, which needs the connection. */
        if (t->listen_fd >= 0 && (pf[1].revents & POLLIN)) tree_accept(t, s, b);
        if (t->listen_fd < 0 && hs.fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)))
            hs_read(&hs, b);
        /* jvms may have grown: only the entries polled. */
        for (guint i = 0; 2 + 2 * i + 1 < pfds->len; i++) {
            tree_jvm *j = g_ptr_array_index(t->jvms, i);
            if (j->hs.fd >= 0 && (pf[2 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)))
                hs_read(&j->hs, b);
            if (j->ctl.fd >= 0 && (pf[3 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)))
                tree_ctl_read(j, b);
        }
    }
    g_array_free(pfds, TRUE);
    hs_close(&hs);
}

/* The final info.json of the trace and of each further JVM of the tree,
 * the warnings of a recording that traced nothing, and the summary. */
static void finish_recording(recorder *r)
{
    pr_opts *o = &r->o;
    pr_session *s = &r->s;
    pr_backend *b = &r->b;
    tree *t = &r->t;
    char err[1024];
    clock_gettime(CLOCK_REALTIME, &s->end);
    pr_clock_end(&s->clock_start, &s->clock_end);

    tree_unlisten(t);
    GArray *more = g_array_new(FALSE, TRUE, sizeof(pr_tree_jvm));
    for (guint i = 0; t->jvms && i < t->jvms->len; i++) {
        tree_jvm *j = g_ptr_array_index(t->jvms, i);
        hs_close(&j->hs);
        if (j->index == 1) continue;
        /* Still running (ptrec was told to stop waiting) or, on hardware,
         * not seen ending: written as they are. */
        if (!j->ended) {
            bool running = j->ctl.fd >= 0;
            tree_jvm_end(j, b);
            if (running) {
                j->own.finished = false;
                char e2[1024];
                if (pr_write_info(&j->own, e2, sizeof e2) != 0) jerr_error("%s", e2);
            }
        }
        pr_tree_jvm tj = { .index = j->index, .pid = j->own.jvm_pid, .dir = j->rel };
        g_array_append_val(more, tj);
    }
    s->more_jvms = (const pr_tree_jvm *)(void *)more->data;
    s->n_more_jvms = more->len;
    b->ops->finish(b, &s->sum);
    if (o->filter == PR_FILTER_RANGE) {
        s->range_set = true;
        s->range_lo = o->range_lo;
        s->range_hi = o->range_hi;
    }
    if (pr_write_info(s, err, sizeof err) != 0) jerr_error("%s", err);
    if (o->tree && (!t->jvms || t->jvms->len == 0))
        jerr_warn("%s started no java launcher: nothing was traced (the execs of statically "
                  "linked programs are not followed)", o->command[0]);
    else if (o->filter == PR_FILTER_CODECACHE && s->jvm_pid == 0 && (r->has_agent || o->tree))
        jerr_warn("the agent never reported the code cache: nothing was traced (see %s/jvm/"
                  "agent.log)", r->out);
    if (!o->quiet) {
        char line[160];
        pr_format_summary(&s->sum, line, sizeof line);
        fprintf(stderr, "ptrec: %s, trace in %s\n", line, r->out_given);
        for (guint i = 1; t->jvms && i < t->jvms->len; i++) {
            tree_jvm *j = g_ptr_array_index(t->jvms, i);
            pr_format_summary(&j->own.sum, line, sizeof line);
            fprintf(stderr, "ptrec: JVM %lu (pid %ld): %s, trace in %s/%s\n", j->index,
                    j->own.jvm_pid, line, r->out_given, j->rel);
        }
    }
    g_array_free(more, TRUE);
    s->more_jvms = NULL;
    s->n_more_jvms = 0;
}

static void recorder_free(recorder *r)
{
    r->b.ops->destroy(&r->b);
    pr_summary_free(&r->s.sum);
    tree *t = &r->t;
    for (guint i = 0; t->jvms && i < t->jvms->len; i++) {
        tree_jvm *j = g_ptr_array_index(t->jvms, i);
        pr_summary_free(&j->own.sum);
        g_free(j->dir);
        g_free(j->rel);
        g_free(j);
    }
    if (t->jvms) g_ptr_array_free(t->jvms, TRUE);
    g_free(t->sock);
    g_free(t->sockdir);
    g_free(r->exec_lib);
    g_strfreev(r->s.exec_argv);
    g_free(r->agent);
    g_free(r->real);
    g_free(r->o.resolved);
    g_free(r->out);
}

int main(int argc, char **argv)
{
    jerr_set_prog("ptrec");
    recorder r = { .hsp = { -1, -1 }, .ctlp = { -1, -1 }, .t = { .listen_fd = -1 },
                   .sfd = -1 };
    parse_options(argc, argv, &r.o);
    check_out_dir(&r);
    resolve_command(&r);
    prepare_backend(&r);
    make_trace(&r);
    child_environment(&r);
    start_command(&r);
    wait_for_command(&r);
    finish_recording(&r);
    int ws = r.s.wait_status;
    int status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1;
    recorder_free(&r);
    return status;
}
