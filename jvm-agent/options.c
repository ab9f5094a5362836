/* The agent's options (-agentpath:libjpt.so=OPTIONS), its output directory, the
 * VM options it reads for itself, and the JVMTI capabilities it asks for. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jvmti.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jvm-agent/agent.h"
#include "jvm-agent/agent_jvmti.h"
#include "jvm-agent/queue.h"

#define MAX_OPTION_MS 3600000u     /* patch_ms, close_ms: an hour */
#define MAX_OPTION_MB (1u << 20)   /* budget_mb: a terabyte */

static const char usage_text[] =
    "jpt agent options (comma-separated, -agentpath:libjpt.so=OPT,OPT...):\n"
    "  out=DIR        trace directory; the agent writes DIR/jvm/ (default: $JPT_TRACE_DIR,\n"
    "                 else ./jpt-<pid>.trace). DIR must not contain commas.\n"
    "  mode=trace     record code, classes, methods, threads (default)\n"
    "  mode=reference also record every method entry/exit (and, with -Xint, every\n"
    "                 bytecode as a single step): an instrumentation reference, slow\n"
    "  patch_ms=N     re-snapshot live code every N ms for patches (default 50; 0: only\n"
    "                 at shutdown)\n"
    "  close_ms=N     in between, re-read recently patched call sites and the inline\n"
    "                 cache stubs every N ms (default 10; 0: never)\n"
    "  retransform=0  do not recover classes loaded before the agent's hook\n"
    "  budget_mb=N    bytes waiting for the writer before producers wait/drop (default 256)\n"
    "  help           print this text; the JVM then runs untraced\n"
    "Needs nothing else; -XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints keeps\n"
    "inline maps dense (it is also on by default while this agent is loaded).\n";

int mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    size_t l = strlen(path);
    if (l == 0 || l >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(tmp, path, l + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
        return -1;
    struct stat sb;
    if (stat(tmp, &sb) < 0)
        return -1;
    if (!S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

void print_usage(FILE *f)
{
    fputs(usage_text, f);
}

/* The whole number val of option name into *out; false (message printed) if
 * val is not one or exceeds max. */
static bool parse_count(const char *name, const char *val, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (!*val || *end || errno || v > max || val[0] == '-') {
        fprintf(stderr, "jpt: error: agent option '%s=%s' wants a whole number up to %" PRIu64
                "\n", name, val, max);
        return false;
    }
    *out = v;
    return true;
}

/* Returns 0, 1 for "help", -1 on a bad option (message printed). */
int parse_options(const char *opts)
{
    snprintf(ag.options, sizeof ag.options, "%s", opts ? opts : "");
    if (!opts || !*opts)
        return 0;
    char *copy = strdup(opts);
    if (!copy)
        return -1;
    int rc = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        const char *val = eq ? eq + 1 : "";
        if (eq)
            *eq = 0;
        if (strcmp(tok, "help") == 0) {
            rc = 1;
        } else if (strcmp(tok, "out") == 0) {
            if (!*val) {
                fprintf(stderr, "jpt: error: agent option 'out' wants a directory (out=DIR)\n");
                rc = -1;
                break;
            }
            snprintf(ag.dir, sizeof ag.dir, "%s", val);
        } else if (strcmp(tok, "mode") == 0) {
            if (strcmp(val, "trace") == 0) {
                ag.mode = JM_MODE_TRACE;
            } else if (strcmp(val, "reference") == 0) {
                ag.mode = JM_MODE_REFERENCE;
            } else {
                fprintf(stderr, "jpt: error: agent option 'mode' wants trace or reference, not "
                        "'%s'\n", val);
                rc = -1;
                break;
            }
        } else if (strcmp(tok, "patch_ms") == 0 || strcmp(tok, "close_ms") == 0) {
            uint64_t ms;
            if (!parse_count(tok, val, MAX_OPTION_MS, &ms)) {
                rc = -1;
                break;
            }
            unsigned *dst = strcmp(tok, "patch_ms") == 0 ? &ag.patch_ms : &ag.close_ms;
            *dst = (unsigned)ms;
        } else if (strcmp(tok, "budget_mb") == 0) {
            uint64_t mb;
            if (!parse_count(tok, val, MAX_OPTION_MB, &mb)) {
                rc = -1;
                break;
            }
            ag.budget = mb << 20;
        } else if (strcmp(tok, "retransform") == 0) {
            ag.retransform = strcmp(val, "0") != 0;
        } else {
            fprintf(stderr, "jpt: error: unknown agent option '%s%s%s' (try =help)\n", tok,
                    eq ? "=" : "", val);
            rc = -1;
            break;
        }
    }
    free(copy);
    return rc;
}

/* The VM options as the launcher takes them, in the order they apply: the
 * process command line (NUL-separated arguments), then the environment
 * variables it honours. An @argfile or -XX:Flags= file is not followed. */
static void scan_vm_options(void (*scan)(const char *s, size_t len, void *ctx), void *ctx)
{
    static const char *const envs[] = { "JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS",
                                        "_JAVA_OPTIONS" };
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[65536];
        ssize_t n = read(fd, buf, sizeof buf);
        close(fd);
        if (n > 0)
            scan(buf, (size_t)n, ctx);
    }
    for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
        const char *v = getenv(envs[i]);
        if (v)
            scan(v, strlen(v), ctx);
    }
}

/* Finds the last -XX:[+-]DebugNonSafepoints in s. */
static void scan_dns(const char *s, size_t len, void *ctx)
{
    int *flag = ctx;
    static const char on[] = "-XX:+DebugNonSafepoints", off[] = "-XX:-DebugNonSafepoints";
    for (size_t i = 0; i + sizeof on - 1 <= len; i++) {
        if (memcmp(s + i, on, sizeof on - 1) == 0)
            *flag = 1;
        else if (memcmp(s + i, off, sizeof off - 1) == 0)
            *flag = 0;
    }
}

/* DebugNonSafepoints decides how dense the pc -> inline-stack maps are.
 * HotSpot turns it on by itself when an agent wants CompiledMethodLoad and
 * the flag is left at its default (compute_recording_non_safepoints), so only
 * an explicit -XX:-DebugNonSafepoints makes the maps sparse. */
int debug_non_safepoints(void)
{
    int flag = 2;
    scan_vm_options(scan_dns, &flag);
    return flag;
}

/* Sets *ctx when s has --patch-module, or an argument file that may hide it. */
static void scan_patch(const char *s, size_t len, void *ctx)
{
    static const char opt[] = "--patch-module";
    for (size_t i = 0; i < len; i++) {
        if ((i == 0 || s[i - 1] == 0 || s[i - 1] == ' ') && s[i] == '@')
            *(bool *)ctx = true;
        if (len - i >= sizeof opt - 1 && memcmp(s + i, opt, sizeof opt - 1) == 0)
            *(bool *)ctx = true;
    }
}

/* Whether classes of the runtime image may have been replaced: JVMTI does not
 * show the JVM's module patches, so the options are read for them. */
bool image_may_be_patched(void)
{
    bool patched = false;
    scan_vm_options(scan_patch, &patched);
    return patched;
}

/* Requests each wanted capability that the JVM can give, and says what is
 * lost for each one it cannot. */
void add_capabilities(void)
{
    jvmtiCapabilities pot, want;
    memset(&pot, 0, sizeof pot);
    memset(&want, 0, sizeof want);
    if ((*ag.jvmti)->GetPotentialCapabilities(ag.jvmti, &pot) != JVMTI_ERROR_NONE)
        memset(&pot, 0, sizeof pot);
#define WANT(cap, lost)                                                   \
    do {                                                                  \
        if (pot.cap)                                                      \
            want.cap = 1;                                                 \
        else                                                              \
            jq_warn("JVM lacks capability " #cap ": " lost);              \
    } while (0)
    WANT(can_generate_compiled_method_load_events,
         "no compiled code, inline maps or stubs are recorded");
    WANT(can_generate_all_class_hook_events, "no class files are recorded");
    WANT(can_get_bytecodes, "no bytecode of hidden classes is recorded");
    WANT(can_get_constant_pool, "no constant pools of hidden classes are recorded");
    if (ag.retransform) {
        WANT(can_retransform_classes, "classes loaded before the agent have no class files");
        if (pot.can_retransform_any_class)
            want.can_retransform_any_class = 1;
    }
    if (ag.mode == JM_MODE_REFERENCE) {
        WANT(can_generate_method_entry_events, "no method entry records");
        WANT(can_generate_method_exit_events, "no method exit records");
        WANT(can_generate_single_step_events, "no single-step records");
    }
#undef WANT
    jvmtiError e = (*ag.jvmti)->AddCapabilities(ag.jvmti, &want);
    if (e != JVMTI_ERROR_NONE) {
        /* Another agent may hold an exclusive one: take them one at a time. */
        jvmtiCapabilities one;
        unsigned char *w = (unsigned char *)&want;
        for (size_t i = 0; i < sizeof want; i++) {
            for (int bit = 0; bit < 8; bit++) {
                if (!(w[i] & (1u << bit)))
                    continue;
                memset(&one, 0, sizeof one);
                ((unsigned char *)&one)[i] = (unsigned char)(1u << bit);
                jvmtiError e1 = (*ag.jvmti)->AddCapabilities(ag.jvmti, &one);
                if (e1 != JVMTI_ERROR_NONE)
                    jq_warn("capability (byte %zu bit %d of jvmtiCapabilities) refused: %s",
                            i, bit, errname(e1));
            }
        }
    }
    memset(&ag.caps, 0, sizeof ag.caps);
    (*ag.jvmti)->GetCapabilities(ag.jvmti, &ag.caps);
}

/* Takes an exclusive lock on dir/agent.lock for the life of the process.
 * False only if another live process holds it; any other failure (no flock
 * support on the file system) is not a reason to stop. */
bool lock_dir(const char *dir)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/agent.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return true;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        bool busy = errno == EWOULDBLOCK;
        close(fd);
        return !busy;
    }
    return true; /* fd stays open: the lock lasts until the process ends */
}

void default_dir(void)
{
    if (ag.dir[0])
        return;
    const char *env = getenv("JPT_TRACE_DIR");
    if (env && *env)
        snprintf(ag.dir, sizeof ag.dir, "%s", env);
    else
        snprintf(ag.dir, sizeof ag.dir, "jpt-%d.trace", (int)getpid());
}
