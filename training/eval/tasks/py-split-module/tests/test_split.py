import ast
import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

APP = Path("/app")
PACKAGE = APP / "geokit"

LAYOUT = {
    "points": ["Point", "normalize_lon", "as_point"],
    "units": [
        "KM_PER_MILE",
        "KM_PER_NAUTICAL_MILE",
        "UNITS",
        "convert",
        "km_to_miles",
        "miles_to_km",
    ],
    "distance": [
        "EARTH_RADIUS_KM",
        "haversine",
        "initial_bearing",
        "destination",
        "midpoint",
        "path_length",
    ],
    "bbox": ["BBox", "bbox_of", "overlaps"],
    "parsing": ["ParseError", "parse_dms", "parse_point"],
    "formatting": ["format_dms", "format_point", "format_distance"],
}
PUBLIC = [name for names in LAYOUT.values() for name in names]


def module(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        return importlib.import_module(f"geokit.{name}")


def fresh_core():
    """geokit.core imported anew (its warning is only raised the first time)."""
    import geokit

    sys.modules.pop("geokit.core", None)
    if hasattr(geokit, "core"):
        delattr(geokit, "core")
    return importlib.import_module("geokit.core")


def imports_of(path):
    """Every module an import statement in the file names (relative ones resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = "geokit" if path.parent == PACKAGE else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(filter(None, [package, base]))
            yield base
            for alias in node.names:
                yield f"{base}.{alias.name}"
        elif isinstance(node, ast.Call) and getattr(
            node.func, "attr", getattr(node.func, "id", "")
        ) in (
            "import_module",
            "__import__",
        ):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield arg.value


@pytest.mark.parametrize("section", sorted(LAYOUT))
def test_each_section_has_its_module(section):
    assert (PACKAGE / f"{section}.py").is_file(), f"geokit/{section}.py is missing"
    mod = module(section)
    for name in LAYOUT[section]:
        assert hasattr(mod, name), f"geokit.{section} has no {name}"
        value = getattr(mod, name)
        if callable(value):
            assert value.__module__ == f"geokit.{section}", (
                f"{name} is defined in {value.__module__}"
            )


def test_every_public_name_is_defined_once():
    for section, names in LAYOUT.items():
        for name in names:
            value = getattr(module(section), name)
            for other in LAYOUT:
                if other != section and hasattr(module(other), name) and callable(value):
                    assert getattr(module(other), name) is value, (
                        f"{name} defined again in geokit.{other}"
                    )


def test_core_warns_and_reexports_the_same_objects():
    with pytest.warns(DeprecationWarning):
        core = fresh_core()
    for section, names in LAYOUT.items():
        for name in names:
            assert hasattr(core, name), f"geokit.core lost {name}"
            assert getattr(core, name) is getattr(module(section), name), (
                f"geokit.core.{name} is another object"
            )


def test_core_star_import_still_gives_every_name():
    with pytest.warns(DeprecationWarning):
        fresh_core()
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        exec("from geokit.core import *", namespace)
    assert set(PUBLIC) <= set(namespace)


def test_core_defines_nothing_itself():
    tree = ast.parse((PACKAGE / "core.py").read_text(encoding="utf-8"))
    defined = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    assert not defined, f"geokit/core.py still defines {defined}"
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]


def repo_files():
    found = sorted(PACKAGE.glob("*.py")) + sorted((APP / "tests").rglob("*.py"))
    return [p for p in found if p != PACKAGE / "core.py" and p.name != "conftest.py"]


@pytest.mark.parametrize("path", repo_files(), ids=lambda p: str(p.relative_to(APP)))
def test_nothing_imports_core(path):
    names = set(imports_of(path))
    assert "geokit.core" not in names, f"{path.relative_to(APP)} still imports geokit.core"


def test_the_repo_tests_still_exist_and_use_the_new_modules():
    files = sorted((APP / "tests").glob("test_*.py"))
    assert files, "the repository's tests are gone"
    used = set()
    for path in files:
        used |= set(imports_of(path))
    assert any(
        name.startswith(("geokit.distance", "geokit.parsing", "geokit.formatting")) for name in used
    ), used


def run_python(*args, **kwargs):
    env = {**os.environ, "PYTHONPATH": str(APP), "PYTHONWARNINGS": "error::DeprecationWarning"}
    return subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", *args],
        cwd=APP,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        **kwargs,
    )


def test_import_geokit_does_not_warn_or_load_core():
    done = run_python(
        "-c",
        "import sys, geokit, geokit.cli, geokit.track, geokit.report\n"
        "for name in ('points', 'units', 'distance', 'bbox', 'parsing', 'formatting'):\n"
        "    __import__('geokit.' + name)\n"
        "assert 'geokit.core' not in sys.modules, 'geokit.core was imported'\n"
        "print(geokit.haversine(geokit.Point(0, 0), geokit.Point(0, 1)))",
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == pytest.approx(111.195, abs=0.001)


@pytest.mark.parametrize("section", sorted(LAYOUT))
def test_each_module_imports_on_its_own(section):
    done = run_python("-c", f"import geokit.{section}")
    assert done.returncode == 0, done.stderr


def test_the_cli_does_not_warn():
    done = run_python(
        "-m", "geokit", "distance", "51.5074N 0.1278W", "52.52, 13.405", "--unit", "mi"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "578.85 mi"
    done = run_python("-m", "geokit", "track", "tracks/monday.csv", "--unit", "mi")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == "driven 9.6 mi in 39 legs (longest: leg 33, 0.4 mi)"
    done = run_python("-m", "geokit", "convert", "33 52 7.7 S, 151 12 33.5 E")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["-33.86881, 151.20931", "33°52'07.7\"S 151°12'33.5\"E"]
    done = run_python("-m", "geokit", "bearing", "nowhere", "0, 0")
    assert done.returncode == 2


def test_behaviour_is_unchanged():
    points, units, distance = module("points"), module("units"), module("distance")
    bbox, parsing, formatting = module("bbox"), module("parsing"), module("formatting")
    london, berlin, sydney = (
        points.Point(51.5074, -0.1278),
        points.Point(52.52, 13.405),
        points.Point(-33.8688, 151.2093),
    )
    assert distance.haversine(london, berlin) == pytest.approx(931.5707, abs=1e-3)
    assert distance.initial_bearing(london, berlin) == pytest.approx(77.7578, abs=1e-3)
    assert distance.haversine(london, sydney) == pytest.approx(16993.957, abs=1e-2)
    mid = distance.midpoint(london, berlin)
    assert (mid.lat, mid.lon) == (
        pytest.approx(52.207775, abs=1e-5),
        pytest.approx(6.561672, abs=1e-5),
    )
    east = distance.destination(london, 90, 100)
    assert (east.lat, east.lon) == (
        pytest.approx(51.498526, abs=1e-5),
        pytest.approx(1.316904, abs=1e-5),
    )
    assert distance.path_length([london, berlin, london]) == pytest.approx(2 * 931.5707, abs=1e-3)
    assert distance.path_length([london]) == 0
    assert points.normalize_lon(190) == -170 and points.as_point(
        {"lat": 1, "lon": 2}
    ) == points.Point(1, 2)
    with pytest.raises(ValueError):
        points.Point(91, 0)
    assert units.convert(10, "nmi", "mi") == pytest.approx(11.5078, abs=1e-4)
    assert units.km_to_miles(units.miles_to_km(3)) == pytest.approx(3)
    box = bbox.bbox_of([london, berlin, points.Point(48.8566, 2.3522)])
    assert box == bbox.BBox(48.8566, -0.1278, 52.52, 13.405)
    grown = box.expand(50)
    assert (grown.south, grown.west, grown.north, grown.east) == (
        pytest.approx(48.40694, abs=1e-4),
        pytest.approx(-0.86678, abs=1e-4),
        pytest.approx(52.96966, abs=1e-4),
        pytest.approx(14.14398, abs=1e-4),
    )
    assert bbox.overlaps(box, bbox.BBox(50, 10, 60, 20)) and not bbox.overlaps(
        box, bbox.BBox(0, 0, 1, 1)
    )
    assert parsing.parse_point("51.5N 0.12W") == points.Point(51.5, -0.12)
    assert parsing.parse_dms("0 7 39.9 W") == (pytest.approx(-0.127750, abs=1e-6), "lon")
    with pytest.raises(parsing.ParseError):
        parsing.parse_point("51.5N 0.12N")
    assert issubclass(parsing.ParseError, ValueError)
    assert formatting.format_point(sydney, style="dms") == "33°52'07.7\"S 151°12'33.5\"E"
    assert formatting.format_distance(1234.5, "mi") == "767.1 mi"
    assert formatting.format_distance(0.4321, "m") == "432 m"
    assert formatting.format_dms(-0.1278, "lon") == "0°07'40.1\"W"
