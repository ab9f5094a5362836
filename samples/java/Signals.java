/** Integer division by zero and null dereferences inside compiled code: HotSpot turns
 *  SIGFPE/SIGSEGV into ArithmeticException / NullPointerException through signal handlers. */
public class Signals {
    static int[] maybeNull(int i) { return (i % 97 == 0) ? null : new int[] { i }; }

    static int divide(int a, int b) { return a / b; }

    static int load(int[] a) { return a[0]; }

    public static void main(String[] args) {
        int iters = args.length > 0 ? Integer.parseInt(args[0]) : 40_000;
        int arith = 0, npe = 0;
        long acc = 0;
        for (int i = 0; i < iters; i++) {
            try {
                acc += divide(i, i % 50);
            } catch (ArithmeticException e) {
                arith++;
            }
            try {
                acc += load(maybeNull(i));
            } catch (NullPointerException e) {
                npe++;
            }
        }
        System.out.println("Signals " + arith + " " + npe + " " + acc);
    }
}
