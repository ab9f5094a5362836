/* The hot-method table of `ptdecode hot`, also printed by `ptdecode merge`. */
#ifndef JPT_PTDECODE_HOTPRINT_H
#define JPT_PTDECODE_HOTPRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "profile/cct.h"
#include "profile/hot.h"
#include "profile/names.h"
#include "profile/timebase.h"

/* The top methods of the finalized tree t by `by`: a table, or a JSON array. */
void ptd_print_hot(FILE *out, const pf_cct *t, const pf_names *names, const pf_timebase *tb,
                   pf_metric by, size_t top, bool json);

#endif
