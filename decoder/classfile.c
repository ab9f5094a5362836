#include "decoder/classfile.h"

#include "decoder/bytecodes.h"

#include <inttypes.h>
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

int cf_fail(char *err, size_t errlen, const char *where, uint64_t at, const char *fmt, ...)
{
    if (err && errlen) {
        int n = snprintf(err, errlen, "%s %" PRIu64 ": ", where, at);
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
        return cf_fail(err, errlen, "offset", 0, "class file too short (%zu bytes)", len);
    if (!(p[0] == 0xCA && p[1] == 0xFE && p[2] == 0xBA && p[3] == 0xBE))
        return cf_fail(err, errlen, "offset", 0, "bad magic %02x%02x%02x%02x", p[0], p[1], p[2], p[3]);
    out->minor = be16(p + 4);
    out->major = be16(p + 6);
    out->cp_count = be16(p + 8);
    if (out->major < 45)
        return cf_fail(err, errlen, "offset", 6, "class file version %u.%u is too old", out->major, out->minor);
    if (out->cp_count == 0)
        return cf_fail(err, errlen, "offset", 8, "constant_pool_count is 0");
    /* Offsets of each entry, to resolve this_class afterwards. */
    size_t *at = calloc(out->cp_count, sizeof *at);
    if (!at)
        return cf_fail(err, errlen, "offset", 8, "out of memory");
    size_t off = 10;
    int rc = 0;
    for (unsigned i = 1; i < out->cp_count; i++) {
        if (off >= len) {
            rc = cf_fail(err, errlen, "offset", off, "constant pool entry %u runs past the end", i);
            goto done;
        }
        uint8_t tag = p[off];
        at[i] = off;
        size_t body;
        if (tag == CP_UTF8) {
            if (len - off < 3) {
                rc = cf_fail(err, errlen, "offset", off, "constant pool entry %u runs past the end", i);
                goto done;
            }
            body = 2 + (size_t)be16(p + off + 1);
        } else {
            body = cp_body_size(tag);
            if (!body) {
                rc = cf_fail(err, errlen, "offset", off, "constant pool entry %u has unknown tag %u", i, tag);
                goto done;
            }
        }
        if (len - off - 1 < body) {
            rc = cf_fail(err, errlen, "offset", off, "constant pool entry %u runs past the end", i);
            goto done;
        }
        off += 1 + body;
        if (tag == CP_LONG || tag == CP_DOUBLE)
            i++; /* takes two slots */
    }
    out->cp_end = off;
    if (len - off < 6) {
        rc = cf_fail(err, errlen, "offset", off, "class file ends inside access_flags/this_class");
        goto done;
    }
    out->access_flags = be16(p + off);
    uint16_t this_idx = be16(p + off + 2);
    if (this_idx == 0 || this_idx >= out->cp_count || !at[this_idx] || p[at[this_idx]] != CP_CLASS) {
        rc = cf_fail(err, errlen, "offset", off + 2, "this_class %u is not a Class constant", this_idx);
        goto done;
    }
    uint16_t name_idx = be16(p + at[this_idx] + 1);
    if (name_idx == 0 || name_idx >= out->cp_count || !at[name_idx] || p[at[name_idx]] != CP_UTF8) {
        rc = cf_fail(err, errlen, "offset", at[this_idx] + 1, "class name %u is not a Utf8 constant", name_idx);
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

/* ---- the whole class file ------------------------------------------------ */

struct cf_arena {
    struct cf_arena *next;
    size_t used, cap;
    max_align_t data[];
};

static void *arena_alloc(cf_class *c, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    cf_arena *a = c->arena;
    if (!a || a->cap - a->used < n) {
        size_t cap = n > 8192 ? n : 8192;
        cf_arena *b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        if (a && n > 8192) { /* keep the current chunk for later small requests */
            b->next = a->next;
            a->next = b;
        } else {
            b->next = a;
            c->arena = b;
        }
        a = b;
    }
    void *p = (char *)a->data + a->used;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void cf_free(cf_class *c)
{
    if (!c)
        return;
    for (cf_arena *a = c->arena, *n; a; a = n) {
        n = a->next;
        free(a);
    }
    free(c->cp);
    free(c->strs);
    memset(c, 0, sizeof *c);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A bounds-checked reader over [0, len). */
typedef struct rd {
    const uint8_t *p;
    size_t len, off;
    char *err;
    size_t errlen;
    bool bad;
} rd;

static bool need(rd *r, size_t n, const char *what)
{
    if (r->bad)
        return false;
    if (r->len - r->off < n) {
        cf_fail(r->err, r->errlen, "offset", r->off, "class file ends inside %s", what);
        r->bad = true;
        return false;
    }
    return true;
}

static uint16_t rd16(rd *r, const char *what)
{
    if (!need(r, 2, what))
        return 0;
    uint16_t v = be16(r->p + r->off);
    r->off += 2;
    return v;
}

static uint32_t rd32(rd *r, const char *what)
{
    if (!need(r, 4, what))
        return 0;
    uint32_t v = be32(r->p + r->off);
    r->off += 4;
    return v;
}

static int rfail(rd *r, size_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rfail(rd *r, size_t off, const char *fmt, ...)
{
    if (r->bad)
        return -1;
    r->bad = true;
    if (r->err && r->errlen) {
        int n = snprintf(r->err, r->errlen, "offset %zu: ", off);
        if (n >= 0 && (size_t)n < r->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static bool cp_is(const cf_class *c, uint32_t idx, uint8_t tag)
{
    return idx > 0 && idx < c->cp_count && c->cp[idx].tag == tag;
}

const char *cf_utf8(const cf_class *c, uint32_t idx)
{
    return cp_is(c, idx, CF_UTF8) ? c->strs + c->cp[idx].off : NULL;
}

const char *cf_class_name(const cf_class *c, uint32_t idx)
{
    if (!cp_is(c, idx, CF_CLASS))
        return NULL;
    return cf_utf8(c, be16(c->data + c->cp[idx].off));
}

int cf_member_ref(const cf_class *c, uint32_t idx, uint8_t *tag, const char **klass,
                  const char **name, const char **sig)
{
    if (!(cp_is(c, idx, CF_FIELDREF) || cp_is(c, idx, CF_METHODREF) ||
          cp_is(c, idx, CF_IMETHODREF)))
        return -1;
    const uint8_t *b = c->data + c->cp[idx].off;
    uint16_t nt = be16(b + 2);
    if (!cp_is(c, nt, CF_NAME_AND_TYPE))
        return -1;
    const uint8_t *n = c->data + c->cp[nt].off;
    *tag = c->cp[idx].tag;
    *klass = cf_class_name(c, be16(b));
    *name = cf_utf8(c, be16(n));
    *sig = cf_utf8(c, be16(n + 2));
    return *klass && *name && *sig ? 0 : -1;
}

int cf_method_handle(const cf_class *c, uint32_t idx, uint8_t *kind, uint16_t *ref)
{
    if (!cp_is(c, idx, CF_METHOD_HANDLE))
        return -1;
    const uint8_t *b = c->data + c->cp[idx].off;
    *kind = b[0];
    *ref = be16(b + 1);
    return 0;
}

int cf_dynamic(const cf_class *c, uint32_t idx, uint16_t *bsm, const char **name,
               const char **sig)
{
    if (!(cp_is(c, idx, CF_INVOKE_DYNAMIC) || cp_is(c, idx, CF_DYNAMIC)))
        return -1;
    const uint8_t *b = c->data + c->cp[idx].off;
    uint16_t nt = be16(b + 2);
    if (!cp_is(c, nt, CF_NAME_AND_TYPE))
        return -1;
    const uint8_t *n = c->data + c->cp[nt].off;
    *bsm = be16(b);
    *name = cf_utf8(c, be16(n));
    *sig = cf_utf8(c, be16(n + 2));
    return *name && *sig ? 0 : -1;
}

uint16_t cf_bsm_arg(const cf_class *c, const cf_bsm *b, uint32_t i)
{
    if (i >= b->nargs)
        return 0;
    return be16(c->data + b->args_off + 2 * i);
}

/* Reads cp entries 1..cp_count-1 starting at r->off, then checks every
 * cross-reference. */
static int parse_pool(rd *r, cf_class *c, uint32_t cp_count)
{
    if (cp_count == 0 || cp_count > 65535)
        return rfail(r, r->off, "constant_pool_count %u is out of range", cp_count);
    c->cp_count = (uint16_t)cp_count;
    c->cp = calloc(cp_count, sizeof *c->cp);
    /* Every Utf8 entry of n bytes takes 3 + n bytes of input and n + 1 here. */
    c->strs = malloc(r->len - r->off + 1);
    if (!c->cp || !c->strs)
        return rfail(r, r->off, "out of memory");
    size_t sused = 0;
    for (uint32_t i = 1; i < cp_count; i++) {
        if (!need(r, 1, "the constant pool"))
            return -1;
        size_t at = r->off;
        uint8_t tag = r->p[r->off++];
        if (tag == CF_UTF8) {
            uint16_t n = rd16(r, "a Utf8 constant");
            if (!need(r, n, "a Utf8 constant"))
                return -1;
            const uint8_t *s = r->p + r->off;
            if (memchr(s, 0, n))
                return rfail(r, at, "Utf8 constant %u contains a zero byte", i);
            memcpy(c->strs + sused, s, n);
            c->strs[sused + n] = '\0';
            c->cp[i].tag = tag;
            c->cp[i].off = (uint32_t)sused;
            sused += (size_t)n + 1;
            r->off += n;
            continue;
        }
        size_t body = cp_body_size(tag);
        if (!body)
            return rfail(r, at, "constant pool entry %u has unknown tag %u", i, tag);
        if (!need(r, body, "the constant pool"))
            return -1;
        c->cp[i].tag = tag;
        c->cp[i].off = (uint32_t)r->off;
        r->off += body;
        if (tag == CF_LONG || tag == CF_DOUBLE) {
            if (i + 1 >= cp_count)
                return rfail(r, at, "constant pool entry %u (8 bytes) has no second slot", i);
            i++;
        }
    }
    for (uint32_t i = 1; i < cp_count; i++) {
        const uint8_t *b = r->p + c->cp[i].off;
        size_t at = c->cp[i].off - 1;
        bool ok = true;
        switch (c->cp[i].tag) {
        case CF_CLASS: case CF_STRING: case CF_METHOD_TYPE: case CF_MODULE: case CF_PACKAGE:
            ok = cp_is(c, be16(b), CF_UTF8);
            break;
        case CF_FIELDREF: case CF_METHODREF: case CF_IMETHODREF:
            ok = cp_is(c, be16(b), CF_CLASS) && cp_is(c, be16(b + 2), CF_NAME_AND_TYPE);
            break;
        case CF_NAME_AND_TYPE:
            ok = cp_is(c, be16(b), CF_UTF8) && cp_is(c, be16(b + 2), CF_UTF8);
            break;
        case CF_DYNAMIC: case CF_INVOKE_DYNAMIC:
            ok = cp_is(c, be16(b + 2), CF_NAME_AND_TYPE);
            break;
        case CF_METHOD_HANDLE: {
            uint8_t k = b[0];
            uint16_t ref = be16(b + 1);
            if (k < CF_REF_GET_FIELD || k > CF_REF_INVOKE_INTERFACE)
                ok = false;
            else if (k <= CF_REF_PUT_STATIC)
                ok = cp_is(c, ref, CF_FIELDREF);
            else
                ok = cp_is(c, ref, CF_METHODREF) || cp_is(c, ref, CF_IMETHODREF);
            break;
        }
        default:
            break;
        }
        if (!ok)
            return rfail(r, at, "constant pool entry %u (tag %u) refers to a wrong entry", i,
                         c->cp[i].tag);
    }
    return 0;
}

int cf_parse_pool(const uint8_t *p, size_t len, uint32_t cp_count, cf_class *out, char *err,
                  size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->data = p;
    out->len = len;
    rd r = { .p = p, .len = len, .err = err, .errlen = errlen };
    if (parse_pool(&r, out, cp_count) < 0) {
        cf_free(out);
        return -1;
    }
    return 0;
}

static int by_start_pc(const void *a, const void *b)
{
    const cf_line *x = a, *y = b;
    return x->start_pc < y->start_pc ? -1 : x->start_pc > y->start_pc;
}

/* The Code attribute [r->off, end) of method m. */
static int parse_code(rd *r, cf_class *c, cf_method *m, size_t end)
{
    rd s = *r;
    s.len = end; /* reads stop at the attribute's end */
    size_t at = s.off;
    cf_line *lines = NULL; /* merged LineNumberTables */
    size_t lcap = 0;
    uint32_t code_len;
    if (c->major == 45 && c->minor < 3) { /* JDK 1.0.2: u1 max_stack, u1 max_locals, u2 length */
        if (!need(&s, 4, "a Code attribute"))
            goto bad;
        m->max_stack = s.p[s.off];
        m->max_locals = s.p[s.off + 1];
        s.off += 2;
        code_len = rd16(&s, "a Code attribute");
    } else {
        m->max_stack = rd16(&s, "a Code attribute");
        m->max_locals = rd16(&s, "a Code attribute");
        code_len = rd32(&s, "a Code attribute");
    }
    if (s.bad)
        goto bad;
    if (code_len == 0 || code_len > 65535) {
        rfail(&s, at, "method %s%s: code_length %u is out of range", m->name, m->sig, code_len);
        goto bad;
    }
    if (!need(&s, code_len, "a method's code"))
        goto bad;
    m->code = s.p + s.off;
    m->code_len = code_len;
    s.off += code_len;
    uint16_t nh = rd16(&s, "an exception table");
    if (!need(&s, (size_t)nh * 8, "an exception table"))
        goto bad;
    if (nh) {
        m->handlers = arena_alloc(c, nh * sizeof *m->handlers);
        if (!m->handlers) {
            rfail(&s, s.off, "out of memory");
            goto bad;
        }
    }
    for (uint32_t i = 0; i < nh; i++) {
        const uint8_t *e = s.p + s.off;
        cf_handler *h = &m->handlers[i];
        h->start_pc = be16(e);
        h->end_pc = be16(e + 2);
        h->handler_pc = be16(e + 4);
        uint16_t ct = be16(e + 6);
        if (h->start_pc >= h->end_pc || h->end_pc > code_len || h->handler_pc >= code_len) {
            rfail(&s, s.off, "method %s%s: exception handler %u [%u, %u) -> %u is outside the code",
                  m->name, m->sig, i, h->start_pc, h->end_pc, h->handler_pc);
            goto bad;
        }
        if (ct) {
            h->catch_type = cf_class_name(c, ct);
            if (!h->catch_type) {
                rfail(&s, s.off + 6, "method %s%s: catch type %u is not a Class constant",
                      m->name, m->sig, ct);
                goto bad;
            }
        }
        s.off += 8;
    }
    m->nhandlers = nh;
    uint16_t na = rd16(&s, "a Code attribute's attributes");
    for (uint32_t i = 0; i < na && !s.bad; i++) {
        size_t aat = s.off;
        uint16_t ni = rd16(&s, "an attribute header");
        uint32_t alen = rd32(&s, "an attribute header");
        if (!need(&s, alen, "an attribute"))
            break;
        const char *an = cf_utf8(c, ni);
        if (!an) {
            rfail(&s, aat, "attribute name %u is not a Utf8 constant", ni);
            break;
        }
        if (strcmp(an, "LineNumberTable") == 0) {
            if (alen < 2 || (alen - 2) / 4 < be16(s.p + s.off)) {
                rfail(&s, aat, "LineNumberTable of %s%s has a bad length", m->name, m->sig);
                break;
            }
            uint32_t n = be16(s.p + s.off);
            if (n && m->nlines + n > lcap) {
                /* Several tables are merged; grow geometrically (a hostile
                 * file may hold thousands of small ones). */
                size_t cap = (m->nlines + n) * 2;
                cf_line *l = realloc(lines, cap * sizeof *l);
                if (!l) {
                    rfail(&s, aat, "out of memory");
                    break;
                }
                lines = l;
                lcap = cap;
            }
            for (uint32_t k = 0; k < n; k++) {
                const uint8_t *e = s.p + s.off + 2 + 4 * k;
                lines[m->nlines + k].start_pc = be16(e);
                lines[m->nlines + k].line = be16(e + 2);
            }
            m->nlines += n;
        }
        s.off += alen;
    }
    if (s.bad)
        goto bad;
    if (m->nlines) {
        m->lines = arena_alloc(c, m->nlines * sizeof *m->lines);
        if (!m->lines) {
            rfail(&s, at, "out of memory");
            goto bad;
        }
        memcpy(m->lines, lines, m->nlines * sizeof *m->lines);
        if (m->nlines > 1)
            qsort(m->lines, m->nlines, sizeof *m->lines, by_start_pc);
    }
    free(lines);
    r->off = end;
    return 0;
bad:
    free(lines);
    m->nlines = 0;
    r->bad = true;
    return -1;
}

/* field_info / method_info tables; methods are kept when m is non-NULL. */
static int parse_members(rd *r, cf_class *c, bool methods)
{
    uint16_t n = rd16(r, methods ? "methods_count" : "fields_count");
    if (r->bad)
        return -1;
    if (methods && n) {
        c->methods = arena_alloc(c, n * sizeof *c->methods);
        if (!c->methods)
            return rfail(r, r->off, "out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        size_t at = r->off;
        uint16_t acc = rd16(r, "a member");
        uint16_t ni = rd16(r, "a member");
        uint16_t di = rd16(r, "a member");
        uint16_t na = rd16(r, "a member");
        if (r->bad)
            return -1;
        const char *name = cf_utf8(c, ni), *sig = cf_utf8(c, di);
        if (!name || !sig)
            return rfail(r, at, "%s %u: name or descriptor is not a Utf8 constant",
                         methods ? "method" : "field", i);
        cf_method *m = methods ? &c->methods[i] : NULL;
        if (m) {
            m->access = acc;
            m->name = name;
            m->sig = sig;
        }
        for (uint32_t k = 0; k < na; k++) {
            size_t aat = r->off;
            uint16_t ani = rd16(r, "an attribute header");
            uint32_t alen = rd32(r, "an attribute header");
            if (!need(r, alen, "an attribute"))
                return -1;
            if (m) {
                const char *an = cf_utf8(c, ani);
                if (!an)
                    return rfail(r, aat, "attribute name %u is not a Utf8 constant", ani);
                if (strcmp(an, "Code") == 0) {
                    if (m->code)
                        return rfail(r, aat, "method %s%s has two Code attributes", name, sig);
                    if (parse_code(r, c, m, r->off + alen) < 0)
                        return -1;
                    continue;
                }
            }
            r->off += alen;
        }
    }
    if (methods)
        c->nmethods = n;
    return 0;
}

int cf_parse(const uint8_t *p, size_t len, cf_class *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->data = p;
    out->len = len;
    rd r = { .p = p, .len = len, .err = err, .errlen = errlen };
    if (len < 10) {
        rfail(&r, 0, "class file too short (%zu bytes)", len);
        goto bad;
    }
    if (be32(p) != 0xCAFEBABEu) {
        rfail(&r, 0, "bad magic %02x%02x%02x%02x", p[0], p[1], p[2], p[3]);
        goto bad;
    }
    out->minor = be16(p + 4);
    out->major = be16(p + 6);
    if (out->major < 45) {
        rfail(&r, 6, "class file version %u.%u is too old", out->major, out->minor);
        goto bad;
    }
    r.off = 8;
    uint16_t cpc = rd16(&r, "constant_pool_count");
    if (parse_pool(&r, out, cpc) < 0)
        goto bad;
    size_t at = r.off;
    out->access = rd16(&r, "access_flags");
    uint16_t ti = rd16(&r, "this_class");
    uint16_t si = rd16(&r, "super_class");
    if (r.bad)
        goto bad;
    out->name = cf_class_name(out, ti);
    if (!out->name) {
        rfail(&r, at + 2, "this_class %u is not a Class constant", ti);
        goto bad;
    }
    if (si) {
        out->super_name = cf_class_name(out, si);
        if (!out->super_name) {
            rfail(&r, at + 4, "super_class %u is not a Class constant", si);
            goto bad;
        }
    }
    at = r.off;
    uint16_t ni = rd16(&r, "interfaces_count");
    if (!need(&r, (size_t)ni * 2, "the interfaces"))
        goto bad;
    if (ni) {
        out->interfaces = arena_alloc(out, ni * sizeof *out->interfaces);
        if (!out->interfaces) {
            rfail(&r, at, "out of memory");
            goto bad;
        }
    }
    for (uint32_t i = 0; i < ni; i++) {
        uint16_t ii = be16(p + r.off);
        out->interfaces[i] = cf_class_name(out, ii);
        if (!out->interfaces[i]) {
            rfail(&r, r.off, "interface %u is not a Class constant", ii);
            goto bad;
        }
        r.off += 2;
    }
    out->ninterfaces = ni;
    if (parse_members(&r, out, false) < 0 || parse_members(&r, out, true) < 0)
        goto bad;
    uint16_t na = rd16(&r, "attributes_count");
    for (uint32_t i = 0; i < na && !r.bad; i++) {
        size_t aat = r.off;
        uint16_t ani = rd16(&r, "an attribute header");
        uint32_t alen = rd32(&r, "an attribute header");
        if (!need(&r, alen, "an attribute"))
            break;
        const char *an = cf_utf8(out, ani);
        if (!an) {
            rfail(&r, aat, "attribute name %u is not a Utf8 constant", ani);
            break;
        }
        const uint8_t *b = p + r.off;
        if (strcmp(an, "SourceFile") == 0) {
            if (alen < 2 || !(out->source = cf_utf8(out, be16(b)))) {
                rfail(&r, aat, "bad SourceFile attribute");
                break;
            }
        } else if (strcmp(an, "BootstrapMethods") == 0) {
            if (out->has_bsm) {
                rfail(&r, aat, "two BootstrapMethods attributes");
                break;
            }
            if (alen < 2) {
                rfail(&r, aat, "BootstrapMethods attribute too short");
                break;
            }
            uint16_t nb = be16(b);
            size_t o = 2;
            out->bsm = arena_alloc(out, (nb ? nb : 1) * sizeof *out->bsm);
            if (!out->bsm) {
                rfail(&r, aat, "out of memory");
                break;
            }
            for (uint32_t k = 0; k < nb && !r.bad; k++) {
                if (alen - o < 4) {
                    rfail(&r, r.off + o, "BootstrapMethods entry %u runs past the attribute", k);
                    break;
                }
                cf_bsm *e = &out->bsm[k];
                e->method_handle = be16(b + o);
                e->nargs = be16(b + o + 2);
                if (!cp_is(out, e->method_handle, CF_METHOD_HANDLE)) {
                    rfail(&r, r.off + o, "bootstrap method %u is not a MethodHandle constant", k);
                    break;
                }
                o += 4;
                if ((alen - o) / 2 < e->nargs) {
                    rfail(&r, r.off + o, "BootstrapMethods entry %u runs past the attribute", k);
                    break;
                }
                e->args_off = (uint32_t)(r.off + o);
                for (uint32_t a = 0; a < e->nargs; a++) {
                    uint16_t ai = be16(b + o + 2 * a);
                    if (ai == 0 || ai >= out->cp_count || !out->cp[ai].tag) {
                        rfail(&r, r.off + o + 2 * a, "bootstrap argument %u is not a constant", ai);
                        break;
                    }
                }
                o += 2 * (size_t)e->nargs;
            }
            out->nbsm = nb;
            out->has_bsm = true;
        }
        r.off += alen;
    }
    if (r.bad)
        goto bad;
    return 0;
bad:
    cf_free(out);
    out->data = p;
    out->len = len;
    return -1;
}

/* ---- bytecode ----------------------------------------------------------- */

/* Fixed instruction lengths; 0: variable (switches, wide) or invalid. */
static const uint8_t op_len[256] = {
    [0 ... 15] = 1, [16] = 2, [17] = 3, [18] = 2, [19] = 3, [20] = 3, [21 ... 25] = 2,
    [26 ... 53] = 1, [54 ... 58] = 2, [59 ... 131] = 1, [132] = 3, [133 ... 152] = 1,
    [153 ... 168] = 3, [169] = 2, [172 ... 177] = 1, [178 ... 184] = 3, [185] = 5, [186] = 5,
    [187] = 3, [188] = 2, [189] = 3, [190] = 1, [191] = 1, [192] = 3, [193] = 3, [194] = 1,
    [195] = 1, [197] = 4, [198] = 3, [199] = 3, [200] = 5, [201] = 5,
};


const char *cf_op_name(uint8_t op)
{
    const char *n = bc_name(op);    /* one opcode table, the decoder's */
    return n ? n : "?";
}

int32_t cf_insn_len(const uint8_t *code, uint32_t code_len, uint32_t bci, char *err,
                    size_t errlen)
{
    if (bci >= code_len)
        return cf_fail(err, errlen, "bci", bci, "outside the code (%u bytes)", code_len);
    uint8_t op = code[bci];
    uint32_t left = code_len - bci;
    uint64_t n = op_len[op];
    if (op == CF_OP_WIDE) {
        if (left < 2)
            return cf_fail(err, errlen, "bci", bci, "wide runs past the end of the code");
        uint8_t w = code[bci + 1];
        if ((w >= 21 && w <= 25) || (w >= 54 && w <= 58) || w == 169)
            n = 4;
        else if (w == 132)
            n = 6;
        else
            return cf_fail(err, errlen, "bci", bci, "wide of opcode %u, which has no wide form", w);
    } else if (op == CF_OP_TABLESWITCH || op == CF_OP_LOOKUPSWITCH) {
        uint32_t pad = (4 - (bci + 1) % 4) % 4;
        uint64_t head = 1 + (uint64_t)pad + (op == CF_OP_TABLESWITCH ? 12 : 8);
        if (left < head)
            return cf_fail(err, errlen, "bci", bci, "%s runs past the end of the code", cf_op_name(op));
        const uint8_t *b = code + bci + 1 + pad;
        if (op == CF_OP_TABLESWITCH) {
            int32_t lo = (int32_t)be32(b + 4), hi = (int32_t)be32(b + 8);
            if (lo > hi)
                return cf_fail(err, errlen, "bci", bci, "tableswitch low %d > high %d", lo, hi);
            n = head + 4 * ((uint64_t)((int64_t)hi - lo) + 1);
        } else {
            int32_t np = (int32_t)be32(b + 4);
            if (np < 0)
                return cf_fail(err, errlen, "bci", bci, "lookupswitch npairs %d < 0", np);
            n = head + 8 * (uint64_t)np;
        }
    } else if (n == 0) {
        return cf_fail(err, errlen, "bci", bci, "invalid opcode %u", op);
    }
    if (n > left)
        return cf_fail(err, errlen, "bci", bci, "%s runs past the end of the code", cf_op_name(op));
    return (int32_t)n;
}
