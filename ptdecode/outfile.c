/* Output files written whole or not at all (outfile.h). */
#include "ptdecode/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "common/jerr.h"

/* The temporary files being written (an export writes several), removed if
 * a signal ends the process. */
#define MAX_PENDING 32
static char *volatile pending_tmp[MAX_PENDING];

static void remove_pending(int sig)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending_tmp[i])
            unlink(pending_tmp[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void forget_pending(const char *tmp)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending_tmp[i] == tmp)
            pending_tmp[i] = NULL;
}

/* The stream's writes go through here, which keeps the first failure's
 * errno: stdio reports only that one happened. */
static ssize_t out_write(void *c, const char *buf, size_t n)
{
    ptd_out *o = c;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(o->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (!o->error)
                o->error = w < 0 ? errno : EIO;
            return done ? (ssize_t)done : -1;
        }
        done += (size_t)w;
    }
    return (ssize_t)n;
}

static int out_close(void *c)
{
    ptd_out *o = c;
    if (o->fd != STDOUT_FILENO && close(o->fd) != 0 && !o->error)
        o->error = errno;
    return o->error ? -1 : 0;
}

static const char *shown(const ptd_out *o)
{
    return strcmp(o->path, "-") ? o->path : "standard output";
}

static int wrap(ptd_out *o)
{
    cookie_io_functions_t io = { .write = out_write, .close = out_close };
    o->f = fopencookie(o, "w", io);
    if (!o->f) {
        jerr_error("%s: cannot write: %s", o->tmp ? o->tmp : shown(o), strerror(errno));
        if (o->fd != STDOUT_FILENO)
            close(o->fd);
        return -1;
    }
    return 0;
}

int ptd_out_open(ptd_out *o, const char *path)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    o->fd = -1;
    if (!strcmp(path, "-")) {
        fflush(stdout);
        o->fd = STDOUT_FILENO;
        return wrap(o);
    }
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode)) {
            jerr_error("%s: cannot write: %s", path, strerror(EISDIR));
            return -1;
        }
        o->fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (o->fd < 0) {
            jerr_error("%s: cannot write: %s", path, strerror(errno));
            return -1;
        }
        return wrap(o);
    }
    int slot = 0;
    while (slot < MAX_PENDING && pending_tmp[slot])
        slot++;
    if (slot == MAX_PENDING) {
        jerr_error("%s: cannot write: more than %d outputs at once", path, MAX_PENDING);
        return -1;
    }
    o->tmp = g_strdup_printf("%s.tmp-XXXXXX", path);
    o->fd = g_mkstemp_full(o->tmp, O_WRONLY | O_CLOEXEC, 0600);
    /* mkstemp makes it 0600; an output is as readable as any new file. */
    mode_t mask = umask(0);
    umask(mask);
    if (o->fd < 0 || fchmod(o->fd, 0666 & ~mask) != 0) {
        jerr_error("%s: cannot create a file next to it: %s", path, strerror(errno));
        if (o->fd >= 0) {
            close(o->fd);
            unlink(o->tmp);
        }
        g_free(o->tmp);
        o->tmp = NULL;
        return -1;
    }
    if (wrap(o) < 0) {
        unlink(o->tmp);
        g_free(o->tmp);
        o->tmp = NULL;
        return -1;
    }
    pending_tmp[slot] = o->tmp;
    struct sigaction sa = { .sa_handler = remove_pending };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    return 0;
}

int ptd_out_close(ptd_out *o, bool keep)
{
    fclose(o->f);    /* flushes through out_write; o->error keeps why it failed */
    int e = o->error;
    if (!e && keep && o->tmp && rename(o->tmp, o->path) != 0)
        e = errno;
    if (e)
        jerr_error("%s: cannot write: %s", shown(o), strerror(e));
    if (o->tmp && (e || !keep))
        unlink(o->tmp);
    forget_pending(o->tmp);
    g_free(o->tmp);
    o->tmp = NULL;
    o->f = NULL;
    return e ? -1 : 0;
}
