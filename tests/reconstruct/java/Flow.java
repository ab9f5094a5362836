// Control flow shapes whose CFG edges the unit tests check against javap -c.
public class Flow {
    static int table(int x) {
        switch (x) {
        case 0: return 10;
        case 1: return 11;
        case 2: return 12;
        default: return -1;
        }
    }

    static int lookup(int x) {
        switch (x) {
        case 1:
        case -5: return 1;
        case 1000: return 2;
        default: return 0;
        }
    }

    static int loop(int n) {
        int s = 0;
        for (int i = 0; i < n; i++)
            s += i;
        return s;
    }

    static int guarded(String s) {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            return -1;
        } finally {
            System.out.print("");
        }
    }

    static int rethrow(int n, RuntimeException e) {
        if (n > 0) {
            try {
                return rethrow(n - 1, e);
            } catch (IllegalStateException x) {
                return -1;
            }
        }
        throw e;
    }
}
