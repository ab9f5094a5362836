/* Where a command writes its output file (-o): a regular file, new or
 * replaced, is written through a temporary file in its directory and
 * renamed over it only once everything was written, so a failed or killed
 * command leaves the old file or none, never a part of one. Standard
 * output ("-") and files that are not regular (a FIFO, a device) are
 * written directly. Every failure is one line naming the file and the
 * reason. */
#ifndef JPT_PTDECODE_OUTFILE_H
#define JPT_PTDECODE_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>

typedef struct ptd_out {
    FILE *f;                   /* what to write to; the struct must stay in place */
    const char *path;          /* as given; "-": standard output */
    char *tmp;                 /* the temporary file, NULL when written directly */
    int fd;
    int error;                 /* errno of the first write that failed */
} ptd_out;

/* Opens path for writing. Returns 0, or -1 after printing why. */
int ptd_out_open(ptd_out *o, const char *path);
/* Finishes the output: checks that every write went out (-1 after
 * printing "PATH: cannot write: reason" if not) and, with keep and no
 * write error, puts the file in place; else removes what was written. */
int ptd_out_close(ptd_out *o, bool keep);

#endif
