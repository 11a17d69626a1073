"""The benchmarks stay beside the product: no product module imports `opencomposer.bench`
but the CLI's bench commands, which import it only when they run."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("agent", "lsp", "serving", "kernels", "training", "opencomposer")
BENCH_COMMANDS = {Path("serving/cli/bench_cmd.py"), Path("serving/cli/engine_cmd.py")}


def imported(source: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_only_the_bench_commands_import_the_benchmarks():
    importers = {
        path.relative_to(ROOT)
        for folder in PRODUCT
        for path in (ROOT / folder).rglob("*.py")
        if (ROOT / "opencomposer" / "bench") not in path.parents
        and any(name.startswith("opencomposer.bench") for name in imported(path))
    }
    assert importers == BENCH_COMMANDS
