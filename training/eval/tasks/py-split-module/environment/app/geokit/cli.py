"""geokit distance A B [--unit U] | geokit bearing A B | geokit convert POINT | geokit track FILE"""

import argparse
import sys
from pathlib import Path

from geokit import core
from geokit.report import describe
from geokit.track import load_track


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="geokit")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("distance", help="great-circle distance between two points")
    d.add_argument("a")
    d.add_argument("b")
    d.add_argument("--unit", choices=sorted(core.UNITS), default="km")
    b = sub.add_parser("bearing", help="initial bearing from A to B")
    b.add_argument("a")
    b.add_argument("b")
    c = sub.add_parser("convert", help="a point in decimal and DMS")
    c.add_argument("point")
    t = sub.add_parser("track", help="summary of a track CSV")
    t.add_argument("file", type=Path)
    t.add_argument("--unit", choices=sorted(core.UNITS), default="km")
    args = p.parse_args(argv)
    try:
        if args.command == "distance":
            km = core.haversine(core.parse_point(args.a), core.parse_point(args.b))
            print(core.format_distance(km, args.unit, precision=2))
        elif args.command == "bearing":
            print(f"{core.initial_bearing(core.parse_point(args.a), core.parse_point(args.b)):.1f}")
        elif args.command == "convert":
            point = core.parse_point(args.point)
            print(core.format_point(point))
            print(core.format_point(point, style="dms"))
        else:
            sys.stdout.write(describe(load_track(args.file), args.unit))
    except core.ParseError as exc:
        print(f"geokit: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
