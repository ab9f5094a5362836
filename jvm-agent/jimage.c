/* Class files from the JDK's runtime image (lib/modules).
 *
 * The classes the JVM defined before the agent's load hook was on (the boot
 * loader's, during the primordial phase) came from this image, which the
 * JVM reads with the JDK's own libjimage. Reading their class files from it
 * gives the bytes they were defined from for a few microseconds each, where
 * RetransformClasses makes the JVM rebuild each class file from its internal
 * form and redefine the class with it (some 47 ms for the 363 classes of a
 * JDK 17 start-up, about a third of the agent's cost there).
 *
 * libjimage's entry points are the ones the JVM itself looks up (jimage.hpp,
 * unchanged since JDK 9). Anything missing or odd means "not from the
 * image", and the caller falls back to RetransformClasses. */
#include "jvm-agent/agent.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct JImageFile JImageFile;
typedef int64_t JImageLocationRef;

struct jimage {
    void *lib;
    JImageFile *file;
    JImageFile *(*open)(const char *name, int32_t *error);
    void (*close)(JImageFile *image);
    const char *(*package_to_module)(JImageFile *image, const char *package_name);
    JImageLocationRef (*find)(JImageFile *image, const char *module_name, const char *version,
                              const char *name, int64_t *size);
    int64_t (*get)(JImageFile *image, JImageLocationRef location, char *buffer, int64_t size);
};

/* No class file of the JDK is near this size; a larger answer is not trusted. */
#define MAX_CLASS_BYTES (64u << 20)

jimage *ji_open(const char *java_home)
{
    if (!java_home || !*java_home)
        return NULL;
    char path[4096];
    jimage *ji = calloc(1, sizeof *ji);
    if (!ji)
        return NULL;
    if (snprintf(path, sizeof path, "%s/lib/libjimage.so", java_home) >= (int)sizeof path ||
        !(ji->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
        goto fail;
    *(void **)&ji->open = dlsym(ji->lib, "JIMAGE_Open");
    *(void **)&ji->close = dlsym(ji->lib, "JIMAGE_Close");
    *(void **)&ji->package_to_module = dlsym(ji->lib, "JIMAGE_PackageToModule");
    *(void **)&ji->find = dlsym(ji->lib, "JIMAGE_FindResource");
    *(void **)&ji->get = dlsym(ji->lib, "JIMAGE_GetResource");
    if (!ji->open || !ji->close || !ji->package_to_module || !ji->find || !ji->get)
        goto fail;
    int32_t err = 0;
    if (snprintf(path, sizeof path, "%s/lib/modules", java_home) >= (int)sizeof path ||
        !(ji->file = ji->open(path, &err)))
        goto fail;
    return ji;
fail:
    if (ji->lib)
        dlclose(ji->lib);
    free(ji);
    return NULL;
}

void ji_close(jimage *ji)
{
    if (!ji)
        return;
    ji->close(ji->file);
    dlclose(ji->lib);
    free(ji);
}

uint8_t *ji_class_bytes(jimage *ji, const char *name, size_t *len)
{
    /* name: "java/lang/String"; its package "java/lang" names the module. */
    const char *slash = strrchr(name, '/');
    if (!ji || !slash || slash == name)
        return NULL;
    size_t plen = (size_t)(slash - name), nlen = strlen(name);
    char pkg[1024], res[1100];
    if (plen >= sizeof pkg || nlen + sizeof ".class" > sizeof res)
        return NULL;
    memcpy(pkg, name, plen);
    pkg[plen] = 0;
    const char *module = ji->package_to_module(ji->file, pkg);
    if (!module)
        return NULL;
    memcpy(res, name, nlen);
    memcpy(res + nlen, ".class", sizeof ".class");
    int64_t size = 0;
    /* The version argument is not used by the image format's readers. */
    JImageLocationRef loc = ji->find(ji->file, module, "9.0", res, &size);
    if (!loc || size <= 0 || (uint64_t)size > MAX_CLASS_BYTES)
        return NULL;
    uint8_t *buf = malloc((size_t)size);
    if (!buf)
        return NULL;
    if (ji->get(ji->file, loc, (char *)buf, size) != size ||
        size < 4 || buf[0] != 0xCA || buf[1] != 0xFE || buf[2] != 0xBA || buf[3] != 0xBE) {
        free(buf);
        return NULL;
    }
    *len = (size_t)size;
    return buf;
}
