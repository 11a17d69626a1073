"""ledger [--config PATH] [--journal PATH] COMMAND

    balance [--account A]                       balances per account
    export [--format csv|json|markdown] [--account A] [--output PATH]
"""

import argparse
import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

from ledger import store
from ledger.config import FORMATS, ConfigError, load_config
from ledger.exporters import get_exporter


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ledger")
    parser.add_argument("--config", type=Path, default=Path("ledger.toml"))
    parser.add_argument("--journal", type=Path, help="overrides ledger.journal of the config")
    commands = parser.add_subparsers(dest="command", required=True)
    balance = commands.add_parser("balance", help="balances per account")
    balance.add_argument("--account")
    export = commands.add_parser("export", help="the journal's entries in another format")
    export.add_argument("--format", choices=FORMATS, help="default: export.default_format")
    export.add_argument("--account")
    export.add_argument("--output", type=Path, help="default: standard output")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"ledger: {args.config}: {exc}", file=sys.stderr)
        return 2
    entries = store.select(store.load(args.journal or config.journal), args.account)
    if args.command == "balance":
        totals: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        for e in entries:
            totals[e.account, e.currency] += e.amount
        for (account, currency), total in sorted(totals.items()):
            print(f"{account:<30} {total:>12.2f} {currency}")
        return 0
    exporter = get_exporter(args.format or config.export.default_format)
    if args.output is None:
        exporter(entries, config.export, sys.stdout)
    else:
        with args.output.open("w", encoding="utf-8", newline="") as out:
            exporter(entries, config.export, out)
    return 0
