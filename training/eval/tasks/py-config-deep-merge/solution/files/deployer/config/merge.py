import copy


def merge(base: dict, override: dict) -> dict:
    """`base` with `override` laid over it, key by key: tables (dicts) are merged
    recursively, anything else in `override` (values, lists) replaces what `base` had.
    Neither input is changed, and the result shares no mutable values with them."""
    result = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result
