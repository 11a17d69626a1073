import json
from pathlib import Path

from salesreport import build_report, load_sales, render

EXAMPLE = Path(__file__).parent.parent / "examples" / "q1.csv"


def report(by="region"):
    return build_report(load_sales(EXAMPLE), by=by)


def test_totals():
    total = report().total
    assert (total.orders, total.units, str(total.revenue)) == (10, 22, "866.59")


def test_csv():
    lines = render(report(), "csv").splitlines()
    assert lines[0] == "region,orders,units,revenue"
    assert lines[1] == "US,4,8,336.49"
    assert lines[-1] == "TOTAL,10,22,866.59"


def test_json():
    data = json.loads(render(report("product"), "json"))
    assert data["by"] == "product" and data["total"]["revenue"] == "866.59"
    assert [row["product"] for row in data["rows"]] == ["blender", "kettle", "toaster"]


def test_text():
    text = render(report())
    assert text.splitlines()[0] == "Sales by region (2024-01-03 .. 2024-03-29)"
    assert text.splitlines()[-1].split() == ["TOTAL", "10", "22", "866.59"]
