// Calls whose segment is cut between a callee and its callers: the projector
// links the next segment to the stack the cut one ended with (unit test
// program/segments_link_to_the_stack_an_unresolved_one_ended_with), and
// compiled code with inlined callees (both: two call sites outside loops).
// Returns: more methods that only return than a return in an unknown
// context is matched against (program/returns_in_an_unknown_context_...).
public class Link {
    static int outer(int n) {
        int s = 0;
        for (int i = 0; i < n; i++)
            s += mid(i);
        return s;
    }

    static int mid(int i) {
        return leaf(i) * 3 + 1;
    }

    static int other(int i) {
        return leaf(i) - 9;
    }

    static int both(int i) {
        return leaf(i) + other(i);
    }

    static int leaf(int i) {
        return i ^ 0x55;
    }

    // Two arms between one pin and the return: the trace settles neither
    // (program/a_path_the_trace_does_not_settle_is_estimated_where_paths_part).
    static int pick(int i) {
        int s = i + 1;
        if (i % 97 == 0)
            s = 0;
        else
            s = s * 3 + 1;
        return s;
    }

    // A flag pushed as a constant in each arm, tested right after: the arm
    // and the test agree (program/a_constant_an_arm_pushes_decides_the_if_that_tests_it).
    static int choose(int i) {
        return (i > 5 ? 1 : 0) == 0 ? 10 : 20;
    }
}

class Returns {
    static void r00() {} static void r01() {} static void r02() {} static void r03() {}
    static void r04() {} static void r05() {} static void r06() {} static void r07() {}
    static void r08() {} static void r09() {} static void r10() {} static void r11() {}
    static void r12() {} static void r13() {} static void r14() {} static void r15() {}
    static void r16() {} static void r17() {} static void r18() {} static void r19() {}
    static void r20() {} static void r21() {} static void r22() {} static void r23() {}
    static void r24() {} static void r25() {} static void r26() {} static void r27() {}
    static void r28() {} static void r29() {} static void r30() {} static void r31() {}
    static void r32() {} static void r33() {} static void r34() {} static void r35() {}
    static void r36() {} static void r37() {} static void r38() {} static void r39() {}
    static void r40() {} static void r41() {} static void r42() {} static void r43() {}
    static void r44() {} static void r45() {} static void r46() {} static void r47() {}
    static void r48() {} static void r49() {} static void r50() {} static void r51() {}
    static void r52() {} static void r53() {} static void r54() {} static void r55() {}
    static void r56() {} static void r57() {} static void r58() {} static void r59() {}
    static void r60() {} static void r61() {} static void r62() {} static void r63() {}
    static void r64() {} static void r65() {} static void r66() {} static void r67() {}
    static void r68() {} static void r69() {} static void r70() {} static void r71() {}
}

// A launcher's main with Skip.main's bytecodes in a class loaded long after
// the events that run Skip.main (program/a_class_runs_no_earlier_than_its_load).
class Launch {
    public static void main(String[] a) {
        Skip.seen = 1;
    }
}

// A branch to the next instruction: javac keeps `if (i == -1) {}` as an
// if_icmpne over nothing (program/a_branch_to_the_next_instruction_...).
// The launcher's main, and a method with the same bytecodes before it
// (program/the_launcher_s_main_goes_first_...).
class Skip {
    static int seen;

    static void early(String[] a) {
        seen = 1;
    }

    public static void main(String[] a) {
        seen = 1;
    }

    static void check(int i) {
        if (i == -1) {
        }
        seen = i;
    }
}

// A long ambiguity with a short one on top (program/a_forced_choice_keeps_
// the_paths_that_parted_lately): run and runAgain have the same bytecodes
// and only their return tells them apart; each iteration calls a virtual
// apply whose two overrides differ only after spin returns.
abstract class Op {
    abstract int apply(int x);

    static int spin(int x) {
        for (int k = 0; k < 300; k++)
            x ^= k;
        return x;
    }

    static int run(Op op, int n) {
        int s = 0;
        for (int i = 0; i < n; i++)
            s += op.apply(i);
        return s;
    }

    static int runAgain(Op op, int n) {
        int s = 0;
        for (int i = 0; i < n; i++)
            s += op.apply(i);
        return s;
    }

    // A long ambiguity that only the last bytecodes settle (program/a_long_
    // ambiguity_is_bounded_by_the_memory_its_paths_still_hold): total and
    // totalLess differ in their last arithmetic alone.
    static int total(int n) {
        int s = 7;
        for (int i = 0; i < n; i++)
            s ^= spin(i);
        return s + 3;
    }

    static int totalLess(int n) {
        int s = 7;
        for (int i = 0; i < n; i++)
            s ^= spin(i);
        return s - 3;
    }
}

class Twice extends Op {
    int apply(int x) { return spin(x) * 2; }
}

class Less extends Op {
    int apply(int x) { return spin(x) - 2; }
}

// Receivers: score has the same bytecodes in both classes and calls test on
// this; only the test that runs tells the receiver's class, and with it
// which score runs (program/a_receiver_s_class_picks_the_override_...).
class Pattern0 {
    int score(int x) { return test(x); }
    int test(int x) { return x + 1; }

    static int match(Pattern0 p, int x) {
        int y = x * 7;
        return p.score(y);
    }
}

class Pattern1 extends Pattern0 {
    int score(int x) { return test(x); }
    int test(int x) { return x * 3; }
}

// Two class initializers with the same bytecodes, run by the VM (program/
// an_initialized_class_s_initializer_does_not_run_again): the agent found
// Init0 initialized, so a later run is Init1's.
class Init0 {
    static int mark = 300;
}

class Init1 {
    static int mark = 301;
}
