/* Focus on part of a profile: the stacks that contain a frame matching an
 * --include pattern, without those that contain one matching --exclude
 * (patterns over class and method names, in Java or JVM style: a package
 * 'java.util.*', a class 'Branchy', a method 'Branchy.fib*'). */
#ifndef JPT_PROFILE_FOCUS_H
#define JPT_PROFILE_FOCUS_H

#include <stdbool.h>
#include <stddef.h>

#include "profile/cct.h"
#include "profile/names.h"

typedef struct pf_focus pf_focus;

pf_focus *pf_focus_new(void);
void pf_focus_free(pf_focus *f);
void pf_focus_add(pf_focus *f, const char *glob, bool include);
bool pf_focus_empty(const pf_focus *f);

/* A new finalized tree: the nodes of the finalized tree t whose stack (the
 * methods from the thread root down to the node) has a frame matching an
 * include pattern, when there are any, and none matching an exclude
 * pattern, with their values; the other nodes' values are dropped and nodes
 * left without any value (in their subtree) removed. NULL when out of
 * memory. */
pf_cct *pf_focus_apply(pf_focus *f, const pf_cct *t, const pf_names *names);

/* After pf_focus_apply: the i-th pattern that matched no method, or NULL. */
const char *pf_focus_unmatched(const pf_focus *f, size_t i);

/* A frame of the method matches glob: its class's name in either form
 * ('com.example.*', 'com/example/Foo') or the method's name in either style
 * (pf_method_pattern). */
bool pf_frame_pattern_match(pf_method_pattern *p, const char *glob, const pf_method_name *m);

#endif
