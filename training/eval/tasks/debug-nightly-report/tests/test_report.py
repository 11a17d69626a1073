import json

from jobs import report


def batch(n, queue, seconds):
    return {"id": n, "queue": queue, "jobs": [{"id": f"{n}-{i}", "seconds": s} for i, s in enumerate(seconds)]}


def test_empty_batch_does_not_fail():
    result = report.build_report([batch(1, "a", [1.0, 3.0]), batch(2, "a", []), batch(3, "b", [])])
    assert result["a"]["jobs"] == 2 and result["a"]["batches"] == 2
    assert result["a"]["mean_seconds"] == 2.0
    assert result["b"]["jobs"] == 0 and result["b"]["batches"] == 1


def test_empty_batch_does_not_lower_the_mean():
    result = report.build_report([batch(1, "q", [4.0]), batch(2, "q", [])])
    assert result["q"]["mean_seconds"] == 4.0


def test_nightly_run_over_the_day(tmp_path):
    out = tmp_path / "report.json"
    assert report.main(__import__("pathlib").Path("/app/data"), out) == 0
    result = json.loads(out.read_text())
    assert set(result) == {"email", "billing", "exports"}
    assert sum(q["batches"] for q in result.values()) == 40
    assert all(q["mean_seconds"] > 0 for q in result.values())
