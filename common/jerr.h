/* Error and progress messages of the command-line tools: one line each,
 * prefixed with the program name. */
#ifndef JPT_COMMON_JERR_H
#define JPT_COMMON_JERR_H

#include <stdbool.h>

void jerr_set_prog(const char *name);
const char *jerr_prog(void);
/* "prog: message\n" on stderr. */
void jerr_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void jerr_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the error and exits with `code`. */
_Noreturn void jerr_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Suppresses warnings (errors still print). */
void jerr_set_quiet(bool quiet);

#endif
