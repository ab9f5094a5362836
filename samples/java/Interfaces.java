/** Interface calls told apart by where the interface sits in the receiver's itable.
 * Four counters have next() methods with the same bytecodes, called through the
 * Counter interface from one call site on objects taken from an array: neither the
 * callee's bytecodes nor the receiver's earlier calls say which class ran. HotSpot's
 * interpreter finds Counter in the receiver class's itable by a linear scan, and the
 * scan's length differs between the four classes (their other interfaces come first).
 * The classes run different numbers of calls, so crediting every call to one class
 * shows in the per-method counts. */
public class Interfaces {
    interface Counter { int next(); }

    /** No methods and no superinterface: no itable entry. */
    interface Marker {}

    interface Other { void other(); }

    interface Sized extends Counter { int size(); }

    /** No methods, but a superinterface: an itable entry. */
    interface Tag extends Marker {}

    /** Counter at 0. */
    static final class First implements Counter {
        int n;
        public int next() { return n++; }
    }

    /** Marker has no entry: Other 0, Counter 1. */
    static final class Second implements Marker, Other, Counter {
        int n;
        public int next() { return n++; }
        public void other() {}
    }

    /** Other 0, Tag 1. */
    abstract static class Tagged implements Other, Tag {
        public void other() {}
    }

    /** The superclass's Other and Tag, then Sized's Counter (2), then Sized. */
    static class Third extends Tagged implements Sized {
        int n;
        public int next() { return n++; }
        public int size() { return n; }
    }

    /** Inherits Third's next() and its itable order. */
    static final class Fourth extends Third {}

    static int drive(Counter[] cs, int rounds) {
        int sum = 0;
        for (int r = 0; r < rounds; r++)
            for (int i = 0; i < cs.length; i++)
                sum += cs[i].next();
        return sum;
    }

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 20;
        First a = new First();
        Second b = new Second();
        Third c = new Third();
        Fourth d = new Fourth();
        // per round: First once, Second twice, Third three times, Fourth once
        Counter[] cs = { b, c, a, c, b, d, c };
        int sum = drive(cs, rounds);
        System.out.println("sum " + sum + " first " + a.n + " second " + b.n + " third " + c.n
                           + " fourth " + d.n + " size " + c.size());
    }
}
