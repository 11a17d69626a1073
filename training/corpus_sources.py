"""Where corpus files come from: local folders, git repositories, and by default the machine's
own Python code (the standard library and each distribution installed in this venv).

A source is one repository: the unit of licence fallback, of the held-out split and of
resumption. Files are listed by ripgrep (`rg --files`, the binary the agent's search tools
run), so .gitignore and .ignore rules apply inside and outside git checkouts; a distribution is
listed from its top-level folders and kept to the files its RECORD names, so two distributions
sharing a namespace package do not claim each other's files.
"""

import csv
import hashlib
import re
import shutil
import subprocess
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from opencomposer.paths import find_program
from opencomposer.training.errors import TrainingError
from opencomposer.training.licenses import license_from_metadata

STDLIB_LICENSE = "PSF-2.0"
_RG_ARGS = ["--files", "--hidden", "--no-require-git", "--glob", "!.git", "--sort", "path"]
_STDLIB_EXCLUDE = ["--glob", "!site-packages", "--glob", "!dist-packages", "--glob", "!config-*"]


@dataclass(frozen=True)
class Source:
    repo: str
    """Stable id: the split hash and the resume record use it."""

    root: Path
    license: str | None
    """The licence of files with no SPDX header and no licence file nearer than the root."""

    walk_licenses: bool = True
    """Look for LICENSE/COPYING files between a file and the root (not for the stdlib, whose
    one licence file also describes the history of GPL compatibility)."""

    roots: tuple[str, ...] = (".",)
    """Folders (or single files) under `root` to list."""

    record: frozenset[str] | None = None
    """The only relative paths this source owns (a distribution's RECORD), when not all."""

    exclude: tuple[str, ...] = ()
    """Extra ripgrep arguments (globs that leave folders out)."""


def list_files(source: Source) -> Iterator[Path]:
    """The source's files, gitignore-aware, sorted by path."""
    rg = find_program("rg")
    if rg is None:
        raise TrainingError("ripgrep (rg) is not installed: install the `ripgrep` wheel")
    roots = [r for r in source.roots if (source.root / r).exists()]
    if not roots:
        return
    done = subprocess.run(
        [str(rg), *_RG_ARGS, *source.exclude, "--", *roots],
        cwd=source.root,
        capture_output=True,
        check=False,
    )
    # 1: no file at all; 2 with output: some paths unreadable, the rest listed.
    if done.returncode not in (0, 1) and not (done.returncode == 2 and done.stdout):
        raise TrainingError(
            f"ripgrep could not list {source.root}: {done.stderr.decode(errors='replace')}"
        )
    for line in done.stdout.decode("utf-8", "surrogateescape").splitlines():
        relative = line.removeprefix("./")
        if source.record is None or relative in source.record:
            yield source.root / relative


def default_sources() -> list[Source]:
    """The standard library, then every distribution in site-packages, by name."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    sources = [
        Source(
            "python:stdlib",
            stdlib,
            STDLIB_LICENSE,
            walk_licenses=False,
            exclude=tuple(_STDLIB_EXCLUDE),
        )
    ]
    site = Path(sysconfig.get_paths()["purelib"])
    for dist_info in sorted(site.glob("*.dist-info")):
        if source := distribution_source(site, dist_info):
            sources.append(source)
    return sources


def distribution_source(site: Path, dist_info: Path) -> Source | None:
    """One installed distribution as a source, or None when it records no files of its own."""
    record_file = dist_info / "RECORD"
    if not record_file.is_file():
        return None
    with record_file.open(newline="", encoding="utf-8", errors="replace") as handle:
        paths = [row[0] for row in csv.reader(handle) if row]
    owned = frozenset(p for p in paths if not p.startswith("..") and ".dist-info/" not in p)
    roots = tuple(sorted({p.split("/", 1)[0] for p in owned}))
    if not roots:
        return None
    name = re.sub(r"-[^-]*$", "", dist_info.name.removesuffix(".dist-info")).lower()
    return Source(f"pypi:{name}", site, license_from_metadata(dist_info), roots=roots, record=owned)


def resolve_source(spec: str, clone_into: Path) -> Source:
    """A folder (a git checkout or not) as it is, or anything else `git clone` takes, cloned
    shallowly under `clone_into` (reused when a previous run cloned it)."""
    path = Path(spec).expanduser()
    if path.is_dir() and not (path.name.endswith(".git") and (path / "HEAD").is_file()):
        return Source(f"local:{path.resolve().name}", path.resolve(), None)
    name = re.sub(r"\.git$", "", spec.rstrip("/").rsplit("/", 1)[-1]) or "repo"
    digest = hashlib.sha256(spec.encode()).hexdigest()[:8]
    target = clone_into / f"{name}-{digest}"
    if not (target / ".git").is_dir():
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        cloned = subprocess.run(
            ["git", "clone", "--quiet", "--depth", "1", "--", spec, str(partial)],
            capture_output=True,
            text=True,
            check=False,
        )
        if cloned.returncode != 0:
            raise TrainingError(
                f"cannot use source {spec!r}: not a folder, and git clone failed: "
                f"{cloned.stderr.strip().splitlines()[-1] if cloned.stderr.strip() else ''}"
            )
        partial.rename(target)
    return Source(f"git:{spec}", target, None)
