"""Secret redaction for everything that leaves the process: events, tool output, traces, logs.

Two nets: exact values the process knows are secret (API keys from the config, credentials
dropped from the environment, the values of a workspace's `.env` files), and the shapes of
well-known credentials that might appear anywhere (keys printed by a command, a token pasted
in a prompt). A runtime holds one `Redactor` with its own secrets and gives each thread a
`child()` that adds that thread's workspace secrets, so one workspace's `.env` never masks
another's text. A known value is recognised wrapped too: with line breaks, indentation or
their JSON escapes between any two of its characters (`fold`, `base64 -w`, CRLF, a YAML
block), since that is how terminals, tools and stored payloads cut long values.
`StreamRedactor` masks text that arrives in pieces (model deltas, command output) without ever
letting a secret out split across two of them, however long the pauses between them.
"""

import bisect
import functools
import itertools
import json
import re
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MASK = "[REDACTED]"

# Values shorter than this (not counting whitespace) are too likely to occur by accident to
# be masked everywhere.
MIN_SECRET_LENGTH = 8

# A wrapped secret: a gap, a run of whitespace at most MAX_GAP long, may stand between any
# two of a known value's characters ("\r\n" and 30 columns of indentation; `fold` and
# `base64 -w` insert one character). A longer run separates. A loose gap may also hold the
# escapes JSON writes for whitespace (`\n` in a stored payload, `\\n` in JSON within JSON)
# and a diff's `+` or `-` after a line break (a diff of a file holding a wrapped secret); a
# text is read both ways, since a loose gap could swallow a secret's own character (`-` at
# the start of a line). The lookarounds make each pattern match whole runs only, so that
# `sub` leaves a text's view in one pass of C.
MAX_GAP = 32
# Backslashes an escaped line break may have: JSON within JSON within JSON writes 7, and a
# bound keeps what a stream holds for one bounded (a text may end in a thousand of them).
_MAX_ESCAPE = 8
_GAPS = re.compile(rf"(?<![ \t\r\n])[ \t\r\n]{{1,{MAX_GAP}}}(?![ \t\r\n])")
_LOOSE_UNIT = rf"(?:[ \t\r\n]|\\{{1,{_MAX_ESCAPE}}}[nrt]|(?<=\n)[+-]|(?<=\\n)[+-])"
_LOOSE_GAPS = re.compile(
    rf"(?<![ \t\r\n\\])(?<!\\[nrt]){_LOOSE_UNIT}{{1,{MAX_GAP}}}(?!{_LOOSE_UNIT})"
)
# Deleted from a text and from every secret alike, these leave each occurrence of a secret,
# however wrapped, whole (the letters of the escapes go too): one pass of `bytes.translate`
# and a substring search per secret tell that a text holds none, which nearly every text
# does.
_UNWRAPPED = b" \t\r\n\\nrt+-"
# Below this many bytes one regex over all secrets tells faster than a search per secret
# (a line of output: 10 us against 43 with 22 secrets; 64 kB: 7.7 ms against 1.1).
_SHORT_TEXT = 1024

# A line that ends in a known secret's first character or two is released, not held for the
# rest of the secret to follow after the line break, and the rest is masked where it does
# follow: held, such a line waited (one in 30 with two secrets known, a line ending in a
# letter) until the command printed again, so a server's "started" never showed. The cost is
# those two characters, and only of a secret wrapped exactly there.
RELEASED_PREFIX = 2

# Longest text a private-key block may span between its header and its END line (an
# RSA-16384 key is 12.7 kB in PEM; RSA-4096, the largest in common use, 3.2 kB; an armored
# PGP secret key with its subkeys, about 7 kB).
PEM_SPAN = 32_768
# Longest match of any other shape: every quantifier below is bounded, so a piece of streamed
# text can be judged safe once this much has followed it (the largest is a JWT's three parts).
MAX_SHAPE = 3 * 1024 + 16

# RSA, EC, DSA, OPENSSH, ENCRYPTED, SSH2 ENCRYPTED, PGP ... BLOCK: every armored private key.
_PEM_HEAD = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")


@dataclass(frozen=True)
class _Shape:
    literals: tuple[str, ...]
    """Text the shape cannot occur without: the regex runs only when one is present, which
    keeps redaction of clean text (nearly all of it) at the speed of a substring search
    instead of a dozen regex scans (measured on Python source: 7 MB/s -> 70 MB/s)."""

    pattern: re.Pattern[str]
    replace: str | Callable[[re.Match[str]], str] = MASK
    any_case: bool = False
    """The literals may appear in any letter case."""

    def present(self, text: str) -> bool:
        if self.any_case:
            text = text.lower()
        return any(literal in text for literal in self.literals)

    def mask(self, text: str) -> str:
        return self.pattern.sub(self.replace, text) if self.present(text) else text


def _keep_first_group(match: re.Match[str]) -> str:
    return match.group(1) + MASK


# Shapes made only of _RUN characters: a match never spans a space or punctuation.
_RUN_SHAPES = [
    _Shape(("sk-",), re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,512}")),  # OpenAI etc.
    _Shape(
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,255}")
    ),  # GitHub
    _Shape(("github_pat_",), re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,255}")),
    _Shape(("glpat-",), re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,64}")),  # GitLab
    _Shape(("hf_",), re.compile(r"\bhf_[A-Za-z0-9]{30,255}")),  # Hugging Face
    _Shape(("xox",), re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,255}")),  # Slack
    _Shape(("npm_",), re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),  # npm
    _Shape(
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
        re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,255}"),
    ),  # Stripe
    _Shape(("AKIA", "ASIA"), re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),  # AWS key ids
    _Shape(("AIza",), re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),  # Google API keys
    _Shape(
        ("eyJ",),
        re.compile(  # JSON Web Tokens: header.payload.signature
            r"\beyJ[A-Za-z0-9_\-]{10,1024}\.eyJ[A-Za-z0-9_\-]{10,1024}\.[A-Za-z0-9_\-]{10,1024}"
        ),
    ),
]
# A private key: through its END line, or (cut short, e.g. by an output cap) as far as its
# body goes: base64, its headers (`Proc-Type: 4,ENCRYPTED`, `Version: GnuPG v2.0.22`), line
# breaks as written or as JSON escapes them, and masks already made inside it.
_PRIVATE_KEY = _Shape(
    ("PRIVATE KEY",),
    re.compile(
        _PEM_HEAD.pattern + rf"(?:[\s\S]{{0,{PEM_SPAN}}}?{_PEM_END.pattern}"
        rf"|[A-Za-z0-9+/=\s:,.\\\[\]\-]{{0,{PEM_SPAN}}})"
    ),
)
# The password in a URL (`postgres://user:password@host`); the user name stays.
_URL_PASSWORD = _Shape(
    ("://",), re.compile(r"(://[^\s:/@]{1,256}:)[^\s/@]{1,256}(?=@)"), _keep_first_group
)
_BEARER = _Shape(
    ("bearer",),
    re.compile(r"(?i)\b(bearer\s{1,16})[A-Za-z0-9._~+/\-]{8,2048}={0,2}"),
    _keep_first_group,
    any_case=True,
)
_SHAPES = [*_RUN_SHAPES, _PRIVATE_KEY, _URL_PASSWORD, _BEARER]

# A key folded or wrapped at any width (`fold -w 20 key.pem` cuts its header in two), or so
# written in JSON: the same shape read in a view of the text without its loose gaps, where a
# line's first `-` may have gone as a diff's marker would.
_FOLDED_HEAD = re.compile(r"-{4,5}BEGIN[A-Z0-9]{0,40}PRIVATEKEY(?:BLOCK)?-{4,5}")
_FOLDED_END = re.compile(r"-{4,5}END[A-Z0-9]{0,40}PRIVATEKEY(?:BLOCK)?-{4,5}")
_FOLDED_KEY = re.compile(
    _FOLDED_HEAD.pattern + rf"(?:[\s\S]{{0,{PEM_SPAN}}}?{_FOLDED_END.pattern}"
    rf"|[A-Za-z0-9+/=:,.\\\[\]\-]{{0,{PEM_SPAN}}})"
)
# A header as `_unwrapped` leaves it (its dashes gone).
_UNWRAPPED_HEAD = re.compile(rb"BEGIN[A-Z0-9]{0,40}PRIVATEKEY")
_PENDING_FOLDED_HEAD = re.compile(
    r"-{1,5}(?:B(?:E(?:G(?:I(?:N(?:[A-Z0-9]{0,58}-{0,5})?)?)?)?)?)?\Z"
)


def _escape_may_follow(text: str) -> int:
    """Where the backslashes that end `text` begin (an escape may follow them: judged once
    it is whole), or len(text)."""
    stripped = text[-_MAX_ESCAPE:].rstrip("\\")
    return len(text) - (min(len(text), _MAX_ESCAPE) - len(stripped))


def _folded_view(text: str, start: int) -> "_View | None":
    """text[start:] read through loose gaps, where a key's header may be in it (passes of C
    tell that none is, nearly always, before a view is made in Python)."""
    unwrapped = _unwrapped(text)  # all of it: the stream's mask asks for the same text next
    if b"PRIVATEKEY" not in unwrapped or not _UNWRAPPED_HEAD.search(unwrapped):
        return None
    return _View(text[start:], _LOOSE_GAPS, start)


def _folded_keys(text: str, start: int = 0) -> list[tuple[int, int]]:
    """Spans of the keys in text[start:] read through loose gaps."""
    view = _folded_view(text, start)
    if view is None:
        return []
    spans = [view.span(*match.span()) for match in _FOLDED_KEY.finditer(view.text)]
    return [(_folded_head_start(text, begin), end) for begin, end in spans]


def _folded_head_start(text: str, begin: int) -> int:
    """Where a header found in a loose view begins in `text`: a `-` just before it, after a
    line break, is its first (the view read it as a diff's marker)."""
    if begin > 0 and text[begin - 1] == "-" and text[: begin - 1].endswith(("\n", "\\n")):
        return begin - 1
    return begin


def _mask_private_keys(text: str) -> str:
    return _masked(_PRIVATE_KEY.mask(text), _folded_keys)


def _masked(text: str, find: Callable[[str], Iterable[tuple[int, int]]]) -> str:
    """`text` with the spans `find` gives masked, overlapping ones as one."""
    merged: list[list[int]] = []
    for start, end in sorted(find(text)):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if not merged:
        return text
    out, at = [], 0
    for start, end in merged:
        out += [text[at:start], MASK]
        at = end
    out.append(text[at:])
    return "".join(out)


@functools.lru_cache(maxsize=8)
def _unwrapped(text: str) -> bytes:
    """`text` without what a wrap may insert (`_UNWRAPPED`); the same text is often asked
    for twice (known values, then folded keys), and a string keeps its hash."""
    return text.encode("utf-8", "surrogatepass").translate(None, _UNWRAPPED)


# No shape matches fewer characters (`://a:b` before an `@`).
_SHORTEST_SHAPE = 7


def mask_shapes(text: str) -> str:
    """The second net alone: credential shapes, in order (a masked one can make the next
    match, as a masked key's `]` gives a `bearer` before it a word boundary)."""
    if len(text) < _SHORTEST_SHAPE:
        return text
    for shape in _SHAPES:
        text = _mask_private_keys(text) if shape is _PRIVATE_KEY else shape.mask(text)
    return text


# Stems of the shapes' literals, fewer than the literals (`gh` for four GitHub prefixes):
# telling that none occurs takes one scan each (measured on 2.7 kB events: every literal,
# 42 µs; these stems, 31 µs).
_STEMS = (
    "://",
    "AIza",
    "AKIA",
    "ASIA",
    "PRIVATE KEY",
    "eyJ",
    "gh",
    "github_pat_",
    "glpat-",
    "hf_",
    "npm_",
    "rk_",
    "sk",
    "xox",
)


def _any_shape(text: str) -> bool:
    """Whether some shape may occur in `text` (none matches without its literal)."""
    for stem in _STEMS:
        if stem in text:
            return any(shape.present(text) for shape in _SHAPES)
    return _BEARER.present(text) or b"PRIVATEKEY" in _unwrapped(text)


def _escaped_forms(secret: str) -> set[str]:
    """How a secret reads inside JSON text (stored payloads, request bodies): a value with a
    quote, a backslash, a newline or non-ASCII letters is written differently there."""
    return {json.dumps(secret, ensure_ascii=ascii_only)[1:-1] for ascii_only in (False, True)}


class Redactor:
    """Masks known secret values and credential-shaped strings in text.

    A child sees its parent's secrets as they are now and later, plus its own; the parent
    never sees the child's.
    """

    def __init__(
        self, secrets: Iterable[str | None] = (), *, parent: "Redactor | None" = None
    ) -> None:
        self._parent = parent
        self._own: set[str] = set()
        self._changes = 0
        self._ordered: tuple[int, tuple[str, ...]] | None = None
        self._index: SecretIndex | None = None
        self._children: weakref.WeakSet[Redactor] = weakref.WeakSet()
        for secret in secrets:
            self.add(secret)

    def child(self, secrets: Iterable[str | None] = ()) -> "Redactor":
        child = Redactor(secrets, parent=self)
        self._children.add(child)
        return child

    def add(self, secret: str | None) -> bool:
        """Mask `secret` from now on; False when it is too short to mask or already known."""
        if (
            not secret
            or secret in self._own
            or len(_GAPS.sub("", secret.strip())) < MIN_SECRET_LENGTH
        ):
            return False
        self._own.update(_escaped_forms(secret) | {secret})
        self._changes += 1
        return True

    @property
    def version(self) -> int:
        """Grows whenever a secret is added here or to an ancestor."""
        return self._changes + (self._parent.version if self._parent is not None else 0)

    def secrets(self) -> tuple[str, ...]:
        """Every secret this redactor masks, longest first, so that a secret containing
        another is masked whole (sorted once per change, not once per call)."""
        version = self.version
        if self._ordered is None or self._ordered[0] != version:
            inherited = self._parent.secrets() if self._parent is not None else ()
            ordered = sorted({*inherited, *self._own}, key=len, reverse=True)
            self._ordered = (version, tuple(ordered))
        return self._ordered[1]

    def index(self) -> "SecretIndex":
        """The secrets arranged for streaming (built once per change)."""
        version = self.version
        if self._index is None or self._index.version != version:
            self._index = SecretIndex(version, self.secrets())
        return self._index

    def redact(self, text: str) -> str:
        return mask_shapes(self.mask_secrets(text))

    def mask_secrets(self, text: str) -> str:
        """The first net alone: known values, wrapped or not (shapes are looked for in what
        it leaves)."""
        if len(text) < MIN_SECRET_LENGTH:
            return text
        return self.index().mask(text)

    def finds(self, text: str) -> bool:
        """Whether `redact` could change `text`: a known secret (wrapped or not) or a shape's
        literal may be in it. Complete for JSON text too (secrets are known in their JSON
        forms, and a JSON-escaped line break is a gap), so a whole payload is checked at once
        and walked only when this says so."""
        return self.index().present(text) or _any_shape(text)

    def redact_everywhere(self, text: str) -> str:
        """`redact` with the secrets of every live descendant too: for what belongs to no
        single thread (the process's log)."""
        text = self.redact(text)
        for child in list(self._children):
            text = child.redact_everywhere(text)
        return text

    def redact_data(self, value: Any) -> Any:
        """`value` with every string in it redacted, dictionary keys too: JSON-like data, or a
        pydantic model (rebuilt from its redacted JSON form; the same object when nothing
        needed masking)."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {self.redact_data(k): self.redact_data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_data(v) for v in value]
        if hasattr(value, "model_dump_json") and hasattr(value, "model_validate"):
            if not self.finds(value.model_dump_json()):
                return value  # nearly every event: one scan of its JSON, no walk
            data = value.model_dump(mode="json")
            masked = self.redact_data(data)
            return value if masked == data else type(value).model_validate(masked)
        return value


# --------------------------------------------------------------------------- streams

# A trailing run of the characters _RUN_SHAPES are made of (and of every word character, so
# that a `\b` at a piece's edge reads as in the whole text).
_RUN = re.compile(r"[\w\-.~+/=]*")  # matched on the reversed text: linear, not quadratic
# The end of a text that may still become a private-key header, a URL password or a bearer
# token once more text arrives.
_PENDING_KEY_HEAD = re.compile(
    r"-(?:-(?:-(?:-(?:-(?:B(?:E(?:G(?:I(?:N(?: [A-Z0-9 ]{0,58}-{0,4})?)?)?)?)?)?)?)?)?)?\Z"
)
_PENDING_URL_PASSWORD = re.compile(r":(?:/(?:/[^\s:/@]{0,256}(?::[^\s/@]{0,256})?)?)?\Z")
_PENDING_BEARER = re.compile(r"(?i)\bbearer\s{0,16}[A-Za-z0-9._~+/\-]*={0,2}\Z")
# How far before a text's end such a match can begin: the longest each can be.
_KEY_HEAD_REACH = 80  # "-----BEGIN ", 58 letters, digits and spaces, 4 dashes
_KEY_BLOCK_REACH = PEM_SPAN + 200  # a header, PEM_SPAN of body, an END line
_URL_PASSWORD_REACH = 520  # "://", a 256-character user, ":", a 256-character password
_BEARER_REACH = 2100  # "bearer", 16 spaces, a 2,048-character token, "=="


class _Stage:
    """One step of a stream's redaction, holding back the tail its matches may still need."""

    def __init__(
        self,
        mask: Callable[[str], str],
        pending: Callable[[str], int],
        matches: Callable[[str, int], Iterable[tuple[int, int]]],
    ) -> None:
        self._mask = mask
        self._pending = pending
        self._matches = matches
        self.held = ""

    def push(self, text: str) -> str:
        if not text:  # nothing new: what is held stays held
            return ""
        text = self.held + text
        cut = self._pending(text)
        # A complete match across the cut goes out whole: cut before it instead (again until
        # nothing crosses, since an earlier cut may fall inside another match).
        while 0 < cut < len(text):
            crossing = [start for start, end in self._matches(text, cut) if start < cut < end]
            if not crossing:
                break
            cut = min(crossing)
        self.held = text[cut:]
        return self._mask(text[:cut]) if cut else ""

    def flush(self, text: str = "") -> str:
        """Everything held, and `text` after it, masked."""
        text, self.held = self.held + text, ""
        return self._mask(text) if text else ""


class _KnownSecrets(_Stage):
    """The known values' stage. A line that ends in a secret's first RELEASED_PREFIX
    characters or fewer goes out, and what follows it is masked up to where it ends the rest
    of that secret, held while it may still grow into it."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__(
            redactor.mask_secrets, self._pending_secret, lambda t, c: redactor.index().matches(t, c)
        )
        self._redactor = redactor
        self._rests: frozenset[str] = frozenset()

    def _pending_secret(self, text: str) -> int:
        cut, self._rests = self._redactor.index().pending(text)
        return cut

    def push(self, text: str) -> str:
        if not text:
            return ""
        lead = ""
        if self._rests:
            text, self.held = self.held + text, ""
            end = self._redactor.index().rest_end(text, self._rests)
            if end is None:
                self.held = text
                return ""
            self._rests = frozenset()
            if end:
                lead, text = MASK, text[end:]
        released = super().push(text) if text else ""
        if self.held:  # the end that began a secret was cut before, and is held
            self._rests = frozenset()
        return lead + released

    def flush(self, text: str = "") -> str:
        self._rests = frozenset()
        return super().flush(text)


def _pattern_matches(*shapes: _Shape) -> Callable[[str, int], Iterable[tuple[int, int]]]:
    def matches(text: str, cut: int) -> Iterable[tuple[int, int]]:
        start = max(0, cut - _KEY_BLOCK_REACH)
        for shape in shapes:
            if shape.present(text):
                yield from (m.span() for m in shape.pattern.finditer(text, start))

    return matches


def _masking(*shapes: _Shape) -> Callable[[str], str]:
    literals = [literal for shape in shapes for literal in shape.literals]

    def mask(text: str) -> str:
        if any(literal in text for literal in literals):
            for shape in shapes:
                text = shape.mask(text)
        return text

    return mask


def _pending_at(pattern: re.Pattern[str], reach: int) -> Callable[[str], int]:
    def pending(text: str) -> int:
        found = pattern.search(text, max(0, len(text) - reach))
        return found.start() if found else len(text)

    return pending


def _pending_run(text: str) -> int:
    tail = text[-MAX_SHAPE:][::-1]
    match = _RUN.match(tail)
    return len(text) - (match.end() if match else 0)


_pending_key_head = _pending_at(_PENDING_KEY_HEAD, _KEY_HEAD_REACH)


def _pending_private_key(text: str) -> int:
    """Where a key's header waiting for its END line begins, or one may be beginning; read
    as written and through loose gaps (a folded key)."""
    start = max(0, len(text) - _KEY_BLOCK_REACH)
    cut = _pending_key_head(text)
    for head in _PEM_HEAD.finditer(text, start):
        if not _PEM_END.search(text, head.end()):
            cut = min(cut, head.start())
            break
    view = _folded_view(text, start)
    if view is not None:
        for head in _FOLDED_HEAD.finditer(view.text):
            if not _FOLDED_END.search(view.text, head.end()):
                cut = min(cut, _folded_head_start(text, view.origin(head.start())))
                break
    last = _TRAILING_GAP.match(text[-4 * MAX_GAP :][::-1])
    if last and text[-4 * MAX_GAP :][::-1][last.end() : last.end() + 1] in _FOLDED_HEAD_CHARS:
        # A header folded as it begins may end the text: its 80 characters, each after a gap
        # of at most MAX_GAP.
        tail_start = max(0, len(text) - _KEY_HEAD_REACH * (MAX_GAP + 1))
        tail = text[tail_start : _escape_may_follow(text)]
        seen = _LOOSE_GAPS.sub("", tail)
        if _PENDING_FOLDED_HEAD.search(seen, max(0, len(seen) - _KEY_HEAD_REACH)):
            view = _View(tail, _LOOSE_GAPS, tail_start)
            partial = _PENDING_FOLDED_HEAD.search(
                view.text, max(0, len(view.text) - _KEY_HEAD_REACH)
            )
            if partial:
                cut = min(cut, _folded_head_start(text, view.origin(partial.start())))
    return cut


_FOLDED_HEAD_CHARS = frozenset("-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
# The loose gaps that end a text, read backwards (an escape reads `n\\`).
_TRAILING_GAP = re.compile(r"(?:[ \t\r\n+]|[nrt]?\\+)*")


def _private_key_matches(text: str, cut: int) -> Iterable[tuple[int, int]]:
    yield from _pattern_matches(_PRIVATE_KEY)(text, cut)
    yield from _folded_keys(text, max(0, cut - _KEY_BLOCK_REACH))


class StreamRedactor:
    """Redacts text that arrives in pieces, such as a model's deltas or a command's output.

    `push` returns what can be sent now, redacted, and holds back the shortest tail that
    could still grow into a secret: the longest suffix that begins a known secret, a trailing
    run of the characters credential shapes are made of, a pending `bearer`, URL password or
    private-key block. `flush` returns the rest. The pieces joined are the redacted whole
    text, so a secret never goes out split in two. The stream runs the nets in the order
    `Redactor.redact` does, one stage each (known values, then the shapes in their order),
    since masking one can make the next match. Only what arrives decides what is released,
    never time: a key printed a line a minute is held whole all the same. What is held back
    is bounded: the longest known secret with a gap of MAX_GAP after each of its characters,
    MAX_SHAPE characters, or a private-key block (PEM_SPAN) waiting for its END line.
    """

    def __init__(self, redactor: Redactor) -> None:
        self._stages = [
            _KnownSecrets(redactor),
            _Stage(_masking(*_RUN_SHAPES), _pending_run, _pattern_matches(*_RUN_SHAPES)),
            _Stage(_mask_private_keys, _pending_private_key, _private_key_matches),
            _Stage(
                _URL_PASSWORD.mask,
                _pending_at(_PENDING_URL_PASSWORD, _URL_PASSWORD_REACH),
                _pattern_matches(_URL_PASSWORD),
            ),
            _Stage(
                _BEARER.mask, _pending_at(_PENDING_BEARER, _BEARER_REACH), _pattern_matches(_BEARER)
            ),
        ]

    def push(self, text: str) -> str:
        for stage in self._stages:
            text = stage.push(text)
        return text

    def flush(self) -> str:
        text = ""
        for stage in self._stages:
            text = stage.flush(text)
        return text

    @property
    def held(self) -> int:
        """Characters held back now."""
        return sum(len(stage.held) for stage in self._stages)


class SourcedStreamRedactor:
    """One stream redaction over text that arrives from several sources in turn (a command's
    stdout and stderr): a secret split between them is judged whole, as a reader who sees
    them interleaved would read it.

    What goes out is cut where its source changes. That is exact while a released text holds
    no mask (it is then what was held, as it arrived); a released text with a mask in it goes
    out with the source whose text released it.
    """

    def __init__(self, redactor: Redactor) -> None:
        self._stream = StreamRedactor(redactor)
        self._unreleased: deque[tuple[str, int]] = deque()
        """(source, characters) of what the stream holds, as it arrived."""

        self._last = ""

    def push(self, source: str, text: str) -> list[tuple[str, str]]:
        if text:
            self._unreleased.append((source, len(text)))
            self._last = source
        return self._sources(self._stream.push(text), source)

    def flush(self) -> list[tuple[str, str]]:
        """Everything held, with its sources."""
        return self._sources(self._stream.flush(), self._last)

    def _sources(self, text: str, source: str) -> list[tuple[str, str]]:
        if not text:
            return []
        if MASK in text:
            held = self._stream.held
            self._unreleased = deque([(source, held)] if held else [])
            return [(source, text)]
        parts: list[tuple[str, str]] = []
        at = 0
        while at < len(text) and self._unreleased:
            origin, count = self._unreleased[0]
            taken = min(count, len(text) - at)
            if parts and parts[-1][0] == origin:
                parts[-1] = (origin, parts[-1][1] + text[at : at + taken])
            else:
                parts.append((origin, text[at : at + taken]))
            at += taken
            if taken == count:
                self._unreleased.popleft()
            else:
                self._unreleased[0] = (origin, count - taken)
        if at < len(text):
            parts.append((source, text[at:]))
        return parts


class _View:
    """A text with its gaps left out, and where each of its characters came from: a wrapped
    secret is whole in it. (`gaps.sub("", text)` is its text alone, made in C.)"""

    def __init__(self, text: str, gaps: re.Pattern[str], offset: int = 0) -> None:
        """`offset`: where `text` begins in the text the positions refer to."""
        parts: list[str] = []
        self._starts: list[int] = []  # where each kept piece begins in the view
        self._origins: list[int] = []  # and in the text
        kept = at = 0
        for gap in gaps.finditer(text):
            if gap.start() > at:
                parts.append(text[at : gap.start()])
                self._starts.append(kept)
                self._origins.append(offset + at)
                kept += gap.start() - at
            at = gap.end()
        if len(text) > at:
            parts.append(text[at:])
            self._starts.append(kept)
            self._origins.append(offset + at)
        self.text = "".join(parts)

    def origin(self, index: int) -> int:
        piece = bisect.bisect_right(self._starts, index) - 1
        return self._origins[piece] + index - self._starts[piece]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The text's span of the view's [start, end)."""
        return self.origin(start), self.origin(end - 1) + 1


def _origin_from_end(text: str, gaps: re.Pattern[str], offset: int, count: int) -> int:
    """Where the last `count` characters of `text`'s view begin (`offset`: where `text`
    begins), from a view of as little of its end as that takes."""
    if gaps is _GAPS:  # nearly always: a character or two, then a line break
        stripped = text.rstrip(" \t\r\n")
        last = stripped[-count:]
        if len(text) - len(stripped) <= MAX_GAP and not any(c in last for c in " \t\r\n"):
            return offset + len(stripped) - count
    width = 4 * count + 2 * MAX_GAP
    while True:
        start = max(0, len(text) - width)
        view = _View(text[start:], gaps, offset + start)
        if len(view.text) > count or start == 0:  # a gap cut at the start cannot matter
            return view.origin(len(view.text) - count)
        width *= 4


class SecretIndex:
    """Known secrets arranged to answer fast, whatever their number: may a text hold one,
    where (wrapped or not), does a text end with the beginning of one, and does one lie
    across a cut.

    A text is read with whitespace gaps, and where it may hold loose ones (a backslash, a
    line beginning with `+` or `-`) with those too."""

    def __init__(self, version: int, secrets: tuple[str, ...]) -> None:
        self.version = version
        self._needles = {
            gaps: sorted({gaps.sub("", secret) for secret in secrets})
            for gaps in (_GAPS, _LOOSE_GAPS)
        }
        self._firsts = {gaps: {n[0] for n in needles} for gaps, needles in self._needles.items()}
        # Where a secret may begin: its first two characters (a zero-width match per place).
        self._heads = {
            gaps: re.compile("(?=" + "|".join(sorted({re.escape(n[:2]) for n in needles})) + ")")
            for gaps, needles in self._needles.items()
        }
        self._longest = max((len(n) for n in self._needles[_GAPS]), default=0)
        self._unwrapped = {
            s.encode("utf-8", "surrogatepass").translate(None, _UNWRAPPED) for s in secrets
        }
        self._any_unwrapped = re.compile(b"|".join(map(re.escape, self._unwrapped)))

    def present(self, text: str) -> bool:
        """Whether `text` may hold a secret (never False when it does)."""
        if not self._unwrapped:
            return False
        unwrapped = _unwrapped(text)
        if len(unwrapped) < _SHORT_TEXT:
            return self._any_unwrapped.search(unwrapped) is not None
        return any(secret in unwrapped for secret in self._unwrapped)

    def mask(self, text: str) -> str:
        """`text` with every occurrence of a secret masked, overlapping ones as one."""
        return _masked(text, self._occurrences) if self.present(text) else text

    def pending(self, text: str) -> tuple[int, frozenset[str]]:
        """(cut, rests): the start of the longest suffix of `text` that begins a secret (gaps,
        and a backslash that may begin an escape, allowed at its end), or len(text); and,
        where what begins one is a line's end of at most RELEASED_PREFIX characters (left
        before the cut), the rests of the secrets it begins, to be masked where they follow."""
        if not self._longest:
            return len(text), frozenset()
        start, found = self._reach(text, len(text)), len(text)
        rests: set[str] = set()
        line_end = text.rstrip(" \t\r").endswith("\n")
        for gaps in self._readings(text, start):
            # Trailing backslashes may begin an escape: judged once it is whole.
            end = _escape_may_follow(text) if gaps is _LOOSE_GAPS else len(text)
            region = text[start:end]
            needles, seen = self._needles[gaps], gaps.sub("", region)
            lowest = max(0, len(seen) - self._longest + 1)
            starts = [m.start() for m in self._heads[gaps].finditer(seen, lowest)]
            if seen and seen[-1] in self._firsts[gaps]:
                starts.append(len(seen) - 1)
            for index in starts:
                tail = seen[index:]
                at = bisect.bisect_left(needles, tail)
                if at == len(needles) or not needles[at].startswith(tail):
                    continue
                if not line_end or len(tail) > RELEASED_PREFIX:
                    found = min(found, _origin_from_end(region, gaps, start, len(tail)))
                    break
                while at < len(needles) and needles[at].startswith(tail):
                    rests.add(needles[at][len(tail) :])
                    at += 1
        return found, (frozenset(rests) if found == len(text) else frozenset())

    def rest_end(self, text: str, rests: frozenset[str]) -> int | None:
        """Where `text`, after the line that ended in a secret's first characters, ends the
        rest of one of those secrets (gaps allowed, as between any of its characters): 0
        where it begins none, None where it may still grow into one."""
        bound = text[: (self._longest + 1) * (MAX_GAP + 1)]
        growing = False
        for gaps in self._readings(bound, 0):
            # Trailing backslashes may begin an escape: judged once it is whole.
            view = _View(bound[: _escape_may_follow(bound)] if gaps is _LOOSE_GAPS else bound, gaps)
            for rest in rests:
                if view.text.startswith(rest):
                    return view.span(0, len(rest))[1]
                growing = growing or rest.startswith(view.text)
        return None if growing else 0

    def matches(self, text: str, cut: int) -> Iterator[tuple[int, int]]:
        """Occurrences that start before `cut` and may reach past it."""
        start = self._reach(text, cut) if self._longest else len(text)
        if self.present(text[start:]):
            yield from (span for span in self._occurrences(text, start) if span[0] < cut)

    def _occurrences(self, text: str, start: int = 0) -> Iterator[tuple[int, int]]:
        for gaps in self._readings(text, start):
            view = _View(text[start:], gaps, start)
            for needle in self._needles[gaps]:
                at = view.text.find(needle)
                while at >= 0:
                    yield view.span(at, at + len(needle))
                    at = view.text.find(needle, at + 1)

    @staticmethod
    def _readings(text: str, start: int) -> tuple[re.Pattern[str], ...]:
        region = text[start:]
        loose = "\\" in region or "\n+" in region or "\n-" in region
        return (_GAPS, _LOOSE_GAPS) if loose else (_GAPS,)

    def _reach(self, text: str, end: int) -> int:
        """Where the text before `end` holds more than the longest secret's characters
        however gapped: no secret ending at or after `end` can begin before it."""
        width = 2 * self._longest + MAX_GAP
        while True:
            start = max(0, end - width)
            if start == 0 or len(_LOOSE_GAPS.sub("", text[start:end])) > self._longest:
                return start
            width *= 4


# --------------------------------------------------------------------------- classifying

# Characters of generated keys and tokens (base64, base64url, hex).
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_\-]+")
# A generated key changes between lower case, upper case and digits about every other
# character; words, versions and package names rarely do. Measured over 3,000 of each: 99.4%
# of 20-character hex keys (secrets.token_hex), 99.5% of UUIDs and all base64url keys
# (token_urlsafe) change class at 1 in 5 characters or more; `x86_64-linux-gnu-gcc-12` at
# 0.18, `ubuntu-22.04-desktop-amd64` at 0.14, `my-service-name-prod-2024` at 0.05. CamelCase
# names (0.3) count as random too: harmless, they do not occur in text by accident either.
_RANDOM_MIN_LENGTH = 20
_RANDOM_MIN_CHANGES = 0.2


def _char_class(char: str) -> str:
    return "d" if char.isdigit() else "u" if char.isupper() else "l"


def looks_random(value: str) -> bool:
    """A generated key or token: long, of token characters only, changing between lower
    case, upper case and digits often (see _RANDOM_MIN_CHANGES)."""
    if (
        len(value) < _RANDOM_MIN_LENGTH
        or value.startswith("/")
        or _TOKEN_CHARS.fullmatch(value) is None
    ):
        return False
    classes = [_char_class(c) for c in value if c.isalnum()]
    if len(set(classes)) < 2:
        return False
    changes = sum(a != b for a, b in itertools.pairwise(classes))
    return changes / (len(classes) - 1) >= _RANDOM_MIN_CHANGES


def url_credentials(value: str) -> list[str]:
    """The secret parts of a URL that carries credentials in its user info (`scheme://user:
    password@host`, or a DSN whose user name is a key: `https://<key>@sentry.io/1`); empty
    for any other text."""
    if "://" not in value or "@" not in value or any(c.isspace() for c in value):
        return []
    try:
        parts = urlsplit(value)
    except ValueError:
        return []
    if not parts.netloc or "@" not in parts.netloc:
        return []
    user, _, password = parts.netloc.rpartition("@")[0].partition(":")
    return [part for part in (password, user if looks_random(user) else "") if part]


def looks_like_credential(value: str) -> bool:
    """Whether a value, whatever its name, looks like a credential: a URL with a password or
    a key in its user info, a known credential shape, or a long random token. Paths, lists,
    words, numbers and addresses do not."""
    return (
        bool(url_credentials(value))
        or looks_random(value)
        or any(
            any(literal in value for literal in shape.literals) and shape.pattern.search(value)
            for shape in _SHAPES
        )
    )
