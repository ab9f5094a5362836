// Calls whose segment is cut between a callee and its callers: the projector
// links the next segment to the stack the cut one ended with (unit test
// program/segments_link_to_the_stack_an_unresolved_one_ended_with), and
// compiled code with inlined callees (both: two call sites outside loops).
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
}
