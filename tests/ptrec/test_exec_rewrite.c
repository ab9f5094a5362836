/* Unit tests of how a traced process tree runs its JVMs (collector/exec_rewrite.h):
 * the requests ptrec reads from any process of the tree, and the exec of a java
 * launcher rewritten for the emulated and the hardware backend. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "collector/exec_rewrite.h"

static bool req(const char *s, pr_exec_req *r, unsigned long *n)
{
    return pr_parse_exec_request(s, strlen(s), r, n);
}

Test(exec_request, good)
{
    pr_exec_req r;
    unsigned long n = 9;
    cr_assert(req("exec 1", &r, &n));
    cr_assert_eq(r, PR_EXEC_REQ_EXEC);
    cr_assert_eq(n, 0);
    cr_assert(req("plugin 1 jvm 2", &r, &n));
    cr_assert_eq(r, PR_EXEC_REQ_PLUGIN);
    cr_assert_eq(n, 2);
    cr_assert(req("plugin 1 jvm 999999999", &r, &n));
    cr_assert_eq(n, 999999999ul);
}

Test(exec_request, hostile)
{
    const char *bad[] = { "", "exec", "exec 2", "exec 1 ", " exec 1", "EXEC 1", "plugin 1 jvm",
                          "plugin 1 jvm ", "plugin 1 jvm 0", "plugin 1 jvm 01", "plugin 1 jvm -1",
                          "plugin 1 jvm 1x", "plugin 1 jvm 1234567890", "plugin 2 jvm 1",
                          "plugin 1 jvm 1 ", NULL };
    pr_exec_req r;
    unsigned long n;
    for (int i = 0; bad[i]; i++) cr_assert_not(req(bad[i], &r, &n), "accepted '%s'", bad[i]);
    cr_assert_not(pr_parse_exec_request("exec 1\0", 7, &r, &n));
    cr_assert_not(pr_parse_exec_request("plugin 1 jvm 1\0", 15, &r, &n));
}

Test(exec_reply, parses)
{
    unsigned long n;
    const char *dir;
    size_t len;
    const char *ok = "ok 3 /tmp/a trace/java-3";
    cr_assert(pr_parse_exec_reply(ok, strlen(ok), &n, &dir, &len));
    cr_assert_eq(n, 3);
    cr_assert_eq(len, strlen("/tmp/a trace/java-3"));
    cr_assert(!strncmp(dir, "/tmp/a trace/java-3", len));
    const char *bad[] = { "", "ok", "ok 3", "ok 3 ", "ok 3 rel/dir", "ok 0 /d", "ok x /d",
                          "no cannot-create-directory", "ok  3 /d", NULL };
    for (int i = 0; bad[i]; i++)
        cr_assert_not(pr_parse_exec_reply(bad[i], strlen(bad[i]), &n, &dir, &len), "accepted '%s'",
                      bad[i]);
    cr_assert_not(pr_parse_exec_reply("ok 3 /d\0x", 9, &n, &dir, &len));
}

static const char *env_table[8][2];

static char *fake_getenv(const char *k)
{
    for (int i = 0; env_table[i][0]; i++)
        if (!strcmp(env_table[i][0], k)) return (char *)env_table[i][1];
    return NULL;
}

Test(exec_cfg, complete_or_not)
{
    pr_exec_cfg c;
    memset(env_table, 0, sizeof env_table);
    cr_assert_not(pr_exec_cfg_get(&c, fake_getenv));
    env_table[0][0] = PR_EXEC_ENV_SOCK; env_table[0][1] = "/tmp/s";
    cr_assert_not(pr_exec_cfg_get(&c, fake_getenv));   /* no agent */
    env_table[1][0] = PR_EXEC_ENV_AGENT; env_table[1][1] = "/l/libjpt.so";
    cr_assert(pr_exec_cfg_get(&c, fake_getenv));
    cr_assert_null(c.qemu);
    env_table[2][0] = PR_EXEC_ENV_QEMU; env_table[2][1] = "/usr/bin/qemu-x86_64";
    cr_assert_not(pr_exec_cfg_get(&c, fake_getenv));   /* qemu without the plugin */
    env_table[3][0] = PR_EXEC_ENV_PLUGIN; env_table[3][1] = "/l/libptemu.so,filter=none";
    cr_assert(pr_exec_cfg_get(&c, fake_getenv));
    cr_assert_str_eq(c.plugin, "/l/libptemu.so,filter=none");
    env_table[0][1] = "";
    cr_assert_not(pr_exec_cfg_get(&c, fake_getenv));
}

static void assert_vec(char **got, const char *const *want)
{
    size_t i = 0;
    for (; want[i]; i++) {
        cr_assert_not_null(got[i], "missing [%zu] '%s'", i, want[i]);
        cr_assert_str_eq(got[i], want[i], "[%zu]", i);
    }
    cr_assert_null(got[i], "extra [%zu] '%s'", i, got[i]);
}

Test(exec_plan, emulated)
{
    pr_exec_cfg c = { .sock = "/tmp/s", .agent = "/l/libjpt.so", .qemu = "/usr/bin/qemu-x86_64",
                      .plugin = "/l/libptemu.so,filter=none,psb_period=4096" };
    char *argv[] = { "java", "-cp", "classes", "Hello", NULL };
    char *envp[] = { "PATH=/bin", "LD_PRELOAD=/b/libjptexec.so /u/other.so",
                     "JPT_HANDSHAKE_FD=1", "HOME=/h", NULL };
    pr_exec_plan p;
    cr_assert(pr_exec_plan_make(&c, "/jdk/bin/java", argv, envp, "/t/a,b/java-2", 7, 8, &p));
    cr_assert_str_eq(p.path, "/usr/bin/qemu-x86_64");
    const char *want[] = { "/usr/bin/qemu-x86_64",
                           "-E", "LD_PRELOAD=/b/libjptexec.so /u/other.so",
                           "-E", "JPT_HANDSHAKE_FD=7",
                           "-plugin", "/l/libptemu.so,filter=none,psb_period=4096,"
                                      "out=/t/a,,b/java-2,ctl=8",
                           "/jdk/bin/java", "-agentpath:/l/libjpt.so=out=/t/a,b/java-2",
                           "-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints",
                           "-cp", "classes", "Hello", NULL };
    assert_vec(p.argv, want);
    /* qemu itself is not interposed, and no stale handshake descriptor is passed on */
    const char *want_env[] = { "PATH=/bin", "HOME=/h", NULL };
    assert_vec(p.envp, want_env);
    pr_exec_plan_free(&p);
}

Test(exec_plan, hardware)
{
    pr_exec_cfg c = { .sock = "/tmp/s", .agent = "/l/libjpt.so" };
    char *argv[] = { "my-java", "-version", NULL };
    char *envp[] = { "LD_PRELOAD=/b/libjptexec.so", "JPT_HANDSHAKE_FD=1", NULL };
    pr_exec_plan p;
    cr_assert(pr_exec_plan_make(&c, "/jdk/bin/java", argv, envp, "/t", 5, -1, &p));
    cr_assert_str_eq(p.path, "/jdk/bin/java");
    const char *want[] = { "my-java", "-agentpath:/l/libjpt.so=out=/t",
                           "-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints",
                           "-version", NULL };
    assert_vec(p.argv, want);
    /* the JVM's own children are followed too */
    const char *want_env[] = { "LD_PRELOAD=/b/libjptexec.so", "JPT_HANDSHAKE_FD=5", NULL };
    assert_vec(p.envp, want_env);
    pr_exec_plan_free(&p);
}

Test(exec_plan, empty_argv_and_env)
{
    pr_exec_cfg c = { .sock = "/tmp/s", .agent = "/l/libjpt.so" };
    char *argv[] = { NULL };
    char *envp[] = { NULL };
    pr_exec_plan p;
    cr_assert(pr_exec_plan_make(&c, "/jdk/bin/java", argv, envp, "/t", 5, -1, &p));
    const char *want[] = { "/jdk/bin/java", "-agentpath:/l/libjpt.so=out=/t",
                           "-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints", NULL };
    assert_vec(p.argv, want);
    const char *want_env[] = { "JPT_HANDSHAKE_FD=5", NULL };
    assert_vec(p.envp, want_env);
    pr_exec_plan_free(&p);
    cr_assert(pr_exec_plan_make(&c, "/jdk/bin/java", NULL, NULL, "/t", 5, -1, &p));
    assert_vec(p.argv, want);
    pr_exec_plan_free(&p);
}
