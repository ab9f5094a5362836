// Class-hierarchy analysis: an interface, an abstract class and two implementors.
interface Shape {
    double area();
    default String name() { return "shape"; }
}

abstract class Base implements Shape {
    public abstract double area();
    public String toString() { return name() + area(); }
}

class Circle extends Base {
    final double r;
    Circle(double r) { this.r = r; }
    public double area() { return 3.14159 * r * r; }
    public String name() { return "circle"; }
}

class Square implements Shape {
    final double s;
    Square(double s) { this.s = s; }
    public double area() { return s * s; }
}

class Ring extends Circle {
    Ring(double r) { super(r); }
    public double area() { return super.area() / 2; }
    // another object's method, then this one's (receivers)
    double sum(Circle o) { return o.area() + area(); }
}

// Loaded but never prepared (as the JVM loads a class to verify a caller
// that then never runs the code using it): no object of it exists.
class Oval extends Base {
    public double area() { return 1; }
}

// Constructor calls on this (rc_this_call): the superclass's after another
// object's in the body, and this(...) with an object made for its argument.
class Made extends Circle {
    final Circle inner;
    Made() { this(new Circle(1)); }
    Made(Circle c) {
        super(c.r);
        inner = new Circle(2);
    }
}

// A call of a native method that compiled code makes through a stub
// (as System.arraycopy's).
class Copier {
    static native void copy(Object from, int at, Object to, int to_at, int n);
    static void run(byte[] a, byte[] b) { copy(a, 0, b, 0, 4); }
}

public class Cha {
    static double total(Shape[] shapes) {
        double t = 0;
        for (Shape sh : shapes)
            t += sh.area();
        return t;
    }

    static String names(Shape a) { return a.name(); }

    static double viaBase(Base b) { return b.area(); }

    static Runnable lambda(int k) { return () -> System.out.print(k > 100 ? "" : ""); }

    static java.util.function.ToIntFunction<String> ref() { return String::length; }

    static Circle make() { return new Circle(1); }
}

// Itables in HotSpot's order: the superclass's interfaces, each direct
// superinterface's own, then the direct ones, each once; an interface with
// no method and no superinterface (Marker) has no entry.
interface Counter { int next(); }
interface Marker {}
interface Sized extends Counter { int size(); }
interface Tag extends Marker {}
interface Other { void other(); }

class Count0 implements Counter {              // Counter 0
    int n;
    public int next() { return n++; }
}

class Count1 implements Marker, Other, Counter { // Other 0, Counter 1
    int n;
    public int next() { return n++; }
    public void other() {}
}

abstract class Tagged implements Other, Tag {} // Other 0, Tag 1

class Count2 extends Tagged implements Sized {  // Other 0, Tag 1, Counter 2, Sized 3
    int n;
    public int next() { return n++; }
    public int size() { return n; }
    public void other() {}
}

class Count2b extends Count2 {}                // the same, Count2.next

class Counting {
    static int count(Counter c) { return c.next(); }
}
