#include "decoder/x86.h"

#include <string.h>

static int64_t rel8(const uint8_t *p) { return (int8_t)p[0]; }

static int64_t rel32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* x86_classify, and for direct branches the offset of their end in *end. */
static xfer classify(const uint8_t *p, size_t n, int64_t *disp, int *direct, size_t *end)
{
    size_t i = 0, e = 0;
    int64_t d = 0;
    int dir = 0;
    xfer t = X_OTHER;
    /* legacy prefixes, then REX */
    while (i < n && (p[i] == 0x66 || p[i] == 0x67 || p[i] == 0xf2 || p[i] == 0xf3 ||
                     p[i] == 0x2e || p[i] == 0x3e || p[i] == 0x26 || p[i] == 0x64 ||
                     p[i] == 0x65 || p[i] == 0x36 || p[i] == 0xf0))
        i++;
    if (i < n && (p[i] & 0xf0) == 0x40)
        i++;
    if (i >= n)
        goto out;
    uint8_t op = p[i];
    if (op == 0xc3 || op == 0xc2) {
        t = X_RET;
    } else if (op == 0xca || op == 0xcb || op == 0xcf || op == 0xcd || op == 0xcc) {
        t = X_FAR;
    } else if (op == 0xe8 && i + 5 <= n) {
        t = X_CALL, dir = 1, d = rel32(p + i + 1), e = i + 5;
    } else if (op == 0xe9 && i + 5 <= n) {
        t = X_JMP_DIRECT, dir = 1, d = rel32(p + i + 1), e = i + 5;
    } else if (op == 0xeb && i + 2 <= n) {
        t = X_JMP_DIRECT, dir = 1, d = rel8(p + i + 1), e = i + 2;
    } else if (((op >= 0x70 && op <= 0x7f) || (op >= 0xe0 && op <= 0xe3)) && i + 2 <= n) {
        t = X_COND, dir = 1, d = rel8(p + i + 1), e = i + 2;
    } else if (op == 0x0f && i + 1 < n) {
        uint8_t op2 = p[i + 1];
        if (op2 >= 0x80 && op2 <= 0x8f && i + 6 <= n)
            t = X_COND, dir = 1, d = rel32(p + i + 2), e = i + 6;
        else if (op2 == 0x05 || op2 == 0x34 || op2 == 0x07 || op2 == 0x35)
            t = X_FAR;    /* syscall, sysenter, sysret, sysexit */
    } else if (op == 0xff && i + 1 < n) {
        switch ((p[i + 1] >> 3) & 7) {
        case 2: t = X_CALL; break;
        case 3: t = X_FAR; break;
        case 4: t = X_JMP_INDIRECT; break;
        case 5: t = X_FAR; break;
        default: break;
        }
    }
out:
    if (disp)
        *disp = d;
    if (direct)
        *direct = dir;
    if (end)
        *end = e;
    return t;
}

xfer x86_classify(const uint8_t *p, size_t n, int64_t *disp, int *direct)
{
    return classify(p, n, disp, direct, NULL);
}

bool x86_direct_target(const uint8_t *p, size_t n, uint64_t ip, uint64_t *target)
{
    int64_t d;
    int dir;
    size_t end;
    xfer t = classify(p, n, &d, &dir, &end);
    if (!dir || (t != X_JMP_DIRECT && t != X_CALL && t != X_COND))
        return false;
    *target = ip + end + (uint64_t)d;
    return true;
}
