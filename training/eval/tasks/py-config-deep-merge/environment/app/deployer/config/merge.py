def merge(base: dict, override: dict) -> dict:
    """`base` with `override` laid over it."""
    result = dict(base)
    result.update(override)
    return result
