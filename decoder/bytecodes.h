/* JVM bytecode names and HotSpot's rewritten forms.
 *
 * HotSpot's interpreter has one template (codelet) per bytecode, including
 * the JVM-internal bytecodes its rewriter substitutes at run time
 * (fast_agetfield for a resolved getfield, fast_iaccess_0 for aload_0
 * followed by an int getfield, ...). A decoded trace must speak standard
 * bytecodes, so each codelet maps to the one or two standard opcodes its
 * template executes. The JVM-internal list is HotSpot's
 * interpreter/bytecodes.cpp (identical for JDK 17 and 25). */
#ifndef JPT_DECODER_BYTECODES_H
#define JPT_DECODER_BYTECODES_H

#include <stdbool.h>
#include <stdint.h>

#define BC_NUM_JAVA 202      /* standard opcodes 0..201 (0xca breakpoint is 202) */
#define BC_BREAKPOINT 202
#define BC_WIDE 196          /* its template jumps to the wide entry of the next
                              * bytecode's template: one instruction, two codelets */

/* Standard opcode's mnemonic ("iload_0"), or NULL outside 0..201. */
const char *bc_name(int opcode);
/* Standard opcode for a mnemonic, or -1. */
int bc_lookup(const char *name);

/* The standard opcodes a template executes, from its codelet description
 * (the JVM's bytecode name) and, when the name is unknown, its bytecode
 * number. Fills ops[0..n) and returns n: 1 for plain and simply rewritten
 * bytecodes, 2 for the fused ones (fast_iaccess_0 = aload_0 getfield,
 * fast_iload2 = iload iload, fast_icaload = iload caload), 0 if the codelet
 * runs no bytecode (breakpoint, _shouldnotreachhere, unknown). */
int bc_std_ops(const char *description, int32_t bytecode, uint8_t ops[2]);

#endif
