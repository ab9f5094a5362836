/* The control connection of libptemu.so: `filter ...` lines from ptrec, each handed to a
 * vCPU thread to apply (g_reset_req) and answered once it has been, and the filter
 * syntax they and the filter= argument share. */
#include "ptemu.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Filter change requests from the control thread. */
static pthread_mutex_t g_req_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_req_cond = PTHREAD_COND_INITIALIZER;
static uint64_t g_req_lo, g_req_hi;
static uint64_t g_req_seq, g_applied_seq;
atomic_int g_reset_req;
static int ctl_fd = -1;

bool filter_parse(const char *s, uint64_t *lo, uint64_t *hi)
{
    char *end;
    if (!strcmp(s, "none")) {
        *lo = 1;
        *hi = 0;
        return true;
    }
    if (!strcmp(s, "all")) {
        *lo = 0;
        *hi = UINT64_MAX;
        return true;
    }
    errno = 0;
    uint64_t a = strtoull(s, &end, 0);
    if (errno || (*end != '-' && *end != ' '))
        return false;
    while (*end == ' ' || *end == '-')
        end++;
    uint64_t b = strtoull(end, &end, 0);
    if (errno || (*end && *end != '\n' && *end != '\r' && *end != ' ') || b <= a)
        return false;
    *lo = a;
    *hi = b;
    return true;
}

static void ctl_reply(const char *s)
{
    ptemu_write_all(ctl_fd, s, strlen(s));
}

/* The control thread: reads `filter ...` lines, has a vCPU thread apply them, answers. */
static void *ctl_thread(void *arg)
{
    (void)arg;
    char line[512];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(ctl_fd, line + len, sizeof line - 1 - len);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return NULL;
        }
        len += (size_t)r;
        line[len] = 0;
        char *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = 0;
            uint64_t lo, hi;
            if (!strncmp(line, "filter ", 7) && filter_parse(line + 7, &lo, &hi)) {
                pthread_mutex_lock(&g_req_lock);
                g_req_lo = lo;
                g_req_hi = hi;
                uint64_t seq = ++g_req_seq;
                atomic_store(&g_reset_req, 1);
                /* Wait for the flush. When every guest thread is blocked in a system call
                 * nothing runs the reset; it is then still in force before any further
                 * guest code: a thread returning from a system call requests the reset in
                 * the syscall-return callback, and QEMU performs it before executing the
                 * next translated block. */
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 200 * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000L;
                }
                while (g_applied_seq < seq &&
                       pthread_cond_timedwait(&g_req_cond, &g_req_lock, &ts) == 0)
                    ;
                pthread_mutex_unlock(&g_req_lock);
                ctl_reply("ok\n");
            } else {
                ctl_reply("no bad request\n");
            }
            size_t used = (size_t)(nl + 1 - line);
            memmove(line, nl + 1, len - used + 1);
            len -= used;
        }
        if (len == sizeof line - 1)
            len = 0;
    }
}

void filter_init(uint64_t lo, uint64_t hi)
{
    g_req_lo = lo;
    g_req_hi = hi;
}

void filter_apply(uint64_t *lo, uint64_t *hi)
{
    pthread_mutex_lock(&g_req_lock);
    *lo = g_req_lo;
    *hi = g_req_hi;
    uint64_t seq = g_req_seq;
    g_applied_seq = seq;
    pthread_cond_broadcast(&g_req_cond);
    pthread_mutex_unlock(&g_req_lock);
}

void filter_recheck(void)
{
    pthread_mutex_lock(&g_req_lock);
    if (g_req_seq != g_applied_seq)
        atomic_store(&g_reset_req, 1);
    pthread_mutex_unlock(&g_req_lock);
}

int filter_ctl_start(int fd)
{
    ctl_fd = fd;
    if (fcntl(ctl_fd, F_SETFD, FD_CLOEXEC) < 0) {
        ptemu_warn("ctl=%d: %s", ctl_fd, strerror(errno));
        return -1;
    }
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, ctl_thread, NULL)) {
        ptemu_warn("cannot start the control thread");
        return -1;
    }
    pthread_attr_destroy(&at);
    return 0;
}
