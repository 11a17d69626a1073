"""Secret redaction for everything that leaves the process: logs now, tool output and traces.

Two nets: exact values the process knows are secret (API keys and tokens from the config),
and the shapes of well-known credentials that might appear anywhere (keys printed by a
command, a token pasted in a prompt).
"""

import re
from collections.abc import Iterable

MASK = "[REDACTED]"

# Values shorter than this are too likely to occur by accident to be masked everywhere.
MIN_SECRET_LENGTH = 8

# Each credential shape with the literal text it cannot occur without: the regex runs only
# when that text is present, which keeps redaction of clean text (nearly all of it) at the
# speed of a substring search instead of nine regex scans (measured on Python source: 7 MB/s
# -> 70 MB/s).
_PATTERNS = [
    (literals, re.compile(pattern))
    for literals, pattern in (
        (("sk-",), r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}"),  # OpenAI / Anthropic keys
        (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{36,}"),  # GitHub
        (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
        (("hf_",), r"\bhf_[A-Za-z0-9]{30,}"),  # Hugging Face
        (("xox",), r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),  # Slack
        (("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key ids
        (("AIza",), r"\bAIza[0-9A-Za-z_\-]{35}\b"),  # Google API keys
        (("PRIVATE KEY-----",),
         r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
    )
]
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/\-]{8,}=*")


class Redactor:
    """Masks known secret values and credential-shaped strings in text."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: set[str] = set()
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= MIN_SECRET_LENGTH:
            self._secrets.add(secret)

    def redact(self, text: str) -> str:
        # Longest first, so a secret that contains another is masked whole.
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, MASK)
        for literals, pattern in _PATTERNS:
            if any(literal in text for literal in literals):
                text = pattern.sub(MASK, text)
        if "bearer" in text.lower():
            text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
        return text
