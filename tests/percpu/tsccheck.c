/* tsccheck FILE.pt...: every file's packets decode from its start to its end
 * (libipt's packet decoder) and its TSC packets never go back in time.
 * Prints one line per file (packets, PSBs, TSCs, first and last TSC); exit
 * status 1 with "FILE: offset N: ..." on the first problem. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <glib.h>
#include <intel-pt.h>

static int check(const char *path)
{
    gchar *buf = NULL;
    gsize len = 0;
    GError *ge = NULL;
    if (!g_file_get_contents(path, &buf, &len, &ge)) {
        fprintf(stderr, "%s: %s\n", path, ge->message);
        g_error_free(ge);
        return 1;
    }
    int rc = 0;
    uint64_t n = 0, psbs = 0, tscs = 0, first = 0, last = 0;
    if (len) {
        struct pt_config cfg;
        pt_config_init(&cfg);
        cfg.begin = (uint8_t *)buf;
        cfg.end = (uint8_t *)buf + len;
        struct pt_packet_decoder *d = pt_pkt_alloc_decoder(&cfg);
        int r = d ? pt_pkt_sync_set(d, 0) : -pte_nomem;
        while (r >= 0) {
            uint64_t off = 0;
            pt_pkt_get_offset(d, &off);
            struct pt_packet p;
            r = pt_pkt_next(d, &p, sizeof p);
            if (r < 0) {
                if (r != -pte_eos) {
                    fprintf(stderr, "%s: offset %" PRIu64 ": %s\n", path, off,
                            pt_errstr(pt_errcode(r)));
                    rc = 1;
                }
                break;
            }
            n++;
            psbs += p.type == ppt_psb;
            if (p.type != ppt_tsc) continue;
            if (tscs && p.payload.tsc.tsc < last) {
                fprintf(stderr, "%s: offset %" PRIu64 ": TSC %" PRIu64 " after %" PRIu64 "\n",
                        path, off, p.payload.tsc.tsc, last);
                rc = 1;
                break;
            }
            if (!tscs++) first = p.payload.tsc.tsc;
            last = p.payload.tsc.tsc;
        }
        if (d) pt_pkt_free_decoder(d);
    }
    printf("%s: %" PRIu64 " packets, %" PRIu64 " PSB, %" PRIu64 " TSC from %" PRIu64 " to %"
           PRIu64 "\n", path, n, psbs, tscs, first, last);
    g_free(buf);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: tsccheck FILE.pt...\n");
        return 2;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) rc |= check(argv[i]);
    return rc;
}
