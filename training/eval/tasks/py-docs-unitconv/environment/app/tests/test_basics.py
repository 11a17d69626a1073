from unitconv import convert, parse_quantity


def test_km_to_m():
    assert convert(1.5, "km", "m") == 1500


def test_parse():
    assert parse_quantity("3 ft").unit == "ft"
