/* Option values more than one command takes, each checked and reported in
 * one place. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/jerr.h"
#include "ptdecode/commands.h"

/* --jobs N: 1 to 1024 threads for decoding and reconstruction. */
bool ptd_parse_jobs(const char *arg, unsigned *jobs)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || *end || end == arg || v < 1 || v > 1024) {
        jerr_error("--jobs: expected a thread count from 1 to 1024, got '%s'", arg);
        return false;
    }
    *jobs = (unsigned)v;
    return true;
}

bool ptd_parse_tid(const char *cmd, const char *arg, long long *tid)
{
    char *end;
    errno = 0;
    *tid = strtoll(arg, &end, 10);
    if (errno || *end || *tid < 0 || *tid > UINT32_MAX) {
        jerr_error("%s: --thread wants a thread id, not '%s'", cmd, arg);
        return false;
    }
    return true;
}

bool ptd_parse_limit(const char *cmd, const char *arg, uint64_t *limit)
{
    char *end;
    errno = 0;
    *limit = strtoull(arg, &end, 10);
    if (errno || *end || arg[0] == '-') {
        jerr_error("%s: --limit wants a count, not '%s'", cmd, arg);
        return false;
    }
    return true;
}
