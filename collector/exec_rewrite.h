/* How ptrec follows a process tree (collector/README.md, "Scripts"): the
 * command runs natively with libjptexec.so preloaded; when a process execs a
 * java launcher, the library asks ptrec for the JVM's trace directory and
 * execs the launcher with the agent, under qemu and the plugin when ptrec
 * records with --emulate. These are the pure parts, shared by the library
 * and ptrec and unit-tested: the configuration ptrec leaves in the
 * environment, the protocol lines and the rewritten exec. No glib: the
 * library is loaded into every program of the tree. */
#ifndef JPT_COLLECTOR_EXEC_REWRITE_H
#define JPT_COLLECTOR_EXEC_REWRITE_H

#include <stdbool.h>
#include <stddef.h>

/* The environment ptrec gives the command's process tree. */
#define PR_EXEC_ENV_SOCK "JPT_EXEC_SOCK"     /* ptrec's listening socket */
#define PR_EXEC_ENV_AGENT "JPT_EXEC_AGENT"   /* libjpt.so */
#define PR_EXEC_ENV_QEMU "JPT_EXEC_QEMU"     /* qemu-x86_64 (emulated backend only) */
#define PR_EXEC_ENV_PLUGIN "JPT_EXEC_PLUGIN" /* -plugin argument, less out= and ctl= */

typedef struct pr_exec_cfg {
    const char *sock, *agent;
    const char *qemu, *plugin;   /* both NULL: the hardware backend, the JVM runs natively */
} pr_exec_cfg;

/* Fills *c from `get` (getenv). False when the process is not under ptrec
 * (no socket or agent) or the emulator's settings are half there. */
bool pr_exec_cfg_get(pr_exec_cfg *c, char *(*get)(const char *));

/* The protocol on ptrec's socket, one connection per request:
 *   "exec 1\n"           -> "ok <n> <dir>\n" (the n-th JVM, traced into dir)
 *                           or "no <reason>\n"; the connection then carries
 *                           the agent's handshake (docs/FORMAT.md)
 *   "plugin 1 jvm <n>\n" -> no reply; the connection is the plugin's control
 *                           socket for the n-th JVM (emulated backend) */
#define PR_EXEC_MAX_LINE 4200

typedef enum pr_exec_req { PR_EXEC_REQ_EXEC, PR_EXEC_REQ_PLUGIN } pr_exec_req;

/* Parses a request line (without '\n'), from any process of the tree: exact
 * tokens, n a positive decimal. */
bool pr_parse_exec_request(const char *line, size_t len, pr_exec_req *req, unsigned long *n);
/* Parses ptrec's answer "ok <n> <dir>" (without '\n'); *dir points into line. */
bool pr_parse_exec_reply(const char *line, size_t len, unsigned long *n, const char **dir,
                         size_t *dirlen);

/* The exec that runs a java launcher traced. */
typedef struct pr_exec_plan {
    char *path;          /* what to execve */
    char **argv, **envp; /* NULL-terminated */
} pr_exec_plan;

/* Builds the exec of the java launcher `path` (argv and envp as the program
 * passed them) traced into `dir`: -agentpath:AGENT=out=DIR and the flags for
 * exact JIT maps as the launcher's first options (only this JVM loads the
 * agent: nothing is added to JAVA_TOOL_OPTIONS, which every JVM below would
 * read), JPT_HANDSHAKE_FD=hs_fd in the JVM's environment. Under the emulator
 * (cfg->qemu): qemu with the plugin writing into DIR, controlled on ctl_fd;
 * LD_PRELOAD leaves qemu's own environment (qemu execs nothing) and is given
 * to the guest with -E, so the JVM's children are followed. Returns false
 * when out of memory. */
bool pr_exec_plan_make(const pr_exec_cfg *cfg, const char *path, char *const argv[],
                       char *const envp[], const char *dir, int hs_fd, int ctl_fd,
                       pr_exec_plan *p);
void pr_exec_plan_free(pr_exec_plan *p);

/* True when path is an ELF file. A java launcher must be one to run under
 * qemu or take JVM options; a script named java (a version manager's shim)
 * runs natively and execs the real launcher. */
bool pr_is_elf_file(const char *path);

#endif
