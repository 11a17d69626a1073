from pathlib import Path

from support.corpus_repos import GPL, MIT

from opencomposer.training.licenses import (
    LicenseResolver,
    is_permissive,
    license_from_metadata,
    license_from_text,
    spdx_header,
)


def test_licence_texts_are_recognised():
    assert license_from_text(MIT) == "MIT"
    assert license_from_text(GPL) == "GPL-3.0"
    assert license_from_text("GNU LESSER GENERAL PUBLIC LICENSE Version 3") == "LGPL-3.0"
    assert license_from_text("Apache License\n Version 2.0, January 2004") == "Apache-2.0"
    assert license_from_text("All rights reserved.") is None


def test_spdx_header_in_comment_styles():
    assert spdx_header("# SPDX-License-Identifier: Apache-2.0\nimport os\n") == "Apache-2.0"
    assert spdx_header("/* SPDX-License-Identifier: MIT OR GPL-2.0 */\n") == "MIT OR GPL-2.0"
    assert spdx_header("x = 1\n" * 2000 + "# SPDX-License-Identifier: MIT\n") is None


def test_expressions():
    assert is_permissive("MIT")
    assert is_permissive("MIT OR GPL-3.0")
    assert not is_permissive("MIT AND GPL-3.0")
    assert is_permissive("(Apache-2.0 WITH LLVM-exception) OR MIT")
    assert not is_permissive("GPL-2.0+")
    assert not is_permissive(None)
    assert is_permissive("BSD License")  # a classifier's name, normalised


def test_nearest_licence_file_then_fallback(tmp_path: Path):
    (tmp_path / "vendor" / "gpl").mkdir(parents=True)
    (tmp_path / "LICENSE").write_text(MIT)
    (tmp_path / "vendor" / "gpl" / "COPYING").write_text(GPL)
    resolver = LicenseResolver(tmp_path, "Apache-2.0")
    assert resolver.license_of(tmp_path / "vendor" / "a.py", "x = 1\n") == "MIT"
    assert resolver.license_of(tmp_path / "vendor" / "gpl" / "b.py", "x = 1\n") == "GPL-3.0"
    header = "# SPDX-License-Identifier: BSD-3-Clause\n"
    assert resolver.license_of(tmp_path / "vendor" / "gpl" / "c.py", header) == "BSD-3-Clause"
    bare = LicenseResolver(tmp_path / "vendor", "Apache-2.0", include_root=False)
    assert bare.license_of(tmp_path / "vendor" / "a.py", "") == "Apache-2.0"


def test_distribution_metadata(tmp_path: Path):
    dist = tmp_path / "a-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.4\nName: a\nLicense-Expression: MIT\n")
    assert license_from_metadata(dist) == "MIT"
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: a\n"
        "Classifier: License :: OSI Approved :: Apache Software License\n"
        "Classifier: License :: OSI Approved :: MIT License\n"
    )
    assert license_from_metadata(dist) == "Apache-2.0 OR MIT"
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: a\nLicense-File: COPYING\n")
    (dist / "COPYING").write_text(GPL)
    assert license_from_metadata(dist) == "GPL-3.0"
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: a\nLicense: UNKNOWN\n")
    assert license_from_metadata(dist) is None
