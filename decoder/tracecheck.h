/* The check every ptdecode command runs on a trace directory before reading
 * it: the one place that tells a fatal error from a counted loss
 * (docs/FORMAT.md, "Damage and loss"). Fatal: a file that is missing or
 * not a regular file, a bad header, a record or index entry no writer makes,
 * files that contradict each other. Counted: what a recording cut off or a
 * file cut short leaves: the bytes and records before the cut are used, the
 * rest is counted and warned about. */
#ifndef JPT_DECODER_TRACECHECK_H
#define JPT_DECODER_TRACECHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <glib.h>

typedef struct dc_check {
    bool reference;            /* the agent's reference mode: no PT expected */
    bool have_info;            /* info.json was read */
    bool complete;             /* info.json "complete" is true */
    long long exit_signal;     /* info.json exit.signal; 0: none */
    bool meta_end;             /* jvm/meta.jpt holds the END record */
    bool meta_cut;             /* ... ends in a record cut short, at meta_cut_offset */
    uint64_t meta_cut_offset;
    uint64_t meta_ignored;     /* records whose payload cannot be read: ignored */
    uint64_t code_cut;         /* code records whose bytes lie past the end of code.bin */
    uint64_t streams;          /* PT stream files (pt/<stream>.pt) */
    uint64_t streams_absent;   /* streams info.json lists with bytes and no file holds */
    uint64_t indexes_cut;      /* .idx files ending in a partial record */
    uint64_t missing_bytes;    /* stream bytes the index or info.json has and the file not */
    uint64_t unindexed_bytes;  /* stream bytes past the index: not decoded */
    /* Of missing_bytes, those the decoder does not count in dc_stats
     * lost_bytes itself: absent streams, info.json sizes beyond the file and
     * its index, per-CPU streams (decoded as their split). */
    uint64_t lost_outside;
    bool main_untraced;        /* the thread named "main" has no trace */
    uint32_t main_tid;
    /* Warnings, as found: one line each ("FILE: offset N: ..."), and its
     * kind (a constant string: jerr_warn_kind). */
    GPtrArray *warnings, *kinds;
} dc_check;

/* Checks DIR. Returns 0 with *c filled (dc_check_free it); or -1 with a
 * one-line "FILE: offset N: reason" (or "FILE: reason") in err and nothing
 * to free. */
int dc_check_trace(const char *dir, dc_check *c, char *err, size_t errlen);
void dc_check_free(dc_check *c);

/* True when the recording did not finish as recorded: info.json says so or
 * is missing next to PT streams, the command died of a signal, meta.jpt is
 * cut or has no END record. */
bool dc_check_cut(const dc_check *c);
/* What the summary and stats print on their "recording" line: "complete",
 * or "cut: " and the reasons. */
const char *dc_check_recording(const dc_check *c, char *buf, size_t len);
/* What they add to the "losses" line, e.g. ", 2 streams absent, 4096
 * bytes past their index not decoded" (empty when nothing). */
const char *dc_check_losses(const dc_check *c, char *buf, size_t len);

#endif
