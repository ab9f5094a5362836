/** Single-threaded, branch-heavy: conditionals, switches, loops, recursion, exceptions. */
public class Branchy {
    static int collatzSteps(long n) {
        int steps = 0;
        while (n != 1) {
            n = (n & 1) == 0 ? n / 2 : 3 * n + 1;
            steps++;
        }
        return steps;
    }

    static int classify(int v) {
        switch (v % 7) {
            case 0: return 3;
            case 1: case 2: return v & 5;
            case 3: return -v;
            default: return v >> 1;
        }
    }

    static int sparse(int v) {
        switch (v) {
            case 10: return 1;
            case 1000: return 2;
            case 100000: return 3;
            default: return 0;
        }
    }

    static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

    static int parse(String s) {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 2000;
        long acc = 0;
        for (int i = 1; i <= rounds; i++) {
            acc += collatzSteps(i);
            acc += classify(i);
            acc += sparse(i * 10);
            acc += parse((i % 3 == 0) ? "x" + i : Integer.toString(i));
        }
        acc += fib(18);
        System.out.println("Branchy " + rounds + " " + acc);
    }
}
