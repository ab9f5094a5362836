#include "reconstruct/classfile.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    CP_UTF8 = 1, CP_INTEGER = 3, CP_FLOAT = 4, CP_LONG = 5, CP_DOUBLE = 6, CP_CLASS = 7,
    CP_STRING = 8, CP_FIELDREF = 9, CP_METHODREF = 10, CP_IMETHODREF = 11,
    CP_NAME_AND_TYPE = 12, CP_METHOD_HANDLE = 15, CP_METHOD_TYPE = 16, CP_DYNAMIC = 17,
    CP_INVOKE_DYNAMIC = 18, CP_MODULE = 19, CP_PACKAGE = 20,
};

static int fail(char *err, size_t errlen, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, size_t off, const char *fmt, ...)
{
    if (err && errlen) {
        int n = snprintf(err, errlen, "offset %zu: ", off);
        if (n >= 0 && (size_t)n < errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

/* Size of a constant-pool entry's body after its tag, or 0 for an unknown tag. */
static size_t cp_body_size(uint8_t tag)
{
    switch (tag) {
    case CP_INTEGER: case CP_FLOAT: case CP_FIELDREF: case CP_METHODREF:
    case CP_IMETHODREF: case CP_NAME_AND_TYPE: case CP_DYNAMIC: case CP_INVOKE_DYNAMIC:
        return 4;
    case CP_LONG: case CP_DOUBLE:
        return 8;
    case CP_CLASS: case CP_STRING: case CP_METHOD_TYPE: case CP_MODULE: case CP_PACKAGE:
        return 2;
    case CP_METHOD_HANDLE:
        return 3;
    default:
        return 0;
    }
}

int cf_parse_header(const uint8_t *p, size_t len, cf_header *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (len < 10)
        return fail(err, errlen, 0, "class file too short (%zu bytes)", len);
    if (!(p[0] == 0xCA && p[1] == 0xFE && p[2] == 0xBA && p[3] == 0xBE))
        return fail(err, errlen, 0, "bad magic %02x%02x%02x%02x", p[0], p[1], p[2], p[3]);
    out->minor = be16(p + 4);
    out->major = be16(p + 6);
    out->cp_count = be16(p + 8);
    if (out->major < 45)
        return fail(err, errlen, 6, "class file version %u.%u is too old", out->major, out->minor);
    if (out->cp_count == 0)
        return fail(err, errlen, 8, "constant_pool_count is 0");
    /* Offsets of each entry, to resolve this_class afterwards. */
    size_t *at = calloc(out->cp_count, sizeof *at);
    if (!at)
        return fail(err, errlen, 8, "out of memory");
    size_t off = 10;
    int rc = 0;
    for (unsigned i = 1; i < out->cp_count; i++) {
        if (off >= len) {
            rc = fail(err, errlen, off, "constant pool entry %u runs past the end", i);
            goto done;
        }
        uint8_t tag = p[off];
        at[i] = off;
        size_t body;
        if (tag == CP_UTF8) {
            if (len - off < 3) {
                rc = fail(err, errlen, off, "constant pool entry %u runs past the end", i);
                goto done;
            }
            body = 2 + (size_t)be16(p + off + 1);
        } else {
            body = cp_body_size(tag);
            if (!body) {
                rc = fail(err, errlen, off, "constant pool entry %u has unknown tag %u", i, tag);
                goto done;
            }
        }
        if (len - off - 1 < body) {
            rc = fail(err, errlen, off, "constant pool entry %u runs past the end", i);
            goto done;
        }
        off += 1 + body;
        if (tag == CP_LONG || tag == CP_DOUBLE)
            i++; /* takes two slots */
    }
    out->cp_end = off;
    if (len - off < 6) {
        rc = fail(err, errlen, off, "class file ends inside access_flags/this_class");
        goto done;
    }
    out->access_flags = be16(p + off);
    uint16_t this_idx = be16(p + off + 2);
    if (this_idx == 0 || this_idx >= out->cp_count || !at[this_idx] || p[at[this_idx]] != CP_CLASS) {
        rc = fail(err, errlen, off + 2, "this_class %u is not a Class constant", this_idx);
        goto done;
    }
    uint16_t name_idx = be16(p + at[this_idx] + 1);
    if (name_idx == 0 || name_idx >= out->cp_count || !at[name_idx] || p[at[name_idx]] != CP_UTF8) {
        rc = fail(err, errlen, at[this_idx] + 1, "class name %u is not a Utf8 constant", name_idx);
        goto done;
    }
    size_t n = be16(p + at[name_idx] + 1);
    if (n >= sizeof out->this_class)
        n = sizeof out->this_class - 1;
    memcpy(out->this_class, p + at[name_idx] + 3, n);
    out->this_class[n] = '\0';
done:
    free(at);
    return rc;
}
