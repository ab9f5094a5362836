/** The JDK's Latin-1 string loops, which C2 unrolls: hashes of fresh strings, equals of
 *  equal lengths, indexOf and lastIndexOf (`Strings ROUNDS`). */
public class Strings {
    public static void main(String[] args) {
        int rounds = Integer.parseInt(args[0]);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 40; i++) sb.append((char) ('a' + i % 26));
        String base = sb.toString();
        long total = 0;
        for (int r = 0; r < rounds; r++) {
            String s = new String(base.substring(r % 7) + r);
            String t = new String(s);
            total += s.hashCode();
            total += s.equals(t) ? 1 : 0;
            total += s.indexOf('z');
            total += s.lastIndexOf('q');
        }
        System.out.println("Strings " + total);
    }
}
