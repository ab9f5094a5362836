/* The instructions inside a block of compiled code.
 *
 * libipt's block decoder follows conditional branches inside a block, so a
 * block of compiled code can run through several inlined methods without
 * saying which way each branch went. Inline-stack events need every
 * position, so the path is recovered from the code: starting at the
 * block's first instruction, following fall-through, both arms of each
 * conditional branch and direct jumps, the paths of exactly `ninsn`
 * instructions that end at the block's last instruction are counted
 * (breadth first, one set of candidate addresses per step). When exactly one
 * exists it is the path that ran. Ambiguous or impossible blocks (code
 * changed by an unrecorded patch, say) report 0 and the caller falls back to
 * the block's two ends. Results are cached per (version, start, end, count):
 * hot loops repeat the same blocks. */
#ifndef JPT_DECODER_JITPATH_H
#define JPT_DECODER_JITPATH_H

#include <stddef.h>
#include <stdint.h>

#include "decoder/model.h"

#define JP_MAX_INSNS 4096     /* longer blocks are not searched */

typedef struct jp_cache jp_cache;

/* NULL if the code bytes (m->code_path) or capstone are unavailable: callers
 * then keep to block ends. */
jp_cache *jp_new(const dm_model *m);
void jp_free(jp_cache *jc);
/* The addresses of the ninsn instructions of the block [ip .. end_ip] in
 * version v: returns ninsn and points *path at them (valid until the next
 * call), or 0 if the path is not unique. */
size_t jp_path(jp_cache *jc, const dm_code *v, uint64_t ip, uint64_t end_ip, uint32_t ninsn,
               const uint64_t **path);

/* The loop step at head, a jump-back target in version v: what the loop
 * adds, each time round, to the register its exit test compares. C2 unrolls
 * a counted loop into copies of its body and advances the induction
 * variable once per pass, by the stride times the copies (`add $16, r11d;
 * ...; cmp r11d, limit; jl head`), while the copies may share PC records:
 * the step is what says how many iterations a pass ran. Found by a linear
 * sweep from head to the first jump back to it, conditional and right after
 * a compare, following what registers and stack slots hold as a head value
 * plus a constant (moves, add, sub, inc, dec, lea): one compared operand
 * must have moved by a constant, the other not; else 0. Cached per
 * (v, head). */
int64_t jp_loop_step(jp_cache *jc, const dm_code *v, uint64_t head);

#endif
