"""Default sources: the standard library and each installed distribution as a repository."""

from pathlib import Path

from support.corpus_repos import GPL

from opencomposer.training.corpus import build_corpus, iter_corpus
from opencomposer.training.corpus_sources import default_sources, distribution_source, list_files


def _dist(site: Path, name: str, files: dict[str, str], metadata: str) -> Path:
    dist_info = site / f"{name}-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\n{metadata}")
    for relative, text in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(text)
    record = [*files, f"{dist_info.name}/METADATA", "../../bin/tool"]
    (dist_info / "RECORD").write_text("".join(f"{p},,\n" for p in record))
    return dist_info


def test_distributions_own_only_their_recorded_files(tmp_path: Path, code_texts: list[str]):
    site = tmp_path / "site-packages"
    a = _dist(
        site,
        "alpha",
        {"ns/alpha/core.py": code_texts[0], "alpha_mod.py": code_texts[1]},
        "License-Expression: MIT\n",
    )
    b = _dist(
        site,
        "beta",
        {"ns/beta/core.py": code_texts[2]},
        "Classifier: License :: OSI Approved :: GNU General Public License v3 (GPLv3)\n",
    )
    (site / "LICENSE").write_text(GPL)  # a stray licence a wheel dropped at the top
    alpha, beta = distribution_source(site, a), distribution_source(site, b)
    assert alpha is not None and beta is not None
    assert (alpha.repo, alpha.license, beta.license) == ("pypi:alpha", "MIT", "GPL-3.0")
    assert sorted(p.relative_to(site).as_posix() for p in list_files(alpha)) == [
        "alpha_mod.py",
        "ns/alpha/core.py",
    ]
    manifest = build_corpus([alpha, beta], tmp_path / "out", val_fraction=0)
    kept = sorted(r["path"] for r in iter_corpus(tmp_path / "out", "train"))
    assert kept == ["alpha_mod.py", "ns/alpha/core.py"]  # the stray GPL file is not theirs
    assert manifest["skipped"] == {"license_not_permissive": 1}


def test_default_sources_are_this_python():
    sources = default_sources()
    assert sources[0].repo == "python:stdlib" and sources[0].license == "PSF-2.0"
    by_repo = {s.repo: s for s in sources}
    assert by_repo["pypi:numpy"].license is not None
    files = list(list_files(sources[0]))
    assert any(p.name == "json" or p.parent.name == "json" for p in files)
    assert not any("site-packages" in p.parts for p in files)
