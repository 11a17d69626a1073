"""A few lines about a track, for the drivers' daily summary."""

from geokit.distance import haversine, initial_bearing
from geokit.formatting import format_distance, format_point
from geokit.points import Point
from geokit.track import Track


def describe(track: Track, unit: str = "km") -> str:
    if len(track.points) < 2:
        return "no movement"
    start, end = track.points[0], track.points[-1]
    leg, leg_km = track.longest_leg()
    radius = haversine(track.bbox.center, Point(track.bbox.north, track.bbox.east))
    lines = [
        f"from {format_point(start, precision=4)} to {format_point(end, precision=4)}",
        f"driven {format_distance(track.length_km, unit)} in {len(track.points) - 1} legs "
        f"(longest: leg {leg + 1}, {format_distance(leg_km, unit)})",
        f"straight line {format_distance(haversine(start, end), unit)}, "
        f"heading {initial_bearing(start, end):.0f}°",
        f"area {format_point(track.bbox.center, precision=4)} ± {format_distance(radius, unit)}",
    ]
    return "\n".join(lines) + "\n"
