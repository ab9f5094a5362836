/* ParCCT speedup: builds the CCT of one large flow sequentially and with
 * the thread-pool builder, checks the trees are equal, and prints the times
 * and the speedup. Run through bench/cct-build.
 *
 *   cct-build [--trace DIR] [--events N] [--threads T] [--methods M] [--depth D]
 *             [--runs R]
 *
 * With --trace, the flow is a recorded trace's, as the profiles see it
 * (pf_flow_source: decoded, projected and recovered), read into memory
 * first; without, a synthetic one.
 *
 * The flow: 4 application threads, random walks of calls and returns over
 * M methods (skewed towards a few hot ones) up to depth D, with bytecode
 * events in between; defaults give a tree of some 10^5 nodes, far fewer
 * than events, as real runs do. It is
 * generated once into memory so that both builders read the same events at
 * memory speed. */
#include <getopt.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "profile/cct.h"
#include "profile/source.h"

/* CPU seconds of the whole process (all threads). */
static double cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds of the calling thread only. */
static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The flow in memory: events, and the stacks FL_SEGMENT events point to. */
typedef struct flow {
    GArray *ev;               /* fl_event */
    GPtrArray *stacks;
} flow;

static int keep_event(const fl_event *e, void *ctx)
{
    flow *fw = ctx;
    fl_event c = *e;
    c.stack = NULL;
    if (e->stack && e->depth) {
        uint64_t *st = g_memdup2(e->stack, e->depth * sizeof *st);
        g_ptr_array_add(fw->stacks, st);
        c.stack = st;
    }
    g_array_append_val(fw->ev, c);
    return 0;
}

/* The tree finalized, as ptdecode uses it (taking t). */
static pf_cct *finalized(pf_cct *t)
{
    if (!t || t->finalized)
        return t;
    pf_cct *fin = pf_cct_finalize(t);
    pf_cct_free(t);
    return fin;
}

static double load_average(void)
{
    double l = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = 0;
        fclose(f);
    }
    return l;
}

static void generate(flow *fw, uint64_t n, uint32_t methods, uint32_t max_depth)
{
    g_array_set_size(fw->ev, n);
    fl_event *ev = (fl_event *)fw->ev->data;
    GRand *r = g_rand_new_with_seed(11);
    uint32_t depth[4] = { 0 };
    uint32_t (*stack)[256] = g_malloc0(4 * sizeof *stack);
    uint64_t tsc[4] = { 1, 1, 1, 1 };
    for (uint64_t i = 0; i < n; i++) {
        uint32_t t = (uint32_t)(i / 4096 % 4);   /* threads interleave in runs */
        fl_event *e = &ev[i];
        *e = (fl_event){ .tid = 1000 + t, .bci = -1, .opcode = -1, .count = 1 };
        e->tsc = tsc[t] += (uint64_t)g_rand_int_range(r, 1, 100);
        int k = g_rand_int_range(r, 0, 10);
        if (k < 4 && depth[t] < max_depth) {
            e->kind = FL_CALL;
            /* A call graph: each method calls one of 4 callees, the first
             * ones far more often, like hot paths. */
            double u = g_rand_double(r);
            uint32_t caller = depth[t] ? stack[t][depth[t] - 1] : t;
            uint32_t m = 1 + (caller * 31u + (uint32_t)(u * u * u * 4)) % methods;
            e->method_id = m;
            stack[t][depth[t]++] = m;
        } else if (k < 8 && depth[t] > 0) {
            e->kind = FL_RETURN;
            depth[t]--;
        } else {
            e->kind = FL_BYTECODE;
        }
    }
    g_rand_free(r);
    g_free(stack);
}

int main(int argc, char **argv)
{
    uint64_t n = 4000000;
    unsigned threads = 2, runs = 3;
    uint32_t methods = 400, max_depth = 16;
    const char *trace = NULL;
    static const struct option opts[] = {
        { "trace", required_argument, NULL, 'T' },
        { "events", required_argument, NULL, 'e' }, { "threads", required_argument, NULL, 't' },
        { "methods", required_argument, NULL, 'm' }, { "runs", required_argument, NULL, 'r' },
        { "depth", required_argument, NULL, 'd' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'e': n = strtoull(optarg, NULL, 10); break;
        case 't': threads = (unsigned)atoi(optarg); break;
        case 'm': methods = (uint32_t)atoi(optarg); break;
        case 'r': runs = (unsigned)atoi(optarg); break;
        case 'd': max_depth = (uint32_t)atoi(optarg); break;
        case 'T': trace = optarg; break;
        default:
            fprintf(stderr, "usage: cct-build [--trace DIR] [--events N] [--threads T] "
                    "[--methods M] [--depth D] [--runs R]\n");
            return 2;
        }
    }
    if (n == 0 || threads == 0 || methods == 0 || runs == 0 || max_depth == 0 || max_depth > 256) {
        fprintf(stderr, "cct-build: counts must be positive\n");
        return 2;
    }
    flow fw = { g_array_new(FALSE, FALSE, sizeof(fl_event)), g_ptr_array_new_with_free_func(g_free) };
    if (trace) {
        char err[512];
        fprintf(stderr, "cct-build: reading the flow of %s ...\n", trace);
        if (pf_flow_source(trace, keep_event, &fw, err, sizeof err) != 0) {
            fprintf(stderr, "cct-build: %s\n", err);
            return 2;
        }
        n = fw.ev->len;
    } else {
        generate(&fw, n, methods, max_depth);
    }
    const fl_event *ev = (const fl_event *)fw.ev->data;
    pf_cct_opts o = pf_cct_default_opts();
    double best_seq = 1e30, best_par = 1e30, cpu_seq = 0, cpu_par = 0;
    /* Both builders end with the finalized tree the profiles use: the
     * sequential one finalizes its tree, the parallel one finalizes its
     * partial trees in parallel and merges them (pf_par_finish). Recorded
     * of the best runs: the sequential builder's finalizing, and the
     * parallel one's feeding (buffering events into chunks, on the calling
     * thread: serial) and finishing (wall time after the last event). */
    double seq_fin = 0, feed_cpu = 0, finish_wall = 0;
    pf_cct *seq_tree = NULL, *par_tree = NULL;
    for (unsigned run = 0; run < runs; run++) {
        double c0 = cpu(), t0 = now();
        pf_seq *s = pf_seq_new(&o);
        for (uint64_t i = 0; i < n; i++)
            pf_seq_sink(&ev[i], s);
        pf_cct *built = pf_seq_finish(s);
        double tb = now();
        pf_cct *t = finalized(built);
        double t1 = now(), c1 = cpu();
        double f0 = thread_cpu();
        pf_par *p = pf_par_new(&o, threads, 1u << 16);
        for (uint64_t i = 0; i < n; i++)
            pf_par_sink(&ev[i], p);
        double f1 = thread_cpu(), tf = now();
        pf_cct *u = finalized(pf_par_finish(p));
        double t2 = now(), c2 = cpu();
        if (!t || !u) {
            fprintf(stderr, "cct-build: out of memory\n");
            return 2;
        }
        if (t1 - t0 < best_seq) {
            best_seq = t1 - t0;
            cpu_seq = c1 - c0;
            seq_fin = t1 - tb;
        }
        if (t2 - t1 < best_par) {
            best_par = t2 - t1;
            cpu_par = c2 - c1;
            feed_cpu = f1 - f0;
            finish_wall = t2 - tf;
        }
        pf_cct_free(seq_tree);
        pf_cct_free(par_tree);
        seq_tree = t;
        par_tree = u;
    }
    pf_cct *a = seq_tree, *b = par_tree;
    char why[256];
    bool same = pf_cct_equal(a, b, why, sizeof why);
    printf("%s: events %" PRIu64 ", CCT nodes %u, %u processors\n", trace ? trace : "synthetic flow",
           n, a->count, g_get_num_processors());
    printf("sequential         %8.3f s  (%.1f M events/s, %.3f s CPU; finalizing %.3f s)\n",
           best_seq, (double)n / best_seq / 1e6, cpu_seq, seq_fin);
    printf("parallel, %u threads %7.3f s  (%.1f M events/s, %.3f s CPU; finishing %.3f s)\n",
           threads, best_par, (double)n / best_par / 1e6, cpu_par, finish_wall);
    printf("speedup            %8.2fx   (best of %u runs, each to the finalized tree; trees %s)\n",
           best_seq / best_par, runs, same ? "equal" : why);
    /* On a machine whose cores are busy with other work the wall-clock
     * speedup understates the builder: the CPU ratio says how much work
     * the pool adds (copying events, finalizing partial trees, merging). */
    printf("load average %.2f; parallel work / sequential work %.2f\n", load_average(),
           cpu_seq > 0 ? cpu_par / cpu_seq : 0);
    printf("serial part: feeding the pool %.3f s CPU (%.0f%% of the sequential work)\n", feed_cpu,
           cpu_seq > 0 ? 100 * feed_cpu / cpu_seq : 0);
    pf_cct_free(seq_tree);
    pf_cct_free(par_tree);
    g_array_free(fw.ev, TRUE);
    g_ptr_array_free(fw.stacks, TRUE);
    return same ? 0 : 1;
}
