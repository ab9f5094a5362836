/* Pure functions of ptrec: parsing of everything that comes from outside
 * (command-line values, the agent's handshake line, /proc/cpuinfo). Kept free
 * of process state so the unit tests can feed them hostile input directly. */
#ifndef JPT_COLLECTOR_PTREC_LIB_H
#define JPT_COLLECTOR_PTREC_LIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- command-line values -------------------------------------------------- */

/* "4096", "512K", "4M", "1G", "4MiB", "64k": binary multiples. Rejects zero,
 * signs, overflow and trailing junk. Returns false on any of these. */
bool pr_parse_size(const char *s, uint64_t *out);

/* Plain decimal (or 0x hex) unsigned integer, whole string, no sign. */
bool pr_parse_u64(const char *s, uint64_t *out);

/* "0xLO-0xHI" (hex, prefix optional): lo < hi required. */
bool pr_parse_range(const char *s, uint64_t *lo, uint64_t *hi);

/* ---- the handshake (docs/FORMAT.md) --------------------------------------- */

#define PR_HANDSHAKE_MAX_LINE 256

typedef struct pr_handshake {
    uint64_t low, high;   /* code-cache bounds [low, high) */
    long pid;
} pr_handshake;

/* Parses one line (without its '\n') of the form
 *     jpt 1 codecache 0x<low> 0x<high> pid <pid>
 * The line comes from the traced process, so nothing is trusted: exact tokens,
 * single spaces, hex of at most 16 digits, low < high, both in the user half of
 * the address space, pid a positive decimal. On failure returns false and
 * points *why at a static description. */
bool pr_parse_handshake(const char *line, size_t len, pr_handshake *hs, const char **why);

/* ---- /proc/cpuinfo --------------------------------------------------------- */

typedef struct pr_cpu {
    char vendor[32];
    int family, model, stepping;   /* -1 when unknown */
} pr_cpu;

/* Parses the first processor's block of a /proc/cpuinfo image. */
void pr_cpu_parse(const char *text, pr_cpu *cpu);

/* ---- the traced command --------------------------------------------------- */

/* True when `path` (as given, or as resolved) names a java launcher: its
 * basename is "java". */
bool pr_is_java_launcher(const char *given, const char *resolved);

/* True when one whitespace-separated option of `opts` (or one argument of
 * argv, NULL-terminated) loads the jpt agent: -agentpath:...libjpt.so[=...]. */
bool pr_has_jpt_agent_opts(const char *opts);
bool pr_has_jpt_agent_argv(char *const argv[]);

#endif
