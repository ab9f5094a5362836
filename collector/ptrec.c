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
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>

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
"When COMMAND is a java launcher, ptrec loads the jpt agent (libjpt.so) into it\n"
"through JAVA_TOOL_OPTIONS, with -XX:+DebugNonSafepoints for exact JIT maps,\n"
"unless the command line or JAVA_TOOL_OPTIONS already loads it. The agent\n"
"reports the JVM's code cache and ptrec limits tracing to it (--filter).\n"
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
"  # a workload script that runs ${JAVA}: put ptrec in front of the java binary\n"
"  JAVA=\"ptrec --emulate -o /tmp/x.trace -- /usr/lib/jvm/java-17-openjdk-amd64/bin/java\" \\\n"
"      ./rhino.sh\n"
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
 * ptrec and ptdecode write there, and some of it. *stranger names the first
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

static bool has_space(const char *s)
{
    for (; *s; s++)
        if (g_ascii_isspace(*s)) return true;
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

static void hs_line(hs_state *h, pr_session *s, pr_backend *b, const char *line, size_t n)
{
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
    if (s->opts->filter != PR_FILTER_CODECACHE) {
        /* The filter was fixed at start; tracing is on. */
        s->handshake = "ok";
        hs_reply(h, "ok\n");
        return;
    }
    char err[256];
    if (b->ops->on_filter(b, hs.low, hs.high, err, sizeof err) != 0) {
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

static void hs_read(hs_state *h, pr_session *s, pr_backend *b)
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
        if (!h->skipping) hs_line(h, s, b, h->buf, n);
        h->skipping = false;
        if (h->fd < 0) return;
        memmove(h->buf, nl + 1, h->len - n - 1);
        h->len -= n + 1;
    }
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
    jerr_set_prog("ptrec");
    pr_opts o = { 0 };
    parse_options(argc, argv, &o);

    const char *out_given = o.out_dir;
    if (!*out_given)
        jerr_die(PR_EXIT_USAGE, "-o: the trace directory's name is empty");
    char *out = g_canonicalize_filename(o.out_dir, NULL);
    o.out_dir = out;
    if (has_bad_chars(out))
        jerr_die(PR_EXIT_USAGE, "the trace directory's path %s must not contain commas, quotes "
                 "or control characters (they separate the agent's and the plugin's options)",
                 out);
    struct stat st;
    bool replace = false;
    if (stat(out, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            jerr_die(PR_EXIT_USAGE, "%s exists and is not a directory", out_given);
        if (!dir_is_empty(out)) {
            if (!o.force)
                jerr_die(PR_EXIT_USAGE, "%s exists (use --force to replace it)", out_given);
            char *stranger;
            if (!looks_like_trace(out, &stranger))
                jerr_die(PR_EXIT_USAGE, "%s is not empty and does not look like a trace "
                         "directory%s%s%s; not replacing it", out, stranger ? " (it holds " : "",
                         stranger ? stranger : "", stranger ? ")" : "");
            replace = true;
        }
    } else {
        /* A mistyped -o must not leave a tree of new directories. */
        char *parent = g_path_get_dirname(out);
        if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
            jerr_die(PR_EXIT_USAGE, "cannot create %s: %s is not a directory (create it first)",
                     out_given, parent);
        g_free(parent);
    }

    /* The command: qemu-user does not search PATH, and java detection wants
     * the real file behind symlinks such as /usr/bin/java. */
    o.resolved = pr_find_in_path(o.command[0]);
    if (!o.resolved) {
        if (strchr(o.command[0], '/') && access(o.command[0], F_OK) == 0)
            jerr_die(PR_EXIT_NOEXEC, "%s: not an executable file", o.command[0]);
        jerr_die(PR_EXIT_NOTFOUND, "%s: command not found", o.command[0]);
    }
    char *real = realpath(o.resolved, NULL);
    if (o.emulate) {
        /* qemu-user emulates one program; what a script execs runs natively. */
        FILE *f = fopen(o.resolved, "rb");
        char head[2] = { 0, 0 };
        if (f) {
            if (fread(head, 1, 2, f) != 2) head[0] = 0;
            fclose(f);
        }
        if (head[0] == '#' && head[1] == '!')
            jerr_die(PR_EXIT_USAGE, "%s is a script: under emulation the programs it starts "
                     "would run untraced; put ptrec in front of the java command itself "
                     "(e.g. JAVA=\"ptrec --emulate -o X -- java\" %s)", o.command[0], o.command[0]);
    }

    pr_session s = { .opts = &o, .handshake = "none" };
    s.java = pr_is_java_launcher(o.command[0], real);
    bool has_agent = pr_has_jpt_agent_argv(o.command + 1) ||
                     pr_has_jpt_agent_opts(getenv("JAVA_TOOL_OPTIONS")) ||
                     pr_has_jpt_agent_opts(getenv("JDK_JAVA_OPTIONS")) ||
                     pr_has_jpt_agent_opts(getenv("_JAVA_OPTIONS"));
    char err[1024];
    char *agent = NULL;
    pr_backend b = { .ops = o.emulate ? &pr_emulated_ops : &pr_perf_ops, .opts = &o };
    s.backend = b.ops->name;
    int rc = b.ops->prepare(&b, &o, &s.exec_argv, err, sizeof err);
    if (rc) jerr_die(rc, "%s", err);
    s.perf = b.perf;
    if (s.java && !has_agent) {
        if (!(agent = find_agent(o.agent, err, sizeof err))) jerr_die(PR_EXIT_USAGE, "%s", err);
        if (has_bad_chars(agent))
            jerr_die(PR_EXIT_USAGE, "the agent's path %s must not contain commas, quotes or "
                     "control characters", agent);
        s.agent_path = agent;
        s.agent_added = true;
    }

    if (!s.java && !has_agent && o.filter == PR_FILTER_CODECACHE)
        jerr_warn("%s is not a java launcher and loads no jpt agent: with --filter codecache "
                  "nothing will be traced (use --filter all)", o.command[0]);

    /* The trace directory. */
    if (replace) {
        /* Walk the real directory: nftw with FTW_PHYS would not enter DIR
         * itself when it is a symlink to a trace. */
        char *top = realpath(out, NULL);
        if (!top || nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            jerr_die(PR_EXIT_USAGE, "cannot replace %s", out_given);
        free(top);
    }
    static const char *const subdirs[] = { "pt", "sideband", "jvm" };
    if (mkdir(out, 0777) != 0 && errno != EEXIST)
        jerr_die(PR_EXIT_USAGE, "cannot create %s: %s", out, strerror(errno));
    for (size_t i = 0; i < G_N_ELEMENTS(subdirs); i++) {
        char *p = g_build_filename(out, subdirs[i], NULL);
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            jerr_die(PR_EXIT_USAGE, "cannot create %s: %s", p, strerror(errno));
        g_free(p);
    }

    char *cpuinfo = NULL;
    if (g_file_get_contents("/proc/cpuinfo", &cpuinfo, NULL, NULL)) pr_cpu_parse(cpuinfo, &s.cpu);
    else pr_cpu_parse("", &s.cpu);
    g_free(cpuinfo);
    clock_gettime(CLOCK_REALTIME, &s.start);
    pr_clock_now(&s.clock_start);
    /* A first info.json now, so a trace whose recorder died is still described. */
    if (pr_write_info(&s, err, sizeof err) != 0) jerr_die(PR_EXIT_USAGE, "%s", err);

    /* Environment of the child. */
    int hsp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, hsp) != 0)
        jerr_die(1, "socketpair: %s", strerror(errno));
    char fdstr[16];
    snprintf(fdstr, sizeof fdstr, "%d", hsp[1]);
    setenv("JPT_HANDSHAKE_FD", fdstr, 1);
    setenv("JPT_TRACE_DIR", out, 1);
    if (agent) {
        GString *jto = g_string_new(getenv("JAVA_TOOL_OPTIONS"));
        if (jto->len) g_string_append_c(jto, ' ');
        /* The JVM splits JAVA_TOOL_OPTIONS at white space unless quoted. */
        const char *q = has_space(agent) || has_space(out) ? "\"" : "";
        g_string_append_printf(jto, "%s-agentpath:%s=out=%s%s -XX:+UnlockDiagnosticVMOptions "
                               "-XX:+DebugNonSafepoints", q, agent, out, q);
        setenv("JAVA_TOOL_OPTIONS", jto->str, 1);
        g_string_free(jto, TRUE);
    }

    sigset_t mask, oldmask;
    sigemptyset(&mask);
    int fwd[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
    for (size_t i = 0; i < G_N_ELEMENTS(fwd); i++) sigaddset(&mask, fwd[i]);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, &oldmask);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) jerr_die(1, "signalfd: %s", strerror(errno));

    int inherit[8];
    size_t ninherit = b.ops->child_fds(&b, inherit, G_N_ELEMENTS(inherit) - 1);
    inherit[ninherit++] = hsp[1];
    int errp[2];
    if (pipe2(errp, O_CLOEXEC) != 0) jerr_die(1, "pipe: %s", strerror(errno));
    /* With an attach step the child waits on this pipe before its exec. */
    int gate[2] = { -1, -1 };
    if (b.ops->attach && pipe2(gate, O_CLOEXEC) != 0) jerr_die(1, "pipe: %s", strerror(errno));

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
        sigprocmask(SIG_SETMASK, &oldmask, NULL);
        execv(s.exec_argv[0], s.exec_argv);
        int e = errno;
        ssize_t w = write(errp[1], &e, sizeof e);
        (void)w;
        _exit(PR_EXIT_NOTFOUND);
    }
    s.pid = pid;
    close(errp[1]);
    close(hsp[1]);
    if (gate[0] >= 0) {
        close(gate[0]);
        if (b.ops->attach(&b, pid, err, sizeof err) != 0) {
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
    ssize_t r;
    while ((r = read(errp[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {}
    close(errp[0]);
    if (r == (ssize_t)sizeof exec_errno) {
        waitpid(pid, NULL, 0);
        jerr_die(exec_errno == ENOENT ? PR_EXIT_NOTFOUND : PR_EXIT_NOEXEC, "cannot run %s: %s",
                 s.exec_argv[0], strerror(exec_errno));
    }
    if (b.ops->start(&b, pid, err, sizeof err) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        jerr_die(1, "%s", err);
    }

    hs_state hs = { .fd = hsp[0] };
    while (!s.finished) {
        struct pollfd pfd[2] = {
            { .fd = sfd, .events = POLLIN },
            { .fd = hs.fd, .events = POLLIN },
        };
        int n = poll(pfd, hs.fd >= 0 ? 2 : 1, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            jerr_die(1, "poll: %s", strerror(errno));
        }
        if (pfd[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGCHLD) continue;
                /* A signal from the terminal already went to the whole
                 * foreground process group, the child included. */
                if (si.ssi_code == SI_KERNEL) continue;
                kill(pid, (int)si.ssi_signo);
            }
            int wst;
            pid_t w = waitpid(pid, &wst, WNOHANG);
            if (w == pid) {
                s.finished = true;
                s.wait_status = wst;
            }
        }
        if (hs.fd >= 0 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
            hs_read(&hs, &s, &b);
    }
    hs_close(&hs);
    clock_gettime(CLOCK_REALTIME, &s.end);
    pr_clock_end(&s.clock_start, &s.clock_end);

    b.ops->finish(&b, &s.sum);
    if (o.filter == PR_FILTER_RANGE) {
        s.range_set = true;
        s.range_lo = o.range_lo;
        s.range_hi = o.range_hi;
    }
    if (pr_write_info(&s, err, sizeof err) != 0) jerr_error("%s", err);
    if (o.filter == PR_FILTER_CODECACHE && s.jvm_pid == 0 && (s.java || has_agent))
        jerr_warn("the agent never reported the code cache: nothing was traced (see %s/jvm/"
                  "agent.log)", out);
    if (!o.quiet) {
        char line[160];
        pr_format_summary(&s.sum, line, sizeof line);
        fprintf(stderr, "ptrec: %s, trace in %s\n", line, out_given);
    }

    b.ops->destroy(&b);
    pr_summary_free(&s.sum);
    int status = WIFEXITED(s.wait_status) ? WEXITSTATUS(s.wait_status)
               : WIFSIGNALED(s.wait_status) ? 128 + WTERMSIG(s.wait_status) : 1;
    g_strfreev(s.exec_argv);
    g_free(agent);
    g_free(real);
    g_free(o.resolved);
    g_free(out);
    return status;
}
