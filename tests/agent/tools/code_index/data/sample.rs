use std::fmt;

pub const MAX_DEPTH: usize = 8;
static GREETING: &str = "hi";

#[derive(Debug)]
pub struct Point {
    x: f64,
    y: f64,
}

pub enum Shape {
    Circle(f64),
    Square(f64),
}

pub trait Area {
    fn area(&self) -> f64;
    fn describe(&self) -> String {
        format!("{}", self.area())
    }
}

impl Point {
    pub fn new(x: f64, y: f64) -> Self {
        Point { x, y }
    }
}

impl<T> fmt::Display for Wrapper<T> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "wrapper")
    }
}

type Grid = Vec<Vec<u8>>;

mod geometry {
    pub fn origin() -> (f64, f64) {
        (0.0, 0.0)
    }
}

fn main() {}
