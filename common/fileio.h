/* Small file helpers shared by the writers (libc only). */
#ifndef JPT_COMMON_FILEIO_H
#define JPT_COMMON_FILEIO_H

#include <stddef.h>

/* write() until all n bytes are out, retrying after EINTR and short writes
 * (a full disk or a signal), so a record is never left half-written unless
 * the process dies. Returns 0 or -errno. */
int jpt_write_all(int fd, const void *p, size_t n);

#endif
