/** A JVM that starts a JVM (as build tools and test runners do): runs Hello from the same
 *  class path with ProcessBuilder and prints its exit status. */
public class Spawn {
    public static void main(String[] args) throws Exception {
        String java = System.getProperty("java.home") + "/bin/java";
        String cp = System.getProperty("java.class.path");
        Process p = new ProcessBuilder(java, "-cp", cp, "Hello").inheritIO().start();
        System.out.println("child exited " + p.waitFor());
    }
}
