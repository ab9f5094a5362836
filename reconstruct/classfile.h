/* Class-file parsing. This first part validates the header and constant pool
 * and finds the class's own name; method and attribute parsing build on it. */
#ifndef JPT_RECONSTRUCT_CLASSFILE_H
#define JPT_RECONSTRUCT_CLASSFILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct cf_header {
    uint16_t minor, major;
    uint16_t cp_count;         /* as in the file: entries are 1..cp_count-1 */
    uint16_t access_flags;
    char this_class[512];      /* internal form, e.g. java/lang/String */
    size_t cp_end;             /* offset just past the constant pool */
} cf_header;

/* Parses bytes [0, len). Returns 0, or -1 with a one-line message naming the
 * offset in err. Never reads outside the buffer. */
int cf_parse_header(const uint8_t *p, size_t len, cf_header *out, char *err, size_t errlen);

#endif
