"""A few lines about a track, for the drivers' daily summary."""

import geokit.core as gc
from geokit.track import Track


def describe(track: Track, unit: str = "km") -> str:
    if len(track.points) < 2:
        return "no movement"
    start, end = track.points[0], track.points[-1]
    leg, leg_km = track.longest_leg()
    radius = gc.haversine(track.bbox.center, gc.Point(track.bbox.north, track.bbox.east))
    lines = [
        f"from {gc.format_point(start, precision=4)} to {gc.format_point(end, precision=4)}",
        f"driven {gc.format_distance(track.length_km, unit)} in {len(track.points) - 1} legs "
        f"(longest: leg {leg + 1}, {gc.format_distance(leg_km, unit)})",
        f"straight line {gc.format_distance(gc.haversine(start, end), unit)}, "
        f"heading {gc.initial_bearing(start, end):.0f}°",
        f"area {gc.format_point(track.bbox.center, precision=4)} "
        f"± {gc.format_distance(radius, unit)}",
    ]
    return "\n".join(lines) + "\n"
