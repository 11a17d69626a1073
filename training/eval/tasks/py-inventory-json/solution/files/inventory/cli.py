import argparse
import sys
from pathlib import Path

from inventory import render, store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="inventory")
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="show the items of a CSV file")
    listing.add_argument("file", type=Path)
    listing.add_argument("--sort", choices=("sku", "name", "quantity", "price"), default="sku")
    listing.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    items = store.sorted_items(store.load(args.file), args.sort)
    text = render.as_json(items) if args.format == "json" else render.table(items)
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
