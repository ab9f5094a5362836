/* Thread id reuse: a thread ends and a new one gets the same id (forced through
 * /proc/sys/kernel/ns_last_pid). Both must land in one decodable tid-<TID> stream, the second
 * continuing the first's files. Exits 77 (skipped) where the id cannot be forced. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile long sink;
static volatile long lasttid;

static void *work(void *arg)
{
    long s = 0;
    for (long i = 0; i < 2000; i++)
        s += (i & 1) ? i * (long)arg : i >> 1;
    sink += s;
    lasttid = syscall(SYS_gettid);
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, work, (void *)1);
    pthread_join(t, NULL);
    long first = lasttid;
    int reused = 0;
    for (int k = 0; k < 3; k++) {
        usleep(20000); /* let the old thread's id be released */
        FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");
        if (!f) {
            printf("cannot force thread ids: skipped\n");
            return 77;
        }
        fprintf(f, "%ld", first - 1);
        if (fclose(f) != 0) {
            printf("cannot force thread ids: skipped\n");
            return 77;
        }
        pthread_create(&t, NULL, work, (void *)(long)(k + 2));
        pthread_join(t, NULL);
        reused += lasttid == first;
    }
    printf("reuse: id %ld reused %d times\n", first, reused);
    return reused ? 0 : 77;
}
