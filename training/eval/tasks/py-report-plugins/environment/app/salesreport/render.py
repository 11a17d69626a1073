"""The report as text: an aligned table, CSV or JSON."""

import csv
import io
import json

from salesreport.model import Report, Row

FORMATS = ("text", "csv", "json")


def render(report: Report, fmt: str = "text") -> str:
    if fmt == "text":
        return _text(report)
    elif fmt == "csv":
        return _csv(report)
    elif fmt == "json":
        return _json(report)
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def cells(row: Row) -> list[str]:
    """A row's cells as the formats write them."""
    return [row.key, str(row.orders), str(row.units), f"{row.revenue:.2f}"]


def _text(report: Report) -> str:
    table = [report.columns] + [cells(row) for row in report.rows] + [cells(report.total)]
    widths = [max(len(line[i]) for line in table) for i in range(len(report.columns))]
    lines = [_period(report)]
    for line in table:
        first, *numbers = line
        lines.append(
            "  ".join(
                [first.ljust(widths[0])]
                + [n.rjust(w) for n, w in zip(numbers, widths[1:], strict=True)]
            )
        )
    return "\n".join(lines) + "\n"


def _period(report: Report) -> str:
    if report.first_day is None:
        return f"{report.title} (no sales)"
    return f"{report.title} ({report.first_day} .. {report.last_day})"


def _csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(report.columns)
    for row in [*report.rows, report.total]:
        writer.writerow(cells(row))
    return out.getvalue()


def _json(report: Report) -> str:
    def record(row: Row) -> dict:
        return {
            report.by: row.key,
            "orders": row.orders,
            "units": row.units,
            "revenue": f"{row.revenue:.2f}",
        }

    data = {
        "title": report.title,
        "by": report.by,
        "from": report.first_day and report.first_day.isoformat(),
        "to": report.last_day and report.last_day.isoformat(),
        "rows": [record(row) for row in report.rows],
        "total": record(report.total),
    }
    return json.dumps(data, indent=2) + "\n"
