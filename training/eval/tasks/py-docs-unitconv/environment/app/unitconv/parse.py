import re

from unitconv.quantity import Quantity
from unitconv.registry import DEFAULT_REGISTRY

_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S+)\s*$")


class ParseError(ValueError):
    pass


def parse_quantity(text, registry=DEFAULT_REGISTRY):
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
    return [parse_quantity(part, registry) for part in text.split(separator) if part.strip()]
