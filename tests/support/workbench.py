"""The VS Code workbench in Chromium, as a user drives it: commands from the palette, the
opencomposer chat view (a webview: frames inside frames), editors, notifications. Every wait is
bounded and says what it waited for."""

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from playwright.sync_api import FrameLocator, Locator, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

T = TypeVar("T")
WAIT_S = 30
MOD = "Control"


def until(what: str, condition: Callable[[], T], timeout: float = WAIT_S) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def rendered(locator: Locator) -> str:
    """The text of editor lines as Monaco renders them (spaces as no-break spaces)."""
    return "".join(locator.all_inner_texts()).replace("\u00a0", " ")


class Workbench:
    def __init__(self, page: Page) -> None:
        self.page = page

    def open_folder(self, url: str) -> None:
        self.page.goto(url)
        self.page.wait_for_selector(".monaco-workbench", timeout=WAIT_S * 2000)
        self.page.wait_for_selector(
            '.activitybar [aria-label="opencomposer"]', timeout=WAIT_S * 2000
        )

    # ------------------------------------------------------------------ commands

    def run_command(self, title: str) -> None:
        """Run a command by its title from the command palette, as a user would. The palette
        lists the commands registered when it opens, so while extensions are still starting
        it is closed and opened again until the command is there."""
        box = self.page.locator(".quick-input-widget input")
        row = self.page.locator(".quick-input-list .monaco-list-row", has_text=title).first
        deadline = time.monotonic() + WAIT_S
        while True:
            self.page.keyboard.press("F1")
            box.wait_for(state="visible")
            box.fill(f">{title}")
            try:
                row.wait_for(state="visible", timeout=3000)
                break
            except PlaywrightTimeout:
                self.page.keyboard.press("Escape")
                if time.monotonic() > deadline:
                    raise AssertionError(f"no command {title!r} in the palette") from None
        self.page.keyboard.press("Enter")
        # Closed, or reused at once by an input box the command opened.
        until(
            "the palette to close",
            lambda: not box.is_visible() or not box.input_value().startswith(">"),
        )

    def answer_input(self, prompt: str, text: str) -> None:
        """Type into the input box a command opened (`showInputBox` with `prompt`), confirm."""
        widget = self.page.locator(".quick-input-widget", has_text=prompt)
        widget.wait_for(state="visible")
        box = widget.locator("input")
        box.fill(text)
        until("the input to take the text", lambda: box.input_value() == text)
        self.page.keyboard.press("Enter")

    # ------------------------------------------------------------------ the chat view

    def show_chat(self) -> FrameLocator:
        # Its activity bar icon (a click on it while it is shown would hide the side bar).
        icon = self.page.locator('.activitybar .action-item:has([aria-label="opencomposer"])')
        if "checked" not in (icon.get_attribute("class") or ""):
            icon.click()
            self.page.mouse.move(700, 450)  # its hover would cover the side bar
        chat = self.chat
        chat.locator("#input").wait_for(state="visible", timeout=WAIT_S * 1000)
        return chat

    @property
    def chat(self) -> FrameLocator:
        return self.page.frame_locator("iframe.webview.ready").frame_locator("#active-frame")

    def chat_text(self) -> str:
        return self.chat.locator("#items").inner_text()

    def send(self, text: str) -> None:
        box = self.chat.locator("#input")
        box.fill(text)
        box.press("Enter")

    def until_chat_shows(self, pattern: str, timeout: float = WAIT_S) -> str:
        return until(
            f"the chat to show {pattern!r} (it shows {self.chat_text()!r})",
            lambda: re.search(pattern, self.chat_text()) and self.chat_text(),
            timeout,
        )

    def chat_button(self, name: str) -> Locator:
        return self.chat.get_by_role("button", name=name)

    # ------------------------------------------------------------------ editors

    def open_file(self, relative: str) -> None:
        self.page.keyboard.press(f"{MOD}+P")
        box = self.page.locator(".quick-input-widget input")
        box.wait_for(state="visible")
        box.fill(relative)
        name = Path(relative).name
        self.page.locator(".quick-input-list .monaco-list-row", has_text=name).first.wait_for()
        self.page.keyboard.press("Enter")
        self.page.locator(f'.tab[data-resource-name="{name}"]').wait_for()
        self.page.locator(".monaco-editor.focused").wait_for()

    def focus_editor(self) -> None:
        self.page.locator(".editor-instance .monaco-editor .view-lines").first.click()

    def editor_text(self) -> str:
        """The active editor's text, as rendered (all lines of a short file)."""
        return rendered(self.page.locator(".editor-instance .monaco-editor .view-lines").first)

    def is_dirty(self, name: str) -> bool:
        tab = self.page.locator(f'.tab[data-resource-name="{name}"]')
        return "dirty" in (tab.get_attribute("class") or "")

    def go_to_line(self, line: int, column: int = 1) -> None:
        self.page.keyboard.press(f"{MOD}+G")
        box = self.page.locator(".quick-input-widget input")
        box.wait_for(state="visible")
        box.fill(f":{line}:{column}")
        self.page.keyboard.press("Enter")

    def quick_fix(self, title: str) -> None:
        """Open the Quick Fix menu at the cursor (Ctrl+.) and pick the action titled so."""
        self.page.keyboard.press(f"{MOD}+.")
        rows = self.page.locator(".action-widget .monaco-list-row.action")
        rows.first.wait_for()
        titles = [text.strip() for text in rows.all_inner_texts()]
        index = next((i for i, text in enumerate(titles) if title in text), None)
        assert index is not None, f"no {title!r} among the quick fixes {titles}"
        # The menu's rows take the keyboard (the pointer would land on the editor's hover).
        for _ in range(index):
            self.page.keyboard.press("ArrowDown")
        self.page.keyboard.press("Enter")

    def until_squiggle(self) -> None:
        """An error squiggle in the active editor: a diagnostic has arrived."""
        self.page.locator(".editor-instance .squiggly-error").first.wait_for()

    # ------------------------------------------------------------------ notifications

    def notifications(self) -> str:
        return " | ".join(self.page.locator(".notification-toast").all_inner_texts())

    def until_notified(self, pattern: str, timeout: float = WAIT_S) -> str:
        return until(
            f"a notification matching {pattern!r} (shown: {self.notifications()!r})",
            lambda: re.search(pattern, self.notifications()) and self.notifications(),
            timeout,
        )
