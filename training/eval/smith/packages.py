"""The real projects tasks are made from: small, pure-Python, permissively licensed packages
whose sdists on PyPI ship their own test suites, which run offline in about a second with
pytest alone. Each is pinned by version and sha256, so a generated suite is the same suite on
every machine.
"""

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from opencomposer.training.errors import TrainingError


@dataclass(frozen=True)
class SourcePackage:
    name: str
    version: str
    sha256: str
    license: str
    package: str
    """The import package (or single module, as `six.py`) whose code is mutated, relative to
    the sdist's root."""

    tests: tuple[str, ...]
    """What pytest is given, relative to the sdist's root."""

    import_root: str = "."
    """The folder on PYTHONPATH: `.` or `src`."""

    repo: str = ""
    """Where the project lives (owner/name), recorded as SWE-bench records `repo`."""

    @property
    def sdist(self) -> str:
        return f"{self.name.replace('-', '_')}-{self.version}.tar.gz"

    @property
    def folder(self) -> str:
        return f"{self.name}-{self.version}"


PACKAGES = (
    SourcePackage(
        "cachetools",
        "8.0.2",
        "30ac523adfc118b51d2b2e7bad8a0ddb31370dfe2700c7f10ca224f36ccf81e0",
        "MIT",
        "src/cachetools",
        ("tests",),
        "src",
        "tkem/cachetools",
    ),
    SourcePackage(
        "idna",
        "3.10",
        "12f65c9b470abda6dc35cf8e63cc574b1c52b11df2c86030af0ac09b01b13ea9",
        "BSD-3-Clause",
        "idna",
        ("tests",),
        repo="kjd/idna",
    ),
    SourcePackage(
        "inflection",
        "0.5.1",
        "1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417",
        "MIT",
        "inflection",
        ("test_inflection.py",),
        repo="jpvanhal/inflection",
    ),
    SourcePackage(
        "isodate",
        "0.7.2",
        "4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6",
        "BSD-3-Clause",
        "src/isodate",
        ("tests",),
        "src",
        "gweis/isodate",
    ),
    SourcePackage(
        "parse",
        "1.22.4",
        "706d458feed5a81b02768d3156e8070baf6cee7d150a3a3c0cd43101a875c3b5",
        "MIT",
        "parse",
        ("tests",),
        repo="r1chardj0n3s/parse",
    ),
    SourcePackage(
        "semver",
        "3.1.2",
        "bea193552413194252d33ff26ce0962b76669bd1c6fb17e8e203ac37f072feaf",
        "BSD-3-Clause",
        "src/semver",
        ("tests",),
        "src",
        "python-semver/python-semver",
    ),
    SourcePackage(
        "six",
        "1.17.0",
        "ff70335d468e7eb6ec65b95b99d3a2836546063f63acc5171de367e834932a81",
        "MIT",
        "six.py",
        ("test_six.py",),
        repo="benjaminp/six",
    ),
    SourcePackage(
        "tabulate",
        "0.10.0",
        "e2cfde8f79420f6deeffdeda9aaec3b6bc5abce947655d17ac662b126e48a60d",
        "MIT",
        "tabulate",
        ("test",),
        repo="astanin/python-tabulate",
    ),
    SourcePackage(
        "toolz",
        "1.2.0",
        "9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
        "BSD-3-Clause",
        "toolz",
        ("toolz/tests",),
        repo="pytoolz/toolz",
    ),
    SourcePackage(
        "boltons",
        "26.2.0",
        "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c",
        "BSD-3-Clause",
        "boltons",
        ("tests",),
        repo="mahmoud/boltons",
    ),
    SourcePackage(
        "pyasn1",
        "0.6.5",
        "6b11616a6bcf3a40e635f082bb232fa57b5e0dd7f517bd7ddd69ec3794508a47",
        "BSD-2-Clause",
        "pyasn1",
        ("tests",),
        repo="pyasn1/pyasn1",
    ),
)


def package_named(name: str) -> SourcePackage:
    for package in PACKAGES:
        if package.name == name:
            return package
    known = ", ".join(p.name for p in PACKAGES)
    raise TrainingError(f"no source package {name!r} (known: {known})")


def fetch_sdist(package: SourcePackage, cache: Path) -> Path:
    """The sdist's tarball in `cache`, downloaded by pip from the configured index when it is
    not there yet, and checked against its pinned sha256 either way."""
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / package.sdist
    if not tarball.is_file():
        with tempfile.TemporaryDirectory(dir=cache) as scratch:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    "--no-binary",
                    ":all:",
                    "--dest",
                    scratch,
                    f"{package.name}=={package.version}",
                ],
                capture_output=True,
                text=True,
            )
            downloaded = Path(scratch, package.sdist)
            if done.returncode != 0 or not downloaded.is_file():
                raise TrainingError(
                    f"cannot download the sdist of {package.name} {package.version}: "
                    f"{(done.stderr or done.stdout).strip()[-1000:]}"
                )
            downloaded.replace(tarball)
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    if digest != package.sha256:
        tarball.unlink()
        raise TrainingError(
            f"{package.sdist} has sha256 {digest}, not the pinned {package.sha256}: removed"
        )
    return tarball


def unpack_sdist(tarball: Path, package: SourcePackage, into: Path) -> Path:
    """The sdist's tree at `into` (replaced when present), unpacked with tarfile's `data`
    filter: no absolute paths, links out of the tree, devices or set-uid bits."""
    if into.exists():
        shutil.rmtree(into)
    with tempfile.TemporaryDirectory(dir=into.parent) as scratch:
        with tarfile.open(tarball) as archive:
            archive.extractall(scratch, filter="data")
        root = Path(scratch, package.folder)
        if not root.is_dir():
            roots = [p.name for p in Path(scratch).iterdir()]
            raise TrainingError(f"{tarball.name} holds {roots}, not {package.folder}/")
        root.replace(into)
    return into
