#include "common/jerr.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

static const char *prog = "jpt";
static bool quiet, verbose;
/* Warnings come from any thread (decoding runs on several). */
static GMutex lock;

/* Kinds of bulk warnings met so far, with their first message. */
#define MAX_KINDS 64
static struct kind {
    char kind[64];
    unsigned long count;
    char first[160];
} kinds[MAX_KINDS];
static size_t nkinds;

void jerr_set_prog(const char *name) { prog = name; }
const char *jerr_prog(void) { return prog; }
void jerr_set_quiet(bool q) { quiet = q; }

static void vmsg(const char *kind, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: %s", prog, kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void jerr_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_mutex_lock(&lock);
    vmsg("", fmt, ap);
    g_mutex_unlock(&lock);
    va_end(ap);
}

/* Warnings already printed, by hash: readers that meet the same damage say
 * it in the same words, and it is printed once. */
#define MAX_SEEN 4096
static uint64_t seen[MAX_SEEN];
static size_t nseen;

static bool seen_before(const char *fmt, va_list ap)
{
    char buf[1024];
    va_list cp;
    va_copy(cp, ap);
    vsnprintf(buf, sizeof buf, fmt, cp);
    va_end(cp);
    uint64_t h = 1469598103934665603ull;
    for (const char *p = buf; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    for (size_t i = 0; i < nseen; i++)
        if (seen[i] == h)
            return true;
    if (nseen < MAX_SEEN)
        seen[nseen++] = h;
    return false;
}

void jerr_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_mutex_lock(&lock);
    if (!quiet && !seen_before(fmt, ap))
        vmsg("warning: ", fmt, ap);
    g_mutex_unlock(&lock);
    va_end(ap);
}

void jerr_set_verbose(bool v) { verbose = v; }

void jerr_warn_flush(void)
{
    g_mutex_lock(&lock);
    for (size_t i = 0; i < nkinds; i++) {
        if (kinds[i].count > 1 && !quiet && !verbose)
            fprintf(stderr, "%s: warning: %lu more like \"%s\" (--verbose shows each)\n",
                    prog, kinds[i].count - 1, kinds[i].first);
        kinds[i].count = kinds[i].count ? 1 : 0;
    }
    g_mutex_unlock(&lock);
}

/* jerr_warn_kind with the lock held. */
static void warn_kind(const char *kind, const char *fmt, va_list ap)
{
    if (quiet)
        return;
    struct kind *k = NULL;
    for (size_t i = 0; i < nkinds && !k; i++)
        if (!strncmp(kinds[i].kind, kind, sizeof kinds[i].kind - 1))
            k = &kinds[i];
    if (!k && nkinds < MAX_KINDS) {
        if (!nkinds)
            atexit(jerr_warn_flush);
        k = &kinds[nkinds++];
        snprintf(k->kind, sizeof k->kind, "%s", kind);
    }
    if (seen_before(fmt, ap))
        return;
    if (k && k->count++ && !verbose)
        return;
    if (k && k->count == 1) {
        /* The count line quotes the start of the first message. */
        va_list cp;
        va_copy(cp, ap);
        int n = vsnprintf(k->first, sizeof k->first, fmt, cp);
        va_end(cp);
        if (n >= (int)sizeof k->first)
            memcpy(k->first + sizeof k->first - 4, "...", 4);
    }
    vmsg("warning: ", fmt, ap);
}

void jerr_warn_kind(const char *kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_mutex_lock(&lock);
    warn_kind(kind, fmt, ap);
    g_mutex_unlock(&lock);
    va_end(ap);
}

void jerr_warn_grouped(const char *msg)
{
    /* "FILE: offset N: what": the same what, numbers aside, is the same
     * kind ("... (vaddr 0x7f.., size 272); record ignored"). */
    const char *what = msg, *p;
    while ((p = strstr(what, ": ")))
        what = p + 2;
    char kind[64];
    size_t n = 0;
    for (p = what; *p && n + 1 < sizeof kind; p++) {
        if (g_ascii_isdigit(*p) || (*p == 'x' && p > what && p[-1] == '0')) {
            if (!n || kind[n - 1] != '#')
                kind[n++] = '#';
            while (g_ascii_isxdigit(p[1]) || p[1] == 'x')
                p++;
        } else {
            kind[n++] = *p;
        }
    }
    kind[n] = '\0';
    jerr_warn_kind(kind, "%s", msg);
}

void jerr_die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_mutex_lock(&lock);
    vmsg("", fmt, ap);
    g_mutex_unlock(&lock);
    va_end(ap);
    exit(code);
}
