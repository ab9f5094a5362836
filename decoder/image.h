/* The code bytes of a trace as libipt images.
 *
 * Every blob, code version and patch of the model is a file-backed section
 * (jvm/code.bin, offset, size, vaddr) in a shared libipt image section
 * cache, so libipt maps each once and keeps its block cache per section
 * (blobs and versions are split around runs of zero bytes, which are never
 * code: see add_extents in image.c). A decoder gets its own pt_image
 * (di_image) that shows the code valid at the decoder's current time:
 * di_image_advance applies loads, patches and unloads as decoding passes
 * their times.
 *
 * Sections reach libipt lazily: the address space is cut into tiles (no
 * section of any time overlaps two), and a tile's sections go into the
 * pt_image when the decoder first reads in it, through the image's
 * read-memory callback (which then returns that one instruction's bytes;
 * libipt gives its block isid 0, see di_image_read). From then on libipt
 * finds the tile's sections itself and keeps its block cache for them, so
 * the callback is off the hot path. libipt's pt_image_add walks every
 * section of the image, so adding all of a JIT run's thousands of sections
 * to each new image (per chunk, per retry, per unload) would cost
 * quadratic time for code a stretch of trace mostly never touches.
 *
 * Layering: libipt's pt_image_add shrinks or splits existing sections that
 * overlap a new one, so a section added later replaces what was there. The
 * image is therefore built bottom-up: blobs (oldest snapshot first), then
 * the valid code versions by start time, then their patches by time. Adding
 * a version or a patch is an incremental pt_image_add_cached; an unload
 * cannot be expressed that way (libipt removes sections only by file name
 * or address space, and all ours share both), so the image is rebuilt from
 * the timeline, once per batch of unloads passed.
 *
 * Threads: a di_cache is read-only once made (libipt's section cache locks
 * itself), so any number of threads may use one; a di_image belongs to one
 * thread at a time (its own section cache, if it has one, too). */
#ifndef JPT_DECODER_IMAGE_H
#define JPT_DECODER_IMAGE_H

#include <stdbool.h>
#include <stdint.h>

#include <intel-pt.h>

#include "decoder/model.h"

typedef struct di_cache di_cache;
typedef struct di_image di_image;

/* Registers every section of m with a new image section cache. NULL with a
 * message on failure. m must outlive the cache. */
di_cache *di_cache_new(const dm_model *m, char *err, size_t errlen);
void di_cache_free(di_cache *c);
struct pt_image_section_cache *di_cache_iscache(di_cache *c);

/* A new image showing the code valid at time tsc. */
di_image *di_image_new(di_cache *c, uint64_t tsc, char *err, size_t errlen);
/* The same, with the call-site resolutions early[0..nearly) (patch
 * indices) already applied ahead of their time, as an image that decoded
 * the trace up to tsc would have them (parallel decoding hands them from
 * one piece of a stream to the next). With own_cache, the image keeps its
 * sections in a section cache of its own (made as it needs them): libipt
 * keeps its block cache per section, and how it cuts instructions into
 * blocks depends on what that cache holds, so a decoder whose results
 * must not depend on what other decoders did (or do, on other threads)
 * starts from an empty one. */
di_image *di_image_new_resolved(di_cache *c, uint64_t tsc, const uint32_t *early, size_t nearly,
                                bool own_cache, char *err, size_t errlen);
/* A section cache of one decoder's own that several of its images share, so
 * that the isids of blocks mean the same in all of them (a decoder that
 * re-decodes a stretch with another image keeps its per-isid caches). */
typedef struct di_store di_store;
di_store *di_store_new(const di_cache *c);
void di_store_free(di_store *s);
/* di_image_new_resolved with its sections in store (NULL: the shared
 * cache); the store must outlive the image. */
di_image *di_image_new_in(di_cache *c, di_store *store, uint64_t tsc, const uint32_t *early,
                          size_t nearly, char *err, size_t errlen);
/* The section cache the image's sections (and the isids of its blocks)
 * belong to. */
struct pt_image_section_cache *di_image_iscache(di_image *im);
void di_image_free(di_image *im);
/* Moves the image forward to time tsc (never backward). Returns 1 if the
 * pt_image object was replaced (the caller must pt_blk_set_image it), 0 if
 * it was updated in place or unchanged, -1 on a libipt error. */
int di_image_advance(di_image *im, uint64_t tsc);
struct pt_image *di_image_get(di_image *im);
/* Up to size bytes of the code the image shows at ip (for blocks libipt
 * gives isid 0: their first instruction came through the callback). The
 * bytes read, or a negative libipt error code (-pte_nomap: no code). */
int di_image_read(di_image *im, uint8_t *buf, size_t size, uint64_t ip);
/* Time of the next change after the image's current time (UINT64_MAX if
 * none): callers skip di_image_advance until decoding passes it. */
uint64_t di_image_next_change(const di_image *im);

/* Call-site resolutions (model.h): whether ip is the call of one, and
 * di_image_resolve_call, to be called when the decoded thread has just gone
 * through the call at site to target. If the earliest resolution of that
 * site not yet in the image replaced a call to target, it is applied now,
 * in place (the pt_image object stays). Returns 1 if applied, 0 if not, -1
 * on a libipt error (2: below). The call at site is the block's last instruction and
 * the thread is in the stub, so nothing decoded so far is affected. */
bool di_cache_call_site(const di_cache *c, uint64_t ip);
int di_image_resolve_call(di_image *im, uint64_t site, uint64_t target);
/* A resolution with made-up states (model.h) cannot be applied on entry to
 * the resolver: di_image_resolve_call returns 2 for it instead, and this is
 * to be called with where the resolver went on to (dest), when the thread
 * gets there. If dest is where a made-up state's static call stub goes
 * (the callee's c2i adapter), the site is given that state (and the stub
 * its fill) until the resolution's record time, when the site's recorded
 * state replaces it; else the recorded state applies now. Returns as
 * di_image_resolve_call. */
int di_image_resolve_to(di_image *im, uint64_t site, uint64_t target, uint64_t dest);
/* The thread entered HotSpot's inline-cache miss handler from the call at
 * site. If the image holds a made-up state there that calls compiled code
 * (dm_patch.direct: the callee's unverified entry, whose receiver check
 * failed), the handler re-points the site before it returns: the
 * resolution the state precedes (dm_patch.state_of) applies now. 1 if
 * applied, 0 if not, -1 on a libipt error. */
int di_image_ic_miss(di_image *im, uint64_t site);
/* The made-up state the image holds whose static call stub's jump (to its
 * c2i adapter, dm_patch.stub_to) is at ip; else UINT32_MAX. A thread that
 * goes through that stub and leaves the adapter for the VM has the adapter
 * re-point the site at the callee's compiled code: the site's recorded
 * state (dm_patch.state_of) applies then (di_image_apply_early). */
uint32_t di_image_stub_exit(di_image *im, uint64_t ip);
/* The same for a recorded state: the decoded thread went through the call
 * at call_ip into the block [ip, end_ip], the static call stub (`mov rbx,
 * imm64; jmp`) the site calls in the image. If the site's next recorded
 * change re-points it from that stub (dm_patch.call_from), the c2i adapter
 * the stub jumps to makes that change when it leaves for the VM (HotSpot's
 * fixup of the calling site, once the callee has compiled code): its index;
 * else UINT32_MAX. The agent copies an nmethod when HotSpot reports it,
 * often after its sites were resolved, so such a state is often the first
 * one recorded. */
uint32_t di_image_stub_fixup(di_image *im, uint64_t call_ip, uint64_t ip, uint64_t end_ip);
/* The decoded thread went through the call at call_ip to ip, where a
 * made-up state in the image has the site call its resolver
 * (dm_patch.at_resolver, after a c2i fixup that cleaned the site): that
 * state's index (its record applies when the resolver leaves for the VM),
 * else UINT32_MAX. */
uint32_t di_image_resolver_state(di_image *im, uint64_t call_ip, uint64_t ip);

/* Whether patch idx was applied ahead of its time (or again over a made-up
 * state of its call) by this image. */
bool di_image_applied_early(const di_image *im, uint32_t idx);
/* Patches applied ahead of their time, in the order applied (the early
 * list the image was made with first): an image made at an earlier time of
 * the same decoding gets the first n of them as its early list. */
const uint32_t *di_image_early_log(const di_image *im, size_t *n);
/* Whether patch idx is in the image (its time has come, or applied early). */
bool di_image_has_patch(const di_image *im, uint32_t idx);
/* Applies patch idx now, ahead of its record time (a decoder that found the
 * image's bytes contradicted by the trace tries the bytes recorded next).
 * 1 if applied, 0 if it is in the image already or does not apply (its
 * code version is not live), -1 on a libipt error. */
int di_image_apply_early(di_image *im, uint32_t idx);
/* Up to max patches overlapping [lo, hi) recorded after time `after`,
 * earliest first. */
size_t di_cache_patches_in(const di_cache *c, uint64_t lo, uint64_t hi, uint64_t after,
                           uint32_t *out, size_t max);

/* Counters for reports. */
typedef struct di_stats {
    uint64_t sections_added, rebuilds, patches_applied;
    uint64_t patches_resolved;   /* of those, applied ahead of their time (resolutions,
                                    the static stub fills they pull in, retries) */
    uint64_t states_made_up;     /* call sites given a made-up state (di_image_resolve_to) */
} di_stats;
const di_stats *di_image_stats(const di_image *im);

#endif
