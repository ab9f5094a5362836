/* Internal interfaces between the agent's files (not installed). */
#ifndef JPT_AGENT_AGENT_H
#define JPT_AGENT_AGENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- patch.c: the code patch watcher -------------------------------------
 * HotSpot rewrites compiled code after it was loaded (call sites resolved,
 * inline caches, nmethod entry barriers...). The watcher keeps a copy of
 * every live range it was told about, compares it with memory off the
 * application threads, and records each change as JM_CODE_PATCH. */

/* Starts watching [vaddr, vaddr+size) whose current bytes are `bytes` (the
 * copy already recorded). Returns false if a range with the same start and
 * size is already watched (a repeated load event) or on allocation failure. */
bool pw_register(uint64_t vaddr, uint64_t size, const void *bytes);
/* Stops watching the range starting at vaddr (compiled method unloaded). */
void pw_unregister(uint64_t vaddr);
/* Starts the background thread: a full scan every interval_ms (0: no
 * thread, only the final scan), and a scan of the close spans (pinned areas,
 * recently patched sites) every close_ms in between (0: none). With
 * stub_ranges, hs_stub_ranges() is re-read each full scan. */
int pw_start(unsigned interval_ms, unsigned close_ms, bool stub_ranges, char *err,
             size_t errlen);
/* Also compares [vaddr, vaddr+size), once it is watched, every close_ms: an
 * area HotSpot rewrites often, such as the inline cache transition stubs.
 * Up to four areas; more are ignored. */
void pw_watch_closely(uint64_t vaddr, uint64_t size);
/* Last scan, then stops the thread. Idempotent. */
void pw_stop(void);

typedef struct pw_stats {
    uint64_t ranges, scans, patches, patch_bytes, scan_ns_max, scan_ns_total,
        unreadable, close_scans, close_changes, close_scan_ns_total;
} pw_stats;
void pw_get_stats(pw_stats *s);

/* ---- jimage.c: class files from the JDK's runtime image ------------------ */

typedef struct jimage jimage;
/* Opens JAVA_HOME/lib/modules through JAVA_HOME/lib/libjimage.so; NULL when
 * either is missing or unusable. */
jimage *ji_open(const char *java_home);
void ji_close(jimage *ji);
/* The class file of class `name` ("java/lang/String") in the image, malloc'd,
 * its size in *len; NULL when the image has no such class. */
uint8_t *ji_class_bytes(jimage *ji, const char *name, size_t *len);

/* ---- idmap.c: small hash containers (libc only) ------------------------- */

/* Insert-only set of nonzero 64-bit keys, guarded by its own mutex. */
typedef struct u64set {
    pthread_mutex_t lock;
    uint64_t *slots;
    size_t cap, n;
} u64set;
#define U64SET_INIT { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0 }
/* Returns 1 if key was added, 0 if present, -1 on allocation failure. */
int u64set_add(u64set *s, uint64_t key);
bool u64set_has(u64set *s, uint64_t key);

/* Classes by (signature, defining loader): the load hook sees a name and a
 * loader object, ClassPrepare a class object; both reduce to this key. */
enum { CE_FILE = 1, CE_PREPARED = 2, CE_HIDDEN = 4 };
typedef struct class_entry {
    uint64_t id;
    unsigned flags;    /* CE_*: what has been recorded for the class */
} class_entry;

/* Finds or creates the entry for (sig, loader) (new entries get the next
 * class id, starting at 1), returns it as it was before this call in *before,
 * then ORs set_flags into it, all under one lock so two threads never both
 * see a flag unset. Returns false on allocation failure. */
bool class_get(const char *sig, uint64_t loader, unsigned set_flags, class_entry *before);
uint64_t class_count(void);


#endif
