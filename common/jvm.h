/* The JVM's own vocabulary (JVMS chapter 6 opcodes, access flags), for every
 * stage that reads bytecode. */
#ifndef JPT_COMMON_JVM_H
#define JPT_COMMON_JVM_H

#include <stdbool.h>

enum jvm_opcode {
    JVM_NOP = 0x00, JVM_ACONST_NULL = 0x01, JVM_ICONST_M1 = 0x02, JVM_ICONST_0 = 0x03,
    JVM_ICONST_5 = 0x08, JVM_LDC = 0x12, JVM_LDC_W = 0x13, JVM_LDC2_W = 0x14,
    JVM_ALOAD = 0x19, JVM_ALOAD_0 = 0x2a, JVM_ALOAD_3 = 0x2d, JVM_SALOAD = 0x35,
    JVM_ASTORE = 0x3a, JVM_ASTORE_0 = 0x4b, JVM_ASTORE_3 = 0x4e, JVM_SASTORE = 0x56,
    JVM_POP = 0x57, JVM_SWAP = 0x5f, JVM_INEG = 0x74, JVM_DNEG = 0x77, JVM_IINC = 0x84,
    JVM_I2L = 0x85, JVM_I2S = 0x93, JVM_DCMPG = 0x98,
    JVM_IFEQ = 0x99, JVM_IFNE = 0x9a, JVM_IF_ACMPNE = 0xa6, JVM_GOTO = 0xa7, JVM_JSR = 0xa8, JVM_RET = 0xa9,
    JVM_TABLESWITCH = 0xaa, JVM_LOOKUPSWITCH = 0xab,
    JVM_IRETURN = 0xac, JVM_ARETURN = 0xb0, JVM_RETURN = 0xb1,
    JVM_GETSTATIC = 0xb2, JVM_PUTSTATIC, JVM_GETFIELD, JVM_PUTFIELD,
    JVM_INVOKEVIRTUAL = 0xb6, JVM_INVOKESPECIAL, JVM_INVOKESTATIC, JVM_INVOKEINTERFACE,
    JVM_INVOKEDYNAMIC,
    JVM_NEW = 0xbb, JVM_NEWARRAY = 0xbc, JVM_ANEWARRAY = 0xbd, JVM_ARRAYLENGTH = 0xbe,
    JVM_ATHROW = 0xbf, JVM_CHECKCAST = 0xc0, JVM_INSTANCEOF = 0xc1, JVM_MONITORENTER = 0xc2,
    JVM_MONITOREXIT = 0xc3, JVM_WIDE = 0xc4, JVM_MULTIANEWARRAY = 0xc5,
    JVM_IFNULL = 0xc6, JVM_IFNONNULL = 0xc7, JVM_GOTO_W = 0xc8, JVM_JSR_W = 0xc9,
};

#define JVM_ACC_PUBLIC       0x0001
#define JVM_ACC_PRIVATE      0x0002
#define JVM_ACC_STATIC       0x0008
#define JVM_ACC_FINAL        0x0010
#define JVM_ACC_SYNCHRONIZED 0x0020
#define JVM_ACC_NATIVE       0x0100
#define JVM_ACC_ABSTRACT     0x0400

static inline bool jvm_is_invoke(int op) { return op >= JVM_INVOKEVIRTUAL && op <= JVM_INVOKEDYNAMIC; }
static inline bool jvm_is_return(int op) { return op >= JVM_IRETURN && op <= JVM_RETURN; }
/* if<cond>, if_icmp<cond>, if_acmp<cond>, ifnull, ifnonnull */
static inline bool jvm_is_if(int op)
{
    return (op >= JVM_IFEQ && op <= JVM_IF_ACMPNE) || op == JVM_IFNULL || op == JVM_IFNONNULL;
}

#endif
