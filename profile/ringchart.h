/* Calling Context Ring Chart: a single self-contained HTML page (no network)
 * that renders a calling context tree given in the cct-json format
 * ({"format":"jpt-cct","version":1,...}) as concentric rings. The page
 * template is compiled into the binary; the CCT is embedded as a JSON block. */
#ifndef JPT_PROFILE_RINGCHART_H
#define JPT_PROFILE_RINGCHART_H

#include <stddef.h>
#include <stdio.h>

/* Writes the ring chart page for the cct-json document `cct_json` (`len`
 * bytes, need not be NUL-terminated) to `out`. `title` (may be NULL: the
 * page then shows the document's own title) is HTML-escaped into <title>.
 * Inside the embedded script block "</" is written as "<\/" and "<!--" as
 * "\u003c!--", both equivalent inside JSON strings, so the data cannot end
 * the block. Returns 0, or -1 with a message in `err` (if non-NULL) when the
 * input is not a cct-json object or writing fails. */
int pf_ringchart_write(FILE *out, const char *cct_json, size_t len, const char *title,
                       char *err, size_t errlen);

/* The page template itself (without data), for tools that want to ship it. */
extern const char pf_ringchart_template[];
extern const size_t pf_ringchart_template_len;

#endif
