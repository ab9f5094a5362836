/* What the agent reads from HotSpot's exported Serviceability-Agent tables
 * (gHotSpotVMStructs, gHotSpotVMTypes, gHotSpotVMIntConstants,
 * gHotSpotVMLongConstants): interpreter codelets, code-cache bounds and heaps.
 * Offsets and sizes are always taken from the tables, never hard-coded. */
#ifndef JPT_AGENT_HOTSPOT_H
#define JPT_AGENT_HOTSPOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Finds the tables in the loaded libjvm.so. Returns false (with a reason
 * naming what is missing) on a JVM without them; everything else in the agent
 * keeps working. Safe to call more than once (later calls return the first
 * answer); call it first from one thread (Agent_OnLoad). */
bool hs_init(char *why, size_t whylen);

/* Code-cache bounds [low, high) for the PT IP filter. Valid from VMStart. */
bool hs_code_cache_bounds(uint64_t *low, uint64_t *high);

/* Enqueues (through jq_emit) the JVM's code layout at VMInit:
 * JM_CODE_CACHE (bounds and heaps, each heap's reserved range), one
 * JM_CODELET per interpreter codelet, a JM_CODE_BLOB with the whole
 * interpreter buffer and one per non-nmethod code heap (committed part).
 * With a non-segmented code cache (-XX:-SegmentedCodeCache, or a small
 * ReservedCodeCacheSize) the one heap "CodeCache" holds everything; its
 * committed part at VMInit is snapshot (the initial commit, a few MiB, which
 * holds the stubs, adapters and interpreter generated at startup; capped at
 * 64 MiB from the bottom). Missing table entries give one jq_warn each and
 * the rest is still recorded. Returns the number of codelets recorded. */
int hs_record_layout(void);

/* Address ranges the patch watcher re-snapshots besides compiled methods
 * (non-nmethod heaps: stubs and adapters). Returns the count written (<= max).
 * Reads the live heap bounds each call; never warns (safe to poll). */
size_t hs_stub_ranges(uint64_t (*ranges)[2], size_t max);

/* Compilation level (0-4) of the nmethod whose code starts at code_addr (as
 * CompiledMethodLoad reports it), found through the code heap's segment map;
 * -1 if it cannot be told. Safe from any thread. */
int hs_nmethod_level(uint64_t code_addr);

/* ---- table lookups (valid after a successful hs_init) --------------------- */

/* Offset of a non-static field, e.g. ("StubQueue", "_stub_buffer"). */
bool hs_field_offset(const char *type, const char *field, uint64_t *offset);
/* Address of a static field, e.g. ("CodeCache", "_low_bound"); 0 if absent. */
uint64_t hs_static_address(const char *type, const char *field);
/* sizeof(type) as the JVM was compiled, e.g. "InterpreterCodelet". */
bool hs_type_size(const char *type, uint64_t *size);
bool hs_int_constant(const char *name, int32_t *value);
bool hs_long_constant(const char *name, uint64_t *value);
/* Address of a -XX flag's value (e.g. "CodeEntryAlignment"), from the
 * JVMFlag table; 0 if not found. */
uint64_t hs_flag_address(const char *name);

/* Copies n bytes of this process's memory at src without faulting on an
 * unmapped address. Returns the number of bytes copied (short on a hole). */
size_t hs_safe_read(void *dst, uint64_t src, size_t n);

#endif
