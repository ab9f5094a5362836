/** JIT-heavy: a hot loop that C2 compiles with small callees inlined
 *  (Jit.mix and Jit$Vec.dot are the callees to look for in inline stacks). */
public class Jit {
    static final class Vec {
        final double x, y;
        Vec(double x, double y) { this.x = x; this.y = y; }
        double dot(Vec o) { return x * o.x + y * o.y; }
    }

    static int mix(int a, int b) { return (a * 0x9E3779B1) ^ (b >>> 3); }

    static long hot(int n) {
        long acc = 0;
        Vec v = new Vec(1.5, -2.0);
        for (int i = 0; i < n; i++) {
            acc += mix(i, (int) acc);
            acc += (long) v.dot(new Vec(i, i + 1));
        }
        return acc;
    }

    public static void main(String[] args) {
        int iters = args.length > 0 ? Integer.parseInt(args[0]) : 300;
        long total = 0;
        for (int r = 0; r < iters; r++) total += hot(10_000);
        System.out.println("Jit " + total);
    }
}
