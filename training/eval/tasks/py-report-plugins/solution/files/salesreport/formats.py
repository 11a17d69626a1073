"""The registry of output formats: a format is a function from a report to its text.

    from salesreport import formats

    @formats.register("tsv")
    def tsv(report):
        return "".join(f"{row.key}\t{row.revenue}\n" for row in report.rows)

The built-in ones (text, csv, json, markdown) are in salesreport.render; a plugin is any module
that registers more when it is imported (the CLI's --plugin and SALESREPORT_PLUGINS).
"""

from collections.abc import Callable
from typing import TypeAlias

from salesreport.model import Report

Formatter: TypeAlias = Callable[[Report], str]

_FORMATS: dict[str, Formatter] = {}


class UnknownFormat(ValueError):
    """No format of that name is registered."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown format {name!r}; known formats: {', '.join(names())}")


def register(name: str) -> Callable[[Formatter], Formatter]:
    """A decorator: registers the function as the format `name` and returns it unchanged.
    A name can only be registered once (ValueError)."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a format needs a name, not {name!r}")

    def decorator(formatter: Formatter) -> Formatter:
        if name in _FORMATS:
            raise ValueError(f"the format {name!r} is already registered")
        _FORMATS[name] = formatter
        return formatter

    return decorator


def get(name: str) -> Formatter:
    try:
        return _FORMATS[name]
    except KeyError:
        raise UnknownFormat(name) from None


def names() -> list[str]:
    """The registered formats, sorted."""
    return sorted(_FORMATS)
