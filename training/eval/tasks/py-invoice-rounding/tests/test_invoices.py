import json
import random
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from billing.invoice import Invoice, InvoiceMismatch, Line, build_invoice, check, line_for
from billing.rates import RATES
from jobs import nightly


def cents(quantity, price):
    """quantity x price as written, half up to the cent (the policy in billing/invoice.py)."""
    exact = Decimal(str(quantity)) * Decimal(str(price)) * 100
    return int(exact.quantize(Decimal(1), rounding=ROUND_HALF_UP))


@pytest.mark.parametrize(
    ("plan", "meter", "quantity", "expected"),
    [
        ("standard", "build_minutes", 1, 13),
        ("standard", "build_minutes", 4.6, 58),
        ("standard", "build_minutes", 8.2, 103),
        ("standard", "build_minutes", 0.6, 8),
        ("standard", "storage_gb_hours", 2.8, 4),
        ("standard", "storage_gb_hours", 11.6, 15),
        ("standard", "storage_gb_hours", 9.2, 12),
        ("standard", "api_calls_k", 3, 101),
        ("standard", "egress_gb", 475.8, 4044),
        ("pro", "api_calls_k", 1.0, 30),
        ("pro", "api_calls_k", 11.0, 325),
        ("pro", "api_calls_k", 17, 502),
        ("pro", "build_minutes", 1.0, 11),
        ("pro", "build_minutes", 43.0, 452),
    ],
)
def test_lines_round_half_up(plan, meter, quantity, expected):
    assert cents(quantity, RATES[plan][meter]) == expected
    assert line_for(meter, quantity, plan).amount_cents == expected


def test_many_invoices_add_up():
    rng = random.Random(7)
    for n in range(400):
        plan = rng.choice(["standard", "pro"])
        usage = {m: round(rng.uniform(0, 5000), rng.choice([0, 1, 1, 2])) for m in rng.sample(sorted(RATES[plan]), rng.randint(1, 4))}
        invoice = build_invoice(f"t{n}", "2026-11", usage, plan)
        want = {m: cents(q, RATES[plan][m]) for m, q in usage.items()}
        assert {l.meter: l.amount_cents for l in invoice.lines} == want, usage
        assert invoice.total_cents == sum(want.values())
        assert [l.meter for l in invoice.lines] == sorted(usage)


def test_check_still_guards():
    bad = Invoice("x", "2026-11", (Line("egress_gb", 1.0, 0.085, 9),), 10)
    with pytest.raises(InvoiceMismatch):
        check(bad)
    check(Invoice("x", "2026-11", (Line("egress_gb", 1.0, 0.085, 9),), 9))


def test_nightly_run(tmp_path):
    assert nightly.run(Path("/app/data"), tmp_path) == 0
    written = sorted(p.stem for p in tmp_path.glob("*.json"))
    assert written == ["acme", "bluth", "dunder", "globex", "hooli", "initech", "umbrella", "wonka"]
    for tenant in written:
        record = json.loads(Path(f"/app/data/usage/{tenant}.json").read_text())
        invoice = json.loads((tmp_path / f"{tenant}.json").read_text())
        prices = RATES[record["plan"]]
        want = {m: cents(q, prices[m]) for m, q in record["usage"].items()}
        assert {l["meter"]: l["amount_cents"] for l in invoice["lines"]} == want, tenant
        assert invoice["total_cents"] == sum(want.values()), tenant


def test_prices_unchanged():
    flat = {(p, m): float(v) for p, rates in RATES.items() for m, v in rates.items()}
    assert flat == {
        ("standard", "api_calls_k"): 0.335, ("standard", "build_minutes"): 0.125,
        ("standard", "egress_gb"): 0.085, ("standard", "storage_gb_hours"): 0.0125,
        ("pro", "api_calls_k"): 0.295, ("pro", "build_minutes"): 0.105,
        ("pro", "egress_gb"): 0.065, ("pro", "storage_gb_hours"): 0.0105,
    }
