#include "common/jerr.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *prog = "jpt";
static bool quiet;

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
    vmsg("", fmt, ap);
    va_end(ap);
}

void jerr_warn(const char *fmt, ...)
{
    if (quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmsg("warning: ", fmt, ap);
    va_end(ap);
}

void jerr_die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg("", fmt, ap);
    va_end(ap);
    exit(code);
}
