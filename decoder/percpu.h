/* Per-CPU traces (pt/cpu-K.pt with sideband/cpu-K.sb, the hardware
 * backend's and `ptrec --emulate --cpus N`'s layout) split into the
 * per-thread streams the rest of the decoder works on.
 *
 * Each CPU stream is cut into stretches: up to and including a TIP.PGD, up
 * to a loss (AUX TRUNCATED), or up to the end. With a user-space IP filter,
 * a thread is switched in or out only while tracing is off, so every
 * PERF_RECORD_SWITCH of the CPU's sideband is attached to the gap that
 * contains its time: from the last TSC before a TIP.PGD (or a loss) to the
 * TSC of the next TIP.PGE (or of the PSB+ where decoding resumes). A switch
 * whose time lies inside a stretch cannot be attached: it is reported and
 * counted, never guessed. A stretch belongs to the thread switched in at
 * the gap before it; with no switch there, to the thread of the stretch
 * before. The stretches of all CPUs are taken in time order, so a thread
 * that migrates continues its one stream, and its flow state (shadow stack,
 * pending bytecodes, inline position) carries over as in a per-thread
 * trace. The first IP packet of a stretch is written uncompressed (the CPU
 * stream's last IP may be another thread's); a thread's stream gets an
 * AUX TRUNCATED record (and a PSB+ before its next stretch) where trace of
 * it may have been lost. Sideband times are converted to TSC with
 * info.json "time". */
#ifndef JPT_DECODER_PERCPU_H
#define JPT_DECODER_PERCPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dc_percpu_stats {
    uint64_t cpus, threads, stretches;
    uint64_t switches;          /* SWITCH records read */
    uint64_t attached;          /* ... attached to a gap */
    uint64_t unattached;        /* ... whose time lies inside a stretch: reported */
    uint64_t inconsistent;      /* switch-out of a thread that was not switched in, etc. */
    uint64_t orphan_stretches;  /* stretches before any switch-in: left out */
    uint64_t orphan_bytes;
    uint64_t skipped_bytes;     /* undecodable bytes up to the next PSB */
    uint64_t losses;            /* AUX TRUNCATED records of the CPU streams */
    uint64_t problems;          /* messages (the first ones in msgs) */
    char msgs[8][320];
    size_t nmsgs;
} dc_percpu_stats;

/* Time conversion of the sideband (info.json "time"): perf time -> TSC. */
typedef struct dc_time_conv {
    bool valid;
    uint64_t time_zero;
    uint32_t time_mult;
    uint16_t time_shift;
} dc_time_conv;

/* Reads DIR/info.json "time"; identity when it is missing. Returns 0, or -1
 * with err naming the file when its mult or shift is out of range. */
int dc_read_time_conv(const char *dir, dc_time_conv *tc, char *err, size_t errlen);

/* Splits DIR's per-CPU streams into OUTDIR/pt/tid-N.pt and .idx. Returns 0,
 * or -1 with a message in err when nothing could be split (a stream that
 * cannot be read). Problems inside the streams are counted in st and the
 * first ones described in st->msgs ("FILE: offset N: ..."). */
int dc_percpu_split(const char *dir, const char *outdir, const dc_time_conv *tc,
                    dc_percpu_stats *st, char *err, size_t errlen);

/* The directory whose pt/ holds DIR's per-thread streams: DIR itself when
 * it has tid-N streams or no per-CPU ones; else a private directory where
 * the per-CPU streams were split (once per process, removed at exit; the
 * problems are printed as warnings then). NULL with err on failure; a failed
 * split is not retried: later calls give the same err. */
const char *dc_thread_stream_dir(const char *dir, char *err, size_t errlen);

/* The split's statistics for DIR (NULL if DIR was not split). */
const dc_percpu_stats *dc_percpu_stats_of(const char *dir);

/* The warnings the split of DIR printed (none if it was not split), each a
 * g_strdup'd line appended to out (a GPtrArray). */
struct _GPtrArray;
void dc_percpu_warnings(const char *dir, struct _GPtrArray *out);

#endif
