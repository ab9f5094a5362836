import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.IntUnaryOperator;

/** Virtual and interface dispatch, lambdas, exceptions, switches, recursion and JDK calls
 * (collections, string formatting): everything reconstruction has to tell apart. The call
 * sequence inside {@link #round} is deterministic, so a test can check it by hand. */
public class Dispatch {
    interface Shape {
        int area();
        default int scaled(int k) { return area() * k; }
    }

    abstract static class Base implements Shape {
        abstract int side();
        public int area() { return side() * side(); }
    }

    static final class Square extends Base {
        final int s;
        Square(int s) { this.s = s; }
        int side() { return s; }
    }

    static final class Rect implements Shape {
        final int w, h;
        Rect(int w, int h) { this.w = w; this.h = h; }
        public int area() { return w * h; }
        @Override public int scaled(int k) { return w * k * h; }
    }

    /* Two implementations with the same bytecode: in interpreted code a trace cannot tell
     * which one runs. Unused is loaded (after Used, which puts it first among the call's
     * targets in class-hierarchy order) but never instantiated, so only Used can be the
     * receiver; reconstruction prefers targets whose class has objects. */
    interface Counter { int next(int x); }

    static final class Unused implements Counter {
        static int touch() { return 1; }
        public int next(int x) { return x + 1; }
    }

    static final class Used implements Counter {
        public int next(int x) { return x + 1; }
    }

    static int depth(int n) {
        if (n == 0)
            throw new IllegalStateException("bottom");
        return depth(n - 1) + 1;
    }

    /* The arms push constants of different encodings (iconst, bipush, sipush, ldc):
     * arms with identical bytecode run identical interpreter code, so a trace cannot
     * tell them apart (docs/ACCURACY.md). */
    static int kind(Shape s) {
        switch (s.area() % 4) {
            case 0: return 1;
            case 1: return 20;
            case 2: return 300;
            default: return 100000;
        }
    }

    static int round(int i, Map<String, Integer> seen) {
        Shape a = new Square(i % 5 + 1);
        Shape b = new Rect(i % 3 + 1, 2);
        int sum = a.area() + b.area();          // Base.area -> Square.side x2; Rect.area
        sum += a.scaled(2) + b.scaled(3);       // Shape.scaled (default) -> Base.area; Rect.scaled
        IntUnaryOperator twice = x -> x * 2;
        sum += twice.applyAsInt(sum);           // lambda$round$0
        sum += kind(a) + kind(b);
        try {
            sum += depth(i % 4);
        } catch (IllegalStateException e) {
            sum -= 1;
        }
        String key = String.format("k%d", i % 7);
        seen.merge(key, 1, Integer::sum);
        return sum;
    }

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 40;
        Map<String, Integer> seen = new HashMap<>();
        List<Integer> out = new ArrayList<>();
        long acc = 0;
        for (int i = 0; i < rounds; i++) {
            int r = round(i, seen);
            out.add(r);
            acc += r;
        }
        Counter c = new Used();
        acc += Unused.touch();
        for (int i = 0; i < rounds * 50; i++)
            acc += c.next(i);
        System.out.println("Dispatch " + rounds + " " + acc + " " + seen.size() + " " + out.size());
    }
}
