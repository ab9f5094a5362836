/* A java launcher by name for ptrec's tests (an ELF file, as ptrec wants a
 * launcher to be): prints the JVM options it was given first (-agentpath:,
 * -XX:), one "jvm-option X" a line, and execs the rest of its command line
 * (the fake agent). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int i = 1;
    for (; i < argc && (!strncmp(argv[i], "-agentpath:", 11) || !strncmp(argv[i], "-XX:", 4)); i++)
        printf("jvm-option %s\n", argv[i]);
    fflush(stdout);
    if (i >= argc) return 0;
    execvp(argv[i], argv + i);
    perror(argv[i]);
    return 127;
}
