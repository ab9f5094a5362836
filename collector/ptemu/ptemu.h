/* Internal interfaces between the files of libptemu.so (ptemu.c, codestore.c,
 * filterctl.c). All hidden: the plugin exports only what QEMU looks up. */
#ifndef JPT_PTEMU_PTEMU_H
#define JPT_PTEMU_PTEMU_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* ptemu.c: a "ptemu: " line on stderr; a write that warns when it fails. */
void ptemu_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ptemu_write_all(int fd, const void *p, size_t n);

/* codestore.c: the test mode code store, eval/code.bin. code_store_open creates it
 * (-1 with errno on failure); code_id gives the id of (ip, bytes), recording them when
 * new (with the translation lock held); code_flush writes what is buffered. */
int code_store_open(const char *path);
uint32_t code_id(uint64_t ip, const uint8_t *bytes, uint8_t len);
void code_flush(void);
uint32_t code_store_count(void);

/* filterctl.c: the filter requests of ptrec's control connection. */
/* "LO-HI", "none" or "all" -> [lo, hi); false when it is none of these. */
bool filter_parse(const char *s, uint64_t *lo, uint64_t *hi);
/* Set: a vCPU thread should have QEMU flush its blocks (qemu_plugin_reset) so that the
 * requested filter applies; checked on every instruction. */
extern atomic_int g_reset_req;
/* The filter in force before any request. */
void filter_init(uint64_t lo, uint64_t hi);
/* Serves the control connection fd on a thread of its own; -1 after a warning. */
int filter_ctl_start(int fd);
/* In the reset callback: the requested filter into [*lo, *hi), its request answered. */
void filter_apply(uint64_t *lo, uint64_t *hi);
/* After a reset: a request that came meanwhile asks for another. */
void filter_recheck(void);

#pragma GCC visibility pop

#endif
