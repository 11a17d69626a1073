from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    symbol: str
    dimension: str
    factor: float
    offset: float = 0.0

    def to_base(self, value):
        return value * self.factor + self.offset

    def from_base(self, value):
        return (value - self.offset) / self.factor


class UnitRegistry:
    def __init__(self, units=(), aliases=None):
        self._units = {}
        self._aliases = dict(aliases or {})
        for unit in units:
            self.add(unit)

    def add(self, unit, *aliases):
        if unit.symbol in self._units:
            raise ValueError(f"unit {unit.symbol!r} is already registered")
        self._units[unit.symbol] = unit
        for alias in aliases:
            self._aliases[alias] = unit.symbol

    def get(self, name):
        symbol = self._aliases.get(name, name)
        try:
            return self._units[symbol]
        except KeyError:
            raise KeyError(f"unknown unit {name!r}") from None

    def dimension_of(self, name):
        return self.get(name).dimension

    def symbols(self, dimension=None):
        return sorted(s for s, u in self._units.items() if dimension is None or u.dimension == dimension)


DEFAULT_REGISTRY = UnitRegistry(
    [
        Unit("m", "length", 1.0), Unit("km", "length", 1000.0), Unit("cm", "length", 0.01),
        Unit("mm", "length", 0.001), Unit("mi", "length", 1609.344), Unit("ft", "length", 0.3048),
        Unit("in", "length", 0.0254),
        Unit("kg", "mass", 1.0), Unit("g", "mass", 0.001), Unit("lb", "mass", 0.45359237),
        Unit("s", "time", 1.0), Unit("min", "time", 60.0), Unit("h", "time", 3600.0),
        Unit("K", "temperature", 1.0), Unit("C", "temperature", 1.0, 273.15),
        Unit("F", "temperature", 5 / 9, 273.15 - 32 * 5 / 9),
    ],
    aliases={"metre": "m", "meter": "m", "kilometre": "km", "mile": "mi", "miles": "mi",
             "foot": "ft", "feet": "ft", "inch": "in", "°C": "C", "°F": "F", "hr": "h"},
)
