/* Loads libptemu.so the way QEMU does and calls its install hook with
 * qemu_info_t values other QEMUs would pass: another plugin API version,
 * system emulation, another target. Each must be refused (non-zero) with one
 * line on stderr naming the problem, before the plugin touches anything else.
 *   plugin_version LIBPTEMU */
#include <dlfcn.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "collector/ptemu/qemu_api.h"

typedef int (*install_fn)(qemu_plugin_id_t, const qemu_info_t *, int, char **);

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: plugin_version LIBPTEMU\n");
        return 2;
    }
    /* RTLD_LAZY: the qemu_plugin_* functions QEMU would provide stay
     * unresolved; the checks under test must not need them. */
    void *h = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "FAIL: dlopen: %s\n", dlerror());
        return 1;
    }
    const int *version = dlsym(h, "qemu_plugin_version");
    install_fn install = (install_fn)dlsym(h, "qemu_plugin_install");
    if (!version || !install || *version != 1) {
        fprintf(stderr, "FAIL: the plugin must export qemu_plugin_version = 1 and qemu_plugin_install\n");
        return 1;
    }
    static const struct {
        const char *what;
        qemu_info_t info;
        const char *message; /* expected in the plugin's one line */
    } cases[] = {
        { "API version 2 only", { "x86_64", { 2, 2 }, false, { { 0, 0 } } },
          "built for QEMU plugin API 1, this QEMU offers 2..2" },
        { "API version 0", { "x86_64", { 0, 0 }, false, { { 0, 0 } } },
          "built for QEMU plugin API 1, this QEMU offers 0..0" },
        { "system emulation", { "x86_64", { 1, 1 }, true, { { 1, 1 } } },
          "needs qemu-x86_64 (user mode), got x86_64 (system emulation)" },
        { "target aarch64", { "aarch64", { 1, 1 }, false, { { 0, 0 } } },
          "needs qemu-x86_64 (user mode), got aarch64" },
    };
    char arg[] = "out=/nonexistent-dir-never-created";
    char *args[] = { arg };
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* The plugin writes its message to descriptor 2: capture it. */
        FILE *cap = tmpfile();
        int saved = dup(2);
        if (!cap || saved < 0 || dup2(fileno(cap), 2) < 0) {
            fprintf(stderr, "FAIL: cannot capture stderr\n");
            return 1;
        }
        int rc = install(1, &cases[i].info, 1, args);
        dup2(saved, 2);
        close(saved);
        char text[512] = "";
        rewind(cap);
        size_t n = fread(text, 1, sizeof text - 1, cap);
        text[n] = '\0';
        fclose(cap);
        int lines = 0;
        for (size_t k = 0; k < n; k++)
            lines += text[k] == '\n';
        bool ok = rc != 0 && lines == 1 && strstr(text, cases[i].message);
        printf("%-20s -> %s: %s", cases[i].what, rc ? "refused" : "ACCEPTED", n ? text : "(no message)\n");
        if (!ok)
            failures++;
    }
    printf("%d passed, %d failed\n", (int)(sizeof cases / sizeof cases[0]) - failures, failures);
    return failures ? 1 : 0;
}
