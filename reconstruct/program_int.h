/* The program's internals (program.h), shared by its files: program.c
 * (loading, lookups, CFGs), program_targets.c (call targets) and
 * program_receivers.c (receivers). */
#ifndef JPT_RECONSTRUCT_PROGRAM_INT_H
#define JPT_RECONSTRUCT_PROGRAM_INT_H

#include "reconstruct/program.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "common/jmeta.h"
#include "common/jmrec.h"
#include "common/jvm.h"
#include "reconstruct/cfg.h"
#include "decoder/classfile.h"

_Static_assert(sizeof(void *) == 8, "method ids are kept in pointer-sized hash keys");

typedef struct rc_class rc_class;

struct site;

typedef struct rc_mx {
    rc_method m;               /* first: rc_method pointers convert back */
    rc_class *cls;
    rc_cfg *cfg;               /* atomic; &failed_cfg when the build failed */
    uint8_t *on_this;          /* atomic, made on first use: per instruction, 1
                                * for an invoke on this (rc_receiver_is_this) */
    struct site **sites;       /* atomic, made on first use: call targets by
                                * instruction index (each slot atomic) */
    uint64_t initialized_by;   /* a class initializer: the time by which the agent
                                * found its class initialized (0: not known) */
    const rc_method *this_call; /* atomic, made on first use (rc_this_call);
                                 * &no_this_call: none */
    gint this_call_insn;       /* atomic: its instruction */
} rc_mx;

struct rc_class {
    uint32_t index;
    uint64_t class_id;
    const char *name;
    cf_class cf;               /* whole class file, or a bare pool (or nothing) */
    bool from_file;            /* false: bare (hidden, or no class file captured) */
    bool hidden;               /* CLASS_PREPARE flag 1 */
    bool prepared;             /* a CLASS_PREPARE record names it */
    uint64_t since;            /* the earliest time its code can run: when the load hook
                                * (or, for a hidden class, preparation) recorded it;
                                * 0 for classes loaded before the agent's hook */
    uint16_t access;
    rc_class *super;
    rc_class **ifaces;
    uint16_t nifaces;
    GPtrArray *children;       /* direct subclasses, implementors, subinterfaces */
    uint32_t first_method, nmethods; /* in p->mx */
    rc_class *next_same_name;
    rc_class *first_same_name; /* the first class loaded with this name (itself) */
    /* HotSpot's transitive interfaces (see transitive_ifaces), under
     * p->itable_lock */
    uint8_t trans_state;       /* TRANS_* */
    uint16_t ntrans;
    rc_class **trans;
};

enum { TRANS_NOT_YET = 0, TRANS_BUSY, TRANS_KNOWN, TRANS_UNKNOWN };

/* A target of an interface call and the position, in the itable of a
 * receiver class that selects it, of the interface the call names (-1:
 * unknown). */
typedef struct itab_ent {
    const rc_method *t;
    int32_t pos;
} itab_ent;

typedef struct site {
    uint32_t n;
    bool open;
    uint32_t nitab;            /* through an interface: see rc_itable_may_run */
    itab_ent *itab;            /* sorted by target; owned by the site in p->cha */
    const rc_method *t[];
} site;

struct rc_program {
    jm_reader *r;
    GPtrArray *classes;        /* rc_class * */
    GHashTable *by_name;       /* name -> first rc_class of that name */
    GHashTable *by_cid;        /* class id -> rc_class */
    rc_mx *mx;
    uint32_t nmethods;
    GHashTable *by_id;         /* method id -> rc_mx */
    GPtrArray *warnings;       /* char * */
    GStringChunk *strs;
    uint32_t ndamaged, nbare, nbare_plain;
    bool any_prepared;         /* the metadata has CLASS_PREPARE records */
    rc_class *object;          /* java/lang/Object, if captured */
    GHashTable *names;         /* interned method names and descriptors */
    GPtrArray *bare_virtual;   /* rc_mx * of bare classes that may be interface targets */
    GMutex lock;
    GHashTable *vm_sites;      /* the same for rc_vm_call_targets */
    GPtrArray *load_class;     /* loadClass(String) of every class loader; NULL: not yet */
    GHashTable *cha;           /* (class index << 32 | resolved method index) -> site */
    GMutex itable_lock;        /* rc_class.trans* */
};

/* program.c */
const char *prog_interned(const rc_program *p, const char *s);
void prog_cha_site_free(gpointer data);
bool prog_class_may_have_run(const rc_program *p, const rc_class *c);
rc_class *prog_class_find(const rc_program *p, const char *name);
rc_mx *prog_declared(const rc_program *p, const rc_class *c, const char *name, const char *sig);
rc_mx *prog_mx_of(rc_program *p, const rc_method *m);

/* program_targets.c */
bool prog_is_interface(const rc_class *c);
rc_mx *prog_select_chain(const rc_program *p, const rc_class *d, const rc_mx *r);

#endif
