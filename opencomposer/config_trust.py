"""How a repository's `.opencomposer.toml` may change each setting: tighten, never loosen.

A workspace file travels with a repository that may not be the user's own. Every setting
that decides where code and credentials go, what commands see, what runs unasked or how much
a turn may spend carries one of these rules in `config.py`, as field metadata
(`Annotated[type, rule]`), so the rule lives beside the setting it protects. A table's rule
covers every key inside it without a rule of its own: a setting added to `server` or
`tools.sandbox` later is user-only until someone decides otherwise. Settings without a rule
(the model, timeouts, the editor's options) are the repository's to choose.

The loader asks each rule what the workspace layer may contribute, given the value the user's
own layers make without the workspace file (`below`) and the value they make with it
(`proposed`): lists of secrets and hidden paths grow (union), lists of what is let through
only shrink, booleans move only to the safe side, limits only go down, approval modes only
get stricter. A value that would loosen is refused (`Loosens`), as user-only keys always
were: the user sees which file and key, and can set the value in their own config if they
mean it. A value quietly ignored would leave the repository believing it was applied.
Environment variables and flags are the user's own and are never judged.
"""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel

from opencomposer.agent.protocol.common import ApprovalMode, ApprovalPolicy

# Declared loosest first (auto, ask, deny): the order approvals compare modes in.
_STRICTNESS = {mode: rank for rank, mode in enumerate(ApprovalMode)}


class Loosens(Exception):
    """A workspace value that would loosen a setting: why, in a few words ("it would be
    true; yours is false"); the loader adds the file, the key and the rule's risk."""


@dataclass(frozen=True)
class WorkspaceRule:
    """How a workspace file may change one setting (or every key of a table)."""

    risk: str
    """What a repository could do with the key, completing "a repository could use it to"."""

    per_key: ClassVar[bool] = False
    """Whether the rule, put on a table, judges each key inside it (user-only tables) rather
    than the table's value as a whole (an approval policy)."""

    def admit(self, below: Any, proposed: Any) -> Any:
        """The value the workspace layer contributes, or `Loosens`."""
        raise NotImplementedError


@dataclass(frozen=True)
class UserOnly(WorkspaceRule):
    """Never set by a workspace file: where code, prompts and data go, who may connect."""

    per_key: ClassVar[bool] = True

    def admit(self, below: Any, proposed: Any) -> Any:
        raise Loosens("only your own config may set it")


@dataclass(frozen=True)
class Grows(WorkspaceRule):
    """A list of secrets or hidden things: the workspace's entries are added to the user's,
    none removed (`secret_env = []` leaves the user's list as it is)."""

    def admit(self, below: list[Any], proposed: list[Any]) -> list[Any]:
        return [*below, *(entry for entry in proposed if entry not in below)]


@dataclass(frozen=True)
class Narrows(WorkspaceRule):
    """A list of what is let through: the workspace may drop entries, never add one."""

    def admit(self, below: list[Any], proposed: list[Any]) -> list[Any]:
        added = [str(entry) for entry in proposed if entry not in below]
        if added:
            raise Loosens(f"{', '.join(added)} would be added; it may only drop entries")
        return proposed


@dataclass(frozen=True)
class SafeValue(WorkspaceRule):
    """A switch: the workspace may turn it to the safe side only."""

    safe: Any = None

    def admit(self, below: Any, proposed: Any) -> Any:
        if proposed not in (self.safe, below):
            raise Loosens(f"it would be {_toml(proposed)}; only {_toml(self.safe)} may be set here")
        return proposed


@dataclass(frozen=True)
class AtMost(WorkspaceRule):
    """A limit: the workspace may lower it, never raise or remove it."""

    unset_is_unlimited: bool = True
    """Whether leaving the limit unset means no limit (else a default worked out at run time
    that the workspace file cannot be compared with)."""

    def admit(self, below: float | None, proposed: float | None) -> float | None:
        if proposed == below:
            return proposed
        if below is None:
            if self.unset_is_unlimited:
                return proposed
            raise Loosens("your settings leave it to a default worked out at run time")
        if proposed is None or proposed > below:
            raise Loosens(f"{_toml(proposed)} is above your {below}; it may only lower it")
        return proposed


@dataclass(frozen=True)
class StricterApproval(WorkspaceRule):
    """An approval policy: every class mode and rule at least as strict as the user's, and a
    new rule for a tool or command at least as strict as the strictest mode in the user's
    policy (a rule decides before the class modes, so anything looser could let a call run
    that the user's policy asks about or refuses)."""

    def admit(self, below: ApprovalPolicy, proposed: ApprovalPolicy) -> ApprovalPolicy:
        modes = [*_modes(below)]
        ceiling = max(modes, key=_STRICTNESS.__getitem__, default=ApprovalMode.auto)
        for name in type(below).model_fields:
            ours, theirs = getattr(below, name), getattr(proposed, name)
            if isinstance(ours, ApprovalMode):
                _no_looser(name, ours, theirs)
            elif isinstance(ours, dict):
                for key, mode in theirs.items():
                    _no_looser(f"{name}[{key!r}]", ours.get(key, ceiling), mode)
            elif ours != theirs:
                raise Loosens(f"{name} cannot be changed by a workspace file")
        return proposed


def _modes(policy: ApprovalPolicy) -> Iterator[ApprovalMode]:
    for name in type(policy).model_fields:
        value = getattr(policy, name)
        if isinstance(value, ApprovalMode):
            yield value
        elif isinstance(value, dict):
            yield from value.values()


def _no_looser(name: str, ours: ApprovalMode, theirs: ApprovalMode) -> None:
    if _STRICTNESS[theirs] < _STRICTNESS[ours]:
        raise Loosens(f"{name} would be {theirs.value}, looser than your {ours.value}")


def _toml(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value)


def rule_of(model: type[BaseModel], name: str) -> WorkspaceRule | None:
    field = model.model_fields.get(name)
    if field is None:
        return None
    return next((m for m in field.metadata if isinstance(m, WorkspaceRule)), None)


def governed(
    model: type[BaseModel],
    data: Mapping[str, Any],
    inherited: WorkspaceRule | None = None,
    prefix: str = "",
) -> Iterator[tuple[str, WorkspaceRule]]:
    """Each dotted key a workspace file sets that a rule governs, with the rule: a key's own
    rule, else its table's. A table is followed down while its keys are judged one by one;
    a key the model does not know inherits its table's rule (and is refused by a user-only
    one before validation could name it)."""
    for name, value in data.items():
        key = f"{prefix}{name}"
        rule = rule_of(model, name) or inherited
        table = _table(model, name)
        if isinstance(value, Mapping) and table and (rule is None or rule.per_key):
            yield from governed(table, value, rule, key + ".")
        elif rule is not None:
            yield key, rule


def _table(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    """The model of a setting that is a table, else None."""
    field = model.model_fields.get(name)
    inner = field.annotation if field is not None else None
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None
