from billing import monthly_price


def test_team_price():
    assert monthly_price("team") == 4900
