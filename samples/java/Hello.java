/** The quick-start sample: a few calls and a loop, small enough to trace under emulation. */
public class Hello {
    static int square(int x) { return x * x; }

    public static void main(String[] args) {
        int sum = 0;
        for (int i = 0; i < 100; i++) sum += square(i);
        System.out.println("Hello from jpt, sum of squares = " + sum);
    }
}
