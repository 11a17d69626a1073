"""geokit distance A B [--unit U] | geokit bearing A B | geokit convert POINT | geokit track FILE"""

import argparse
import sys
from pathlib import Path

from geokit.distance import haversine, initial_bearing
from geokit.formatting import format_distance, format_point
from geokit.parsing import ParseError, parse_point
from geokit.report import describe
from geokit.track import load_track
from geokit.units import UNITS


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="geokit")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("distance", help="great-circle distance between two points")
    d.add_argument("a")
    d.add_argument("b")
    d.add_argument("--unit", choices=sorted(UNITS), default="km")
    b = sub.add_parser("bearing", help="initial bearing from A to B")
    b.add_argument("a")
    b.add_argument("b")
    c = sub.add_parser("convert", help="a point in decimal and DMS")
    c.add_argument("point")
    t = sub.add_parser("track", help="summary of a track CSV")
    t.add_argument("file", type=Path)
    t.add_argument("--unit", choices=sorted(UNITS), default="km")
    args = p.parse_args(argv)
    try:
        if args.command == "distance":
            km = haversine(parse_point(args.a), parse_point(args.b))
            print(format_distance(km, args.unit, precision=2))
        elif args.command == "bearing":
            print(f"{initial_bearing(parse_point(args.a), parse_point(args.b)):.1f}")
        elif args.command == "convert":
            point = parse_point(args.point)
            print(format_point(point))
            print(format_point(point, style="dms"))
        else:
            sys.stdout.write(describe(load_track(args.file), args.unit))
    except ParseError as exc:
        print(f"geokit: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
