from unitconv.registry import DEFAULT_REGISTRY


class ConversionError(ValueError):
    pass


def convert(value, from_unit, to_unit, registry=DEFAULT_REGISTRY):
    source, target = registry.get(from_unit), registry.get(to_unit)
    if source.dimension != target.dimension:
        raise ConversionError(f"cannot convert {source.dimension} ({from_unit}) to {target.dimension} ({to_unit})")
    return target.from_base(source.to_base(value))


def convert_many(values, from_unit, to_unit, *, registry=DEFAULT_REGISTRY, ndigits=None):
    out = [convert(v, from_unit, to_unit, registry) for v in values]
    return out if ndigits is None else [round(v, ndigits) for v in out]
