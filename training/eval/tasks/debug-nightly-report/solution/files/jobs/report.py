"""The nightly report: per-queue job counts and mean durations, from the day's batches."""

import json
import logging
from pathlib import Path

log = logging.getLogger("jobs.report")


def average_duration(batch: dict) -> float | None:
    """None for a batch that ran no jobs (it has no duration to average)."""
    durations = [job["seconds"] for job in batch["jobs"]]
    return round(sum(durations) / len(durations), 3) if durations else None


def build_report(batches: list[dict]) -> dict[str, dict[str, float]]:
    report: dict[str, dict[str, float]] = {}
    for batch in batches:
        queue = report.setdefault(batch["queue"], {"jobs": 0, "batches": 0, "mean_seconds": 0.0})
        queue["jobs"] += len(batch["jobs"])
        queue["batches"] += 1
        mean = average_duration(batch)
        if mean is not None:
            queue[f"batch_{batch['id']}_mean"] = mean
    for queue in report.values():
        means = [v for k, v in queue.items() if k.startswith("batch_")]
        queue["mean_seconds"] = round(sum(means) / len(means), 3) if means else 0.0
    return report


def main(folder: Path = Path("data"), out: Path = Path("report.json")) -> int:
    batches = [json.loads(p.read_text()) for p in sorted(folder.glob("batch-*.json"))]
    out.write_text(json.dumps(build_report(batches), indent=2, sort_keys=True))
    log.info("report written: %d batches", len(batches))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
