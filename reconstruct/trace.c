/* Opening a trace for reconstruction, and one thread's decoded flow. */
#include "reconstruct/trace.h"
#include "decoder/percpu.h"

#include <stdio.h>
#include <string.h>

#include <glib.h>

struct rt_trace {
    char *dir;
    dm_model *m;
    di_cache *cache;
    dc_trace_info info;
    rc_program *p;
    rp_index *idx;
    uint32_t *tids;
    size_t ntids, ncpu;
    GPtrArray *warnings;
    dc_options dopt;
};

rt_trace *rt_open(const char *dir, char *err, size_t errlen)
{
    dm_model *m = dm_load(dir, err, errlen);
    if (!m)
        return NULL;
    rt_trace *t = g_new0(rt_trace, 1);
    t->dir = g_strdup(dir);
    t->m = m;
    t->warnings = g_ptr_array_new_with_free_func(g_free);
    for (size_t i = 0; i < m->nwarnings; i++)
        g_ptr_array_add(t->warnings, g_strdup(m->warnings[i]));
    if (m->warnings_total > m->nwarnings)
        g_ptr_array_add(t->warnings, g_strdup_printf("%s: %zu more metadata problems not "
                                                     "shown", dir,
                                                     m->warnings_total - m->nwarnings));
    char msg[1024];
    if (dc_read_info(dir, &t->info, msg, sizeof msg) < 0)
        g_ptr_array_add(t->warnings,
                        g_strdup_printf("%s (decoding without CPU errata workarounds)", msg));
    t->cache = di_cache_new(m, err, errlen);
    if (!t->cache) {
        rt_close(t);
        return NULL;
    }
    t->p = rc_program_load(dir, err, errlen);
    if (!t->p) {
        rt_close(t);
        return NULL;
    }
    const char *const *lines;
    size_t nw = rc_program_warnings(t->p, &lines);
    for (size_t i = 0; i < nw && i < 20; i++)
        g_ptr_array_add(t->warnings, g_strdup(lines[i]));
    if (nw > 20)
        g_ptr_array_add(t->warnings, g_strdup_printf("%s: %zu more class-file problems not "
                                                     "shown", dir, nw - 20));
    t->idx = rp_index_new(t->p);
    t->dopt.threads = 1;
    t->ntids = dc_list_thread_streams(dir, &t->tids, &t->ncpu);
    return t;
}

void rt_close(rt_trace *t)
{
    if (!t)
        return;
    rp_index_free(t->idx);
    rc_program_free(t->p);
    di_cache_free(t->cache);
    dm_free(t->m);
    g_free(t->tids);
    g_ptr_array_free(t->warnings, TRUE);
    g_free(t->dir);
    g_free(t);
}

void rt_set_decode_options(rt_trace *t, const dc_options *o)
{
    t->dopt = *o;
}

size_t rt_warnings(const rt_trace *t, const char *const **lines)
{
    *lines = (const char *const *)t->warnings->pdata;
    return t->warnings->len;
}

const dm_model *rt_model(const rt_trace *t) { return t->m; }
rc_program *rt_program(const rt_trace *t) { return t->p; }

size_t rt_threads(const rt_trace *t, const uint32_t **tids, size_t *ncpu)
{
    *tids = t->tids;
    if (ncpu)
        *ncpu = t->ncpu;
    return t->ntids;
}

int rt_thread_flow_path(rt_trace *t, uint32_t tid, const char *pt_path, const char *idx_path,
                        const rt_flow_out *out, char *err, size_t errlen)
{
    rp_projector *r = rp_new(t->p, t->m, t->idx, tid, out->sink, out->ctx);
    dc_output dout = { .sink = rp_event, .ctx = r };
    dc_stats local;
    int rc = dc_decode_stream_opts(&(dc_trace){ t->m, t->cache, &t->info }, pt_path, idx_path,
                                   &dout, &t->dopt, out->dst ? out->dst : &local, err, errlen);
    if (rc >= 0 && rp_finish(r, out->st))
        rc = 1;
    rp_free(r);
    return rc;
}

int rt_thread_flow(rt_trace *t, uint32_t tid, const rt_flow_out *out, char *err, size_t errlen)
{
    /* A per-CPU trace's threads are in its split (decoder/percpu.h). */
    const char *sdir = dc_thread_stream_dir(t->dir, err, errlen);
    if (!sdir)
        return -1;
    char *pt = g_strdup_printf("%s/pt/tid-%u.pt", sdir, tid);
    char *idx = g_strdup_printf("%s/pt/tid-%u.idx", sdir, tid);
    int rc = rt_thread_flow_path(t, tid, pt, idx, out, err, errlen);
    g_free(pt);
    g_free(idx);
    return rc;
}

rp_projector *rt_projector(rt_trace *t, uint32_t tid, fl_sink sink, void *ctx)
{
    return rp_new(t->p, t->m, t->idx, tid, sink, ctx);
}

int rt_decode(rt_trace *t, uint32_t tid, const dc_output *out, const dc_options *opt,
              dc_stats *st, char *err, size_t errlen)
{
    const char *sdir = dc_thread_stream_dir(t->dir, err, errlen);
    if (!sdir)
        return -1;
    char *pt = g_strdup_printf("%s/pt/tid-%u.pt", sdir, tid);
    char *idx = g_strdup_printf("%s/pt/tid-%u.idx", sdir, tid);
    int rc = dc_decode_stream_opts(&(dc_trace){ t->m, t->cache, &t->info }, pt, idx, out, opt, st,
                                   err, errlen);
    g_free(pt);
    g_free(idx);
    return rc;
}

const char *rt_dir(const rt_trace *t) { return t->dir; }

const char *rt_method_name(const rt_trace *t, uint64_t method_id, char *buf, size_t len)
{
    const rc_method *m = method_id ? rc_method_by_id(t->p, method_id) : NULL;
    if (m) {
        snprintf(buf, len, "%s.%s%s", m->klass, m->name, m->sig);
        return buf;
    }
    if (!method_id) {
        snprintf(buf, len, "?");
        return buf;
    }
    return dm_method_str(t->m, method_id, buf, len);
}
