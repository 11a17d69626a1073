"""The report as text, in any registered format; the built-in ones are here: an aligned table
(text), CSV, JSON and a Markdown table."""

import csv
import io
import json

from salesreport import formats
from salesreport.model import Report, Row


def render(report: Report, fmt: str = "text") -> str:
    """The report in the format `fmt` (formats.UnknownFormat if none has that name)."""
    return formats.get(fmt)(report)


def cells(row: Row) -> list[str]:
    """A row's cells as the formats write them."""
    return [row.key, str(row.orders), str(row.units), f"{row.revenue:.2f}"]


def table(report: Report) -> list[list[str]]:
    """The header, a line per row, then the total."""
    return [report.columns] + [cells(row) for row in report.rows] + [cells(report.total)]


@formats.register("text")
def text(report: Report) -> str:
    lines = table(report)
    widths = [max(len(line[i]) for line in lines) for i in range(len(report.columns))]
    out = [_period(report)]
    for line in lines:
        first, *numbers = line
        out.append(
            "  ".join(
                [first.ljust(widths[0])]
                + [n.rjust(w) for n, w in zip(numbers, widths[1:], strict=True)]
            )
        )
    return "\n".join(out) + "\n"


def _period(report: Report) -> str:
    if report.first_day is None:
        return f"{report.title} (no sales)"
    return f"{report.title} ({report.first_day} .. {report.last_day})"


@formats.register("csv")
def csv_table(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows(table(report))
    return out.getvalue()


@formats.register("json")
def json_document(report: Report) -> str:
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


@formats.register("markdown")
def markdown(report: Report) -> str:
    """A GitHub table with the cells of the CSV; the numbers right-aligned."""
    header, *rows = table(report)

    def line(values: list[str]) -> str:
        return "| " + " | ".join(value.replace("|", "\\|") for value in values) + " |"

    align = "|---|" + "---:|" * (len(header) - 1)
    return "\n".join([line(header), align] + [line(row) for row in rows]) + "\n"
