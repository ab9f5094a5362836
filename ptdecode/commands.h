#ifndef JPT_PTDECODE_COMMANDS_H
#define JPT_PTDECODE_COMMANDS_H

/* Each returns the process exit status: 0 ok, 1 bad or incomplete input
 * (what could be read is still reported), 2 usage error. */
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
/* `ptdecode TRACE.DIR`: the summary (profile_cmds.c). */
int cmd_summary(int argc, char **argv);

/* The calling-context encoding tree `ptdecode context` numbers a trace's
 * contexts with (default options), for `ptdecode flow --context-ids`. NULL
 * after printing why. (A pf_cct; declared opaquely to keep this header
 * free of profile/.) */
struct pf_cct *ptd_context_tree(const char *dir);

#endif
