/** Prints what Java code sees of the handshake variable: the agent must have
 *  removed it so that child processes do not inherit a stale descriptor. */
public class EnvProbe {
    public static void main(String[] args) {
        System.out.println("JPT_HANDSHAKE_FD=" + System.getenv("JPT_HANDSHAKE_FD"));
    }
}
