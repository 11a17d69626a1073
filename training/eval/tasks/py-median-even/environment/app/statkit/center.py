from collections import Counter
from collections.abc import Sequence


def mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle] + ordered[middle + 1]) / 2


def mode(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("mode of no values")
    counts = Counter(values)
    best = max(counts.values())
    return min(value for value, count in counts.items() if count == best)
