// Runs the shapes of Flow and Cha so a recording captures them (and enough of
// the JDK to load thousands of methods).
import java.util.*;
import java.util.stream.*;

public class Sample {
    public static void main(String[] args) {
        int s = 0;
        for (int i = 0; i < 2000; i++)
            s += Flow.table(i & 3) + Flow.lookup(i) + Flow.loop(i & 15) + Flow.guarded(i % 7 == 0 ? "x" : "1");
        Shape[] sh = { new Circle(1), new Square(2), new Ring(3) };
        double t = 0;
        for (int i = 0; i < 1000; i++)
            t += Cha.total(sh) + Cha.names(sh[i % 3]).length() + Cha.viaBase(Cha.make());
        Runnable r = Cha.lambda(s);
        r.run();
        List<String> words = Arrays.asList("alpha", "beta", "gamma", "delta");
        int sum = words.stream().map(w -> w.toUpperCase()).mapToInt(Cha.ref()).sum();
        Map<String, Integer> m = new TreeMap<>();
        for (String w : words)
            m.merge(w.substring(0, 1), 1, Integer::sum);
        System.out.println("sample " + s + " " + (long) t + " " + sum + " " + m);
    }
}
