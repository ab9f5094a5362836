/* Writes a small synthetic trace.dir/jvm with one record of every type, for
 * reader tests: mkmeta DIR. The content is consistent (code offsets valid, a
 * real minimal class file) so that `ptdecode info` accepts it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/jmeta.h"

/* A minimal valid class file: class Tiny extends java/lang/Object, no members. */
static const unsigned char tiny_class[] = {
    0xCA, 0xFE, 0xBA, 0xBE, 0x00, 0x00, 0x00, 0x3D, /* magic, 0, 61 */
    0x00, 0x05,                                     /* cp_count 5 */
    0x07, 0x00, 0x02,                               /* #1 Class #2 */
    0x01, 0x00, 0x04, 'T', 'i', 'n', 'y',           /* #2 Utf8 Tiny */
    0x07, 0x00, 0x04,                               /* #3 Class #4 */
    0x01, 0x00, 0x10, 'j', 'a', 'v', 'a', '/', 'l', 'a', 'n', 'g', '/', 'O', 'b', 'j', 'e',
    'c', 't',                                       /* #4 Utf8 java/lang/Object */
    0x00, 0x21, 0x00, 0x01, 0x00, 0x03,             /* flags, this, super */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* interfaces, fields, methods, attrs */
};

static void emit(jm_writer *w, uint16_t type, uint64_t tsc, jm_buf *b, const void *code,
                 uint64_t n)
{
    if (b->failed || jm_write(w, type, tsc, b->data, (uint32_t)b->len, code, n) != 0) {
        fprintf(stderr, "mkmeta: write failed\n");
        exit(1);
    }
    b->len = 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mkmeta DIR\n");
        return 2;
    }
    char jvm[4096], err[512];
    snprintf(jvm, sizeof jvm, "%s/jvm", argv[1]);
    mkdir(argv[1], 0755);
    mkdir(jvm, 0755);
    jm_writer *w = jm_writer_open(jvm, 1000, 4242, err, sizeof err);
    if (!w) {
        fprintf(stderr, "mkmeta: %s\n", err);
        return 1;
    }
    jm_buf b;
    jm_buf_init(&b);
    uint8_t code[64];
    for (unsigned i = 0; i < sizeof code; i++)
        code[i] = (uint8_t)(0x90 + (i & 1));
    const uint64_t cc = 0x7f0000000000ull;

    jm_put_str(&b, "OpenJDK 64-Bit Server VM"); jm_put_str(&b, "17.0-test");
    jm_put_str(&b, "jpt"); jm_put_str(&b, "/jdk"); jm_put_u32(&b, JM_MODE_TRACE);
    jm_put_str(&b, "out=x");
    emit(w, JM_JVM_INFO, 1001, &b, NULL, 0);

    jm_put_u64(&b, cc); jm_put_u64(&b, cc + 0x100000); jm_put_u32(&b, 1);
    jm_put_u64(&b, cc); jm_put_u64(&b, cc + 0x100000); jm_put_str(&b, "CodeHeap 'non-nmethods'");
    emit(w, JM_CODE_CACHE, 1002, &b, NULL, 0);

    jm_put_u64(&b, cc + 0x100); jm_put_u64(&b, cc + 0x140); jm_put_i32(&b, 0x60);
    jm_put_str(&b, "iadd");
    emit(w, JM_CODELET, 1003, &b, NULL, 0);

    jm_put_u64(&b, cc); jm_put_u64(&b, 32); jm_put_u64(&b, 0); jm_put_u32(&b, JM_BLOB_INTERPRETER);
    jm_put_str(&b, "Interpreter");
    emit(w, JM_CODE_BLOB, 1004, &b, code, 32);

    jm_put_u64(&b, 0x1111); jm_put_u64(&b, 1); jm_put_str(&b, "LTiny;"); jm_put_str(&b, "run");
    jm_put_str(&b, "()V"); jm_put_u32(&b, 9);
    emit(w, JM_METHOD, 1005, &b, NULL, 0);
    jm_put_u64(&b, 0x2222); jm_put_u64(&b, 1); jm_put_str(&b, "LTiny;"); jm_put_str(&b, "inl");
    jm_put_str(&b, "(I)I"); jm_put_u32(&b, 9);
    emit(w, JM_METHOD, 1005, &b, NULL, 0);

    jm_put_u64(&b, 1); jm_put_str(&b, "LTiny;"); jm_put_u32(&b, JM_CLASS_LOAD_HOOK);
    jm_put_bytes(&b, tiny_class, sizeof tiny_class);
    emit(w, JM_CLASS_FILE, 1006, &b, NULL, 0);

    jm_put_u64(&b, 1); jm_put_str(&b, "LTiny;"); jm_put_u32(&b, 0); jm_put_u32(&b, 2);
    jm_put_u64(&b, 0x1111); jm_put_u64(&b, 0x2222);
    emit(w, JM_CLASS_PREPARE, 1007, &b, NULL, 0);

    jm_put_u64(&b, 0x2222); jm_put_i32(&b, 2); jm_put_i32(&b, 1);
    jm_put_bytes(&b, "\x1a\x04\x68\xac", 4);
    emit(w, JM_METHOD_BYTECODE, 1008, &b, NULL, 0);

    jm_put_u64(&b, 1); jm_put_u32(&b, 5); jm_put_bytes(&b, tiny_class + 10, 38);
    emit(w, JM_CONSTANT_POOL, 1009, &b, NULL, 0);

    jm_put_u64(&b, cc + 0x2000); jm_put_u64(&b, 64); jm_put_u64(&b, 0); jm_put_u64(&b, 0x1111);
    jm_put_i32(&b, 4); jm_put_u32(&b, 2);
    jm_put_u64(&b, cc + 0x2004); jm_put_u32(&b, 1); jm_put_u64(&b, 0x1111); jm_put_i32(&b, 0);
    jm_put_u64(&b, cc + 0x2010); jm_put_u32(&b, 2); jm_put_u64(&b, 0x2222); jm_put_i32(&b, 3);
    jm_put_u64(&b, 0x1111); jm_put_i32(&b, 7);
    emit(w, JM_NMETHOD_LOAD, 1010, &b, code, 64);

    jm_put_u64(&b, cc + 0x3000); jm_put_u64(&b, 16); jm_put_u64(&b, 0); jm_put_str(&b, "stub");
    emit(w, JM_DYNAMIC_CODE, 1011, &b, code, 16);

    jm_put_u64(&b, cc + 0x2008); jm_put_u64(&b, 8); jm_put_u64(&b, 0);
    emit(w, JM_CODE_PATCH, 1012, &b, code, 8);

    jm_put_u64(&b, 1); jm_put_u32(&b, 4243); jm_put_str(&b, "main");
    emit(w, JM_THREAD_START, 1013, &b, NULL, 0);

    jm_put_u32(&b, 4243); jm_put_u64(&b, 0x1111);
    emit(w, JM_METHOD_ENTRY, 1014, &b, NULL, 0);
    jm_put_u32(&b, 4243); jm_put_u64(&b, 0x1111); jm_put_i32(&b, 0);
    emit(w, JM_SINGLE_STEP, 1015, &b, NULL, 0);
    jm_put_u32(&b, 4243); jm_put_u64(&b, 0x1111); jm_put_u8(&b, 0);
    emit(w, JM_METHOD_EXIT, 1016, &b, NULL, 0);

    jm_put_u64(&b, 0x1111); jm_put_u64(&b, cc + 0x2000);
    emit(w, JM_NMETHOD_UNLOAD, 1017, &b, NULL, 0);

    jm_put_u64(&b, 1); jm_put_u32(&b, 4243);
    emit(w, JM_THREAD_END, 1018, &b, NULL, 0);

    jm_put_str(&b, "a test warning");
    emit(w, JM_WARNING, 1019, &b, NULL, 0);

    jm_put_u32(&b, 1); jm_put_str(&b, "dropped_records"); jm_put_u64(&b, 0);
    emit(w, JM_STATS, 1020, &b, NULL, 0);
    jm_put_u32(&b, 1); jm_put_u64(&b, 1);
    emit(w, JM_CLASSES_INITIALIZED, 1020, &b, NULL, 0);
    emit(w, JM_END, 1021, &b, NULL, 0);

    jm_buf_free(&b);
    return jm_writer_close(w) == 0 ? 0 : 1;
}
