"""A number with its unit."""

from dataclasses import dataclass

from unitconv.convert import ConversionError, convert
from unitconv.registry import DEFAULT_REGISTRY


@dataclass(frozen=True)
class Quantity:
    """An amount in a unit: `value` (a number) and `unit` (a unit's symbol)."""

    value: float
    unit: str

    def to(self, unit, registry=DEFAULT_REGISTRY):
        """This quantity expressed in `unit`, looked up in `registry`."""
        return Quantity(convert(self.value, self.unit, unit, registry), unit)

    def plus(self, other, registry=DEFAULT_REGISTRY):
        """The sum of this quantity and `other` (converted with `registry`), in this
        quantity's unit; temperatures cannot be added."""
        if registry.dimension_of(other.unit) == "temperature":
            raise ConversionError("adding temperatures is not meaningful")
        return Quantity(self.value + other.to(self.unit, registry).value, self.unit)

    def scaled(self, factor):
        """This quantity multiplied by `factor`, in the same unit."""
        return Quantity(self.value * factor, self.unit)

    @property
    def dimension(self):
        """What the quantity measures, e.g. "length"."""
        return DEFAULT_REGISTRY.dimension_of(self.unit)
