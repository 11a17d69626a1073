#include <string>

namespace geo {

class Shape {
public:
    Shape();
    virtual ~Shape();
    virtual double area() const = 0;
    std::string name() const { return "shape"; }
};

struct Point {
    double x, y;
};

enum class Kind { Circle, Square };

double Shape::area() const {
    return 0.0;
}

Shape::~Shape() {}

}  // namespace geo

template <typename T>
const T& geo::Box<T>::get() const {
    return value_;
}

using Points = std::vector<geo::Point>;

template <typename T>
T clamp(T value, T lo, T hi) {
    return value < lo ? lo : value > hi ? hi : value;
}

int main() {
    return 0;
}
