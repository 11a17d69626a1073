import csv
import io
import json
import os
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

EXPORT = Path(__file__).parent / "data" / "h1.csv"

CSV_BY_REGION = """\
region,orders,units,revenue
US,3,7,308.99
APAC,2,7,268.00
EU,3,6,177.60
LATAM,2,2,135.25
TOTAL,10,22,889.84
"""


@pytest.fixture
def report():
    from salesreport import build_report, load_sales

    return build_report(load_sales(EXPORT), by="region")


def unique(stem):
    return f"{stem}_{uuid.uuid4().hex[:8]}"


def plugin(tmp_path, monkeypatch, body):
    """A plugin module in tmp_path (importable), named uniquely; returns its name."""
    name = unique("acme_plugin")
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def cli(argv):
    """The CLI's exit status: returned, or raised as SystemExit (argparse's errors)."""
    from salesreport import cli as module

    try:
        return module.main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


def csv_rows(text):
    return list(csv.reader(io.StringIO(text)))


def markdown_rows(text):
    """The cells of the table lines (| a | b |) of a markdown text."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("|") and line.endswith("|") and len(line) > 1:
            rows.append([cell.strip() for cell in line[1:-1].split("|")])
    return rows


def test_the_builtin_formats_are_registered():
    from salesreport import formats

    names = formats.names()
    assert {"text", "csv", "json", "markdown"} <= set(names)
    assert names == sorted(names)
    for name in ("text", "csv", "json", "markdown"):
        assert callable(formats.get(name))


def test_render_goes_through_the_registry(report):
    from salesreport import formats, render

    for name in ("text", "csv", "json", "markdown"):
        assert render(report, name) == formats.get(name)(report)
    assert render(report) == formats.get("text")(report)


def test_the_old_formats_are_unchanged(report):
    from salesreport import render

    assert render(report, "csv") == CSV_BY_REGION
    data = json.loads(render(report, "json"))
    assert data["by"] == "region" and data["from"] == "2024-04-02" and data["to"] == "2024-06-29"
    assert [row["region"] for row in data["rows"]] == ["US", "APAC", "EU", "LATAM"]
    assert data["total"] == {"region": "TOTAL", "orders": 10, "units": 22, "revenue": "889.84"}
    lines = render(report, "text").splitlines()
    assert lines[0] == "Sales by region (2024-04-02 .. 2024-06-29)"
    assert [line.split() for line in lines[1:]] == csv_rows(CSV_BY_REGION)


def test_markdown_is_a_table_of_the_csv_cells(report):
    from salesreport import render

    rows = markdown_rows(render(report, "markdown"))
    want = csv_rows(CSV_BY_REGION)
    assert len(rows) == len(want) + 1, rows
    assert rows[0] == want[0]
    assert len(rows[1]) == 4 and all(re.fullmatch(r":?-+:?", cell) for cell in rows[1]), rows[1]
    assert rows[2:] == want[1:]


def test_markdown_by_product():
    from salesreport import build_report, load_sales, render

    product = build_report(load_sales(EXPORT), by="product")
    rows = markdown_rows(render(product, "markdown"))
    assert rows[0] == ["product", "orders", "units", "revenue"]
    assert rows[2:] == csv_rows(render(product, "csv"))[1:]


def test_register_is_a_decorator(report):
    from salesreport import formats, render

    name = unique("tsv")

    def tsv(rep):
        return "".join(f"{row.key}\t{row.units}\n" for row in rep.rows)

    assert formats.register(name)(tsv) is tsv
    assert formats.get(name) is tsv
    assert name in formats.names() and formats.names() == sorted(formats.names())
    assert render(report, name) == "US\t7\nAPAC\t7\nEU\t6\nLATAM\t2\n"


def test_a_taken_name_cannot_be_registered_again(report):
    from salesreport import formats, render

    name = unique("dup")
    first = formats.register(name)(lambda rep: "first")
    with pytest.raises(ValueError):
        formats.register(name)(lambda rep: "second")
    with pytest.raises(ValueError):
        formats.register("csv")(lambda rep: "mine")
    assert formats.get(name) is first
    assert render(report, "csv") == CSV_BY_REGION


def test_an_unknown_format(report):
    from salesreport import formats, render

    assert issubclass(formats.UnknownFormat, ValueError)
    with pytest.raises(formats.UnknownFormat) as caught:
        formats.get("no-such-format")
    message = str(caught.value)
    assert "no-such-format" in message
    assert all(name in message for name in ("text", "csv", "json", "markdown")), message
    with pytest.raises(formats.UnknownFormat):
        render(report, "no-such-format")


def test_cli_markdown(capsys):
    assert cli([EXPORT, "--format", "markdown"]) in (0, None)
    rows = markdown_rows(capsys.readouterr().out)
    assert rows[0] == csv_rows(CSV_BY_REGION)[0] and rows[2:] == csv_rows(CSV_BY_REGION)[1:]


def test_cli_output_file(tmp_path):
    out = tmp_path / "q2.md"
    assert cli([EXPORT, "--by", "product", "--format", "markdown", "-o", out]) in (0, None)
    assert markdown_rows(out.read_text())[0] == ["product", "orders", "units", "revenue"]
    assert cli([EXPORT, "--format", "csv", "-o", tmp_path / "q2.csv"]) in (0, None)
    assert (tmp_path / "q2.csv").read_text() == CSV_BY_REGION


def test_cli_plugin_option(tmp_path, monkeypatch, capsys):
    fmt = unique("units")
    name = plugin(
        tmp_path,
        monkeypatch,
        f"""
        from salesreport import formats

        @formats.register({fmt!r})
        def units(report):
            return "".join(f"{{row.key}}={{row.units}}\\n" for row in report.rows + [report.total])
        """,
    )
    assert cli([EXPORT, "--plugin", name, "--format", fmt]) in (0, None)
    assert capsys.readouterr().out == "US=7\nAPAC=7\nEU=6\nLATAM=2\nTOTAL=22\n"


def test_cli_several_plugins_and_the_list(tmp_path, monkeypatch, capsys):
    a, b = unique("fmt_a"), unique("fmt_b")
    one = plugin(
        tmp_path,
        monkeypatch,
        f"from salesreport import formats\nformats.register({a!r})(lambda r: 'A\\n')\n",
    )
    two = plugin(
        tmp_path,
        monkeypatch,
        f"from salesreport import formats\nformats.register({b!r})(lambda r: 'B\\n')\n",
    )
    assert cli(["--plugin", one, "--plugin", two, "--list-formats"]) in (0, None)
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert {"text", "csv", "json", "markdown", a, b} <= set(listed)
    assert cli([EXPORT, "--plugin", one, "--plugin", two, "--format", b]) in (0, None)
    assert capsys.readouterr().out == "B\n"


def test_cli_plugins_from_the_environment(tmp_path, monkeypatch, capsys):
    a, b = unique("env_a"), unique("env_b")
    one = plugin(
        tmp_path,
        monkeypatch,
        f"from salesreport import formats\nformats.register({a!r})(lambda r: 'one\\n')\n",
    )
    two = plugin(
        tmp_path,
        monkeypatch,
        f"from salesreport import formats\nformats.register({b!r})(lambda r: 'two\\n')\n",
    )
    monkeypatch.setenv("SALESREPORT_PLUGINS", f"{one}, {two}")
    assert cli([EXPORT, "--format", a]) in (0, None)
    assert capsys.readouterr().out == "one\n"
    assert cli(["--list-formats"]) in (0, None)
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert {a, b} <= set(listed)


def test_cli_list_formats_needs_no_export(capsys):
    assert cli(["--list-formats"]) in (0, None)
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert {"text", "csv", "json", "markdown"} <= set(listed)


def test_cli_unknown_format_exits_2(capsys):
    assert cli([EXPORT, "--format", "yaml"]) == 2
    err = capsys.readouterr().err
    assert "yaml" in err and "markdown" in err


def test_cli_plugin_that_cannot_be_imported_exits_2(capsys):
    missing = unique("no_such_plugin")
    assert cli([EXPORT, "--plugin", missing]) == 2
    assert missing in capsys.readouterr().err


def test_python_dash_m(tmp_path):
    fmt = unique("sub")
    name = unique("acme_sub")
    (tmp_path / f"{name}.py").write_text(
        "from salesreport import formats\n"
        f"formats.register({fmt!r})(lambda r: r.total.key + '\\n')\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(["/app", str(tmp_path)]),
        "SALESREPORT_PLUGINS": name,
    }
    done = subprocess.run(
        [sys.executable, "-m", "salesreport", str(EXPORT), "--format", fmt],
        cwd="/app",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "TOTAL\n"
