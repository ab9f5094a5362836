#include "common/fileio.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

int jpt_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (w == 0)
            return -EIO;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}
