import ast
import enum
import json
from pathlib import Path

import pytest

SHOP = Path("/app/shop")
VALUES = {"pending", "paid", "shipped", "delivered", "cancelled", "refunded"}


def status_enum():
    from shop.status import OrderStatus

    return OrderStatus


def test_the_enum():
    OrderStatus = status_enum()
    assert issubclass(OrderStatus, enum.Enum)
    assert {m.name: m.value for m in OrderStatus} == {v.upper(): v for v in VALUES}


@pytest.mark.parametrize("path", sorted(p.name for p in SHOP.glob("*.py") if p.name != "status.py"))
def test_no_status_strings_left(path):
    tree = ast.parse((SHOP / path).read_text())
    left = sorted(
        {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in VALUES}
    )
    assert not left, f"shop/{path} still spells statuses as strings: {left}"


def test_every_old_module_uses_the_enum():
    for name in ("orders", "refunds", "storage", "reports", "notifications", "api"):
        assert "OrderStatus" in (SHOP / f"{name}.py").read_text(), f"shop/{name}.py does not use OrderStatus"


def lifecycle():
    from shop.orders import Order

    a, b, c, d = Order("a", "ada", 1000), Order("b", "bob", 2500), Order("c", "cy", 400), Order("d", "di", 999)
    b.pay()
    c.pay(); c.ship()
    d.pay(); d.ship(); d.deliver()
    return [a, b, c, d]


def test_orders_hold_members():
    OrderStatus = status_enum()
    from shop.orders import Order, OrderError

    a, b, c, d = lifecycle()
    assert [o.status for o in (a, b, c, d)] == [OrderStatus.PENDING, OrderStatus.PAID, OrderStatus.SHIPPED, OrderStatus.DELIVERED]
    assert all(isinstance(o.status, OrderStatus) for o in (a, b, c, d))
    assert Order("x", "x", 1).status is OrderStatus.PENDING
    assert [o.is_open for o in (a, b, c, d)] == [True, True, True, False]
    a.cancel()
    assert a.status is OrderStatus.CANCELLED and not a.is_open
    with pytest.raises(OrderError, match="^order d is delivered, cannot cancel$"):
        d.cancel()
    with pytest.raises(OrderError, match="^order a is cancelled, cannot pay$"):
        a.pay()


def test_refunds():
    OrderStatus = status_enum()
    from shop import refunds
    from shop.orders import OrderError

    a, b, c, d = lifecycle()
    assert [refunds.can_refund(o) for o in (a, b, c, d)] == [False, True, True, True]
    assert refunds.refund(c) == 400 and c.status is OrderStatus.REFUNDED
    with pytest.raises(OrderError, match="^order a is pending, cannot refund$"):
        refunds.refund(a)
    assert all(isinstance(s, OrderStatus) for s in refunds.REFUNDABLE)


def test_storage_keeps_strings(tmp_path):
    OrderStatus = status_enum()
    from shop import storage

    orders = lifecycle()
    path = tmp_path / "orders.json"
    storage.save(orders, path)
    raw = json.loads(path.read_text())
    assert [r["status"] for r in raw] == ["pending", "paid", "shipped", "delivered"]
    assert all(type(r["status"]) is str for r in raw)
    assert [e[1] for e in raw[3]["events"]] == ["paid", "shipped", "delivered"]
    back = storage.load(path)
    assert [o.status for o in back] == [OrderStatus.PENDING, OrderStatus.PAID, OrderStatus.SHIPPED, OrderStatus.DELIVERED]
    assert all(isinstance(o.status, OrderStatus) for o in back)
    assert storage.dump(back) == storage.dump(orders)
    back[1].ship()
    assert back[1].status is OrderStatus.SHIPPED


def test_storage_rejects_unknown_status():
    from shop import storage

    with pytest.raises(ValueError):
        storage.parse(json.dumps([{"id": "z", "customer": "z", "total_cents": 1, "status": "lost"}]))


def test_reports():
    OrderStatus = status_enum()
    from shop import reports

    orders = lifecycle()
    counts = reports.count_by_status(orders)
    assert all(isinstance(k, OrderStatus) for k in counts)
    assert counts == {OrderStatus.PENDING: 1, OrderStatus.PAID: 1, OrderStatus.SHIPPED: 1,
                      OrderStatus.DELIVERED: 1, OrderStatus.CANCELLED: 0, OrderStatus.REFUNDED: 0}
    assert reports.revenue_cents(orders) == 2500 + 400 + 999
    assert [o.id for o in reports.backlog(orders)] == ["b"]


def test_notifications():
    OrderStatus = status_enum()
    from shop import notifications

    a, b, c, d = lifecycle()
    assert notifications.subject(a) is None
    assert notifications.subject(b) == "Thanks for your order b"
    assert notifications.subject(c) == "Your order c is on its way"
    assert [notifications.needs_tracking_link(o) for o in (a, b, c, d)] == [False, False, True, False]
    assert all(isinstance(k, OrderStatus) for k in notifications.SUBJECTS)


def test_api_speaks_strings():
    from shop import api

    orders = lifecycle()
    out = api.list_orders(orders, "paid")
    assert json.loads(json.dumps(out)) == {"orders": [{"id": "b", "customer": "bob", "total_cents": 2500, "status": "paid"}]}
    assert isinstance(out["orders"][0]["status"], str)
    assert [o["status"] for o in json.loads(json.dumps(api.list_orders(orders)))["orders"]] == ["pending", "paid", "shipped", "delivered"]
    assert api.list_orders(orders, "bogus") == {"error": "unknown status 'bogus'"}
    assert api.list_orders(orders, "refunded") == {"orders": []}
    shipped = api.act(orders[1], "ship")
    assert json.loads(json.dumps(shipped))["status"] == "shipped" and isinstance(shipped["status"], str)
    assert api.act(orders[3], "cancel") == {"error": "order d is delivered, cannot cancel"}
    assert json.loads(json.dumps(api.act(orders[3], "refund")))["status"] == "refunded"
    assert api.act(orders[0], "explode") == {"error": "unknown action 'explode'"}
