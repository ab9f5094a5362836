#include "collector/exec_rewrite.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

bool pr_exec_cfg_get(pr_exec_cfg *c, char *(*get)(const char *))
{
    c->sock = get(PR_EXEC_ENV_SOCK);
    c->agent = get(PR_EXEC_ENV_AGENT);
    c->qemu = get(PR_EXEC_ENV_QEMU);
    c->plugin = get(PR_EXEC_ENV_PLUGIN);
    if (c->qemu && !*c->qemu) c->qemu = NULL;
    if (c->plugin && !*c->plugin) c->plugin = NULL;
    return c->sock && *c->sock && c->agent && *c->agent && !c->qemu == !c->plugin;
}

/* A positive decimal of at most 9 digits filling [p, end). */
static bool take_count(const char *p, const char *end, unsigned long *n)
{
    if (p == end || end - p > 9 || *p == '0') return false;
    unsigned long v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9') return false;
        v = v * 10 + (unsigned long)(*p - '0');
    }
    *n = v;
    return true;
}

bool pr_parse_exec_request(const char *line, size_t len, pr_exec_req *req, unsigned long *n)
{
    static const char exec_line[] = "exec 1", plugin_pre[] = "plugin 1 jvm ";
    if (len == sizeof exec_line - 1 && memcmp(line, exec_line, len) == 0) {
        *req = PR_EXEC_REQ_EXEC;
        *n = 0;
        return true;
    }
    size_t pn = sizeof plugin_pre - 1;
    if (len > pn && memcmp(line, plugin_pre, pn) == 0 && take_count(line + pn, line + len, n)) {
        *req = PR_EXEC_REQ_PLUGIN;
        return true;
    }
    return false;
}

bool pr_parse_exec_reply(const char *line, size_t len, unsigned long *n, const char **dir,
                         size_t *dirlen)
{
    if (len < 3 || memcmp(line, "ok ", 3) != 0) return false;
    const char *p = line + 3, *end = line + len;
    const char *sp = memchr(p, ' ', (size_t)(end - p));
    if (!sp || !take_count(p, sp, n) || sp + 1 >= end || sp[1] != '/') return false;
    if (memchr(sp + 1, '\0', (size_t)(end - sp - 1))) return false;
    *dir = sp + 1;
    *dirlen = (size_t)(end - sp - 1);
    return true;
}

/* A growing NULL-terminated vector of strings. */
typedef struct vec {
    char **v;
    size_t n, cap;
    bool oom;
} vec;

static void vec_add(vec *a, char *s)
{
    if (!s) { a->oom = true; return; }
    if (a->n + 2 > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        char **v = realloc(a->v, cap * sizeof *v);
        if (!v) { a->oom = true; free(s); return; }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    if (vasprintf(&s, f, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

static void vec_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

static bool env_named(const char *entry, const char *name)
{
    size_t n = strlen(name);
    return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

/* qemu's option parser reads ",," as a literal comma. */
static char *qemu_escape(const char *s)
{
    size_t n = strlen(s), extra = 0;
    for (size_t i = 0; i < n; i++) extra += s[i] == ',';
    char *o = malloc(n + extra + 1), *q = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ',') *q++ = ',';
        *q++ = s[i];
    }
    *q = '\0';
    return o;
}

bool pr_exec_plan_make(const pr_exec_cfg *cfg, const char *path, char *const argv[],
                       char *const envp[], const char *dir, int hs_fd, int ctl_fd,
                       pr_exec_plan *p)
{
    memset(p, 0, sizeof *p);
    vec av = { 0 }, ev = { 0 };
    const char *preload = NULL;
    for (size_t i = 0; envp && envp[i]; i++) {
        if (env_named(envp[i], "JPT_HANDSHAKE_FD")) continue;
        if (cfg->qemu && env_named(envp[i], "LD_PRELOAD")) {
            preload = envp[i];
            continue;
        }
        vec_add(&ev, strdup(envp[i]));
    }
    char *hs = fmt("JPT_HANDSHAKE_FD=%d", hs_fd);
    if (cfg->qemu) {
        char *out = qemu_escape(dir);
        vec_add(&av, strdup(cfg->qemu));
        if (preload) {
            vec_add(&av, strdup("-E"));
            vec_add(&av, strdup(preload));
        }
        vec_add(&av, strdup("-E"));
        vec_add(&av, hs);
        vec_add(&av, strdup("-plugin"));
        vec_add(&av, out ? fmt("%s,out=%s,ctl=%d", cfg->plugin, out, ctl_fd) : NULL);
        free(out);
    } else {
        vec_add(&ev, hs);
    }
    vec_add(&av, strdup(cfg->qemu ? path : (argv && argv[0] ? argv[0] : path)));
    vec_add(&av, fmt("-agentpath:%s=out=%s", cfg->agent, dir));
    vec_add(&av, strdup("-XX:+UnlockDiagnosticVMOptions"));
    vec_add(&av, strdup("-XX:+DebugNonSafepoints"));
    for (size_t i = 1; argv && argv[0] && argv[i]; i++) vec_add(&av, strdup(argv[i]));
    if (!ev.v && !(ev.v = calloc(1, sizeof *ev.v))) ev.oom = true;
    p->path = strdup(cfg->qemu ? cfg->qemu : path);
    p->argv = av.v;
    p->envp = ev.v;
    if (av.oom || ev.oom || !p->path) {
        pr_exec_plan_free(p);
        return false;
    }
    return true;
}

void pr_exec_plan_free(pr_exec_plan *p)
{
    free(p->path);
    vec_free(p->argv);
    vec_free(p->envp);
    memset(p, 0, sizeof *p);
}

bool pr_is_elf_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return false;
    unsigned char m[4];
    bool elf = read(fd, m, 4) == 4 && m[0] == 0x7f && m[1] == 'E' && m[2] == 'L' && m[3] == 'F';
    close(fd);
    return elf;
}
