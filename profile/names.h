/* Method and thread names of a trace, from its METHOD and THREAD_START
 * records: what profiles print instead of raw ids. */
#ifndef JPT_PROFILE_NAMES_H
#define JPT_PROFILE_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pf_method_name {
    char *class_name;   /* internal form: "java/lang/String" */
    char *name;         /* "hashCode" */
    char *sig;          /* "()I" */
    char *readable;     /* "java.lang.String.hashCode()" */
    char *simple;       /* "java.lang.String.hashCode" */
    uint32_t modifiers; /* ACC_* of the METHOD record */
} pf_method_name;

#define PF_ACC_NATIVE 0x0100

typedef struct pf_names pf_names;

pf_names *pf_names_new(void);
/* Reads the METHOD and THREAD_START records of a trace directory (or its
 * jvm/ folder). Returns NULL with a one-line message in err on failure. */
pf_names *pf_names_load(const char *dir, char *err, size_t errlen);
void pf_names_free(pf_names *n);

/* Adds (or replaces) a method. class_sig may be "Ljava/lang/String;" or
 * "java/lang/String". */
void pf_names_add_method(pf_names *n, uint64_t method_id, const char *class_sig,
                         const char *name, const char *sig, uint32_t modifiers);
/* With simple set, pf_names_readable gives names without the parameter
 * list ("java.lang.String.hashCode"). */
void pf_names_set_simple(pf_names *n, bool simple);
/* The first name a native thread had ("main"). */
void pf_names_add_thread(pf_names *n, uint32_t tid, const char *name);

/* NULL when the method is unknown. */
const pf_method_name *pf_names_method(const pf_names *n, uint64_t method_id);
/* Readable name, "java.lang.String.indexOf(java.lang.String, int)" (without
 * the parameters when simple); "?" for id 0 (a frame the trace could not
 * name), "0x7f..." for another unknown id (buf holds it). */
const char *pf_names_readable(const pf_names *n, uint64_t method_id, char *buf, size_t len);
/* NULL when the thread is unknown. */
const char *pf_names_thread(const pf_names *n, uint32_t tid);

/* "(Ljava/lang/String;I)V" -> "(java.lang.String, int)"; malloc'd. */
char *pf_readable_params(const char *sig);

/* A --method pattern (a glob: * and ? match anything) that matches a method
 * named in either style: Java ("java.lang.String.indexOf(java.lang.String,
 * int)", or without the parameters) or JVM ("java/lang/String.indexOf(
 * Ljava/lang/String;I)I"). It remembers whether it matched anything. */
typedef struct pf_method_pattern pf_method_pattern;
pf_method_pattern *pf_method_pattern_new(const char *glob);
void pf_method_pattern_free(pf_method_pattern *p);
bool pf_method_pattern_match(pf_method_pattern *p, const char *class_name, const char *name,
                             const char *sig);
/* The same for a method named "pkg/Cls.name(sig)" (JVM style, as the flow
 * names them); a name without '(' is matched as it is. */
bool pf_method_pattern_match_jvm(pf_method_pattern *p, const char *jvm_name);
bool pf_method_pattern_matched(const pf_method_pattern *p);
/* A --classes pattern: a glob over the class name in internal
 * ("com/example/Foo") or Java ("com.example.Foo") form. */
bool pf_class_pattern_match(const char *glob, const char *internal_name);
/* What the warnings for a pattern that matches nothing say. */
#define PF_PATTERN_STYLES "names match as pkg.Class.method(Type, ...), pkg.Class.method " \
                          "or pkg/Class.method(descriptor)"

#endif
