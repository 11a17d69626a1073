import pytest
from statkit import median


@pytest.mark.parametrize(
    ("values", "expected"),
    [([1, 2], 1.5), ([4, 1, 3, 2], 2.5), ([10, 20, 30, 40, 50, 60], 35), ([-1, 1], 0)],
)
def test_even(values, expected):
    assert median(values) == expected


@pytest.mark.parametrize(("values", "expected"), [([5], 5), ([3, 1, 2], 2), ([9, 7, 8, 1, 2], 7)])
def test_odd(values, expected):
    assert median(values) == expected


def test_empty():
    with pytest.raises(ValueError):
        median([])
