"""The incremental prompt (`PromptView`) against `build_messages` of the same items.

Random logs as turns write them (user messages, steps of reasoning, text and tool calls that
start open and complete, failed output, steering between steps, context summaries), plus the
changes that must make the view start over: a settled item replaced, a step whose items come
apart. After every change the view must give exactly the whole rebuild's messages.
"""

import random

import pytest

from opencomposer.agent.context import PromptView, build_messages
from opencomposer.agent.protocol.common import ErrorInfo
from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    CommandExecutionItem,
    ContextSummaryItem,
    ErrorItem,
    Item,
    ItemStatus,
    ReasoningItem,
    TextInput,
    UserMessageItem,
)

SYSTEM = "You are a coding agent."


class Log:
    """Items changed the way `ItemLog` changes them, telling the view each time."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.items: list[Item] = []
        self.view = PromptView(SYSTEM)
        self.turn = 0
        self.step = 0

    def add(self, item: Item) -> int:
        self.items.append(item)
        self.view.changed(len(self.items) - 1, item)
        return len(self.items) - 1

    def replace(self, index: int, **changes: object) -> None:
        self.items[index] = self.items[index].model_copy(update=changes)
        self.view.changed(index, self.items[index])

    def check(self) -> None:
        assert self.view.messages(self.items) == build_messages(SYSTEM, self.items)

    def new_id(self) -> str:
        return f"item_{len(self.items) + 1}"

    def user(self, steer: bool = False) -> None:
        text = f"request {self.rng.randrange(1000)}"
        self.add(
            UserMessageItem(
                id=self.new_id(),
                turn_id=f"turn_{self.turn}",
                content=[TextInput(text=text)],
                steer=steer,
                status=ItemStatus.completed,
                context="<env>cwd</env>" if not steer else None,
            )
        )

    def model_step(self) -> None:
        """One step: its items start open, stream, and are completed (some failed), with
        checks while they are open."""
        self.step += 1
        turn_id = f"turn_{self.turn}"
        opened = []
        for kind in self.rng.sample(["reasoning", "text", "call", "call"], self.rng.randint(1, 4)):
            item_id = self.new_id()
            if kind == "reasoning":
                item: Item = ReasoningItem(id=item_id, turn_id=turn_id, step=self.step)
            elif kind == "text":
                item = AgentMessageItem(id=item_id, turn_id=turn_id, step=self.step)
            else:
                item = CommandExecutionItem(
                    id=item_id,
                    turn_id=turn_id,
                    step=self.step,
                    call_id=f"call_{item_id}",
                    tool="run_terminal_cmd",
                    arguments_text='{"command": "ls"}',
                    command="ls",
                )
            opened.append(self.add(item))
            if self.rng.random() < 0.3:
                self.check()
        for index in opened:
            item = self.items[index]
            failed = self.rng.random() < 0.1
            status = ItemStatus.failed if failed else ItemStatus.completed
            if isinstance(item, CommandExecutionItem):
                self.replace(index, status=status, output=f"out {self.rng.randrange(99)}")
            else:
                self.replace(index, status=status, text=f"words {self.rng.randrange(99)}")
            if self.rng.random() < 0.3:
                self.check()

    def summary(self) -> None:
        turn_id = f"turn_{self.turn}"
        self.step += 1
        reasoning = self.add(ReasoningItem(id=self.new_id(), turn_id=turn_id, step=self.step))
        summary = self.add(ContextSummaryItem(id=self.new_id(), turn_id=turn_id, step=self.step))
        self.check()
        self.replace(reasoning, status=ItemStatus.completed, text="what to keep")
        self.replace(summary, status=ItemStatus.completed, text="the story so far", state="s")

    def error(self) -> None:
        self.add(
            ErrorItem(
                id=self.new_id(),
                turn_id=f"turn_{self.turn}",
                error=ErrorInfo(kind="engine", message="gone"),
                status=ItemStatus.completed,
            )
        )


@pytest.mark.parametrize("seed", range(40))
def test_the_view_equals_the_whole_rebuild_at_every_change(seed: int) -> None:
    rng = random.Random(seed)
    log = Log(rng)
    for _ in range(rng.randint(1, 6)):
        log.turn += 1
        log.step = 0
        log.user()
        log.check()
        for _ in range(rng.randint(1, 12)):
            roll = rng.random()
            if roll < 0.08:
                log.summary()
            elif roll < 0.15:
                log.user(steer=True)
            elif roll < 0.2:
                log.error()
            else:
                log.model_step()
            log.check()
        if rng.random() < 0.3 and log.items:
            # A settled item changes after the fact (an approval's late answer, an edit
            # reverted): the view starts over.
            index = rng.randrange(len(log.items))
            log.replace(index, status=ItemStatus.interrupted)
            log.check()


def test_a_step_whose_items_come_apart_is_still_right() -> None:
    """A later item of an already settled step (not what turns write, but the view must not
    be wrong when it happens)."""
    log = Log(random.Random(0))
    log.turn = 1
    log.user()
    log.model_step()
    log.model_step()
    log.user(steer=True)
    log.check()
    log.add(
        AgentMessageItem(
            id=log.new_id(), turn_id="turn_1", step=1, text="late", status=ItemStatus.completed
        )
    )
    log.check()
    log.model_step()
    log.check()


def test_settled_messages_are_reused_from_step_to_step() -> None:
    """What makes the prefix cheap to compare: a step's prompt begins with the very message
    objects of the previous one."""
    log = Log(random.Random(1))
    log.turn = 1
    log.user()
    log.model_step()
    log.model_step()
    first = log.view.messages(log.items)
    log.model_step()
    second = log.view.messages(log.items)
    # The last step may still grow, so it is not settled yet: compare what comes before it.
    shared = max(n for n, message in enumerate(first) if message.role == "assistant")
    assert shared > 2
    assert all(a is b for a, b in zip(first[:shared], second[:shared], strict=True))
