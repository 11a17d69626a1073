"""build_corpus over real folders and git repositories."""

import json
import subprocess
from pathlib import Path

import pytest
from support.corpus_repos import GPL, MIT, git_repo

from opencomposer.training.corpus import Budget, build_corpus, iter_corpus, split_of
from opencomposer.training.corpus_sources import Source, resolve_source
from opencomposer.training.errors import TrainingError


def records(out: Path) -> list[dict[str, str]]:
    return [r for split in ("train", "val") for r in iter_corpus(out, split)]


def test_licences_ignores_and_file_kinds(tmp_path: Path, code_texts: list[str]):
    a, b, c, d, e = code_texts[:5]
    repo = git_repo(
        tmp_path / "repo",
        {
            "LICENSE": MIT,
            ".gitignore": "build/\n",
            "src/kept.py": a,
            "src/crlf.py": b.replace("\n", "\r\n"),
            "build/ignored.py": c,
            "gpl/COPYING": GPL,
            "gpl/left_out.py": d,
            "gpl/spdx.py": "# SPDX-License-Identifier: BSD-3-Clause\n" + e,
            "data.bin": b"\x00\x01\x02binary",
            "blob.py": b"\x00\x01 not text",
            "latin1.py": "caf\xe9 = 1\n".encode("latin-1"),
            "notes.xyz": "not a known type\n",
        },
    )
    bare = tmp_path / "bare"  # a folder with no licence at all
    bare.mkdir()
    (bare / "x.py").write_text(code_texts[5])
    manifest = build_corpus(
        [resolve_source(str(repo), tmp_path / "clones"), Source("bare", bare, None)],
        tmp_path / "out",
        val_fraction=0,
    )
    kept = {r["path"]: r for r in records(tmp_path / "out")}
    assert sorted(kept) == ["gpl/spdx.py", "src/crlf.py", "src/kept.py"]
    assert kept["src/crlf.py"]["text"] == b  # CRLF normalised
    assert kept["src/kept.py"]["license"] == "MIT"
    assert kept["gpl/spdx.py"]["license"] == "BSD-3-Clause"
    assert {r["language"] for r in kept.values()} == {"python"}
    assert manifest["skipped"] == {
        "binary": 1,
        "license_not_permissive": 1,
        "license_unknown": 1,
        "not_utf8": 1,
        "unsupported_type": 5,  # .gitignore, LICENSE, COPYING, data.bin, notes.xyz
    }
    assert manifest["seen"] == 12 and manifest["kept"] == 3
    assert manifest["licenses"] == {"BSD-3-Clause": 1, "MIT": 2}
    assert json.loads((tmp_path / "out" / "manifest.json").read_text()) == manifest


def test_git_url_is_cloned(tmp_path: Path, code_texts: list[str]):
    origin = git_repo(tmp_path / "origin", {"LICENSE": MIT, "a.py": code_texts[0]})
    source = resolve_source(f"file://{origin}", tmp_path / "clones")
    assert (source.root / ".git").is_dir() and source.root.parent == tmp_path / "clones"
    head = subprocess.run(
        ["git", "-C", str(source.root), "rev-list", "--count", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert head.stdout.strip() == "1"
    build_corpus([source], tmp_path / "out", val_fraction=0)
    assert [r["text"] for r in records(tmp_path / "out")] == [code_texts[0]]
    with pytest.raises(TrainingError, match="git clone failed"):
        resolve_source(str(tmp_path / "nowhere.git"), tmp_path / "clones")


def test_exact_and_near_duplicates_removed(tmp_path: Path, code_texts: list[str]):
    text = code_texts[0]
    lines = text.splitlines(keepends=True)
    near = "".join(lines[:-3]) + "# a changed last line\n"  # Jaccard well above 0.85
    files: dict[str, str | bytes] = {"LICENSE": MIT, "a.py": text, "b.py": near}
    files |= {"copy/a.py": text, "other.py": code_texts[1]}
    repo = git_repo(tmp_path / "repo", files)
    manifest = build_corpus([Source("r", repo, None)], tmp_path / "out", val_fraction=0)
    assert sorted(r["path"] for r in records(tmp_path / "out")) == ["a.py", "other.py"]
    assert manifest["skipped"]["exact_duplicate"] == 1
    assert manifest["skipped"]["near_duplicate"] == 1


def test_split_is_by_repository(tmp_path: Path, code_repos: list[Path]):
    sources = [Source(f"local:{p.name}", p, None) for p in code_repos]
    build_corpus(sources, tmp_path / "out", val_fraction=0.3)
    by_split = {
        split: {r["repo"] for r in iter_corpus(tmp_path / "out", split)}
        for split in ("train", "val")
    }
    expected = {s.repo: split_of(s.repo, 0.3) for s in sources}
    assert by_split == {
        split: {repo for repo, s in expected.items() if s == split} for split in ("train", "val")
    }
    assert by_split["train"] and by_split["val"]  # this fraction gives both for these ids


def test_budgets(tmp_path: Path, code_repos: list[Path]):
    sources = [Source(f"local:{p.name}", p, None) for p in code_repos]
    manifest = build_corpus(
        sources,
        tmp_path / "out",
        budget=Budget(max_files=20, max_repo_bytes=1),
    )
    # One file per repository (the first reaches the 1-byte cap), 8 in all.
    assert manifest["kept"] == 8
    assert manifest["skipped"]["repository_budget"] == 8 * 14
    assert build_corpus(sources, tmp_path / "few", budget=Budget(max_files=5))["kept"] == 5


def test_interrupted_run_resumes_to_the_same_output(
    tmp_path: Path, code_repos: list[Path], monkeypatch: pytest.MonkeyPatch
):
    import opencomposer.training.corpus as corpus

    sources = [Source(f"local:{p.name}", p, None) for p in code_repos]
    full = build_corpus(sources, tmp_path / "full", val_fraction=0.3)

    monkeypatch.setattr(corpus, "SHARD_BYTES", 1)  # commit after every source
    calls = 0

    def killed(repo: str, seen: int) -> None:
        nonlocal calls
        calls += 1
        # 16 files a repository (LICENSE first): the third Python file of the fourth one.
        if calls == 52:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_corpus(sources, tmp_path / "resumed", val_fraction=0.3, progress=killed)
    state = json.loads((tmp_path / "resumed" / "corpus" / "state.json").read_text())
    assert len(state["finished"]) == 3
    assert not (tmp_path / "resumed" / "manifest.json").exists()
    leftovers = list((tmp_path / "resumed" / "corpus").rglob("*.tmp"))
    assert leftovers  # the shard being written when it died
    resumed = build_corpus(sources, tmp_path / "resumed", val_fraction=0.3)
    assert not list((tmp_path / "resumed" / "corpus").rglob("*.tmp"))
    assert records(tmp_path / "resumed") == records(tmp_path / "full")
    with pytest.raises(TrainingError, match=r"split with --val-fraction 0\.3"):
        build_corpus(sources, tmp_path / "resumed", val_fraction=0.1)
    drop = ("shards",)
    assert {k: v for k, v in resumed.items() if k not in drop} == {
        k: v for k, v in full.items() if k not in drop
    }


def test_empty_corpus_is_an_error(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README").write_text("nothing here\n")
    with pytest.raises(TrainingError, match="the corpus is empty"):
        build_corpus([Source("e", empty, None)], tmp_path / "out")
    with pytest.raises(TrainingError, match="no corpus"):
        list(iter_corpus(tmp_path / "nothing", "train"))
