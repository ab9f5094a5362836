/* Error and progress messages of the command-line tools: one line each,
 * prefixed with the program name. */
#ifndef JPT_COMMON_JERR_H
#define JPT_COMMON_JERR_H

#include <stdbool.h>

void jerr_set_prog(const char *name);
const char *jerr_prog(void);
/* "prog: message\n" on stderr; a warning already printed is not printed
 * again. */
void jerr_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void jerr_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the error and exits with `code`. */
_Noreturn void jerr_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Suppresses warnings (errors still print). */
void jerr_set_quiet(bool quiet);

/* A warning of a kind that may come in bulk (one per stream, per record):
 * kind is a string naming it (the call's format will do). The
 * first of each kind is printed; later ones are counted, and at exit one
 * line per kind tells how many more there were. With verbose, each one is
 * printed. */
void jerr_warn_kind(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* jerr_warn_kind of a finished message, its kind the text after its last
 * ": " (the "what" of "FILE: offset N: what") with its numbers left out. */
void jerr_warn_grouped(const char *msg);
void jerr_set_verbose(bool verbose);
/* Prints the counts of the kinds warned about more than once, now. */
void jerr_warn_flush(void);

#endif
