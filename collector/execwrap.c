/* libjptexec.so: preloaded by ptrec into the process tree of a command that is
 * not itself a java launcher (a script). It wraps the exec and spawn calls of
 * libc; an exec of a java launcher becomes the exec of that launcher with the
 * agent (and under qemu with the plugin when recording emulated), traced into
 * the directory ptrec assigns it (exec_rewrite.h). Every other exec passes
 * through untouched. Any failure to reach ptrec runs the launcher untraced
 * with one line on stderr: the program itself must never break. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "collector/exec_rewrite.h"
#include "collector/ptrec_lib.h"

#define EXPORT __attribute__((visibility("default")))
/* ptrec answers at once; a loaded machine gets some slack. */
#define REPLY_TIMEOUT_MS 10000

extern char **environ;

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[], char *const[]);

static void *next_symbol(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof buf - 2) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
}

static int connect_ptrec(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path) return -1;
    strcpy(sa.sun_path, path);
    /* Not CLOEXEC: the JVM inherits it (handshake, plugin control). */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    int rc;
    while ((rc = connect(fd, (struct sockaddr *)&sa, sizeof sa)) < 0 && errno == EINTR) {}
    if (rc < 0) { close(fd); return -1; }
    return fd;
}

static bool send_line(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

/* One line from fd within REPLY_TIMEOUT_MS, without its '\n'. */
static bool read_line(int fd, char *buf, size_t cap, size_t *len)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t got = 0;
    for (;;) {
        char *nl = memchr(buf, '\n', got);
        if (nl) { *len = (size_t)(nl - buf); return true; }
        if (got == cap) return false;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (ms >= REPLY_TIMEOUT_MS) return false;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r = poll(&p, 1, (int)(REPLY_TIMEOUT_MS - ms));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        ssize_t k = recv(fd, buf + got, cap - got, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        got += (size_t)k;
    }
}

static const char *env_value(char *const envp[], const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=') return envp[i] + n + 1;
    return NULL;
}

/* The file execvp would run: a name with a slash is itself, else the first
 * executable file on PATH (glibc's default when PATH is unset). */
static char *resolve(const char *file)
{
    if (!file || !*file) return NULL;
    if (strchr(file, '/')) return strdup(file);
    const char *path = getenv("PATH");
    if (!path) path = "/bin:/usr/bin";
    size_t fl = strlen(file);
    for (const char *p = path;; ) {
        const char *c = strchr(p, ':');
        size_t dl = c ? (size_t)(c - p) : strlen(p);
        char *cand = malloc(dl + fl + 3);
        if (!cand) return NULL;
        if (dl) {
            memcpy(cand, p, dl);
            cand[dl] = '/';
            memcpy(cand + dl + 1, file, fl + 1);
        } else {
            memcpy(cand, "./", 2);
            memcpy(cand + 2, file, fl + 1);
        }
        struct stat st;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
            return cand;
        free(cand);
        if (!c) return NULL;
        p = c + 1;
    }
}

/* A java launcher: named java, and an ELF file (a script of that name, a
 * version manager's shim, runs as it is and its exec of the real one is
 * followed). */
static bool is_java(const char *path)
{
    char *real = realpath(path, NULL);
    bool java = pr_is_java_launcher(path, real) && pr_is_elf_file(path);
    free(real);
    return java;
}

/* A traced exec: the plan and the descriptors the JVM inherits (closed by
 * the caller when the exec fails, and in the parent after a spawn). */
typedef struct traced {
    pr_exec_plan plan;
    int fds[2];
} traced;

static void traced_drop(traced *t)
{
    for (int i = 0; i < 2; i++)
        if (t->fds[i] >= 0) close(t->fds[i]);
    pr_exec_plan_free(&t->plan);
}

/* True when `path` is a java launcher to trace and *t holds its exec. */
static bool plan_traced(const char *path, char *const argv[], char *const envp[], traced *t)
{
    memset(&t->plan, 0, sizeof t->plan);
    t->fds[0] = t->fds[1] = -1;
    pr_exec_cfg cfg;
    if (!path || !pr_exec_cfg_get(&cfg, getenv)) return false;
    if (!is_java(path)) return false;
    /* A command line that loads the agent itself is the user's to run. */
    if ((argv && argv[0] && pr_has_jpt_agent_argv(argv + 1)) ||
        pr_has_jpt_agent_opts(env_value(envp, "JAVA_TOOL_OPTIONS")) ||
        pr_has_jpt_agent_opts(env_value(envp, "JDK_JAVA_OPTIONS")) ||
        pr_has_jpt_agent_opts(env_value(envp, "_JAVA_OPTIONS")))
        return false;
    int hs = connect_ptrec(cfg.sock);
    if (hs < 0) {
        note("jpt: cannot reach ptrec at %s (%s): %s runs untraced", cfg.sock, strerror(errno),
             path);
        return false;
    }
    t->fds[0] = hs;
    char line[PR_EXEC_MAX_LINE + 1];
    size_t len = 0;
    unsigned long n;
    const char *dir;
    size_t dirlen;
    bool answered = send_line(hs, "exec 1\n") && read_line(hs, line, sizeof line - 1, &len);
    if (!answered || !pr_parse_exec_reply(line, len, &n, &dir, &dirlen)) {
        line[answered ? len : 0] = '\0';
        bool refused = strncmp(line, "no ", 3) == 0;
        note("jpt: ptrec gave %s no trace directory%s%.200s: it runs untraced", path,
             refused ? ": " : "", refused ? line + 3 : "");
        traced_drop(t);
        return false;
    }
    char *d = strndup(dir, dirlen);
    bool ok = d != NULL;
    if (ok && cfg.qemu) {
        char intro[64];
        snprintf(intro, sizeof intro, "plugin 1 jvm %lu\n", n);
        ok = (t->fds[1] = connect_ptrec(cfg.sock)) >= 0 && send_line(t->fds[1], intro);
    }
    ok = ok && pr_exec_plan_make(&cfg, path, argv, envp, d, t->fds[0], t->fds[1], &t->plan);
    free(d);
    if (!ok) {
        note("jpt: cannot prepare the traced exec of %s: it runs untraced", path);
        traced_drop(t);
    }
    return ok;
}

static int traced_execve(const char *path, char *const argv[], char *const envp[])
{
    static execve_fn real_execve;
    if (!real_execve) real_execve = (execve_fn)next_symbol("execve");
    traced t;
    if (!plan_traced(path, argv, envp, &t)) return real_execve(path, argv, envp);
    real_execve(t.plan.path, t.plan.argv, t.plan.envp);
    int e = errno;
    traced_drop(&t);
    errno = e;
    return -1;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    return traced_execve(path, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[])
{
    return traced_execve(path, argv, environ);
}

/* The p variants: a java launcher found on PATH is exec'd by its path; any
 * other file goes to libc, which searches and fails exactly as it would. */
EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    char *path = resolve(file);
    if (path && is_java(path)) {
        int rc = traced_execve(path, argv, envp);
        int e = errno;
        free(path);
        errno = e;
        return rc;
    }
    free(path);
    static int (*real_execvpe)(const char *, char *const[], char *const[]);
    if (!real_execvpe) real_execvpe = next_symbol("execvpe");
    return real_execvpe(file, argv, envp);
}

EXPORT int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}

/* execl, execle, execlp: the arguments into a vector. */
static char **collect(const char *arg0, va_list ap, char ***envp)
{
    size_t n = 1, cap = 16;
    char **v = malloc(cap * sizeof *v);
    if (!v) return NULL;
    v[0] = (char *)arg0;
    for (char *a = arg0 ? va_arg(ap, char *) : NULL;; a = va_arg(ap, char *)) {
        if (n + 1 >= cap) {
            char **w = realloc(v, (cap *= 2) * sizeof *v);
            if (!w) { free(v); return NULL; }
            v = w;
        }
        v[n++] = a;
        if (!a) break;
    }
    if (!arg0) v[0] = NULL;
    if (envp) *envp = va_arg(ap, char **);
    return v;
}

EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    char **v = collect(arg, ap, NULL);
    va_end(ap);
    if (!v) { errno = ENOMEM; return -1; }
    int rc = traced_execve(path, v, environ);
    int e = errno;
    free(v);
    errno = e;
    return rc;
}

EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    char **envp = NULL;
    char **v = collect(arg, ap, &envp);
    va_end(ap);
    if (!v) { errno = ENOMEM; return -1; }
    int rc = traced_execve(path, v, envp);
    int e = errno;
    free(v);
    errno = e;
    return rc;
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    char **v = collect(arg, ap, NULL);
    va_end(ap);
    if (!v) { errno = ENOMEM; return -1; }
    int rc = execvpe(file, v, environ);
    int e = errno;
    free(v);
    errno = e;
    return rc;
}

static int traced_spawn(const char *sym, pid_t *pid, const char *path,
                        const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
                        char *const argv[], char *const envp[], const char *file)
{
    spawn_fn real = (spawn_fn)next_symbol(sym);
    traced t;
    if (!plan_traced(path, argv, envp, &t)) return real(pid, file, fa, attr, argv, envp);
    spawn_fn real_spawn = (spawn_fn)next_symbol("posix_spawn");
    int rc = real_spawn(pid, t.plan.path, fa, attr, t.plan.argv, t.plan.envp);
    traced_drop(&t);   /* the child has its copies */
    return rc;
}

EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return traced_spawn("posix_spawn", pid, path, fa, attr, argv, envp, path);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                        const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    char *path = resolve(file);
    int rc = traced_spawn("posix_spawnp", pid, path, fa, attr, argv, envp, file);
    free(path);
    return rc;
}
