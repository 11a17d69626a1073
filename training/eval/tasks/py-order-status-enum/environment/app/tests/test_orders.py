from shop.orders import Order


def test_pay_and_ship():
    o = Order("o1", "ada", 1000)
    o.pay()
    o.ship()
    assert o.is_open
