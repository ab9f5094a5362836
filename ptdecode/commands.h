#ifndef JPT_PTDECODE_COMMANDS_H
#define JPT_PTDECODE_COMMANDS_H

#include <stdbool.h>
#include <stdint.h>

#include "decoder/tracecheck.h"

/* Each returns the process exit status: 0 ok, also when the trace lost
 * data (counted, warned and reported), 1 on a fatal error (one line naming
 * the file, the offset and the reason), 2 usage error (docs/FORMAT.md,
 * "Damage and loss"). */
int cmd_info(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_hot(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_context(int argc, char **argv);
int cmd_flow(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_shard(int argc, char **argv);
int cmd_merge(int argc, char **argv);
/* `ptdecode TRACE.DIR`: the summary (profile_cmds.c). */
int cmd_summary(int argc, char **argv);

/* The trace check every command runs first: on a fatal error prints its
 * line and returns -1; else prints its warnings and fills *c
 * (dc_check_free it). */
int ptd_check(const char *dir, dc_check *c);

/* The calling-context encoding tree `ptdecode context` numbers a trace's
 * contexts with (default options), for `ptdecode flow --context-ids`. NULL
 * after printing why. (A pf_cct; declared opaquely to keep this header
 * free of profile/.) */
struct pf_cct *ptd_context_tree(const char *dir);

/* Option values several commands take (args.c): each fills its output and
 * returns true, or returns false after printing why not (the error names
 * the command cmd). */
/* --jobs N (1 to 1024) into *jobs. */
bool ptd_parse_jobs(const char *arg, unsigned *jobs);
/* --thread TID: a thread id (0 to 2^32 - 1). */
bool ptd_parse_tid(const char *cmd, const char *arg, long long *tid);
/* --limit N: a count of events or lines (0: no limit). */
bool ptd_parse_limit(const char *cmd, const char *arg, uint64_t *limit);

#endif
