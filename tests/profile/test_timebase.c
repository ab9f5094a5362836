/* The TSC frequency of a trace (info.json time.tsc_hz) and times formatted
 * with it; hostile info.json gives one line naming the file and offset. */
#include <criterion/criterion.h>
#include <string.h>

#include "profile/timebase.h"

static int parse(const char *text, pf_timebase *tb, char *err, size_t errlen)
{
    return pf_timebase_parse(text, strlen(text), "t/info.json", tb, err, errlen);
}

Test(timebase, recorded_frequency)
{
    pf_timebase tb;
    char err[256] = "";
    cr_assert_eq(parse("{\"backend\": \"perf\", \"streams\": [{\"time\": 1}],"
                       " \"time\": {\"time_mult\": 1, \"tsc_hz\": 2400000000,"
                       " \"tsc_hz_source\": \"perf_mmap_page\"}}", &tb, err, sizeof err), 0,
                 "%s", err);
    cr_assert_float_eq(tb.hz, 2.4e9, 1);
    cr_assert_str_eq(tb.source, "info.json (perf_mmap_page)");
    cr_assert(!tb.emulated);
    char buf[64];
    cr_assert_str_eq(pf_time_str(&tb, 2400000000u, buf, sizeof buf), "1.000 s");
    cr_assert_str_eq(pf_time_str(&tb, 12345678, buf, sizeof buf), "5.144 ms");
    cr_assert_str_eq(pf_time_str(&tb, 2400, buf, sizeof buf), "1.000 us");
    cr_assert_str_eq(pf_time_str(&tb, 24, buf, sizeof buf), "10 ns");
    cr_assert_float_eq(pf_time_ns(&tb, 24000), 10000.0, 1e-6);
    cr_assert_not_null(strstr(pf_timebase_describe(&tb, buf, sizeof buf), "2.400 GHz"));

    cr_assert_eq(parse("{\"backend\":\"emulated\",\"time\":{\"tsc_hz\":1e9}}", &tb, err,
                       sizeof err), 0);
    cr_assert(tb.emulated);
    char about[256];
    cr_assert_not_null(strstr(pf_timebase_describe(&tb, about, sizeof about), "emulat"));
}

Test(timebase, absent_frequency_keeps_ticks)
{
    pf_timebase tb;
    char err[256] = "", buf[64];
    /* a tsc_hz outside "time" is not the frequency */
    cr_assert_eq(parse("{\"tsc_hz\": 2e9, \"time\": {\"time_mult\": 1},"
                       " \"x\": {\"time\": {\"tsc_hz\": 3}}}", &tb, err, sizeof err), 0);
    cr_assert_eq(tb.hz, 0);
    cr_assert_str_eq(pf_time_str(&tb, 1234, buf, sizeof buf), "1234 ticks");
    char about[256];
    cr_assert_not_null(strstr(pf_timebase_describe(&tb, about, sizeof about), "TSC ticks"));
    /* no info.json at all */
    cr_assert_eq(pf_timebase_read("/nonexistent-dir", 0, &tb, err, sizeof err), 0);
    cr_assert_eq(tb.hz, 0);
    /* --tsc-hz */
    cr_assert_eq(pf_timebase_read("/nonexistent-dir", 3e9, &tb, err, sizeof err), 0);
    cr_assert_float_eq(tb.hz, 3e9, 1);
    cr_assert_str_eq(tb.source, "--tsc-hz");
}

Test(timebase, hostile_info_json)
{
    static const struct { const char *text, *says; } bad[] = {
        { "{\"time\": {\"tsc_hz\": 5}}", "offset 20: time.tsc_hz 5 is not a TSC frequency" },
        { "{\"time\": {\"tsc_hz\": -2400000000}}", "not a TSC frequency" },
        { "{\"time\": {\"tsc_hz\": 1e400}}", "not a TSC frequency" },
        { "{\"time\": {\"tsc_hz\": nan}}", "not a TSC frequency" },
        { "{\"time\": {\"tsc_hz\": 2400000000", "offset 30: expected ',' or '}'" },
        { "{\"time\": [", "offset 10: unexpected end of file" },
        { "{\"a\": \"\x01\"}", "control character" },
        { "{} x", "trailing data" },
        { "", "offset 0: unexpected end of file" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pf_timebase tb;
        char err[256] = "";
        cr_assert_eq(parse(bad[i].text, &tb, err, sizeof err), -1, "case %zu", i);
        cr_assert_not_null(strstr(err, "t/info.json: "), "case %zu: %s", i, err);
        cr_assert_not_null(strstr(err, bad[i].says), "case %zu: %s", i, err);
        cr_assert_null(strchr(err, '\n'));
        cr_assert_eq(tb.hz, 0);
    }
    /* nested beyond any info.json: refused, not a stack overflow */
    char deep[4096];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    pf_timebase tb;
    char err[256];
    cr_assert_eq(parse(deep, &tb, err, sizeof err), -1);
    cr_assert_not_null(strstr(err, "nested too deeply"), "%s", err);
}
