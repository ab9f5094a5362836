/* pf_ringchart_write: template filled, data escaped, bad input refused. */
#include "profile/flamegraph.h"
#include "profile/ringchart.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static char *render(const char *json, const char *title, int *rc, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    *rc = pf_ringchart_write(f, json, strlen(json), title, err, errlen);
    fclose(f);
    return buf;
}

static const char *MINI =
    "{\"format\":\"jpt-cct\",\"version\":1,\"title\":\"t\",\"metrics\":[\"calls\"],"
    "\"methods\":[{\"class\":\"a/B\",\"name\":\"c\",\"sig\":\"()V\"}],"
    "\"nodes\":{\"parent\":[-1,0,1],\"method\":[-1,-1,0],\"calls\":[0,0,1]},"
    "\"labels\":{\"0\":\"all threads\",\"1\":\"main\"}}";

Test(ringchart, template_filled)
{
    char err[128] = "";
    int rc;
    char *html = render(MINI, "My <profile> & co", &rc, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert(strstr(html, "<!DOCTYPE html>") == html);
    cr_assert_not_null(strstr(html, "<title>My &lt;profile&gt; &amp; co</title>"));
    cr_assert_not_null(strstr(html, "<script type=\"application/json\" id=\"cct\">{\"format\":\"jpt-cct\""));
    cr_assert_null(strstr(html, "@JPT_"));
    /* Self-contained: scripts and styles inlined, nothing fetched. */
    cr_assert_null(strstr(html, "<script src="));
    cr_assert_null(strstr(html, "<link "));
    cr_assert_null(strstr(html, "http://"));
    cr_assert_null(strstr(html, "https://"));
    cr_assert_not_null(strstr(html, "window.jptRing"));
    free(html);
}

Test(ringchart, script_end_escaped)
{
    const char *json = "{\"format\":\"jpt-cct\",\"version\":1,\"title\":\"</script><!-- x\","
                       "\"nodes\":{\"parent\":[-1],\"method\":[-1]},\"labels\":{\"0\":\"a</b\"}}";
    char err[128] = "";
    int rc;
    char *html = render(json, NULL, &rc, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    const char *data = strstr(html, "id=\"cct\">");
    cr_assert_not_null(data);
    data += strlen("id=\"cct\">");
    const char *end = strstr(data, "</script>");
    cr_assert_not_null(end);
    char *block = strndup(data, (size_t)(end - data));
    cr_assert_str_eq(block, "{\"format\":\"jpt-cct\",\"version\":1,\"title\":\"<\\/script>\\u003c!-- x\","
                            "\"nodes\":{\"parent\":[-1],\"method\":[-1]},\"labels\":{\"0\":\"a<\\/b\"}}");
    cr_assert_not_null(strstr(html, "<title>Calling Context Ring Chart</title>"));
    free(block);
    free(html);
}

Test(ringchart, bad_input_refused)
{
    char err[128] = "";
    int rc;
    char *html = render("[1,2]", "x", &rc, err, sizeof err);
    cr_assert_eq(rc, -1);
    cr_assert_not_null(strstr(err, "not a JSON object"));
    free(html);
    html = render("{\"format\":\"other\"}", "x", &rc, err, sizeof err);
    cr_assert_eq(rc, -1);
    cr_assert_not_null(strstr(err, "cct-json"));
    free(html);
    cr_assert_eq(pf_ringchart_write(NULL, MINI, strlen(MINI), NULL, NULL, 0), -1);
}

Test(ringchart, template_exported)
{
    cr_assert_gt(pf_ringchart_template_len, 1000);
    cr_assert_eq(strlen(pf_ringchart_template), pf_ringchart_template_len);
    cr_assert_not_null(strstr(pf_ringchart_template, "@JPT_CCT_JSON@"));
}

/* The flame graph's page is filled the same way: self-contained, the data
 * escaped, bad input refused. */
Test(flamegraph, template_filled)
{
    const char *json = "{\"format\":\"jpt-cct\",\"version\":1,\"title\":\"</script>\","
                       "\"nodes\":{\"parent\":[-1],\"method\":[-1]}}";
    char *buf = NULL, err[128] = "";
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    int rc = pf_flamegraph_write(f, json, strlen(json), "A & B", err, sizeof err);
    fclose(f);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert(strstr(buf, "<!DOCTYPE html>") == buf);
    cr_assert_not_null(strstr(buf, "<title>A &amp; B</title>"));
    cr_assert_not_null(strstr(buf, "\"title\":\"<\\/script>\""));
    cr_assert_not_null(strstr(buf, "window.jptFlame"));
    cr_assert_null(strstr(buf, "@JPT_"));
    cr_assert_null(strstr(buf, "<script src="));
    cr_assert_null(strstr(buf, "<link "));
    cr_assert_null(strstr(buf, "http://"));
    cr_assert_null(strstr(buf, "https://"));
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    rc = pf_flamegraph_write(f, "{\"format\":\"x\"}", 14, NULL, err, sizeof err);
    fclose(f);
    cr_assert_eq(rc, -1);
    cr_assert_not_null(strstr(err, "flamegraph: input is not cct-json"), "%s", err);
    free(buf);
}
