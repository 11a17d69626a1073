"""Unit conversion helpers: convert values between units, parse and format quantities."""

from unitconv.convert import convert, convert_many, ConversionError
from unitconv.parse import parse_quantity, ParseError
from unitconv.quantity import Quantity
from unitconv.registry import Unit, UnitRegistry, DEFAULT_REGISTRY
from unitconv.formatting import format_quantity, humanize

__all__ = [
    "ConversionError", "DEFAULT_REGISTRY", "ParseError", "Quantity", "Unit", "UnitRegistry",
    "convert", "convert_many", "format_quantity", "humanize", "parse_quantity",
]
