"""Outlines of one realistic file per grammar, compared whole, and the inputs that must not
break them: syntax errors, binary garbage, names that are not ASCII or not UTF-8."""

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opencomposer.agent.tools.code_index.languages import LANGUAGES
from opencomposer.agent.tools.code_index.outline import KINDS, LONG_LINE_LEAD, Symbol, outline

DATA = Path(__file__).parent / "data"

# Symbol(name, kind, path, line, end_line, parent, signature)
EXPECTED = [
    (
        "sample.py",
        "python",
        [
            Symbol("MAX_RETRIES", "constant", "sample.py", 4, 4, None, "MAX_RETRIES = 3"),
            Symbol(
                "_DEFAULT_TIMEOUT",
                "constant",
                "sample.py",
                5,
                5,
                None,
                "_DEFAULT_TIMEOUT: float = 2.5",
            ),
            Symbol("Callback", "type", "sample.py", 7, 7, None, "type Callback = callable"),
            Symbol(
                "get_file_name",
                "function",
                "sample.py",
                10,
                13,
                None,
                "def get_file_name(path: str) -> str:",
            ),
            Symbol("strip", "function", "sample.py", 11, 12, "get_file_name", "def strip(part):"),
            Symbol("fetch", "function", "sample.py", 16, 18, None, "async def fetch(url):"),
            Symbol("Client", "class", "sample.py", 21, 32, None, "class Client(Base):"),
            Symbol(
                "__init__", "method", "sample.py", 24, 25, "Client", "def __init__(self, host):"
            ),
            Symbol("address", "method", "sample.py", 27, 29, "Client", "def address(self):"),
            Symbol("Options", "class", "sample.py", 31, 32, "Client", "class Options:"),
            Symbol("Config", "class", "sample.py", 35, 37, None, "class Config:"),
        ],
    ),
    (
        "sample.js",
        "javascript",
        [
            Symbol(
                "API_URL",
                "constant",
                "sample.js",
                3,
                3,
                None,
                'export const API_URL = "https://example.com";',
            ),
            Symbol(
                "loadConfig",
                "function",
                "sample.js",
                6,
                8,
                None,
                "export function loadConfig(path) {",
            ),
            Symbol("ids", "function", "sample.js", 10, 10, None, "function* ids() { yield 1; }"),
            Symbol(
                "fetchJson",
                "function",
                "sample.js",
                12,
                15,
                None,
                "export const fetchJson = async (url) => {",
            ),
            Symbol(
                "parse",
                "function",
                "sample.js",
                13,
                13,
                "fetchJson",
                "const parse = (text) => JSON.parse(text);",
            ),
            Symbol(
                "legacy",
                "function",
                "sample.js",
                17,
                17,
                None,
                "let legacy = function (a, b) { return a + b; };",
            ),
            Symbol(
                "Store",
                "class",
                "sample.js",
                19,
                31,
                None,
                "export default class Store extends Base {",
            ),
            Symbol(
                "onChange",
                "method",
                "sample.js",
                21,
                21,
                "Store",
                'onChange = () => this.emit("change");',
            ),
            Symbol("constructor", "method", "sample.js", 23, 26, "Store", "constructor(name) {"),
            Symbol(
                "size", "method", "sample.js", 28, 28, "Store", "get size() { return cache.size; }"
            ),
            Symbol("save", "method", "sample.js", 30, 30, "Store", "async save() {}"),
        ],
    ),
    (
        "sample.ts",
        "typescript",
        [
            Symbol(
                "DEFAULT_PORT",
                "constant",
                "sample.ts",
                1,
                1,
                None,
                "export const DEFAULT_PORT = 8080;",
            ),
            Symbol("Shape", "interface", "sample.ts", 3, 6, None, "export interface Shape {"),
            Symbol("area", "method", "sample.ts", 5, 5, "Shape", "area(): number;"),
            Symbol(
                "ShapeId", "type", "sample.ts", 8, 8, None, "export type ShapeId = string | number;"
            ),
            Symbol("Color", "enum", "sample.ts", 10, 13, None, "enum Color {"),
            Symbol(
                "Base",
                "class",
                "sample.ts",
                15,
                22,
                None,
                "export abstract class Base<T> implements Shape {",
            ),
            Symbol("area", "method", "sample.ts", 17, 17, "Base", "abstract area(): number;"),
            Symbol("describe", "method", "sample.ts", 19, 21, "Base", "describe(): string {"),
            Symbol(
                "makeShape",
                "function",
                "sample.ts",
                24,
                26,
                None,
                "export function makeShape(id: ShapeId): Shape | undefined {",
            ),
            Symbol(
                "area",
                "function",
                "sample.ts",
                28,
                28,
                None,
                "export const area = (s: Shape): number => s.area();",
            ),
            Symbol("Geometry", "module", "sample.ts", 30, 32, None, "namespace Geometry {"),
            Symbol(
                "origin",
                "function",
                "sample.ts",
                31,
                31,
                "Geometry",
                "export function origin(): [number, number] { return [0, 0]; }",
            ),
            Symbol(
                "overloaded",
                "function",
                "sample.ts",
                34,
                34,
                None,
                "declare function overloaded(x: string): void;",
            ),
        ],
    ),
    (
        "sample.tsx",
        "tsx",
        [
            Symbol("Props", "interface", "sample.tsx", 3, 5, None, "interface Props {"),
            Symbol(
                "Button",
                "function",
                "sample.tsx",
                7,
                11,
                None,
                "export function Button({ label }: Props) {",
            ),
            Symbol(
                "handleClick",
                "function",
                "sample.tsx",
                9,
                9,
                "Button",
                "const handleClick = () => setCount(count + 1);",
            ),
            Symbol(
                "Badge",
                "function",
                "sample.tsx",
                13,
                13,
                None,
                "export const Badge = ({ label }: Props) => <span>{label}</span>;",
            ),
            Symbol(
                "Panel",
                "class",
                "sample.tsx",
                15,
                19,
                None,
                "export default class Panel extends React.Component<Props> {",
            ),
            Symbol("render", "method", "sample.tsx", 16, 18, "Panel", "render() {"),
        ],
    ),
    (
        "sample.go",
        "go",
        [
            Symbol("DefaultPort", "constant", "sample.go", 5, 5, None, "const DefaultPort = 8080"),
            Symbol("modeDev", "constant", "sample.go", 8, 8, None, 'modeDev  = "dev"'),
            Symbol("modeProd", "constant", "sample.go", 9, 9, None, 'modeProd = "prod"'),
            Symbol("Handler", "interface", "sample.go", 12, 14, None, "type Handler interface {"),
            Symbol(
                "Serve",
                "method",
                "sample.go",
                13,
                13,
                "Handler",
                "Serve(w http.ResponseWriter, r *http.Request) error",
            ),
            Symbol("Server", "struct", "sample.go", 16, 18, None, "type Server struct {"),
            Symbol("Port", "type", "sample.go", 20, 20, None, "type Port int"),
            Symbol("Alias", "type", "sample.go", 22, 22, None, "type Alias = Server"),
            Symbol("New", "function", "sample.go", 24, 26, None, "func New(addr string) *Server {"),
            Symbol(
                "Start", "method", "sample.go", 28, 30, "Server", "func (s *Server) Start() error {"
            ),
            Symbol(
                "Addr",
                "method",
                "sample.go",
                32,
                32,
                "Server",
                "func (s Server) Addr() string { return s.addr }",
            ),
            Symbol(
                "Push", "method", "sample.go", 34, 34, "Stack", "func (st *Stack[T]) Push(v T) {}"
            ),
        ],
    ),
    (
        "sample.rs",
        "rust",
        [
            Symbol(
                "MAX_DEPTH", "constant", "sample.rs", 3, 3, None, "pub const MAX_DEPTH: usize = 8;"
            ),
            Symbol(
                "GREETING", "constant", "sample.rs", 4, 4, None, 'static GREETING: &str = "hi";'
            ),
            Symbol("Point", "struct", "sample.rs", 7, 10, None, "pub struct Point {"),
            Symbol("Shape", "enum", "sample.rs", 12, 15, None, "pub enum Shape {"),
            Symbol("Area", "trait", "sample.rs", 17, 22, None, "pub trait Area {"),
            Symbol("area", "method", "sample.rs", 18, 18, "Area", "fn area(&self) -> f64;"),
            Symbol(
                "describe", "method", "sample.rs", 19, 21, "Area", "fn describe(&self) -> String {"
            ),
            Symbol(
                "new",
                "method",
                "sample.rs",
                25,
                27,
                "Point",
                "pub fn new(x: f64, y: f64) -> Self {",
            ),
            Symbol(
                "fmt",
                "method",
                "sample.rs",
                31,
                33,
                "Wrapper",
                "fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {",
            ),
            Symbol("Grid", "type", "sample.rs", 36, 36, None, "type Grid = Vec<Vec<u8>>;"),
            Symbol("geometry", "module", "sample.rs", 38, 42, None, "mod geometry {"),
            Symbol(
                "origin",
                "function",
                "sample.rs",
                39,
                41,
                "geometry",
                "pub fn origin() -> (f64, f64) {",
            ),
            Symbol("main", "function", "sample.rs", 44, 44, None, "fn main() {}"),
        ],
    ),
    (
        "Sample.java",
        "java",
        [
            Symbol("Sample", "class", "Sample.java", 5, 25, None, "public class Sample {"),
            Symbol(
                "MAX_SIZE",
                "constant",
                "Sample.java",
                6,
                6,
                "Sample",
                "public static final int MAX_SIZE = 10;",
            ),
            Symbol(
                "Sample", "method", "Sample.java", 9, 11, "Sample", "public Sample(int count) {"
            ),
            Symbol(
                "toString", "method", "Sample.java", 13, 16, "Sample", "public String toString() {"
            ),
            Symbol(
                "Listener", "interface", "Sample.java", 18, 20, "Sample", "interface Listener {"
            ),
            Symbol(
                "onEvent", "method", "Sample.java", 19, 19, "Listener", "void onEvent(String name);"
            ),
            Symbol(
                "Mode",
                "enum",
                "Sample.java",
                22,
                22,
                "Sample",
                "enum Mode { FAST, SLOW; boolean isFast() { return this == FAST; } }",
            ),
            Symbol(
                "isFast",
                "method",
                "Sample.java",
                22,
                22,
                "Mode",
                "enum Mode { FAST, SLOW; boolean isFast() { return this == FAST; } }",
            ),
            Symbol(
                "Pair",
                "class",
                "Sample.java",
                24,
                24,
                "Sample",
                "record Pair(int left, int right) {}",
            ),
        ],
    ),
    (
        "sample.c",
        "c",
        [
            Symbol("BUFFER_SIZE", "constant", "sample.c", 4, 4, None, "#define BUFFER_SIZE 1024"),
            Symbol("point", "struct", "sample.c", 6, 9, None, "struct point {"),
            Symbol("person_t", "type", "sample.c", 11, 13, None, "} person_t;"),
            Symbol("color", "enum", "sample.c", 15, 15, None, "enum color { RED, GREEN };"),
            Symbol(
                "compare_fn",
                "type",
                "sample.c",
                17,
                17,
                None,
                "typedef int (*compare_fn)(const void *, const void *);",
            ),
            Symbol("add", "function", "sample.c", 21, 25, None, "add(int a, int b)"),
            Symbol(
                "copy_name",
                "function",
                "sample.c",
                27,
                29,
                None,
                "char *copy_name(const char *name) {",
            ),
            Symbol("main", "function", "sample.c", 31, 33, None, "int main(void) {"),
        ],
    ),
    (
        "sample.cpp",
        "cpp",
        [
            Symbol("geo", "module", "sample.cpp", 3, 25, None, "namespace geo {"),
            Symbol("Shape", "class", "sample.cpp", 5, 11, "geo", "class Shape {"),
            Symbol("Shape", "method", "sample.cpp", 7, 7, "Shape", "Shape();"),
            Symbol("~Shape", "method", "sample.cpp", 8, 8, "Shape", "virtual ~Shape();"),
            Symbol(
                "area", "method", "sample.cpp", 9, 9, "Shape", "virtual double area() const = 0;"
            ),
            Symbol(
                "name",
                "method",
                "sample.cpp",
                10,
                10,
                "Shape",
                'std::string name() const { return "shape"; }',
            ),
            Symbol("Point", "struct", "sample.cpp", 13, 15, "geo", "struct Point {"),
            Symbol(
                "Kind", "enum", "sample.cpp", 17, 17, "geo", "enum class Kind { Circle, Square };"
            ),
            Symbol("area", "method", "sample.cpp", 19, 21, "Shape", "double Shape::area() const {"),
            Symbol("~Shape", "method", "sample.cpp", 23, 23, "Shape", "Shape::~Shape() {}"),
            Symbol(
                "get", "method", "sample.cpp", 28, 30, "Box", "const T& geo::Box<T>::get() const {"
            ),
            Symbol(
                "Points",
                "type",
                "sample.cpp",
                32,
                32,
                None,
                "using Points = std::vector<geo::Point>;",
            ),
            Symbol(
                "clamp", "function", "sample.cpp", 35, 37, None, "T clamp(T value, T lo, T hi) {"
            ),
            Symbol("main", "function", "sample.cpp", 39, 41, None, "int main() {"),
        ],
    ),
    (
        "sample.sh",
        "bash",
        [
            Symbol("log", "function", "sample.sh", 4, 6, None, "log() {"),
            Symbol("build", "function", "sample.sh", 8, 10, None, "function build {"),
            Symbol("clean", "function", "sample.sh", 12, 14, None, "function clean() {"),
        ],
    ),
]


@pytest.mark.parametrize(
    ("name", "language", "expected"), EXPECTED, ids=[language for _, language, _ in EXPECTED]
)
def test_outline_lists_every_definition(name: str, language: str, expected: list[Symbol]) -> None:
    assert outline(name, (DATA / name).read_bytes(), language) == expected


def test_the_samples_cover_every_grammar_and_kind() -> None:
    assert {language for _, language, _ in EXPECTED} == {spec.name for spec in LANGUAGES}
    assert {s.kind for _, _, symbols in EXPECTED for s in symbols} == set(KINDS)


def test_a_syntax_error_keeps_the_definitions_tree_sitter_recovered() -> None:
    source = (
        b"def ok():\n    pass\n\ndef broken(:\n    return 1\n\nclass Fine:\n"
        b"    def method(self):\n        pass\n"
    )
    assert outline("broken.py", source, "python") == [
        Symbol("ok", "function", "broken.py", 1, 2, None, "def ok():"),
        Symbol("broken", "function", "broken.py", 4, 5, None, "def broken(:"),
        Symbol("Fine", "class", "broken.py", 7, 9, None, "class Fine:"),
        Symbol("method", "method", "broken.py", 8, 9, "Fine", "def method(self):"),
    ]


@pytest.mark.parametrize("language", [spec.name for spec in LANGUAGES])
def test_binary_garbage_yields_nothing(language: str) -> None:
    garbage = random.Random(language).randbytes(20_000)
    assert outline("blob", garbage, language) == []
    assert outline("empty", b"", language) == []


@settings(max_examples=30, deadline=None, database=None)
@given(source=st.binary(max_size=300), language=st.sampled_from([s.name for s in LANGUAGES]))
def test_any_bytes_give_well_formed_symbols(source: bytes, language: str) -> None:
    for symbol in outline("fuzz", source, language):
        assert symbol.name and symbol.kind in KINDS
        assert 1 <= symbol.line <= symbol.end_line


def test_unicode_names_and_invalid_utf8() -> None:
    source = "def café():\n    pass\n\nclass 名前:\n    pass\n".encode()
    assert outline("uni.py", source, "python") == [
        Symbol("café", "function", "uni.py", 1, 2, None, "def café():"),
        Symbol("名前", "class", "uni.py", 4, 5, None, "class 名前:"),
    ]
    latin1 = 'declare module "caf\xe9" {}\n'.encode("latin-1")
    assert outline("m.d.ts", latin1, "typescript") == [
        Symbol("caf\ufffd", "module", "m.d.ts", 1, 1, None, 'declare module "caf\ufffd" {}'),
    ]


def test_minified_code_signature_starts_shortly_before_the_name() -> None:
    source = b"x;" * 500 + b"function target(){return 1}"
    name_at = source.index(b"target")
    assert outline("min.js", source, "javascript") == [
        Symbol(
            "target", "function", "min.js", 1, 1, None, source[name_at - LONG_LINE_LEAD :].decode()
        ),
    ]
