/* Small file helpers shared by the writers and readers (libc only). */
#ifndef JPT_COMMON_FILEIO_H
#define JPT_COMMON_FILEIO_H

#include <stddef.h>
#include <stdint.h>

/* write() until all n bytes are out, retrying after EINTR and short writes
 * (a full disk or a signal), so a record is never left half-written unless
 * the process dies. Returns 0 or -errno. */
int jpt_write_all(int fd, const void *p, size_t n);

/* What jpt_open_regular returns for a path that is not a regular file. */
#define JPT_ENOTREG (-100000)

/* Opens path for reading only if it is a regular file (after symlinks), so
 * that a FIFO, a device or a directory put in place of a trace file is
 * refused at once instead of blocking or reading forever. Returns the
 * descriptor (O_CLOEXEC) with its size in *size, or -errno, or JPT_ENOTREG. */
int jpt_open_regular(const char *path, uint64_t *size);
/* The reason for a negative jpt_open_regular result, for messages. */
const char *jpt_open_error(int rc);

/* Reads a whole regular file of at most max bytes into a malloc'd buffer
 * (one byte more, a NUL, is allocated). Returns 0; or -1 with
 * "PATH: reason" in err ("offset 0: implausible size N" above max). */
int jpt_read_small_file(const char *path, size_t max, char **buf, size_t *len, char *err,
                        size_t errlen);

#endif
