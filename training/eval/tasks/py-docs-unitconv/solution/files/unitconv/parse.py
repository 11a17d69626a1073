"""Parsing quantities such as "12.5 kg" from text."""

import re

from unitconv.quantity import Quantity
from unitconv.registry import DEFAULT_REGISTRY

_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S+)\s*$")


class ParseError(ValueError):
    """Raised for text that is not a number followed by a known unit."""


def parse_quantity(text, registry=DEFAULT_REGISTRY):
    """The Quantity written in `text`: a number (thousands separators allowed) and a unit
    known to `registry`; an alias is turned into the unit's symbol. ParseError otherwise.

    >>> parse_quantity("3 ft")
    Quantity(value=3.0, unit='ft')
    >>> parse_quantity(" 1,200.5 miles ")
    Quantity(value=1200.5, unit='mi')
    """
    match = _QUANTITY.match(text.replace(",", ""))
    if not match:
        raise ParseError(f"not a quantity: {text!r}")
    number, unit = match.groups()
    try:
        symbol = registry.get(unit).symbol
    except KeyError:
        raise ParseError(f"unknown unit in {text!r}") from None
    return Quantity(float(number), symbol)


def parse_many(text, separator=";", registry=DEFAULT_REGISTRY):
    """Every quantity in `text`, split at `separator` (empty parts skipped), each parsed
    with `registry`."""
    return [parse_quantity(part, registry) for part in text.split(separator) if part.strip()]
