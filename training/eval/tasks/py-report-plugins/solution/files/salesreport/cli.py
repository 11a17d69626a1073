"""salesreport EXPORT.csv [--by region|product] [--format NAME] [--plugin MODULE]... [-o FILE]
salesreport --list-formats [--plugin MODULE]..."""

import argparse
import importlib
import os
import sys
from pathlib import Path

from salesreport import formats
from salesreport.data import GROUPS, BadExport, build_report, load_sales

PLUGINS_VARIABLE = "SALESREPORT_PLUGINS"
"""Plugin modules to load, comma-separated, before those of --plugin."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="salesreport", description="Summarise a sales export.")
    p.add_argument("export", type=Path, nargs="?", help="the CSV export")
    p.add_argument("--by", choices=GROUPS, default="region", help="group by (default: region)")
    p.add_argument(
        "--format", default="text", help="output format (default: text; see --list-formats)"
    )
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help=f"import a module that registers formats (repeatable; also ${PLUGINS_VARIABLE})",
    )
    p.add_argument("--list-formats", action="store_true", help="print the formats and exit")
    p.add_argument("-o", "--output", type=Path, help="write here instead of to stdout")
    return p


def plugin_modules(args: argparse.Namespace) -> list[str]:
    from_env = os.environ.get(PLUGINS_VARIABLE, "").split(",")
    return [name.strip() for name in from_env if name.strip()] + args.plugin


def load_plugin(name: str) -> None:
    importlib.import_module(name)


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    for name in plugin_modules(args):
        try:
            load_plugin(name)
        except Exception as exc:  # a plugin's own errors, ImportError first
            p.error(f"cannot load the plugin {name}: {type(exc).__name__}: {exc}")
    if args.list_formats:
        for name in formats.names():
            print(name)
        return 0
    if args.export is None:
        p.error("the export to summarise is needed")
    try:
        formatter = formats.get(args.format)
    except formats.UnknownFormat as exc:
        p.error(str(exc))
    try:
        report = build_report(load_sales(args.export), by=args.by)
    except (OSError, BadExport) as exc:
        print(f"salesreport: {exc}", file=sys.stderr)
        return 1
    text = formatter(report)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
