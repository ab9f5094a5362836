/* mkring [--flamegraph] CCT.json OUT.html [TITLE]: the ring chart page (or
 * the flame graph's) for a cct-json file, through pf_ringchart_write
 * (pf_flamegraph_write), what ptdecode's exporter calls. */
#include "profile/flamegraph.h"
#include "profile/ringchart.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    bool flame = argc > 1 && !strcmp(argv[1], "--flamegraph");
    if (flame) {
        argv++;
        argc--;
    }
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: mkring [--flamegraph] CCT.json OUT.html [TITLE]\n");
        return 2;
    }
    FILE *in = fopen(argv[1], "rb");
    if (!in) {
        perror(argv[1]);
        return 1;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, in)) > 0) {
        len += got;
        if (len == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    fclose(in);
    if (!buf) {
        fprintf(stderr, "mkring: out of memory\n");
        return 1;
    }
    FILE *out = fopen(argv[2], "wb");
    if (!out) {
        perror(argv[2]);
        free(buf);
        return 1;
    }
    char err[256];
    int rc = (flame ? pf_flamegraph_write : pf_ringchart_write)(out, buf, len,
                                                                argc > 3 ? argv[3] : NULL, err,
                                                                sizeof err);
    if (fclose(out) != 0 && rc == 0) {
        snprintf(err, sizeof err, "mkring: cannot write %s", argv[2]);
        rc = -1;
    }
    free(buf);
    if (rc != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    return 0;
}
