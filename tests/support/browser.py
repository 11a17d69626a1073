"""Debian's chromium, driven by Playwright (no browser is downloaded): the module skips where
either is missing, and `REQUIRES_CHROMIUM` marks a test module that needs them."""

import shutil

import pytest

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="the playwright package is not installed (pip install playwright)"
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRES_CHROMIUM = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium)"
    ),
]
