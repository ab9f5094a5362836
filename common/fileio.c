#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int jpt_open_regular(const char *path, uint64_t *size)
{
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer; on a
     * regular file the flag changes nothing. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return JPT_ENOTREG;
    }
    if (size)
        *size = (uint64_t)st.st_size;
    return fd;
}

const char *jpt_open_error(int rc)
{
    return rc == JPT_ENOTREG ? "not a regular file" : strerror(-rc);
}

int jpt_read_small_file(const char *path, size_t max, char **buf, size_t *len, char *err,
                        size_t errlen)
{
    *buf = NULL;
    *len = 0;
    uint64_t size;
    int fd = jpt_open_regular(path, &size);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot read: %s", path, jpt_open_error(fd));
        return -1;
    }
    if (size > max) {
        snprintf(err, errlen, "%s: offset 0: implausible size %llu", path,
                 (unsigned long long)size);
        close(fd);
        return -1;
    }
    char *p = malloc((size_t)size + 1);
    if (!p) {
        snprintf(err, errlen, "%s: out of memory for %llu bytes", path, (unsigned long long)size);
        close(fd);
        return -1;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, p + got, (size_t)size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(err, errlen, "%s: offset %zu: cannot read: %s", path, got,
                     r < 0 ? strerror(errno) : "the file shrank while it was read");
            free(p);
            close(fd);
            return -1;
        }
        got += (size_t)r;
    }
    close(fd);
    p[got] = '\0';
    *buf = p;
    *len = got;
    return 0;
}
