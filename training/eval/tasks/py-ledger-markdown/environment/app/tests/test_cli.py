import json

from ledger.cli import main


def test_csv_export(capsys):
    assert main(["--journal", "journal.csv", "export", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "date,account,description,amount,currency" and len(lines) == 9


def test_json_export(capsys):
    assert main(["--journal", "journal.csv", "export", "--format", "json", "--account", "income"]) == 0
    assert [r["amount"] for r in json.loads(capsys.readouterr().out)] == [3200.0, 640.0]
