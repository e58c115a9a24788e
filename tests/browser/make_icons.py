"""Draw the PWA's icons as PNG files, with the standard library only (zlib + struct).

    python tests/browser/make_icons.py      # rewrites charlie/adapters/web/static/icons/*.png

The icon is a white "C" with an amber dot in its opening (a remembered thing) on Charlie's
teal. Shapes are signed distance functions, so the edges are anti-aliased without
supersampling. The maskable icon fills the whole square and keeps the glyph inside the
centre 80 % (the safe zone launchers never crop).
"""

from __future__ import annotations

import math
import struct
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

ICONS = Path(__file__).resolve().parents[2] / "charlie/adapters/web/static/icons"

TEAL = (47, 111, 104)
WHITE = (255, 253, 248)
AMBER = (233, 162, 59)

Colour = tuple[int, int, int]
Shape = Callable[[float, float], float]  # signed distance in pixels, negative inside


def rounded_square(size: float, radius: float) -> Shape:
    half = size / 2

    def distance(x: float, y: float) -> float:
        qx = abs(x - half) - (half - radius)
        qy = abs(y - half) - (half - radius)
        outside = math.hypot(max(qx, 0.0), max(qy, 0.0))
        return outside + min(max(qx, qy), 0.0) - radius

    return distance


def letter_c(size: float, scale: float) -> Shape:
    centre = size / 2
    mid = size * 0.25 * scale  # radius of the stroke's centre line
    half_width = size * 0.075 * scale
    slot = size * 0.11 * scale  # half the height of the opening on the right

    def distance(x: float, y: float) -> float:
        ring = abs(math.hypot(x - centre, y - centre) - mid) - half_width
        opening = max(centre - x, abs(y - centre) - slot)
        return max(ring, -opening)

    return distance


def dot(size: float, scale: float) -> Shape:
    cx = size / 2 + size * 0.25 * scale
    cy = size / 2
    radius = size * 0.07 * scale

    def distance(x: float, y: float) -> float:
        return math.hypot(x - cx, y - cy) - radius

    return distance


def coverage(distance: float) -> float:
    return min(1.0, max(0.0, 0.5 - distance))


def draw(size: int, layers: list[tuple[Shape, Colour]]) -> bytes:
    """RGBA rows, each shape painted over the previous ones ("over" compositing)."""
    rows = bytearray()
    for py in range(size):
        rows.append(0)  # PNG filter type: none
        for px in range(size):
            x, y = px + 0.5, py + 0.5
            r = g = b = a = 0.0
            for shape, colour in layers:
                alpha = coverage(shape(x, y))
                if alpha == 0.0:
                    continue
                out = alpha + a * (1 - alpha)
                r = (colour[0] * alpha + r * a * (1 - alpha)) / out
                g = (colour[1] * alpha + g * a * (1 - alpha)) / out
                b = (colour[2] * alpha + b * a * (1 - alpha)) / out
                a = out
            rows += bytes((round(r), round(g), round(b), round(a * 255)))
    return bytes(rows)


def png(size: int, rgba_rows: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rgba_rows, 9))
        + chunk(b"IEND", b"")
    )


def icon(size: int, *, maskable: bool) -> bytes:
    if maskable:  # full bleed; the glyph stays well inside the 80 % safe zone
        background = rounded_square(size, 0.0)
        scale = 0.82
    else:
        background = rounded_square(size, size * 0.22)
        scale = 1.0
    layers = [
        (background, TEAL),
        (letter_c(size, scale), WHITE),
        (dot(size, scale), AMBER),
    ]
    return png(size, draw(size, layers))


def main() -> None:
    ICONS.mkdir(parents=True, exist_ok=True)
    files = {
        "icon-192.png": icon(192, maskable=False),
        "icon-512.png": icon(512, maskable=False),
        "icon-maskable-512.png": icon(512, maskable=True),
        "apple-touch-icon.png": icon(180, maskable=True),  # iOS rounds the corners itself
    }
    for name, data in files.items():
        (ICONS / name).write_bytes(data)
        sys.stdout.write(f"wrote {ICONS / name} ({len(data)} bytes)\n")


if __name__ == "__main__":
    main()
