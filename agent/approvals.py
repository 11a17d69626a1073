"""Approval policy: decides, per tool call, whether it runs, is asked about, or is refused.

Enforced by the runtime on the harness's own classification of the call, never by the
prompt. Precedence within a policy: a rule for the tool; then, for commands, rules matching
their leading words (a matching deny refuses the whole command line; otherwise rules decide
only when they cover every command in it, a wrapper's rule covering the command it runs);
then the mode of the call's risk class. A call approved "for the thread" makes later calls of
that tool and class run without asking, but never overrides a deny.

Two policies judge every call: the thread's (what a client asked for at thread start, made no
looser than the server's) and the server's own (`agent.approval`, as configured now), and the
stricter verdict wins. A client can therefore only tighten: a rule it sends cannot win over
the server's, whatever precedence says inside one policy.
"""

from dataclasses import dataclass, field

from opencomposer.agent.protocol.common import ActionClass, ApprovalMode, ApprovalPolicy
from opencomposer.agent.tools.harness_protocol import PreparedCall

_STRICTNESS = {ApprovalMode.auto: 0, ApprovalMode.ask: 1, ApprovalMode.deny: 2}
_CLASSES = tuple(ActionClass)


def _stricter(*modes: ApprovalMode) -> ApprovalMode:
    return max(modes, key=_STRICTNESS.__getitem__)


def tightened(base: ApprovalPolicy, requested: ApprovalPolicy | None) -> ApprovalPolicy:
    """The policy a thread records: `requested` with class modes no looser than `base`'s and
    the rules of both (the stricter mode where both name the same tool or command). A
    requested rule may still say `auto` for calls its own class mode would ask about; the
    gate's floor keeps it from loosening anything the server's policy says."""
    if requested is None:
        return base

    def rules(
        ours: dict[str, ApprovalMode], theirs: dict[str, ApprovalMode]
    ) -> dict[str, ApprovalMode]:
        return {
            key: _stricter(*(m[key] for m in (ours, theirs) if key in m))
            for key in {**ours, **theirs}
        }

    return ApprovalPolicy(
        **{
            c.value: _stricter(getattr(base, c.value), getattr(requested, c.value))
            for c in _CLASSES
        },
        tools=rules(base.tools, requested.tools),
        commands=rules(base.commands, requested.commands),
    )


@dataclass(frozen=True)
class Verdict:
    mode: ApprovalMode
    reason: str
    """The rule that decided, for the approval prompt and the trace."""


@dataclass
class ApprovalGate:
    policy: ApprovalPolicy
    """The thread's policy."""

    floor: ApprovalPolicy | None = None
    """The server's policy, which every verdict is at least as strict as."""

    grants: set[tuple[str, ActionClass]] = field(default_factory=set)
    """(tool, class) pairs approved for the rest of the thread."""

    def verdict(self, call: PreparedCall) -> Verdict:
        verdicts = [_policy_verdict(self.policy, call)]
        if self.floor is not None:
            verdicts.append(_policy_verdict(self.floor, call))
        verdict = max(verdicts, key=lambda v: _STRICTNESS[v.mode])  # the thread's on a tie
        if verdict.mode == ApprovalMode.ask and (call.tool, call.action_class) in self.grants:
            return Verdict(ApprovalMode.auto, "approved earlier for this thread")
        return verdict

    def grant(self, call: PreparedCall) -> None:
        self.grants.add((call.tool, call.action_class))


def _policy_verdict(policy: ApprovalPolicy, call: PreparedCall) -> Verdict:
    name, action_class = call.tool, call.action_class
    if name in policy.tools:
        return Verdict(policy.tools[name], f"the rule for tool {name}")
    class_verdict = Verdict(
        ApprovalMode(getattr(policy, action_class.value)),
        f"the rule for {action_class.value.replace('_', ' ')} calls",
    )
    if not call.commands or not policy.commands:
        return class_verdict
    matched = _command_rules(policy, call.commands)
    denied = [rule for rule in matched if rule and policy.commands[rule] == "deny"]
    if denied:
        return Verdict(ApprovalMode.deny, f"the command rule {denied[0]!r}")
    found = [rule for rule in matched if rule]
    if not found:
        return class_verdict
    strictest = max(found, key=lambda rule: _STRICTNESS[policy.commands[rule]])
    rule_verdict = Verdict(policy.commands[strictest], f"the command rule {strictest!r}")
    if len(found) == len(matched):
        return rule_verdict
    return max(rule_verdict, class_verdict, key=lambda v: _STRICTNESS[v.mode])


def _command_rules(policy: ApprovalPolicy, argvs: list[list[str]]) -> list[str | None]:
    """The rule deciding each argv: the longest rule whose words start it, or else the
    rule of a wrapper it was unwrapped from (`python -m pytest ...` runs `pytest ...`,
    whose argv is the tail of the wrapper's)."""
    rules: list[str | None] = []
    for index, argv in enumerate(argvs):
        matching = [
            rule
            for rule in policy.commands
            if rule.split() and argv[: len(rule.split())] == rule.split()
        ]
        rule = max(matching, key=lambda r: len(r.split()), default=None)
        if rule is None:
            rule = next(
                (
                    rules[outer]
                    for outer in range(index - 1, -1, -1)
                    if rules[outer]
                    and len(argvs[outer]) > len(argv)
                    and argvs[outer][-len(argv) :] == argv
                ),
                None,
            )
        rules.append(rule)
    return rules
