/* The little x86 the decoder must know itself: what kind of control
 * transfer an instruction is, and the displacement of a direct branch.
 * Lengths come from capstone (jitpath.c). */
#ifndef JPT_DECODER_X86_H
#define JPT_DECODER_X86_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum xfer {
    X_OTHER = 0,      /* no control transfer (or none we follow) */
    X_COND,           /* conditional direct branch (jcc, jrcxz, loop*) */
    X_CALL,           /* near call, direct or indirect */
    X_RET,            /* near return */
    X_JMP_DIRECT,
    X_JMP_INDIRECT,
    X_FAR,            /* far transfers, syscalls, interrupts */
} xfer;

/* Classifies the instruction starting at p (n bytes available). For
 * X_COND, X_JMP_DIRECT and direct X_CALL, *disp (if non-NULL) receives the
 * displacement from the end of the instruction and *direct is set. */
xfer x86_classify(const uint8_t *p, size_t n, int64_t *disp, int *direct);
/* The target of the direct branch or call starting at p (at address ip):
 * true with *target set, false for anything else. */
bool x86_direct_target(const uint8_t *p, size_t n, uint64_t ip, uint64_t *target);

#endif
