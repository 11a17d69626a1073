import pytest

from billing.rates import unit_price


def test_known_price():
    assert unit_price("egress_gb") == 0.085


def test_unknown_meter():
    with pytest.raises(KeyError):
        unit_price("gpu_hours")
