/* Unit tests of ptrec's parsers: every one of them reads input from outside. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "collector/ptrec_lib.h"

/* ---- sizes and numbers ---------------------------------------------------- */

Test(size, suffixes)
{
    uint64_t v;
    cr_assert(pr_parse_size("4096", &v)); cr_assert_eq(v, 4096);
    cr_assert(pr_parse_size("512K", &v)); cr_assert_eq(v, 512u << 10);
    cr_assert(pr_parse_size("512k", &v)); cr_assert_eq(v, 512u << 10);
    cr_assert(pr_parse_size("4M", &v)); cr_assert_eq(v, 4u << 20);
    cr_assert(pr_parse_size("4MiB", &v)); cr_assert_eq(v, 4u << 20);
    cr_assert(pr_parse_size("4MB", &v)); cr_assert_eq(v, 4u << 20);
    cr_assert(pr_parse_size("2G", &v)); cr_assert_eq(v, 2ull << 30);
    cr_assert(pr_parse_size("100B", &v)); cr_assert_eq(v, 100);
}

Test(size, rejects)
{
    uint64_t v = 7;
    const char *bad[] = { "", "0", "K", "-4M", "+4M", "4X", "4M ", " 4M", "4.5M", "4MiBx",
                          "4iB", "18446744073709551616", "17179869184G", "0x10", NULL };
    for (int i = 0; bad[i]; i++)
        cr_assert_not(pr_parse_size(bad[i], &v), "accepted '%s'", bad[i]);
    cr_assert_not(pr_parse_size(NULL, &v));
    cr_assert_eq(v, 7, "a rejected value must not be stored");
}

Test(u64, decimal_and_hex)
{
    uint64_t v;
    cr_assert(pr_parse_u64("0", &v)); cr_assert_eq(v, 0);
    cr_assert(pr_parse_u64("18446744073709551615", &v)); cr_assert_eq(v, UINT64_MAX);
    cr_assert(pr_parse_u64("0x10", &v)); cr_assert_eq(v, 16);
    cr_assert_not(pr_parse_u64("18446744073709551616", &v));
    cr_assert_not(pr_parse_u64("12a", &v));
    cr_assert_not(pr_parse_u64("0x", &v));
    cr_assert_not(pr_parse_u64("-1", &v));
}

Test(range, parse)
{
    uint64_t lo, hi;
    cr_assert(pr_parse_range("0x1000-0x2000", &lo, &hi));
    cr_assert_eq(lo, 0x1000); cr_assert_eq(hi, 0x2000);
    cr_assert(pr_parse_range("7f00-7fff", &lo, &hi));
    cr_assert_eq(lo, 0x7f00); cr_assert_eq(hi, 0x7fff);
    cr_assert_not(pr_parse_range("0x2000-0x1000", &lo, &hi), "inverted");
    cr_assert_not(pr_parse_range("0x1000-0x1000", &lo, &hi), "empty");
    cr_assert_not(pr_parse_range("0x1000", &lo, &hi));
    cr_assert_not(pr_parse_range("0x1000-0x2000x", &lo, &hi));
    cr_assert_not(pr_parse_range("all", &lo, &hi));
}

/* ---- the handshake -------------------------------------------------------- */

static bool hs(const char *line, pr_handshake *out, const char **why)
{
    return pr_parse_handshake(line, strlen(line), out, why);
}

Test(handshake, valid)
{
    pr_handshake h;
    const char *why = NULL;
    cr_assert(hs("jpt 1 codecache 0x7f3a10000000 0x7f3a1f000000 pid 4242", &h, &why));
    cr_assert_eq(h.low, 0x7f3a10000000ull);
    cr_assert_eq(h.high, 0x7f3a1f000000ull);
    cr_assert_eq(h.pid, 4242);
    cr_assert(hs("jpt 1 codecache 0xABCDEF 0xABCDF0 pid 1", &h, &why), "upper-case hex");
    cr_assert_eq(h.low, 0xabcdef);
}

Test(handshake, hostile)
{
    pr_handshake h = { 1, 2, 3 };
    const char *why;
    const char *bad[] = {
        "",
        "jpt",
        "jpt 1",
        "jpt 1 codecache 0x1000 0x2000 pid",
        "jpt 1 codecache 0x1000 0x2000 pid 12 ",           /* trailing space */
        "jpt 1 codecache 0x1000 0x2000 pid 12\r",          /* CRLF */
        "jpt  1 codecache 0x1000 0x2000 pid 12",           /* double space */
        "jpt 1 codecache 0x1000 0x2000 pid -12",
        "jpt 1 codecache 0x1000 0x2000 pid 0",
        "jpt 1 codecache 0x1000 0x2000 pid 99999999999",
        "jpt 1 codecache 0x1000 0x2000 pid 12x",
        "jpt 1 codecache 1000 0x2000 pid 12",              /* no 0x */
        "jpt 1 codecache 0x 0x2000 pid 12",
        "jpt 1 codecache 0x10000000000000000 0x2000 pid 12", /* 17 digits */
        "jpt 1 codecache 0x2000 0x1000 pid 12",            /* inverted */
        "jpt 1 codecache 0x2000 0x2000 pid 12",            /* empty */
        "jpt 1 codecache 0x0 0x2000 pid 12",               /* null page */
        "jpt 1 codecache 0x1000 0xffffffffffffffff pid 12", /* kernel half */
        "jpt 2 codecache 0x1000 0x2000 pid 12",
        "JPT 1 codecache 0x1000 0x2000 pid 12",
        "jpt 1 codecachf 0x1000 0x2000 pid 12",
        "jpt 1 codecache 0x1000 0x2g00 pid 12",
        "jpt 1 codecache 0x1000 0x2000 tid 12",
        "jpt 1 codecache 0x1000 0x2000 pid 12 extra",
        NULL,
    };
    for (int i = 0; bad[i]; i++) {
        why = NULL;
        cr_assert_not(hs(bad[i], &h, &why), "accepted '%s'", bad[i]);
        cr_assert_not_null(why, "no reason for '%s'", bad[i]);
    }
    cr_assert_eq(h.low, 1, "a rejected line must not be stored");
    cr_assert(hs("jpt 2 codecache 0x1000 0x2000 pid 12", &h, &why) == false);
    cr_assert_str_eq(why, "unsupported handshake version");

    /* An embedded NUL must not cut the line short into a valid one. */
    const char nul[] = "jpt 1 codecache 0x1000 0x2000 pid 12\0junk";
    cr_assert_not(pr_parse_handshake(nul, sizeof nul - 1, &h, &why));

    char longline[400];
    memset(longline, '1', sizeof longline);
    cr_assert_not(pr_parse_handshake(longline, sizeof longline, &h, &why));
    cr_assert_str_eq(why, "line too long");
}

/* ---- /proc/cpuinfo ---------------------------------------------------------- */

Test(cpuinfo, first_processor)
{
    const char *text =
        "processor\t: 0\n"
        "vendor_id\t: GenuineIntel\n"
        "cpu family\t: 6\n"
        "model\t\t: 85\n"
        "model name\t: Intel(R) Xeon(R)\n"
        "stepping\t: 7\n"
        "\n"
        "processor\t: 1\n"
        "vendor_id\t: Other\n"
        "cpu family\t: 99\n";
    pr_cpu c;
    pr_cpu_parse(text, &c);
    cr_assert_str_eq(c.vendor, "GenuineIntel");
    cr_assert_eq(c.family, 6);
    cr_assert_eq(c.model, 85, "'model name' must not be taken for 'model'");
    cr_assert_eq(c.stepping, 7);
}

Test(cpuinfo, missing_fields)
{
    pr_cpu c;
    pr_cpu_parse("processor : 0\nstepping : unknown\n", &c);
    cr_assert_eq(c.family, -1);
    cr_assert_eq(c.model, -1);
    cr_assert_eq(c.stepping, -1);
    cr_assert_str_eq(c.vendor, "");
}

/* ---- the command ------------------------------------------------------------ */

Test(command, java_launcher)
{
    cr_assert(pr_is_java_launcher("java", "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"));
    cr_assert(pr_is_java_launcher("/usr/lib/jvm/x/bin/java", NULL));
    cr_assert(pr_is_java_launcher("/usr/bin/j", "/usr/lib/jvm/x/bin/java"), "symlink to java");
    cr_assert_not(pr_is_java_launcher("javac", "/usr/lib/jvm/x/bin/javac"));
    cr_assert_not(pr_is_java_launcher("/opt/java/bin/python3", "/usr/bin/python3.11"));
}

Test(command, agent_detection)
{
    cr_assert(pr_has_jpt_agent_opts("-agentpath:/a/b/libjpt.so"));
    cr_assert(pr_has_jpt_agent_opts("-Xmx1g -agentpath:/a/libjpt.so=out=/t -Xss1m"));
    cr_assert(pr_has_jpt_agent_opts("\"-agentpath:/a b/libjpt.so=out=/t\""));
    cr_assert(pr_has_jpt_agent_opts("-agentpath:libjpt.so"));
    cr_assert_not(pr_has_jpt_agent_opts(NULL));
    cr_assert_not(pr_has_jpt_agent_opts(""));
    cr_assert_not(pr_has_jpt_agent_opts("-agentpath:/a/libother.so=x=libjpt.so"));
    cr_assert_not(pr_has_jpt_agent_opts("-agentpath:/a/notlibjpt.so"));
    cr_assert_not(pr_has_jpt_agent_opts("-agentlib:jdwp"));
    char *argv1[] = { "-cp", "x", "-agentpath:/b/libjpt.so=out=y", "Main", NULL };
    char *argv2[] = { "-cp", "x", "Main", NULL };
    cr_assert(pr_has_jpt_agent_argv(argv1));
    cr_assert_not(pr_has_jpt_agent_argv(argv2));
}
