/* Flame graph: a single self-contained HTML page (no network) that draws a
 * calling context tree given in the cct-json format as a flame graph on a
 * 2D canvas: icicle or flame orientation, search, zoom, the reversed
 * (callers) view, per-thread selection, frame kinds and a metric picker
 * (docs/PROFILES.md). The page template is compiled into the binary; the
 * CCT is embedded as a JSON block, escaped as the ring chart's is. */
#ifndef JPT_PROFILE_FLAMEGRAPH_H
#define JPT_PROFILE_FLAMEGRAPH_H

#include <stddef.h>
#include <stdio.h>

/* Writes the flame graph page for the cct-json document cct_json (len
 * bytes) to out, title (NULL: the document's own) HTML-escaped into
 * <title>. Returns 0, or -1 with a message in err when the input is not a
 * cct-json object or writing fails. */
int pf_flamegraph_write(FILE *out, const char *cct_json, size_t len, const char *title,
                        char *err, size_t errlen);

extern const char pf_flamegraph_template[];
extern const size_t pf_flamegraph_template_len;

#endif
