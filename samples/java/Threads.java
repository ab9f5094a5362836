/** Several short-lived threads, each doing a little work, plus a longer-lived pool.
 *  Arguments: waves of six threads (default 4), iterations per thread (default 2000). */
public class Threads {
    static volatile long sink;

    static long work(int seed, int n) {
        long h = seed;
        for (int i = 0; i < n; i++) h = h * 31 + (i ^ seed);
        return h;
    }

    public static void main(String[] args) throws Exception {
        int waves = args.length > 0 ? Integer.parseInt(args[0]) : 4;
        int n = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
        int perWave = 6;
        for (int w = 0; w < waves; w++) {
            Thread[] ts = new Thread[perWave];
            for (int t = 0; t < perWave; t++) {
                final int seed = w * perWave + t;
                ts[t] = new Thread(() -> sink += work(seed, n), "worker-" + seed);
                ts[t].start();
            }
            for (Thread t : ts) t.join();
        }
        System.out.println("Threads done " + (sink != 0));
    }
}
