"""Which licence a file is under, and whether the corpus may keep it.

A file's licence is, in order: an `SPDX-License-Identifier` line near its top, else the nearest
LICENSE/COPYING file up the tree (never above its repository's root), else what its
distribution's metadata declares. Licence texts are recognised by phrases every copy of that
licence carries; anything not recognised is `None` (unknown), and the corpus keeps only files
whose licence is on the permissive allow-list, so unknown means left out.
"""

import re
from email.parser import HeaderParser
from pathlib import Path

PERMISSIVE = frozenset(
    {
        "MIT",
        "MIT-0",
        "BSD",
        "BSD-2-Clause",
        "BSD-3-Clause",
        "Apache-2.0",
        "PSF-2.0",
        "Python-2.0",
        "ISC",
        "Unlicense",
        "0BSD",
        "Zlib",
        "CC0-1.0",
        "BSL-1.0",
        "HPND",
    }
)
"""SPDX ids whose terms let code be trained on and reproduced with attribution at most.
`BSD` is not an SPDX id: metadata that says only "BSD License" does not say which clauses."""

_SPDX_HEADER = re.compile(r"SPDX-License-Identifier:\s*([^\s*#/][^\n*]*?)\s*(?:\*/|-->)?\s*$", re.M)
_HEADER_CHARS = 2_000

# (SPDX id, phrases that all occur in that licence's text), most specific first: the LGPL and
# AGPL texts mention the GPL, ISC's wording contains 0BSD's.
_TEXTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("AGPL-3.0", ("gnu affero general public license",)),
    ("LGPL-3.0", ("gnu lesser general public license", "version 3")),
    ("LGPL-2.1", ("gnu lesser general public license",)),
    ("LGPL-2.0", ("gnu library general public license",)),
    ("GPL-3.0", ("gnu general public license", "version 3")),
    ("GPL-2.0", ("gnu general public license",)),
    ("MPL-2.0", ("mozilla public license", "2.0")),
    ("Apache-2.0", ("apache license", "version 2.0")),
    ("PSF-2.0", ("python software foundation license",)),
    ("Unlicense", ("free and unencumbered software released into the public domain",)),
    ("CC0-1.0", ("cc0 1.0",)),
    ("BSL-1.0", ("boost software license",)),
    ("MIT", ("permission is hereby granted, free of charge",)),
    ("ISC", ("permission to use, copy, modify, and", "provided that the above copyright")),
    ("0BSD", ("permission to use, copy, modify, and/or distribute this software for any purpose",)),
    ("BSD-3-Clause", ("redistribution and use in source", "neither the name")),
    ("BSD-3-Clause", ("redistribution and use in source", "may be used to endorse")),
    ("BSD-2-Clause", ("redistribution and use in source and binary forms",)),
    ("Zlib", ("altered source versions must be plainly marked",)),
)

# Short names found in `License:` fields and trove classifiers, lower-cased.
_NAMES = {
    "mit": "MIT",
    "mit license": "MIT",
    "bsd": "BSD",
    "bsd license": "BSD",
    "new bsd": "BSD-3-Clause",
    "bsd-2-clause": "BSD-2-Clause",
    "bsd-3-clause": "BSD-3-Clause",
    "3-clause bsd": "BSD-3-Clause",
    "apache 2.0": "Apache-2.0",
    "apache-2.0": "Apache-2.0",
    "apache 2": "Apache-2.0",
    "apache license 2.0": "Apache-2.0",
    "apache software license": "Apache-2.0",
    "apache license, version 2.0": "Apache-2.0",
    "psf": "PSF-2.0",
    "psf-2.0": "PSF-2.0",
    "python software foundation license": "PSF-2.0",
    "isc": "ISC",
    "isc license": "ISC",
    "isc license (iscl)": "ISC",
    "the unlicense (unlicense)": "Unlicense",
    "zlib/libpng license": "Zlib",
    "cc0 1.0 universal (cc0 1.0) public domain dedication": "CC0-1.0",
    "mozilla public license 2.0 (mpl 2.0)": "MPL-2.0",
    "gnu general public license v2 (gplv2)": "GPL-2.0",
    "gnu general public license v3 (gplv3)": "GPL-3.0",
    "gnu general public license (gpl)": "GPL",
    "gnu lesser general public license v3 (lgplv3)": "LGPL-3.0",
    "gnu lesser general public license v2 (lgplv2)": "LGPL-2.0",
    "gnu library or lesser general public license (lgpl)": "LGPL",
    "gnu affero general public license v3": "AGPL-3.0",
}
_PERMISSIVE_IDS = {spdx.lower(): spdx for spdx in PERMISSIVE}
_LICENSE_FILE = re.compile(r"^(licen[cs]e|copying|unlicense)([._-].*)?$", re.I)


def spdx_header(text: str) -> str | None:
    """The expression of an `SPDX-License-Identifier:` line in the file's first lines."""
    found = _SPDX_HEADER.search(text[:_HEADER_CHARS])
    return found.group(1).strip() if found else None


def license_from_text(text: str) -> str | None:
    """The SPDX id of a licence file's text, or None when no known licence's phrases occur."""
    flat = " ".join(text.lower().split())
    for spdx, phrases in _TEXTS:
        if all(phrase in flat for phrase in phrases):
            return spdx
    return None


def license_from_name(name: str) -> str | None:
    """A short licence name (a `License:` field, a classifier's last part) as an SPDX id."""
    key = " ".join(name.strip().lower().split())
    return _NAMES.get(key) or _PERMISSIVE_IDS.get(key)


def is_permissive(expression: str | None) -> bool:
    """Whether an SPDX expression allows training: every AND term permissive, any OR branch."""
    if not expression:
        return False
    cleaned = expression.replace("(", " ").replace(")", " ")
    branches = re.split(r"\s+OR\s+", cleaned)
    return any(
        all(_term(term) in PERMISSIVE for term in re.split(r"\s+AND\s+", branch))
        for branch in branches
    )


def _term(term: str) -> str:
    bare = re.split(r"\s+WITH\s+", term.strip())[0].strip().removesuffix("+")
    return license_from_name(bare) or bare


def is_license_file(name: str) -> bool:
    return bool(_LICENSE_FILE.match(name))


def license_in_folder(folder: Path) -> str | None:
    """The licence of the first recognised LICENSE/COPYING file directly in `folder`; "" when
    there are licence files but none is recognised (unknown, and the search stops here)."""
    try:
        names = sorted(p.name for p in folder.iterdir() if is_license_file(p.name) and p.is_file())
    except OSError:
        return None
    for name in names:
        spdx = license_from_text(_read_text(folder / name))
        if spdx:
            return spdx
    return "" if names else None


def license_from_metadata(dist_info: Path) -> str | None:
    """A distribution's licence from its METADATA: License-Expression, then its licence files,
    then its classifiers, then the free-text License field."""
    metadata = HeaderParser().parsestr(_read_text(dist_info / "METADATA"))
    if expression := metadata.get("License-Expression"):
        return str(expression).strip()
    files = [dist_info / "licenses" / str(f) for f in metadata.get_all("License-File") or []]
    files += [dist_info / str(f) for f in metadata.get_all("License-File") or []]
    for path in files:
        if path.is_file() and (spdx := license_from_text(_read_text(path))):
            return spdx
    classified = [
        license_from_name(str(c).split("::")[-1])
        for c in metadata.get_all("Classifier") or []
        if str(c).startswith("License ::")
    ]
    named = [c for c in classified if c]
    if named:
        # Several classifiers mean a choice of licences.
        return " OR ".join(dict.fromkeys(named))
    field = str(metadata.get("License") or "")
    if field and len(field) < 100:
        return license_from_name(field)
    return license_from_text(field) if field else None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


class LicenseResolver:
    """Finds the nearest LICENSE up the tree for files of one repository, each folder read
    once (a repository of thousands of files has a few dozen folders with licence files).
    `include_root` is False for a distribution, whose root is site-packages: a licence file
    lying there belongs to whichever wheel dropped it."""

    def __init__(
        self, root: Path, fallback: str | None, *, walk: bool = True, include_root: bool = True
    ) -> None:
        self.root = root
        self.fallback = fallback
        self.walk = walk
        self.include_root = include_root
        self._folders: dict[Path, str | None] = {}

    def license_of(self, path: Path, text: str) -> str | None:
        if header := spdx_header(text):
            return header
        folder = path.parent
        while self.walk and (folder == self.root or self.root in folder.parents):
            if folder == self.root and not self.include_root:
                break
            found = self._folder(folder)
            if found is not None:
                return found or self.fallback
            folder = folder.parent
        return self.fallback

    def _folder(self, folder: Path) -> str | None:
        if folder not in self._folders:
            self._folders[folder] = license_in_folder(folder)
        return self._folders[folder]
