/* Per-method control-flow graphs (rc_cfg of program.h), built from code and
 * an exception table alone. Used by program.c; exposed for tests. */
#ifndef JPT_RECONSTRUCT_CFG_H
#define JPT_RECONSTRUCT_CFG_H

#include "reconstruct/program.h"

/* Builds the CFG of code[0, code_len) with handlers h[0, nh). Returns NULL
 * with "bci N: what" in err on invalid code: bad opcodes, instructions past
 * the end, branch/switch/handler targets that are not instruction starts,
 * or a graph too large to be real (exception edges or ret edges above a few
 * million). Free with rc_cfg_free (one allocation). */
rc_cfg *rc_cfg_build(const uint8_t *code, uint32_t code_len, const rc_handler *h, uint32_t nh,
                     char *err, size_t errlen);
void rc_cfg_free(rc_cfg *g);



/* Checks code the way rc_cfg_build does (opcodes, lengths, branch, switch
 * and handler targets) without building anything: 0, or -1 with
 * "bci N: what" in err. */
int rc_code_check(const uint8_t *code, uint32_t code_len, const rc_handler *h, uint32_t nh,
                  char *err, size_t errlen);
#endif
