"""How `--help` reads: click's conventions where typer's differ.

typer prints the `--help` option as taking a `<bool>` value and wraps a required argument in
braces in the usage line (`chat [OPTIONS] {REQUEST}`); neither is something a user can type.
Every command and group of the CLI is made through `CommandApp`, so each gets these rules.
"""

from typing import Any

import typer

# typer vendors click (typer._click); its commands take that copy's Context.
from typer._click import Context
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from opencomposer.serving.cli.options import FLAG


def _usage_pieces(params: list[Any], options_metavar: str | None, ctx: Context) -> list[str]:
    """The usage line as click writes it: REQUIRED bare, [OPTIONAL] in brackets."""
    pieces = [options_metavar] if options_metavar else []
    for param in params:
        if isinstance(param, TyperArgument):
            name = param.display_name_raw
            shown = name if param.required else f"[{name}]"
            pieces.append(shown + ("..." if param.nargs != 1 else ""))
        else:
            pieces.extend(param.get_usage_pieces(ctx))
    return pieces


class _HelpTakesNoValue:
    def get_help_option(self, ctx: Context) -> TyperOption | None:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = FLAG
        return option


class _Command(_HelpTakesNoValue, TyperCommand):
    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        return _usage_pieces(self.get_params(ctx), self.options_metavar, ctx)


class _Group(_HelpTakesNoValue, TyperGroup):
    """A group's usage line is typer's own (`[OPTIONS] COMMAND [ARGS]...`)."""


class CommandApp(typer.Typer):
    """A `typer.Typer` whose commands and groups print help by the rules above."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cls=_Group, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", _Command)
        return super().command(*args, **kwargs)
