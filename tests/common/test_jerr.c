/* Units for the warnings of the command-line tools (common/jerr.h). */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "common/jerr.h"

/* Warnings that differ only in their numbers are one kind: the first is
 * printed, then how many more. */
Test(jerr, bulk_warnings_are_counted, .init = cr_redirect_stderr)
{
    jerr_set_prog("t");
    jerr_warn_grouped("a.jpt: offset 16: record at 0x10 ignored");
    jerr_warn_grouped("a.jpt: offset 48: record at 0x2f ignored");
    jerr_warn_grouped("a.jpt: offset 80: record at 0x30 ignored");
    jerr_warn_grouped("b.idx: offset 16: another kind");
    jerr_warn_flush();
    fflush(stderr);
    cr_assert_stderr_eq_str("t: warning: a.jpt: offset 16: record at 0x10 ignored\n"
                            "t: warning: b.idx: offset 16: another kind\n"
                            "t: warning: 2 more like \"a.jpt: offset 16: record at 0x10 "
                            "ignored\" (--verbose shows each)\n");
}

Test(jerr, verbose_prints_each_and_duplicates_once, .init = cr_redirect_stderr)
{
    jerr_set_prog("t");
    jerr_set_verbose(true);
    jerr_warn_grouped("x: offset 1: cut");
    jerr_warn_grouped("x: offset 2: cut");
    jerr_warn("x: offset 2: cut");
    jerr_warn_flush();
    fflush(stderr);
    cr_assert_stderr_eq_str("t: warning: x: offset 1: cut\n"
                            "t: warning: x: offset 2: cut\n");
}
