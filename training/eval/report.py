"""A bench run as numbers, a Markdown report with its plots, and two runs side by side.

pass@k is the unbiased estimator of Chen et al. (2021): with n attempts of which c passed,
1 - C(n-c, k) / C(n, k), averaged over tasks; k cannot exceed the attempts a task has. An
oracle run reports, per task, whether it is valid: the oracle passes and the untouched
repository fails.
"""

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from opencomposer.training.eval.results import RunInfo, TrialResult


def pass_at_k(n: int, c: int, k: int) -> float:
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} attempts, the task has {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass(frozen=True)
class TaskSummary:
    task: str
    category: str
    attempts: int
    passed: int
    mean_reward: float
    prompt_tokens: float
    completion_tokens: float
    steps: float
    tool_calls: float
    seconds: float
    lines_changed: float
    errors: int

    def pass_at(self, k: int) -> float:
        return pass_at_k(self.attempts, self.passed, k)

    @property
    def tokens(self) -> float:
        return self.prompt_tokens + self.completion_tokens

    def cost(self, price: tuple[float, float]) -> float:
        """Mean dollars per attempt at `price` (per million prompt and completion tokens)."""
        return (self.prompt_tokens * price[0] + self.completion_tokens * price[1]) / 1e6


def summarize(results: Iterable[TrialResult]) -> list[TaskSummary]:
    """One row per task of an agent run (oracle trials are left out), sorted by task."""
    by_task: dict[str, list[TrialResult]] = defaultdict(list)
    for result in results:
        if result.kind == "agent":
            by_task[result.task].append(result)
    rows = []
    for task, trials in sorted(by_task.items()):
        rows.append(
            TaskSummary(
                task=task,
                category=trials[0].category,
                attempts=len(trials),
                passed=sum(t.passed for t in trials),
                mean_reward=statistics.fmean(t.reward for t in trials),
                prompt_tokens=statistics.fmean(t.prompt_tokens for t in trials),
                completion_tokens=statistics.fmean(t.completion_tokens for t in trials),
                steps=statistics.fmean(t.steps for t in trials),
                tool_calls=statistics.fmean(t.tool_calls for t in trials),
                seconds=statistics.fmean(
                    t.setup_seconds + t.agent_seconds + t.verifier_seconds for t in trials
                ),
                lines_changed=statistics.fmean(t.lines_changed for t in trials),
                errors=sum(t.error is not None for t in trials),
            )
        )
    return rows


def ks_for(rows: Sequence[TaskSummary]) -> list[int]:
    """1, and the powers of two up to the fewest attempts any task has."""
    fewest = min((row.attempts for row in rows), default=1)
    ks = [1]
    while ks[-1] * 2 <= fewest:
        ks.append(ks[-1] * 2)
    if fewest not in ks:
        ks.append(fewest)
    return ks


def mean_pass_at(rows: Sequence[TaskSummary], k: int) -> float:
    return statistics.fmean(row.pass_at(k) for row in rows) if rows else 0.0


def by_category(rows: Sequence[TaskSummary]) -> dict[str, list[TaskSummary]]:
    groups: dict[str, list[TaskSummary]] = defaultdict(list)
    for row in rows:
        groups[row.category].append(row)
    return dict(sorted(groups.items()))


@dataclass(frozen=True)
class OracleCheck:
    task: str
    oracle_passed: bool
    untouched_failed: bool
    problem: str | None

    @property
    def valid(self) -> bool:
        return self.oracle_passed and self.untouched_failed


def oracle_checks(results: Iterable[TrialResult]) -> list[OracleCheck]:
    trials: dict[str, dict[str, TrialResult]] = defaultdict(dict)
    for result in results:
        trials[result.task][result.kind] = result
    checks = []
    for task, kinds in sorted(trials.items()):
        oracle, untouched = kinds.get("oracle"), kinds.get("untouched")
        problems = [
            f"{kind}: {r.error or r.problem}" for kind, r in kinds.items() if r.error or r.problem
        ]
        checks.append(
            OracleCheck(
                task,
                oracle_passed=bool(oracle and oracle.passed),
                untouched_failed=bool(
                    untouched and untouched.error is None and not untouched.passed
                ),
                problem="; ".join(problems) or None,
            )
        )
    return checks


def markdown_report(info: RunInfo, results: Sequence[TrialResult], plots: Path | None) -> str:
    if info.mode == "oracle":
        return _oracle_report(info, results)
    rows = summarize(results)
    ks = ks_for(rows)
    price = info.price
    cost_head, cost_rule = (" $ |", "---|") if price else ("", "")
    lines = [
        f"# Bench run {info.run_id}",
        "",
        f"Engine: `{info.engine}` · {len(rows)} tasks · {info.attempts} attempt(s) each"
        + (f" · $ per attempt at {price[0]:g} / {price[1]:g} per million tokens" if price else ""),
        "",
        "| | "
        + " | ".join(f"pass@{k}" for k in ks)
        + " | tokens | steps | tool calls | s |"
        + cost_head,
        "|---|" + "---|" * (len(ks) + 4) + cost_rule,
    ]
    groups = by_category(rows)
    for name, group in [("**all**", rows), *groups.items()]:
        lines.append(_row(name, group, ks, price))
    lines += [
        "",
        "## Tasks",
        "",
        "| task | category | passed | mean reward | tokens | steps | tool calls | lines "
        "changed | s |" + cost_head,
        "|---|---|---|---|---|---|---|---|---|" + cost_rule,
    ]
    for row in rows:
        lines.append(
            f"| {row.task} | {row.category} | {row.passed}/{row.attempts} | "
            f"{row.mean_reward:.2f} | {row.tokens:,.0f} | {row.steps:.1f} | "
            f"{row.tool_calls:.1f} | {row.lines_changed:.0f} | {row.seconds:.1f} |"
            + (f" {row.cost(price):.4f} |" if price else "")
        )
    failed = [r for r in results if r.error or r.problem]
    if failed:
        lines += ["", "## Problems", ""]
        lines += [f"- {r.task} ({r.kind} {r.attempt}): {r.error or r.problem}" for r in failed]
    lines += _cost(info, results)
    if plots is not None:
        lines += ["", "![pass rate by category](pass_by_category.png)", ""]
        lines += ["![tokens against reward](tokens_vs_pass.png)", ""]
    return "\n".join(lines) + "\n"


def _row(
    name: str,
    group: Sequence[TaskSummary],
    ks: Sequence[int],
    price: tuple[float, float] | None,
) -> str:
    passes = " | ".join(f"{mean_pass_at(group, k):.2f}" for k in ks)
    tokens = statistics.fmean(r.tokens for r in group)
    steps = statistics.fmean(r.steps for r in group)
    calls = statistics.fmean(r.tool_calls for r in group)
    seconds = statistics.fmean(r.seconds for r in group)
    figures = f"{tokens:,.0f} | {steps:.1f} | {calls:.1f} | {seconds:.1f}"
    if price:
        figures += f" | {statistics.fmean(r.cost(price) for r in group):.4f}"
    return f"| {name} ({len(group)}) | {passes} | {figures} |"


def _oracle_report(info: RunInfo, results: Sequence[TrialResult]) -> str:
    checks = oracle_checks(results)
    valid = sum(check.valid for check in checks)
    lines = [
        f"# Oracle check {info.run_id}",
        "",
        f"{valid} of {len(checks)} tasks valid (the oracle passes, the untouched repository fails)",
        "",
        "| task | oracle passes | untouched fails | problem |",
        "|---|---|---|---|",
    ]
    for check in checks:
        lines.append(
            f"| {check.task} | {_mark(check.oracle_passed)} | {_mark(check.untouched_failed)} | "
            f"{check.problem or ''} |"
        )
    return "\n".join([*lines, *_cost(info, results)]) + "\n"


def _cost(info: RunInfo, results: Sequence[TrialResult]) -> list[str]:
    """Where a trial's time goes, the run's throughput, and the sandbox's start cost beside
    bare bubblewrap's."""
    if not results:
        return []
    lines = ["", "## Cost", ""]
    phases = (
        ("setup", "setup_seconds"),
        ("agent", "agent_seconds"),
        ("verifier", "verifier_seconds"),
    )
    means = ", ".join(
        f"{name} {statistics.fmean(getattr(r, key) for r in results):.2f} s" for name, key in phases
    )
    lines.append(f"- per trial (mean of {len(results)}): {means}")
    ran = info.trials_run if info.trials_run is not None else len(results)
    if ran == 0:
        lines.append(f"- all {len(results)} trials reused from an earlier invocation")
    elif info.wall_seconds:
        per_task = 2 if info.mode == "oracle" else info.attempts
        rate = ran / per_task / info.wall_seconds * 3600
        lines.append(
            f"- wall time {info.wall_seconds:.1f} s for {ran} trials ({ran / per_task:g} tasks) "
            f"at concurrency {info.concurrency}: {rate:,.0f} tasks/hour"
        )
    if info.sandbox_start:
        bare, task = info.sandbox_start
        lines.append(
            f"- sandbox start (median): bare `bwrap true` {bare * 1000:.1f} ms, a task's "
            f"sandbox {task * 1000:.1f} ms ({task / bare:.2f}x)"
        )
    return lines


def _mark(ok: bool) -> str:
    return "yes" if ok else "**no**"


def write_plots(results: Sequence[TrialResult], into: Path) -> list[Path]:
    """pass_by_category.png and tokens_vs_pass.png (Agg, no display)."""
    rows = summarize(results)
    into.mkdir(parents=True, exist_ok=True)
    groups = by_category(rows)
    figure = Figure(figsize=(7, 4), dpi=100)
    axes = figure.subplots()
    names = list(groups)
    axes.bar(names, [mean_pass_at(groups[n], 1) for n in names])
    axes.set_ylim(0, 1)
    axes.set_ylabel("pass@1")
    axes.tick_params(axis="x", labelrotation=30)
    figure.tight_layout()
    first = into / "pass_by_category.png"
    figure.savefig(first)
    figure = Figure(figsize=(7, 4), dpi=100)
    axes = figure.subplots()
    agent = [r for r in results if r.kind == "agent"]
    axes.scatter(
        [r.prompt_tokens + r.completion_tokens for r in agent],
        [r.reward for r in agent],
        c=["tab:green" if r.passed else "tab:red" for r in agent],
    )
    axes.set_xlabel("tokens (prompt + completion)")
    axes.set_ylabel("reward")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    second = into / "tokens_vs_pass.png"
    figure.savefig(second)
    return [first, second]


@dataclass(frozen=True)
class Flip:
    task: str
    before: float
    after: float


def compare(
    before: Sequence[TrialResult], after: Sequence[TrialResult]
) -> tuple[list[tuple[str, float | None, float | None]], list[Flip]]:
    """Per-task pass@1 of both runs (None where a run lacks the task), and the tasks whose
    majority outcome flipped."""
    first = {row.task: row.pass_at(1) for row in summarize(before)}
    second = {row.task: row.pass_at(1) for row in summarize(after)}
    table = [(task, first.get(task), second.get(task)) for task in sorted({*first, *second})]
    flips = [
        Flip(task, a, b)
        for task, a, b in table
        if a is not None and b is not None and (a >= 0.5) != (b >= 0.5)
    ]
    return table, flips


def comparison_markdown(
    names: tuple[str, str], before: Sequence[TrialResult], after: Sequence[TrialResult]
) -> str:
    table, flips = compare(before, after)
    rows_a, rows_b = summarize(before), summarize(after)
    lines = [
        f"# {names[0]} against {names[1]}",
        "",
        f"pass@1: {mean_pass_at(rows_a, 1):.2f} against {mean_pass_at(rows_b, 1):.2f} "
        f"({len(flips)} flipped)",
        "",
        f"| task | {names[0]} | {names[1]} | |",
        "|---|---|---|---|",
    ]
    flipped = {flip.task for flip in flips}
    for task, a, b in table:
        mark = ("fixed" if (b or 0) > (a or 0) else "broken") if task in flipped else ""
        lines.append(f"| {task} | {_fraction(a)} | {_fraction(b)} | {mark} |")
    return "\n".join(lines) + "\n"


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
