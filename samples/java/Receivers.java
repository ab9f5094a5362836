/** Two sorters whose swap() methods have the same bytecodes and whose less() methods do
 * not. A swap() call alone cannot say which class it ran in; the receiver it shares with
 * the less() calls of the same sort() can. The two sort different amounts of data, so
 * crediting every swap() to one class shows in the per-method counts. */
public class Receivers {
    abstract static class Sorter {
        final int[] a;

        Sorter(int[] a) { this.a = a; }

        abstract boolean less(int i, int j);

        abstract void swap(int i, int j);

        /** Insertion sort: less() then swap() on this object. */
        int sort() {
            int swaps = 0;
            for (int i = 1; i < a.length; i++)
                for (int j = i; j > 0 && less(j, j - 1); j--) {
                    swap(j, j - 1);
                    swaps++;
                }
            return swaps;
        }
    }

    static final class Up extends Sorter {
        Up(int[] a) { super(a); }

        boolean less(int i, int j) { return a[i] < a[j]; }

        void swap(int i, int j) { int t = a[i]; a[i] = a[j]; a[j] = t; }
    }

    static final class Down extends Sorter {
        Down(int[] a) { super(a); }

        boolean less(int i, int j) { return a[i] > a[j]; }

        void swap(int i, int j) { int t = a[i]; a[i] = a[j]; a[j] = t; }
    }

    static int seed = 12345;

    static int[] data(int n) {
        int[] a = new int[n];
        for (int i = 0; i < n; i++) {
            seed = seed * 1103515245 + 12345;
            a[i] = (seed >>> 16) & 1023;
        }
        return a;
    }

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 20;
        int up = 0, down = 0;
        for (int r = 0; r < rounds; r++) {
            up += new Up(data(40)).sort();
            down += new Down(data(12)).sort();
        }
        System.out.println("swaps up " + up + " down " + down);
    }
}
