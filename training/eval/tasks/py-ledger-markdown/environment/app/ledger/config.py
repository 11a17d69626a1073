"""ledger.toml: where the journal is and how exports look.

    [ledger]
    journal = "journal.csv"

    [export]
    default_format = "csv"
    columns = ["date", "account", "description", "amount", "currency"]
    date_format = "%Y-%m-%d"
"""

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ledger.model import COLUMNS

FORMATS = ("csv", "json")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class ExportSettings:
    default_format: str = "csv"
    columns: tuple[str, ...] = COLUMNS
    date_format: str = "%Y-%m-%d"


@dataclass(frozen=True)
class Config:
    journal: Path = Path("journal.csv")
    export: ExportSettings = field(default_factory=ExportSettings)


def load_config(path: Path | None) -> Config:
    """The configuration in `path`; the defaults when it is None or does not exist."""
    if path is None or not Path(path).is_file():
        return Config()
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    base = Path(path).parent
    journal = base / data.get("ledger", {}).get("journal", "journal.csv")
    raw = data.get("export", {})
    export = ExportSettings(
        default_format=raw.get("default_format", "csv"),
        columns=tuple(raw.get("columns", COLUMNS)),
        date_format=raw.get("date_format", "%Y-%m-%d"),
    )
    if export.default_format not in FORMATS:
        raise ConfigError(f"export.default_format must be one of {', '.join(FORMATS)}, not {export.default_format!r}")
    unknown = [c for c in export.columns if c not in COLUMNS]
    if unknown:
        raise ConfigError(f"export.columns: unknown column(s) {', '.join(unknown)}")
    return Config(journal, export)
