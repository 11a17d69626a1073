"""Tasks made by breaking a project: what the generator keeps, what it records, and that each
task it writes is valid by its oracle in the real runner, with a real PyPI sdist among them."""

import hashlib
import io
import json
import re
import shutil
import tarfile
from pathlib import Path

import pytest
from support.bench_fixtures import run_bench

from opencomposer.training.errors import TrainingError
from opencomposer.training.eval.report import oracle_checks
from opencomposer.training.eval.smith.generate import (
    GenerateOptions,
    SmithGenerator,
    distribution,
)
from opencomposer.training.eval.smith.packages import SourcePackage, fetch_sdist, package_named
from opencomposer.training.eval.task import discover_tasks, load_task

pytestmark = [pytest.mark.usefixtures("bwrap"), pytest.mark.slow]

GEOMETRY = '''\
"""Plane shapes."""


def clamp(value, low, high):
    if value < low:
        return low
    if value > high:
        return high
    return value


def rectangle_area(width, height):
    if width < 0 or height < 0:
        raise ValueError("negative side")
    return width * height


def perimeter(sides):
    total = 0
    for side in sides:
        total = total + side
    return total
'''
UNITS = '''\
"""Length units."""

FACTORS = {"mm": 1, "cm": 10, "m": 1000}


def to_mm(value, unit):
    if unit not in FACTORS:
        raise KeyError(unit)
    return value * FACTORS[unit]


def convert(value, source, target):
    return to_mm(value, source) // FACTORS[target]
'''
TESTS = {
    "tests/test_geometry.py": """\
import pytest

from shapes.geometry import clamp, perimeter, rectangle_area


def test_clamp_low():
    assert clamp(-5, 0, 10) == 0


def test_clamp_high():
    assert clamp(50, 0, 10) == 10


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_area():
    assert rectangle_area(3, 4) == 12


def test_negative_side():
    with pytest.raises(ValueError):
        rectangle_area(-1, 2)


@pytest.mark.parametrize("sides, total", [([1, 2, 3], 6), ([5], 5), ([], 0)])
def test_perimeter(sides, total):
    assert perimeter(sides) == total
""",
    "tests/test_units.py": """\
import pytest

from shapes.units import convert, to_mm


def test_to_mm():
    assert to_mm(3, "cm") == 30


def test_unknown_unit():
    with pytest.raises(KeyError):
        to_mm(1, "inch")


def test_convert():
    assert convert(2, "m", "cm") == 200
""",
}


def _sdist(cache: Path) -> SourcePackage:
    """A small project's sdist in `cache`, pinned as the generator pins PyPI's."""
    files = {
        "shapes/__init__.py": "",
        "shapes/geometry.py": GEOMETRY,
        "shapes/units.py": UNITS,
        "PKG-INFO": "Name: shapes\nVersion: 1.0\n",
        **TESTS,
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"shapes-1.0/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "shapes-1.0.tar.gz").write_bytes(buffer.getvalue())
    digest = hashlib.sha256(buffer.getvalue()).hexdigest()
    return SourcePackage("shapes", "1.0", digest, "MIT", "shapes", ("tests",), repo="ex/shapes")


async def _generate(root: Path, package: SourcePackage, **options: int) -> Path:
    out = root / "generated"
    generator = SmithGenerator(
        out,
        cache=root / "cache",
        data_dir=root / "home",
        options=GenerateOptions(**options),
    )
    (report,) = await generator.generate([package])
    assert report.kept == len(discover_tasks([out])) and report.tried >= report.kept
    return out


@pytest.fixture
async def shapes_tasks(outside: Path) -> Path:
    return await _generate(outside, _sdist(outside / "cache"), per_package=4, combined=1)


async def test_each_kept_mutation_breaks_tests_that_passed_and_leaves_others_passing(
    shapes_tasks: Path,
):
    folders = discover_tasks([shapes_tasks])
    assert len(folders) == 5
    all_tests = set()
    for folder in folders:
        task = load_task(folder)
        assert task.warnings == [] and task.swebench is not None
        spec = task.swebench
        assert spec.fail_to_pass and spec.pass_to_pass
        assert not set(spec.fail_to_pass) & set(spec.pass_to_pass)
        all_tests |= set(spec.fail_to_pass) | set(spec.pass_to_pass)
        # Ids as pytest names them from /app, parametrized cases included.
        assert all(
            t.startswith(("tests/test_geometry.py::", "tests/test_units.py::"))
            for t in spec.fail_to_pass
        )
        # The broken files differ from the originals the oracle restores, and only they do.
        for original in (folder / "solution" / "files").rglob("*.py"):
            relative = original.relative_to(folder / "solution" / "files")
            assert (folder / "environment" / "app" / relative).read_text() != original.read_text()
        # Terse, from the failing test, never naming where the bug is.
        for name in ("geometry.py", "units.py", "shapes.geometry", "shapes.units"):
            assert name not in task.instruction
        assert "fails" in task.instruction and "```" in task.instruction
    assert "tests/test_geometry.py::test_perimeter[sides0-6]" in all_tests


async def test_a_combined_task_holds_bugs_that_each_break_a_test(shapes_tasks: Path):
    combined = [
        load_task(folder)
        for folder in discover_tasks([shapes_tasks])
        if len(load_task(folder).config.metadata.model_extra["mutations"]) > 1
    ]
    (task,) = combined
    assert task.config.metadata.difficulty in ("medium", "hard")
    extra = task.config.metadata.model_extra
    assert extra["lines_changed"] >= 2 and extra["tests_failing"] == len(task.swebench.fail_to_pass)


async def test_every_generated_task_passes_its_oracle_check(outside: Path, shapes_tasks: Path):
    run = await run_bench(outside, discover_tasks([shapes_tasks]), mode="oracle")
    invalid = [c for c in oracle_checks(run.results) if not c.valid]
    assert not invalid, [(c.task, c.problem) for c in invalid]
    assert distribution(shapes_tasks)["tasks"] == 5


async def test_an_agent_that_edits_the_tests_or_plants_a_sitecustomize_still_fails(
    outside: Path, shapes_tasks: Path
):
    folder = discover_tasks([shapes_tasks])[0]
    spec = load_task(folder).swebench
    assert spec is not None
    test_file = spec.fail_to_pass[0].split("::")[0]
    plays = {
        "Something broke in shapes": [
            (
                "write_file",
                {
                    "path": test_file,
                    "content": "def test_nothing():\n    pass\n",
                    "overwrite": True,
                },
            ),
            (
                "write_file",
                {
                    "path": "sitecustomize.py",
                    "content": "import sys\nsys.exit(0)\n",
                },
            ),
        ]
    }
    (result,) = (await run_bench(outside, [folder], plays)).results
    assert result.reward == 0.0 and result.reward_source == "swebench"
    assert test_file in result.restored and "sitecustomize.py" in result.restored


async def test_a_tampered_sdist_is_refused_and_removed(outside: Path):
    package = _sdist(outside / "cache")
    tarball = outside / "cache" / package.sdist
    tarball.write_bytes(tarball.read_bytes() + b"\0")
    with pytest.raises(TrainingError, match="not the pinned"):
        fetch_sdist(package, outside / "cache")
    assert not tarball.exists()


async def test_a_package_whose_source_is_missing_is_a_clear_error(outside: Path):
    package = _sdist(outside / "cache")
    moved = SourcePackage(
        package.name, package.version, package.sha256, "MIT", "nowhere", ("tests",)
    )
    with pytest.raises(TrainingError, match="no Python source at nowhere"):
        await _generate(outside, moved, per_package=1, combined=0)


@pytest.mark.timeout(600)
async def test_a_real_pypi_sdist_gives_oracle_valid_tasks(outside: Path):
    """inflection, pinned, downloaded by pip as `bench generate` does."""
    out = await _generate(outside, package_named("inflection"), per_package=2, combined=0)
    folders = discover_tasks([out])
    assert len(folders) == 2
    config = json.loads((folders[0] / "tests" / "config.json").read_text())
    assert config["repo"] == "jpvanhal/inflection" and config["log_parser"] == "parse_log_pytest"
    run = await run_bench(outside, folders, mode="oracle")
    assert all(check.valid for check in oracle_checks(run.results))


async def test_a_folder_of_the_users_is_never_cleared(outside: Path):
    mine = outside / "generated"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me\n")
    with pytest.raises(TrainingError, match="holds no generated suite"):
        await _generate(outside, _sdist(outside / "cache"), per_package=1, combined=0)
    assert (mine / "notes.txt").read_text() == "keep me\n"


async def test_without_protected_paths_test_sh_still_removes_a_planted_fix(
    outside: Path, shapes_tasks: Path
):
    """As under Harbor, which ignores protected_paths: a test module planted beside the tests
    that loads the original code at collection would pass every FAIL_TO_PASS test; test.sh
    itself removes it (and puts the edited tests back)."""
    source = discover_tasks([shapes_tasks])[0]
    folder = outside / "harbor" / source.name
    shutil.copytree(source, folder)
    toml = folder / "task.toml"
    toml.write_text(re.sub(r"(?m)^protected_paths = .*\n", "", toml.read_text()))
    assert load_task(folder).config.verifier.protected_paths == []
    fixes = []
    for original in sorted((folder / "solution" / "files").rglob("*.py")):
        relative = original.relative_to(folder / "solution" / "files")
        module = ".".join(relative.with_suffix("").parts)
        fixes.append(f"import {module} as m\nexec({original.read_text()!r}, m.__dict__)\n")
    plays = {
        "Something broke in shapes": [
            ("write_file", {"path": "tests/test_000_fix.py", "content": "".join(fixes)}),
        ]
    }
    (result,) = (await run_bench(outside, [folder], plays)).results
    assert result.restored == [] and result.reward == 0.0
    log = next((outside / "run" / folder.name).rglob("test-output.log")).read_text()
    assert "test_000_fix" not in log
