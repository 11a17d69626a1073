from dataclasses import dataclass

from unitconv.convert import ConversionError, convert
from unitconv.registry import DEFAULT_REGISTRY


@dataclass(frozen=True)
class Quantity:
    value: float
    unit: str

    def to(self, unit, registry=DEFAULT_REGISTRY):
        return Quantity(convert(self.value, self.unit, unit, registry), unit)

    def plus(self, other, registry=DEFAULT_REGISTRY):
        if registry.dimension_of(other.unit) == "temperature":
            raise ConversionError("adding temperatures is not meaningful")
        return Quantity(self.value + other.to(self.unit, registry).value, self.unit)

    def scaled(self, factor):
        return Quantity(self.value * factor, self.unit)

    @property
    def dimension(self):
        return DEFAULT_REGISTRY.dimension_of(self.unit)
