from deployer.config import load


def test_defaults():
    assert load([], environ={})["http"]["port"] == 8080
