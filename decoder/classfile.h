/* Class-file parsing (JVMS chapter 4) and bytecode decoding (chapter 6).
 *
 * cf_parse_header validates the header and constant pool and finds the
 * class's own name. cf_parse reads the whole class: constant pool (every tag
 * up to Java 25, cross-references checked), super class, interfaces, methods
 * with their Code (exception table, LineNumberTable), SourceFile and
 * BootstrapMethods; fields and other attributes are skipped.
 *
 * Input is untrusted: every read is bounds-checked, a failure returns -1 with
 * one line "offset N: what" (N the byte offset in the buffer), never a crash.
 * Strings and code point into the parsed class's own memory or into the
 * caller's buffer, which must outlive the cf_class.
 *
 * Two stages read class files: the decoder names the callee of a call site
 * from the invoke at its bci (sitestates.c), reconstruct/ builds the program. */
#ifndef JPT_DECODER_CLASSFILE_H
#define JPT_DECODER_CLASSFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cf_handler {
    uint32_t start_pc, end_pc, handler_pc;   /* [start_pc, end_pc) */
    const char *catch_type;                  /* internal class name; NULL: any (finally) */
} cf_handler;

typedef struct cf_line {
    uint32_t start_pc, line;
} cf_line;

typedef struct cf_header {
    uint16_t minor, major;
    uint16_t cp_count;         /* as in the file: entries are 1..cp_count-1 */
    uint16_t access_flags;
    char this_class[512];      /* internal form, e.g. java/lang/String */
    size_t cp_end;             /* offset just past the constant pool */
} cf_header;

/* Writes "WHERE AT: message" into err, one line naming the place in the
 * input ("offset" in a class file, "bci" in a method's code), and returns -1. */
int cf_fail(char *err, size_t errlen, const char *where, uint64_t at, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Parses bytes [0, len). Returns 0, or -1 with a one-line message naming the
 * offset in err. Never reads outside the buffer. */
int cf_parse_header(const uint8_t *p, size_t len, cf_header *out, char *err, size_t errlen);

enum {
    CF_UTF8 = 1, CF_INTEGER = 3, CF_FLOAT = 4, CF_LONG = 5, CF_DOUBLE = 6, CF_CLASS = 7,
    CF_STRING = 8, CF_FIELDREF = 9, CF_METHODREF = 10, CF_IMETHODREF = 11,
    CF_NAME_AND_TYPE = 12, CF_METHOD_HANDLE = 15, CF_METHOD_TYPE = 16, CF_DYNAMIC = 17,
    CF_INVOKE_DYNAMIC = 18, CF_MODULE = 19, CF_PACKAGE = 20,
};

/* Method handle reference kinds (JVMS 4.4.8). */
enum {
    CF_REF_GET_FIELD = 1, CF_REF_GET_STATIC, CF_REF_PUT_FIELD, CF_REF_PUT_STATIC,
    CF_REF_INVOKE_VIRTUAL, CF_REF_INVOKE_STATIC, CF_REF_INVOKE_SPECIAL,
    CF_REF_NEW_INVOKE_SPECIAL, CF_REF_INVOKE_INTERFACE,
};

/* Access flags used here. */
#define CF_ACC_PUBLIC     0x0001
#define CF_ACC_PRIVATE    0x0002
#define CF_ACC_PROTECTED  0x0004
#define CF_ACC_STATIC     0x0008
#define CF_ACC_FINAL      0x0010
#define CF_ACC_NATIVE     0x0100
#define CF_ACC_INTERFACE  0x0200
#define CF_ACC_ABSTRACT   0x0400

typedef struct cf_cp_entry {
    uint8_t tag;               /* 0: unusable (index 0, second slot of Long/Double) */
    uint32_t off;              /* body offset (after the tag) in data; Utf8: offset in strs */
} cf_cp_entry;

typedef struct cf_method {
    uint16_t access;
    const char *name, *sig;
    const uint8_t *code;       /* NULL: no Code attribute */
    uint32_t code_len;
    uint16_t max_stack, max_locals;
    uint32_t nhandlers;
    cf_handler *handlers;      /* catch_type resolved to a name (NULL: any) */
    uint32_t nlines;
    cf_line *lines;            /* sorted by start_pc */
} cf_method;

typedef struct cf_bsm {
    uint16_t method_handle;    /* constant-pool index of a MethodHandle */
    uint16_t nargs;
    uint32_t args_off;         /* offset in data of nargs u2 constant-pool indices */
} cf_bsm;

typedef struct cf_arena cf_arena;

typedef struct cf_class {
    const uint8_t *data;       /* the caller's bytes */
    size_t len;
    uint16_t minor, major, access;
    uint16_t cp_count;
    cf_cp_entry *cp;           /* cp_count entries */
    char *strs;                /* NUL-terminated copies of the Utf8 entries */
    const char *name;          /* this_class, internal form; NULL for a bare pool */
    const char *super_name;    /* NULL for java/lang/Object and module-info */
    uint16_t ninterfaces;
    const char **interfaces;
    uint16_t nmethods;
    cf_method *methods;
    const char *source;        /* SourceFile, or NULL */
    bool has_bsm;
    uint16_t nbsm;
    cf_bsm *bsm;
    cf_arena *arena;
} cf_class;

/* Parses a whole class file [0, len). 0, or -1 with a message in err; out is
 * left empty (cf_free is harmless) on failure. */
int cf_parse(const uint8_t *p, size_t len, cf_class *out, char *err, size_t errlen);
/* Parses a bare constant pool of cp_count (as in a class file) entries that
 * fill [0, len): JVMTI GetConstantPool of a hidden class. */
int cf_parse_pool(const uint8_t *p, size_t len, uint32_t cp_count, cf_class *out, char *err,
                  size_t errlen);
void cf_free(cf_class *c);

/* Typed constant-pool views: NULL / -1 on a bad index or tag. */
const char *cf_utf8(const cf_class *c, uint32_t idx);
const char *cf_class_name(const cf_class *c, uint32_t idx);
/* Fieldref / Methodref / InterfaceMethodref: tag, owner class, name, descriptor. */
int cf_member_ref(const cf_class *c, uint32_t idx, uint8_t *tag, const char **klass,
                  const char **name, const char **sig);
int cf_method_handle(const cf_class *c, uint32_t idx, uint8_t *kind, uint16_t *ref);
/* InvokeDynamic / Dynamic: bootstrap index, name, descriptor. */
int cf_dynamic(const cf_class *c, uint32_t idx, uint16_t *bsm, const char **name,
               const char **sig);
/* Bootstrap argument i of bsm (a constant-pool index), or 0. */
uint16_t cf_bsm_arg(const cf_class *c, const cf_bsm *b, uint32_t i);

/* Bytecode. */
#define CF_OP_TABLESWITCH  170
#define CF_OP_LOOKUPSWITCH 171
#define CF_OP_WIDE         196

/* Length of the instruction at bci (switch padding counts from the start of
 * code), or -1 with "bci N: what" in err: invalid opcode, wide of an opcode
 * that has no wide form, or an instruction running past code_len. */
int32_t cf_insn_len(const uint8_t *code, uint32_t code_len, uint32_t bci, char *err,
                    size_t errlen);
/* The mnemonic of an opcode ("?" for invalid ones). */
const char *cf_op_name(uint8_t op);

#endif
