import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.cli import main

JOURNAL = """date,account,description,amount,currency
2025-01-02,income:salary,January salary,3200.00,EUR
2025-01-03,expenses:rent,Rent | January,-1150.00,EUR
2025-01-05,expenses:groceries,Markthalle,-84.35,EUR
2025-01-12,expenses:travel,"Train Berlin, Hamburg",-59.9,EUR
2025-02-01,expenses:rent,Rent | Feb | late,-1150,EUR
2025-02-28,income:freelance,Invoice #17,640.00,USD
"""


@pytest.fixture
def files(tmp_path):
    journal = tmp_path / "journal.csv"
    journal.write_text(JOURNAL)

    def config(text=""):
        path = tmp_path / "ledger.toml"
        path.write_text(f'[ledger]\njournal = "journal.csv"\n{text}')
        return path

    return journal, config


def run(capsys, *argv):
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def split_row(line):
    line = line.strip()
    assert line.startswith("|") or "|" in line, f"not a table row: {line!r}"
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    cells = re.split(r"(?<!\\)\|", line)
    return [c.strip().replace("\\|", "|") for c in cells]


def table(text):
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) >= 2, f"no table in {text!r}"
    header, separator, *rows = (split_row(line) for line in lines)
    assert all(re.fullmatch(r":?-{3,}:?", c) for c in separator), f"bad separator row {lines[1]!r}"
    assert len(separator) == len(header) and all(len(r) == len(header) for r in rows)
    return header, separator, rows


def csv_rows(capsys, *argv):
    return list(csv.reader(io.StringIO(run(capsys, *argv, "--format", "csv"))))


def test_same_columns_and_values_as_csv(capsys, files):
    journal, config = files
    cfg = config()
    header, _, rows = table(run(capsys, "--config", str(cfg), "export", "--format", "markdown"))
    expected = csv_rows(capsys, "--config", str(cfg), "export")
    assert header == expected[0] == ["date", "account", "description", "amount", "currency"]
    assert rows == expected[1:]
    assert rows[1][2] == "Rent | January" and rows[4][2] == "Rent | Feb | late"
    assert rows[3][3] == "-59.90" and rows[4][3] == "-1150.00"


def test_amount_right_aligned(capsys, files):
    journal, config = files
    header, separator, _ = table(run(capsys, "--journal", str(journal), "export", "--format", "markdown"))
    for name, cell in zip(header, separator):
        assert cell.endswith(":") == (name == "amount"), f"column {name}: {cell!r}"


def test_default_format_from_config(capsys, files):
    journal, config = files
    cfg = config('[export]\ndefault_format = "markdown"\n')
    header, _, rows = table(run(capsys, "--config", str(cfg), "export"))
    assert header[0] == "date" and len(rows) == 6


def test_columns_and_date_format(capsys, files):
    journal, config = files
    cfg = config('[export]\ndefault_format = "markdown"\ncolumns = ["amount", "date", "description"]\ndate_format = "%d.%m.%Y"\n')
    header, separator, rows = table(run(capsys, "--config", str(cfg), "export", "--account", "expenses:rent"))
    assert header == ["amount", "date", "description"]
    assert separator[0].endswith(":") and not separator[1].endswith(":")
    assert rows == [["-1150.00", "03.01.2025", "Rent | January"], ["-1150.00", "01.02.2025", "Rent | Feb | late"]]


def test_no_entries_is_just_the_header(capsys, files):
    journal, config = files
    header, _, rows = table(run(capsys, "--journal", str(journal), "export", "--format", "markdown", "--account", "nothing"))
    assert len(header) == 5 and rows == []


def test_output_file(capsys, files, tmp_path):
    journal, config = files
    out = tmp_path / "out.md"
    run(capsys, "--journal", str(journal), "export", "--format", "markdown", "--output", str(out), "--account", "income")
    _, _, rows = table(out.read_text())
    assert [r[1] for r in rows] == ["income:salary", "income:freelance"]


def test_command_line(files):
    journal, _ = files
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "--journal", str(journal), "export", "--format", "markdown"],
        cwd="/app", capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    assert len(table(done.stdout)[2]) == 6


def test_registry_and_config():
    from ledger.config import ConfigError, load_config
    from ledger.exporters import get_exporter

    assert callable(get_exporter("markdown"))
    with pytest.raises(ValueError):
        get_exporter("xml")


def test_config_still_rejects_unknown_formats(files):
    from ledger.config import ConfigError, load_config

    _, config = files
    assert load_config(config('[export]\ndefault_format = "markdown"\n')).export.default_format == "markdown"
    with pytest.raises(ConfigError):
        load_config(config('[export]\ndefault_format = "xml"\n'))


def test_other_formats_unchanged(capsys, files):
    journal, _ = files
    rows = csv_rows(capsys, "--journal", str(journal), "export")
    assert rows[2] == ["2025-01-03", "expenses:rent", "Rent | January", "-1150.00", "EUR"]
    records = json.loads(run(capsys, "--journal", str(journal), "export", "--format", "json"))
    assert records[3] == {"date": "2025-01-12", "account": "expenses:travel", "description": "Train Berlin, Hamburg", "amount": -59.9, "currency": "EUR"}
