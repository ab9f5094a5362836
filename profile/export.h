/* Profile exports: cct-json, folded stacks, Chrome trace events
 * (docs/PROFILES.md has each format). */
#ifndef JPT_PROFILE_EXPORT_H
#define JPT_PROFILE_EXPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "profile/cct.h"
#include "profile/hot.h"
#include "profile/names.h"

/* The label of thread root node n: "main (tid 1234)"; g_free it. */
char *pf_thread_label(const pf_names *names, const pf_node *n);

/* The finalized tree t as one "jpt-cct" version 1 JSON object; tsc_hz > 0
 * is written as the frequency of its times (pf_export_cct_json: none).
 * Returns 0, -1 on a write error. */
int pf_export_cct_json_hz(FILE *out, const pf_cct *t, const pf_names *names, const char *title,
                          double tsc_hz);
int pf_export_cct_json(FILE *out, const pf_cct *t, const pf_names *names, const char *title);

/* Folded stacks ("a;b;c value" per line, nodes with a nonzero self value
 * of metric `by`). With per_thread, each stack starts with its thread's
 * label; otherwise the threads' contexts are merged. t is finalized. */
int pf_export_folded(FILE *out, const pf_cct *t, const pf_names *names, pf_metric by,
                     bool per_thread);

/* Chrome trace-event JSON of a flow: a "B" event at each method activation's
 * start and an "E" event at its end, per thread in the flow's order, times
 * in microseconds from t0_tsc, each event of a thread at its own nanosecond.
 * Built as the flow is read: memory is the open frames of each thread. */
typedef struct pf_chrome pf_chrome;
pf_chrome *pf_chrome_new(FILE *out, const pf_names *names, uint64_t t0_tsc, double tsc_hz);
int pf_chrome_sink(const fl_event *ev, void *chrome);   /* fl_sink */
/* The same timeline in speedscope's evented format: one profile per thread
 * (each thread's events kept in a temporary file until the end), frames
 * shared; times in ns. Fed by pf_chrome_sink, ended by pf_chrome_finish. */
pf_chrome *pf_speedscope_new(FILE *out, const pf_names *names, uint64_t t0_tsc, double tsc_hz,
                             const char *title);
/* Closes the open frames at each thread's last event and the JSON. Returns
 * the number of spans (B/E pairs) written, or -1 on a write error. */
long long pf_chrome_finish(pf_chrome *c);

/* TSC ticks per second of this machine, measured against CLOCK_MONOTONIC
 * over about 20 ms. */
double pf_tsc_hz_measure(void);

#endif
