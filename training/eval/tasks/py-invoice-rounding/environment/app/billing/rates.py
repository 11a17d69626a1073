"""Unit prices per plan, in EUR per unit of each meter."""

RATES: dict[str, dict[str, float]] = {
    "standard": {
        "api_calls_k": 0.335,      # per thousand API calls
        "build_minutes": 0.125,
        "egress_gb": 0.085,
        "storage_gb_hours": 0.0125,
    },
    "pro": {
        "api_calls_k": 0.295,
        "build_minutes": 0.105,
        "egress_gb": 0.065,
        "storage_gb_hours": 0.0105,
    },
}


def unit_price(meter: str, plan: str = "standard") -> float:
    try:
        return RATES[plan][meter]
    except KeyError:
        raise KeyError(f"no price for meter {meter!r} on plan {plan!r}") from None
