#include "decoder/bytecodes.h"

#include <stddef.h>
#include <string.h>

/* JVMS chapter 6, opcodes 0x00..0xc9. */
static const char *const names[BC_NUM_JAVA] = {
    "nop", "aconst_null", "iconst_m1", "iconst_0", "iconst_1", "iconst_2", "iconst_3",
    "iconst_4", "iconst_5", "lconst_0", "lconst_1", "fconst_0", "fconst_1", "fconst_2",
    "dconst_0", "dconst_1", "bipush", "sipush", "ldc", "ldc_w", "ldc2_w", "iload", "lload",
    "fload", "dload", "aload", "iload_0", "iload_1", "iload_2", "iload_3", "lload_0",
    "lload_1", "lload_2", "lload_3", "fload_0", "fload_1", "fload_2", "fload_3", "dload_0",
    "dload_1", "dload_2", "dload_3", "aload_0", "aload_1", "aload_2", "aload_3", "iaload",
    "laload", "faload", "daload", "aaload", "baload", "caload", "saload", "istore", "lstore",
    "fstore", "dstore", "astore", "istore_0", "istore_1", "istore_2", "istore_3", "lstore_0",
    "lstore_1", "lstore_2", "lstore_3", "fstore_0", "fstore_1", "fstore_2", "fstore_3",
    "dstore_0", "dstore_1", "dstore_2", "dstore_3", "astore_0", "astore_1", "astore_2",
    "astore_3", "iastore", "lastore", "fastore", "dastore", "aastore", "bastore", "castore",
    "sastore", "pop", "pop2", "dup", "dup_x1", "dup_x2", "dup2", "dup2_x1", "dup2_x2", "swap",
    "iadd", "ladd", "fadd", "dadd", "isub", "lsub", "fsub", "dsub", "imul", "lmul", "fmul",
    "dmul", "idiv", "ldiv", "fdiv", "ddiv", "irem", "lrem", "frem", "drem", "ineg", "lneg",
    "fneg", "dneg", "ishl", "lshl", "ishr", "lshr", "iushr", "lushr", "iand", "land", "ior",
    "lor", "ixor", "lxor", "iinc", "i2l", "i2f", "i2d", "l2i", "l2f", "l2d", "f2i", "f2l",
    "f2d", "d2i", "d2l", "d2f", "i2b", "i2c", "i2s", "lcmp", "fcmpl", "fcmpg", "dcmpl",
    "dcmpg", "ifeq", "ifne", "iflt", "ifge", "ifgt", "ifle", "if_icmpeq", "if_icmpne",
    "if_icmplt", "if_icmpge", "if_icmpgt", "if_icmple", "if_acmpeq", "if_acmpne", "goto",
    "jsr", "ret", "tableswitch", "lookupswitch", "ireturn", "lreturn", "freturn", "dreturn",
    "areturn", "return", "getstatic", "putstatic", "getfield", "putfield", "invokevirtual",
    "invokespecial", "invokestatic", "invokeinterface", "invokedynamic", "new", "newarray",
    "anewarray", "arraylength", "athrow", "checkcast", "instanceof", "monitorenter",
    "monitorexit", "wide", "multianewarray", "ifnull", "ifnonnull", "goto_w", "jsr_w",
};

_Static_assert(sizeof names / sizeof names[0] == BC_NUM_JAVA, "opcode table size");

const char *bc_name(int opcode)
{
    return opcode >= 0 && opcode < BC_NUM_JAVA ? names[opcode] : NULL;
}

int bc_lookup(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < BC_NUM_JAVA; i++)
        if (!strcmp(names[i], name))
            return i;
    return -1;
}

/* HotSpot's JVM-internal bytecodes and the standard bytecodes each template
 * stands for (bytecodes.cpp, JVM_BYTECODES_DO: the last column is the
 * "java code"; the fused templates cover a second bytecode too). */
static const struct rewrite {
    const char *name;
    const char *ops[2];
} rewrites[] = {
    { "fast_agetfield", { "getfield", NULL } },
    { "fast_bgetfield", { "getfield", NULL } },
    { "fast_cgetfield", { "getfield", NULL } },
    { "fast_dgetfield", { "getfield", NULL } },
    { "fast_fgetfield", { "getfield", NULL } },
    { "fast_igetfield", { "getfield", NULL } },
    { "fast_lgetfield", { "getfield", NULL } },
    { "fast_sgetfield", { "getfield", NULL } },
    { "fast_aputfield", { "putfield", NULL } },
    { "fast_bputfield", { "putfield", NULL } },
    { "fast_zputfield", { "putfield", NULL } },
    { "fast_cputfield", { "putfield", NULL } },
    { "fast_dputfield", { "putfield", NULL } },
    { "fast_fputfield", { "putfield", NULL } },
    { "fast_iputfield", { "putfield", NULL } },
    { "fast_lputfield", { "putfield", NULL } },
    { "fast_sputfield", { "putfield", NULL } },
    { "fast_aload_0", { "aload_0", NULL } },
    /* aload_0 rewritten together with the getfield after it: one template
     * runs both and dispatches past the getfield. */
    { "fast_iaccess_0", { "aload_0", "getfield" } },
    { "fast_aaccess_0", { "aload_0", "getfield" } },
    { "fast_faccess_0", { "aload_0", "getfield" } },
    { "fast_iload", { "iload", NULL } },
    { "fast_iload2", { "iload", "iload" } },
    { "fast_icaload", { "iload", "caload" } },
    { "fast_invokevfinal", { "invokevirtual", NULL } },
    { "fast_linearswitch", { "lookupswitch", NULL } },
    { "fast_binaryswitch", { "lookupswitch", NULL } },
    { "fast_aldc", { "ldc", NULL } },
    { "fast_aldc_w", { "ldc_w", NULL } },
    { "return_register_finalizer", { "return", NULL } },
    { "invokehandle", { "invokevirtual", NULL } },
    { "nofast_getfield", { "getfield", NULL } },
    { "nofast_putfield", { "putfield", NULL } },
    { "nofast_aload_0", { "aload_0", NULL } },
    { "nofast_iload", { "iload", NULL } },
};

int bc_std_ops(const char *description, int32_t bytecode, uint8_t ops[2])
{
    if (description && *description) {
        int op = bc_lookup(description);
        if (op >= 0) {
            ops[0] = (uint8_t)op;
            return 1;
        }
        for (size_t i = 0; i < sizeof rewrites / sizeof rewrites[0]; i++) {
            if (strcmp(rewrites[i].name, description))
                continue;
            int n = 0;
            for (int k = 0; k < 2 && rewrites[i].ops[k]; k++)
                ops[n++] = (uint8_t)bc_lookup(rewrites[i].ops[k]);
            return n;
        }
        /* A named codelet that is neither standard nor a known rewrite
         * (breakpoint, _shouldnotreachhere, a future JVM-internal code):
         * trusting the number could invent a bytecode. */
        return 0;
    }
    if (bytecode >= 0 && bytecode < BC_NUM_JAVA) {
        ops[0] = (uint8_t)bytecode;
        return 1;
    }
    return 0;
}
