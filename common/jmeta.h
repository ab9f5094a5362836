/* JVM metadata stream (trace.dir/jvm/meta.jpt) and its code-bytes file
 * (trace.dir/jvm/code.bin): the one writer and the one reader.
 *
 * Layout (all integers little-endian, no padding, no alignment):
 *   header:  magic "JPTMETA\0" (8) | u16 major | u16 minor | u32 header_size
 *            | u64 start_tsc | u32 pid | u32 reserved            (32 bytes)
 *   record:  u16 type | u16 flags (0) | u32 size | u64 tsc | payload[size]
 *
 * Payload fields use the encoding of jm_put_* / jm_get_*: u8/u16/u32/u64/i32/i64
 * fixed width, strings as u32 length + bytes (no NUL), byte arrays likewise.
 * A record's payload may be longer than the fields this version defines: readers
 * ignore the tail (a newer minor version may append fields).
 *
 * Records that carry machine code start with the triple
 *   u64 vaddr | u64 size | u64 code_offset
 * where code_offset is the offset in code.bin of `size` bytes that were the
 * code at [vaddr, vaddr+size) at time tsc. The writer appends the bytes to
 * code.bin before the record that names them, so a reader never sees a record
 * whose bytes are missing, even after a crash.
 *
 * See docs/FORMAT.md for every record's payload. */
#ifndef JPT_COMMON_JMETA_H
#define JPT_COMMON_JMETA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JM_MAGIC "JPTMETA"          /* 7 chars + NUL = 8 bytes */
#define JM_VERSION_MAJOR 1
#define JM_VERSION_MINOR 0
#define JM_HEADER_SIZE 32u
#define JM_RECORD_HEADER_SIZE 16u
#define JM_MAX_RECORD_SIZE (256u << 20) /* larger sizes are corrupt input */

#define JM_META_FILE "meta.jpt"
#define JM_CODE_FILE "code.bin"

enum jm_type {
    JM_JVM_INFO = 1,        /* str vm_name | str vm_version | str vm_vendor | str java_home
                               | u32 agent_mode (enum jm_mode) | str options */
    JM_CODE_CACHE = 2,      /* u64 low | u64 high | u32 nheaps | nheaps x {u64 low | u64 high | str name} */
    JM_CODELET = 3,         /* u64 begin | u64 end | i32 bytecode (-1 none) | str description */
    JM_CODE_BLOB = 4,       /* code triple | u32 kind (enum jm_blob_kind) | str name */
    JM_METHOD = 5,          /* u64 method_id | u64 class_id | str class_sig | str name | str sig
                               | u32 modifiers */
    JM_CLASS_FILE = 6,      /* u64 class_id | str class_sig | u32 origin (enum jm_class_origin)
                               | bytes classfile */
    JM_CLASS_PREPARE = 7,   /* u64 class_id | str class_sig | u32 flags (JM_CLASS_HIDDEN...)
                               | u32 nmethods | nmethods x u64 method_id */
    JM_METHOD_BYTECODE = 8, /* u64 method_id | i32 max_stack | i32 max_locals | bytes bytecode */
    JM_CONSTANT_POOL = 9,   /* u64 class_id | u32 cp_count | bytes cp (as in a class file) */
    JM_NMETHOD_LOAD = 10,   /* code triple | u64 method_id | i32 level | u32 npcs |
                               npcs x {u64 pc | u32 depth | depth x {u64 method_id | i32 bci}}
                               (innermost frame first) */
    JM_NMETHOD_UNLOAD = 11, /* u64 method_id | u64 vaddr */
    JM_DYNAMIC_CODE = 12,   /* code triple | str name */
    JM_CODE_PATCH = 13,     /* code triple: new bytes of [vaddr, vaddr+size) from tsc on */
    JM_THREAD_START = 14,   /* u64 java_tid | u32 native_tid | str name */
    JM_THREAD_END = 15,     /* u64 java_tid | u32 native_tid */
    JM_METHOD_ENTRY = 16,   /* reference mode: u32 native_tid | u64 method_id */
    JM_METHOD_EXIT = 17,    /* reference mode: u32 native_tid | u64 method_id | u8 by_exception */
    JM_SINGLE_STEP = 18,    /* reference mode: u32 native_tid | u64 method_id | i32 bci */
    JM_WARNING = 19,        /* str text: something the agent could not record */
    JM_STATS = 20,          /* u32 n | n x {str name | u64 value}: agent counters at shutdown */
    JM_END = 21,            /* clean shutdown; no payload */
    JM_CLASSES_INITIALIZED = 22, /* u32 n | n x u64 class_id: classes initialized by the
                               record's time (those the agent found at its start): their
                               static initializers do not run after it */
    JM_TYPE_LIMIT
};

enum jm_mode { JM_MODE_TRACE = 0, JM_MODE_REFERENCE = 1 };

enum jm_blob_kind {
    JM_BLOB_INTERPRETER = 1,   /* the whole interpreter StubQueue buffer */
    JM_BLOB_CODE_HEAP = 2,     /* committed part of a non-nmethod code heap at VMInit */
    JM_BLOB_OTHER = 3,
};

enum jm_class_origin {
    JM_CLASS_LOAD_HOOK = 1,    /* ClassFileLoadHook at load */
    JM_CLASS_RETRANSFORM = 2,  /* rebuilt by RetransformClasses (class loaded before the hook) */
    JM_CLASS_IMAGE = 3,        /* read from the JDK's runtime image (boot class loaded before the hook) */
};

#define JM_CLASS_HIDDEN 1u     /* JM_CLASS_PREPARE flag: class never reached the load hook */

const char *jm_type_name(uint16_t type);
/* True for the types whose payload starts with the code triple. */
bool jm_type_has_code(uint16_t type);

/* ---- payload encoding ---------------------------------------------------- */

/* Growable byte buffer for building payloads. On allocation failure `failed`
 * is set and further puts are ignored: callers check once at the end. */
typedef struct jm_buf {
    uint8_t *data;
    size_t len, cap;
    bool failed;
} jm_buf;

void jm_buf_init(jm_buf *b);
void jm_buf_free(jm_buf *b);
void jm_put_u8(jm_buf *b, uint8_t v);
void jm_put_u16(jm_buf *b, uint16_t v);
void jm_put_u32(jm_buf *b, uint32_t v);
void jm_put_u64(jm_buf *b, uint64_t v);
void jm_put_i32(jm_buf *b, int32_t v);
void jm_put_str(jm_buf *b, const char *s);             /* NULL encodes as "" */
void jm_put_bytes(jm_buf *b, const void *p, uint32_t n); /* u32 n + bytes */
void jm_put_raw(jm_buf *b, const void *p, size_t n);    /* bytes only */

/* Bounds-checked payload cursor. The first failing get sets `error` (with the
 * field's offset in the payload) and makes every later get return zero/empty,
 * so a parser checks jm_cur_ok() once after reading a record's fields. */
typedef struct jm_cur {
    const uint8_t *p;
    size_t len, pos;
    const char *error;   /* NULL while ok */
    size_t error_pos;
} jm_cur;

void jm_cur_init(jm_cur *c, const void *p, size_t len);
static inline bool jm_cur_ok(const jm_cur *c) { return c->error == NULL; }
uint8_t jm_get_u8(jm_cur *c);
uint16_t jm_get_u16(jm_cur *c);
uint32_t jm_get_u32(jm_cur *c);
uint64_t jm_get_u64(jm_cur *c);
int32_t jm_get_i32(jm_cur *c);
/* Strings and byte arrays point into the payload (not NUL-terminated). */
typedef struct jm_slice { const uint8_t *p; uint32_t len; } jm_slice;
jm_slice jm_get_bytes(jm_cur *c);
/* Returns a newly allocated NUL-terminated copy (free() it), or NULL on error. */
char *jm_get_strdup(jm_cur *c);

/* ---- writer --------------------------------------------------------------- */

/* Not thread-safe: one writer thread owns it. Records are staged in memory
 * and written in chunks of about 1 MiB, and whenever jm_writer_flush is
 * called (the agent flushes each time its queue runs empty), so a crash of
 * the process loses at most the records staged since the last flush, and
 * leaves at most one partial record at the end of the file. */
typedef struct jm_writer jm_writer;

/* Creates dir/meta.jpt and dir/code.bin (dir must exist). Returns NULL and
 * fills err (if non-NULL) with a one-line message on failure. */
jm_writer *jm_writer_open(const char *dir, uint64_t start_tsc, uint32_t pid,
                          char *err, size_t errlen);
/* Appends a record. For code-carrying types, pass the code bytes in code/
 * code_len: they go to code.bin and the payload's code_offset field (bytes
 * 16..23 of the payload) is filled in; the payload's size field must equal
 * code_len. Returns 0 or -errno. */
int jm_write(jm_writer *w, uint16_t type, uint64_t tsc, const void *payload,
             uint32_t payload_len, const void *code, uint64_t code_len);
/* Writes the staged records out (no fsync). Returns 0 or -errno. */
int jm_writer_flush(jm_writer *w);
uint64_t jm_writer_bytes(const jm_writer *w); /* meta + code bytes written */
int jm_writer_close(jm_writer *w);            /* flushes; returns 0 or -errno */

/* ---- reader --------------------------------------------------------------- */

typedef struct jm_header {
    uint16_t major, minor;
    uint32_t header_size;
    uint64_t start_tsc;
    uint32_t pid;
} jm_header;

typedef struct jm_record {
    uint16_t type;
    uint16_t flags;
    uint32_t size;
    uint64_t tsc;
    const uint8_t *payload;
    uint64_t offset;        /* file offset of the record header */
} jm_record;

typedef struct jm_reader jm_reader;

/* The directory of a trace's metadata, malloc'd: DIR itself when it holds
 * meta.jpt (a jvm/ folder given directly), else DIR/jvm, so that messages
 * name DIR/jvm/meta.jpt when it is missing. NULL without memory. */
char *jm_meta_dir(const char *dir);

/* Opens dir/meta.jpt (mapped read-only) and validates the header. On failure
 * returns NULL with a one-line "FILE: offset N: what" message in err. */
jm_reader *jm_reader_open(const char *dir, char *err, size_t errlen);
/* The same over memory the caller keeps alive (tests, fuzzing); `name`
 * stands for the directory in messages. */
jm_reader *jm_reader_open_mem(const void *meta, size_t meta_len, const void *code,
                              size_t code_len, const char *name, char *err, size_t errlen);
const jm_header *jm_reader_header(const jm_reader *r);
/* 1: a record; 0: clean end of file; -1: bad or truncated data at the current
 * offset (message in jm_reader_error; records before it stay valid). */
int jm_reader_next(jm_reader *r, jm_record *rec);
const char *jm_reader_error(const jm_reader *r);
/* After -1 from jm_reader_next: true when the bad record is one that runs
 * past the end of the file (a writer cut off), false for damage (type 0, a
 * size over the limit, an unknown type cut short). */
bool jm_reader_cut(const jm_reader *r);
/* The offset of the next record (after -1: of the bad one). */
uint64_t jm_reader_offset(const jm_reader *r);
const char *jm_reader_path(const jm_reader *r);
/* Code bytes [off, off+len) of code.bin, or NULL (with an error message in
 * err) if out of bounds. Valid until jm_reader_close. */
const uint8_t *jm_reader_code(jm_reader *r, uint64_t off, uint64_t len,
                              char *err, size_t errlen);
const char *jm_reader_code_path(const jm_reader *r);
uint64_t jm_reader_code_size(const jm_reader *r);
void jm_reader_close(jm_reader *r);

#endif
