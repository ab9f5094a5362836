/* Is the guest's rdtsc under qemu-user the host's? The JVM agent stamps its records with
 * rdtsc in the guest while the plugin stamps TSC packets with rdtsc on the host; both must
 * be one clock. Run as `tsc_check QEMU`: reads the host TSC, runs itself under QEMU to
 * read the guest TSC, reads the host TSC again, and requires host-before <= guest <=
 * host-after, five times. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <x86intrin.h>

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--guest")) {
        printf("%llu\n", (unsigned long long)__rdtsc());
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: tsc_check QEMU\n");
        return 2;
    }
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' '/proc/%d/exe' --guest", argv[1], (int)getpid());
    for (int i = 0; i < 5; i++) {
        unsigned long long before = __rdtsc();
        FILE *p = popen(cmd, "r");
        unsigned long long guest = 0;
        int n = p ? fscanf(p, "%llu", &guest) : 0;
        int rc = p ? pclose(p) : -1;
        unsigned long long after = __rdtsc();
        if (n != 1 || rc != 0) {
            fprintf(stderr, "tsc_check: running the guest failed\n");
            return 1;
        }
        printf("host %llu <= guest %llu <= host %llu: %s\n", before, guest, after,
               before <= guest && guest <= after ? "yes" : "NO");
        if (!(before <= guest && guest <= after))
            return 1;
    }
    return 0;
}
