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
