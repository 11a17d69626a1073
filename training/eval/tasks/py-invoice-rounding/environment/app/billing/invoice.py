"""Monthly invoices.

Each line is the meter's quantity times its unit price, rounded half up to the cent. The
invoice total is the sum of its lines: finance reconciles invoices line by line, so the two
must always agree (`check`).
"""

from dataclasses import dataclass

from billing.rates import unit_price


class InvoiceMismatch(Exception):
    """An invoice whose total is not the sum of its lines."""


@dataclass(frozen=True)
class Line:
    meter: str
    quantity: float
    unit_price: float
    amount_cents: int


@dataclass(frozen=True)
class Invoice:
    tenant: str
    period: str
    lines: tuple[Line, ...]
    total_cents: int

    def as_dict(self) -> dict:
        return {
            "tenant": self.tenant,
            "period": self.period,
            "lines": [
                {"meter": l.meter, "quantity": l.quantity, "unit_price": l.unit_price, "amount_cents": l.amount_cents}
                for l in self.lines
            ],
            "total_cents": self.total_cents,
        }


def line_for(meter: str, quantity: float, plan: str = "standard") -> Line:
    price = unit_price(meter, plan)
    return Line(meter, quantity, price, round(quantity * price * 100))


def build_invoice(tenant: str, period: str, usage: dict[str, float], plan: str = "standard") -> Invoice:
    lines = tuple(line_for(meter, quantity, plan) for meter, quantity in sorted(usage.items()))
    total = round(sum(quantity * unit_price(meter, plan) for meter, quantity in usage.items()) * 100)
    invoice = Invoice(tenant, period, lines, total)
    check(invoice)
    return invoice


def check(invoice: Invoice) -> None:
    lines = sum(line.amount_cents for line in invoice.lines)
    if lines != invoice.total_cents:
        raise InvoiceMismatch(
            f"{invoice.tenant} {invoice.period}: total {invoice.total_cents} != sum of lines {lines}"
        )
