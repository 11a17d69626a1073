"""One corpus file read as training text: its language from the extension, and why it is
left out when it is (binary, not UTF-8, too large, a type that is not code or docs).

Text is normalised before it is hashed or kept: CRLF and lone CR become LF and a UTF-8 BOM
is dropped, so the same file checked out on Windows and on Linux is one document.
"""

from pathlib import Path

LANGUAGES = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".java": "java",
    ".kt": "kotlin",
    ".sh": "shell",
    ".bash": "shell",
    ".md": "markdown",
    ".rst": "restructuredtext",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".html": "html",
    ".css": "css",
    ".sql": "sql",
    ".lua": "lua",
    ".rb": "ruby",
    ".pyx": "cython",
    ".cu": "cuda",
}
_NAMES = {"Makefile": "make", "Dockerfile": "dockerfile", "CMakeLists.txt": "cmake"}
_SNIFF = 8192


def language_of(path: Path) -> str | None:
    return _NAMES.get(path.name) or LANGUAGES.get(path.suffix.lower())


def normalise(text: str) -> str:
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def read_text(path: Path, max_bytes: int) -> tuple[str | None, str, int]:
    """(text or None, skip reason or "", size in bytes) of one file."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            return None, "too_large", size
        data = path.read_bytes()
    except OSError:
        return None, "unreadable", 0
    if b"\0" in data[:_SNIFF]:
        return None, "binary", len(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not_utf8", len(data)
    text = normalise(text)
    if not text.strip():
        return None, "empty", len(data)
    return text, "", len(data)
