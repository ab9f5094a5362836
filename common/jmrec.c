#include "common/jmrec.h"

#include <string.h>

static jm_code get_code(jm_cur *c)
{
    jm_code k;
    k.vaddr = jm_get_u64(c);
    k.size = jm_get_u64(c);
    k.code_offset = jm_get_u64(c);
    return k;
}

/* The smallest encoding of one element, to bound counts by the bytes left
 * before trusting them. */
static bool count_fits(jm_cur *c, uint64_t count, uint64_t min_size)
{
    return jm_cur_ok(c) && count <= (c->len - c->pos) / min_size;
}

int jm_parse(const jm_record *rec, jm_rec *out, char *err, size_t errlen)
{
    jm_cur c;
    jm_cur_init(&c, rec->payload, rec->size);
    memset(out, 0, sizeof *out);
    out->type = rec->type;
    out->tsc = rec->tsc;
    const char *bad_count = NULL;
    switch (rec->type) {
    case JM_JVM_INFO:
        out->u.jvm_info.vm_name = jm_get_bytes(&c);
        out->u.jvm_info.vm_version = jm_get_bytes(&c);
        out->u.jvm_info.vm_vendor = jm_get_bytes(&c);
        out->u.jvm_info.java_home = jm_get_bytes(&c);
        out->u.jvm_info.mode = jm_get_u32(&c);
        out->u.jvm_info.options = jm_get_bytes(&c);
        break;
    case JM_CODE_CACHE:
        out->u.code_cache.low = jm_get_u64(&c);
        out->u.code_cache.high = jm_get_u64(&c);
        out->u.code_cache.nheaps = jm_get_u32(&c);
        if (!count_fits(&c, out->u.code_cache.nheaps, 20))
            bad_count = "heap count exceeds the payload";
        out->u.code_cache.heaps = c;
        break;
    case JM_CODELET:
        out->u.codelet.begin = jm_get_u64(&c);
        out->u.codelet.end = jm_get_u64(&c);
        out->u.codelet.bytecode = jm_get_i32(&c);
        out->u.codelet.description = jm_get_bytes(&c);
        if (jm_cur_ok(&c) && out->u.codelet.end < out->u.codelet.begin)
            bad_count = "codelet ends before it begins";
        break;
    case JM_CODE_BLOB:
        out->u.blob.code = get_code(&c);
        out->u.blob.kind = jm_get_u32(&c);
        out->u.blob.name = jm_get_bytes(&c);
        break;
    case JM_METHOD:
        out->u.method.method_id = jm_get_u64(&c);
        out->u.method.class_id = jm_get_u64(&c);
        out->u.method.class_sig = jm_get_bytes(&c);
        out->u.method.name = jm_get_bytes(&c);
        out->u.method.sig = jm_get_bytes(&c);
        out->u.method.modifiers = jm_get_u32(&c);
        break;
    case JM_CLASS_FILE:
        out->u.class_file.class_id = jm_get_u64(&c);
        out->u.class_file.class_sig = jm_get_bytes(&c);
        out->u.class_file.origin = jm_get_u32(&c);
        out->u.class_file.bytes = jm_get_bytes(&c);
        break;
    case JM_CLASS_PREPARE:
        out->u.class_prepare.class_id = jm_get_u64(&c);
        out->u.class_prepare.class_sig = jm_get_bytes(&c);
        out->u.class_prepare.flags = jm_get_u32(&c);
        out->u.class_prepare.nmethods = jm_get_u32(&c);
        if (!count_fits(&c, out->u.class_prepare.nmethods, 8))
            bad_count = "method count exceeds the payload";
        out->u.class_prepare.methods = c;
        break;
    case JM_METHOD_BYTECODE:
        out->u.method_bytecode.method_id = jm_get_u64(&c);
        out->u.method_bytecode.max_stack = jm_get_i32(&c);
        out->u.method_bytecode.max_locals = jm_get_i32(&c);
        out->u.method_bytecode.bytecode = jm_get_bytes(&c);
        break;
    case JM_CONSTANT_POOL:
        out->u.constant_pool.class_id = jm_get_u64(&c);
        out->u.constant_pool.cp_count = jm_get_u32(&c);
        out->u.constant_pool.bytes = jm_get_bytes(&c);
        break;
    case JM_NMETHOD_LOAD:
        out->u.nmethod_load.code = get_code(&c);
        out->u.nmethod_load.method_id = jm_get_u64(&c);
        out->u.nmethod_load.level = jm_get_i32(&c);
        out->u.nmethod_load.npcs = jm_get_u32(&c);
        if (!count_fits(&c, out->u.nmethod_load.npcs, 12))
            bad_count = "pc record count exceeds the payload";
        out->u.nmethod_load.pcs.cur = c;
        out->u.nmethod_load.pcs.left = out->u.nmethod_load.npcs;
        break;
    case JM_NMETHOD_UNLOAD:
        out->u.nmethod_unload.method_id = jm_get_u64(&c);
        out->u.nmethod_unload.vaddr = jm_get_u64(&c);
        break;
    case JM_DYNAMIC_CODE:
        out->u.dynamic_code.code = get_code(&c);
        out->u.dynamic_code.name = jm_get_bytes(&c);
        break;
    case JM_CODE_PATCH:
        out->u.patch.code = get_code(&c);
        break;
    case JM_THREAD_START:
    case JM_THREAD_END:
        out->u.thread.java_tid = jm_get_u64(&c);
        out->u.thread.native_tid = jm_get_u32(&c);
        if (rec->type == JM_THREAD_START)
            out->u.thread.name = jm_get_bytes(&c);
        break;
    case JM_METHOD_ENTRY:
    case JM_METHOD_EXIT:
    case JM_SINGLE_STEP:
        out->u.ref.native_tid = jm_get_u32(&c);
        out->u.ref.method_id = jm_get_u64(&c);
        if (rec->type == JM_SINGLE_STEP)
            out->u.ref.bci = jm_get_i32(&c);
        else if (rec->type == JM_METHOD_EXIT)
            out->u.ref.by_exception = jm_get_u8(&c);
        break;
    case JM_WARNING:
        out->u.warning.text = jm_get_bytes(&c);
        break;
    case JM_CLASSES_INITIALIZED:
        out->u.classes_initialized.n = jm_get_u32(&c);
        if (!count_fits(&c, out->u.classes_initialized.n, 8))
            bad_count = "class count exceeds the payload";
        out->u.classes_initialized.ids = c;
        break;
    case JM_STATS:
        out->u.stats.n = jm_get_u32(&c);
        if (!count_fits(&c, out->u.stats.n, 12))
            bad_count = "item count exceeds the payload";
        out->u.stats.items = c;
        break;
    default:
        break;
    }
    if (!jm_cur_ok(&c) || bad_count) {
        size_t at = jm_cur_ok(&c) ? c.pos : c.error_pos;
        if (err && errlen)
            snprintf(err, errlen, "offset %llu: %s record: %s",
                     (unsigned long long)(rec->offset + JM_RECORD_HEADER_SIZE + at),
                     jm_type_name(rec->type), bad_count ? bad_count : c.error);
        return -1;
    }
    return 0;
}

int jm_heaps_next(jm_cur *c, uint32_t *left, jm_heap *h)
{
    if (!*left)
        return 0;
    (*left)--;
    h->low = jm_get_u64(c);
    h->high = jm_get_u64(c);
    h->name = jm_get_bytes(c);
    return jm_cur_ok(c) ? 1 : -1;
}

int jm_pcs_next(jm_pcs *it, uint64_t *pc, uint32_t *depth, jm_frame *frames, uint32_t max)
{
    if (!it->left)
        return 0;
    it->left--;
    *pc = jm_get_u64(&it->cur);
    *depth = jm_get_u32(&it->cur);
    if (!count_fits(&it->cur, *depth, 12))
        return -1;
    for (uint32_t i = 0; i < *depth; i++) {
        uint64_t m = jm_get_u64(&it->cur);
        int32_t bci = jm_get_i32(&it->cur);
        if (i < max) {
            frames[i].method_id = m;
            frames[i].bci = bci;
        }
    }
    return jm_cur_ok(&it->cur) ? 1 : -1;
}

int jm_methods_next(jm_cur *c, uint32_t *left, uint64_t *method_id)
{
    if (!*left)
        return 0;
    (*left)--;
    *method_id = jm_get_u64(c);
    return jm_cur_ok(c) ? 1 : -1;
}

int jm_stats_next(jm_cur *c, uint32_t *left, jm_slice *name, uint64_t *value)
{
    if (!*left)
        return 0;
    (*left)--;
    *name = jm_get_bytes(c);
    *value = jm_get_u64(c);
    return jm_cur_ok(c) ? 1 : -1;
}
