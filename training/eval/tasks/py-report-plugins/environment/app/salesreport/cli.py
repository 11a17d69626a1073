"""salesreport EXPORT.csv [--by region|product] [--format text|csv|json] [-o FILE]"""

import argparse
import sys
from pathlib import Path

from salesreport.data import GROUPS, BadExport, build_report, load_sales
from salesreport.render import FORMATS, render


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="salesreport", description="Summarise a sales export.")
    p.add_argument("export", type=Path, help="the CSV export")
    p.add_argument("--by", choices=GROUPS, default="region", help="group by (default: region)")
    p.add_argument(
        "--format", choices=FORMATS, default="text", help="output format (default: text)"
    )
    p.add_argument("-o", "--output", type=Path, help="write here instead of to stdout")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        report = build_report(load_sales(args.export), by=args.by)
    except (OSError, BadExport) as exc:
        print(f"salesreport: {exc}", file=sys.stderr)
        return 1
    text = render(report, args.format)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
