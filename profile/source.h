/* Where profiles get their flow from: the one function the profile commands
 * call for events. */
#ifndef JPT_PROFILE_SOURCE_H
#define JPT_PROFILE_SOURCE_H

#include <stddef.h>

#include "reconstruct/flow.h"

/* Delivers the reconstructed flow of the trace in dir to sink: for a
 * reference-mode trace (JVM_INFO mode 1) the agent's records
 * (reconstruct/reference.h); for a traced run, the decoded and
 * reconstructed flow. Returns 0 when the whole flow was delivered, 1 when
 * the sink stopped it, -1 with a one-line message in err. */
int pf_flow_source(const char *dir, fl_sink sink, void *ctx, char *err, size_t errlen);

#endif
