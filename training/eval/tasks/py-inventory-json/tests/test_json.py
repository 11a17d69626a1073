import json

import pytest
from inventory import cli

CSV = "sku,name,quantity,price\nB-2,bolt,5,0.5\nA-1,anchor,2,10.25\nC-3,clip,9,0.1\n"


@pytest.fixture
def stock(tmp_path):
    path = tmp_path / "stock.csv"
    path.write_text(CSV)
    return path


def run(capsys, *argv):
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out


def test_json_rows_and_types(stock, capsys):
    rows = json.loads(run(capsys, "list", str(stock), "--format", "json"))
    assert [row["sku"] for row in rows] == ["A-1", "B-2", "C-3"]
    first = rows[0]
    assert first["name"] == "anchor"
    assert first["quantity"] == 2 and isinstance(first["quantity"], int)
    assert first["price"] == 10.25
    assert first["value"] == 20.5


def test_json_follows_sort(stock, capsys):
    rows = json.loads(run(capsys, "list", str(stock), "--format", "json", "--sort", "quantity"))
    assert [row["sku"] for row in rows] == ["A-1", "B-2", "C-3"][::1] and [
        r["quantity"] for r in rows
    ] == [2, 5, 9]


def test_table_is_still_default(stock, capsys):
    text = run(capsys, "list", str(stock))
    assert text.splitlines()[0].split() == ["sku", "name", "quantity", "price", "value"]
    assert "anchor" in text and not text.lstrip().startswith("[")


def test_unknown_format_refused(stock):
    with pytest.raises(SystemExit) as exit:
        cli.main(["list", str(stock), "--format", "xml"])
    assert exit.value.code == 2
