"""Text from models, commands, files and clients, made safe to show in a terminal.

A terminal obeys what it is sent: CSI sequences move the cursor and erase lines, OSC sets the
window title or writes the clipboard (OSC 52), a carriage return or backspaces overwrite what
was shown, and Unicode's bidirectional overrides reorder it (Trojan Source). Printed raw, a
command could make an approval prompt show `ls -la` while `rm -rf ~` is what runs. So every
character that controls rather than prints is shown as a visible escape (`\\x1b`, `\\r`,
`\\u202e`) wherever text we did not write reaches a terminal: the CLI's consoles, its JSON
and the log lines on stderr.
"""

import re

# C0 controls but tab and newline, DEL, the C1 controls (0x9b is a one-byte CSI), and the
# invisible characters that reorder or break lines: bidi marks, embeddings, overrides and
# isolates, and the Unicode line and paragraph separators.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)
_CONTROL_OR_NEWLINE = re.compile(_CONTROL.pattern[:-1] + "\n]")
_NAMED = {"\r": "\\r", "\n": "\\n", "\x1b": "\\x1b", "\b": "\\b"}
# Characters JSON leaves raw (it escapes only C0 controls): C1 and the invisible ones above.
_JSON_RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _visible(match: re.Match[str]) -> str:
    char = match[0]
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: str, *, newlines: bool = True) -> str:
    """`text` with every control character shown as an escape. `newlines=False` shows line
    breaks as `\\n` too, for one-line views where a line break could push what matters out
    of sight (the command an approval prompt asks about)."""
    pattern = _CONTROL if newlines else _CONTROL_OR_NEWLINE
    return pattern.sub(_visible, text) if pattern.search(text) else text


def json_for_terminal(document: str) -> str:
    """A JSON document with the characters JSON leaves raw escaped as `\\u` escapes; they can
    only occur inside strings, so the document means the same."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m[0]):04x}", document)
