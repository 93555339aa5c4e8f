#!/usr/bin/env python3
"""check_plot.py - what a 'fedvm plot' picture shows, read back from the file.

  check_plot.py svg PROBE.svg FILE.svg   a summary of an SVG, one fact a line
  check_plot.py png FILE.png             a summary of a PNG, one fact a line

cairo writes text into an SVG as glyph outlines (<symbol> paths placed with
<use>), not as <text>. PROBE.svg is a picture drawn by fedvm plot whose texts
are known (see PROBE_* below): its outlines give the character of every glyph
in each of the three styles fedvm plot uses for words (the legend and the x
axis's name; the rotated y axis's name; the bold title), so that the texts of
FILE.svg can be read back. Tick labels, in a smaller size, are counted.

The SVG summary:
  size WxH                 the width and height attributes
  text T / ytext T / title T   each text that reads back, by style
  ticks N                  the other texts (tick labels)
  curve #RRGGBB solid|dashed N [(P pieces)]   a stroked line of a run's colour
                           with N points (in P pieces when broken)
  swatch #RRGGBB solid|dashed    a one-segment line (the legend's samples)
  dots #RRGGBB N           filled markers of a run's colour
  band #RRGGBB N           a translucent filled area of a run's colour (a sweep's
                           spread) with N corners
The PNG summary:
  size WxH, type T         from the IHDR chunk
  background N             pixels of the background colour
  colour #RRGGBB N         pixels of each run colour (to within 8 per channel)
"""
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

PROBE_LABEL = "ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz0123456789._-/()"
PROBE_METRIC = "abcdefghijklmnopqrstuvwxyz._0123456789"
PROBE_TITLE = PROBE_LABEL + ":,"

SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}href"

# The run colours, in order (matplotlib's tab10 without its grey).
PALETTE = ["1f77b4", "ff7f0e", "2ca02c", "d62728", "9467bd", "8c564b", "e377c2", "bcbd22", "17becf"]


def read_svg(path):
    root = ET.parse(path).getroot()
    glyphs = {}  # symbol id -> outline
    for sym in root.iter(SVG + "symbol"):
        p = sym.find(SVG + "path")
        glyphs[sym.get("id")] = p.get("d", "").strip() if p is not None else ""
    texts = []  # each text: the outlines of its glyphs, in order
    for g in root.iter(SVG + "g"):
        uses = g.findall(SVG + "use")
        if uses:
            texts.append([glyphs[u.get(XLINK)[1:]] for u in uses])
    return root, texts


def probe_map(path):
    """Outline -> (character, style) from the probe picture."""
    _, texts = read_svg(path)
    known = {}
    for style, s in (("text", PROBE_LABEL), ("ytext", PROBE_METRIC), ("title", PROBE_TITLE)):
        found = [t for t in texts if len(t) == len(s)]
        if len(found) != 1:
            sys.exit(f"check_plot: the probe has {len(found)} texts of {len(s)} glyphs, not one")
        for outline, ch in zip(found[0], s):
            known[outline] = (" ", None) if ch == " " else (ch, style)
    return known


def colour(style, key):
    m = re.search(key + r":rgb\(([\d.]+)%,([\d.]+)%,([\d.]+)%\)", style)
    if not m:
        return None
    return "".join("%02x" % round(float(v) * 255 / 100) for v in m.groups())


def nearest_run_colour(hexrgb):
    if hexrgb is None:
        return None
    rgb = bytes.fromhex(hexrgb)
    for c in PALETTE:
        if all(abs(a - b) <= 2 for a, b in zip(rgb, bytes.fromhex(c))):
            return c
    return None


def svg_summary(probe, path):
    known = probe_map(probe)
    root, texts = read_svg(path)
    out = ["size %sx%s" % (root.get("width", "").replace("px", ""), root.get("height", "").replace("px", ""))]
    ticks = 0
    for t in texts:
        chars = [known.get(o) for o in t]
        styles = {c[1] for c in chars if c and c[1]}
        if None in chars or len(styles) != 1:
            ticks += 1
            continue
        out.append("%s %s" % (styles.pop(), "".join(c[0] for c in chars)))
    out.append("ticks %d" % ticks)
    for p in root.iter(SVG + "path"):
        style = p.get("style", "")
        d = p.get("d", "")
        run_stroke = nearest_run_colour(colour(style, "stroke"))
        run_fill = nearest_run_colour(colour(style, "fill"))
        if run_stroke and "fill:none" in style:
            n, pieces = len(re.findall(r"[ML]", d)), d.count("M")
            dash = "dashed" if "stroke-dasharray" in style else "solid"
            if n == 2:
                out.append("swatch #%s %s" % (run_stroke, dash))
            else:
                out.append("curve #%s %s %d%s" % (run_stroke, dash, n, " (%d pieces)" % pieces if pieces > 1 else ""))
        elif run_fill and re.search(r"fill-opacity:0\.\d", style):
            out.append("band #%s %d" % (run_fill, len(re.findall(r"[ML]", d.split("Z")[0]))))
        elif run_fill:
            out.append("dots #%s %d" % (run_fill, d.count("M")))
    return out


def png_summary(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return ["not a PNG"]
    chunks, i = [], 8
    while i < len(data):
        n, kind = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + n]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[i + 8 + n:i + 12 + n])[0]:
            return ["bad CRC in " + kind.decode()]
        chunks.append((kind, body))
        i += 12 + n
    w, h, depth, ctype = struct.unpack(">IIBB", chunks[0][1][:10])
    out = ["size %dx%d" % (w, h), "type %d depth %d" % (ctype, depth)]
    if chunks[0][0] != b"IHDR" or depth != 8 or ctype not in (2, 6):
        return out
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
    stride = w * bpp
    prev = bytearray(stride)
    pixels = {}
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):  # undo the row filter
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp):
            px = bytes(line[x:x + 3])
            pixels[px] = pixels.get(px, 0) + 1
        prev = line
    out.append("background %d" % pixels.get(b"\xff\xff\xff", 0))
    for c in PALETTE:
        ref = bytes.fromhex(c)
        n = sum(k for px, k in pixels.items() if all(abs(a - b) <= 8 for a, b in zip(px, ref)))
        out.append("colour #%s %d" % (c, n))
    return out


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "svg":
        print("\n".join(svg_summary(sys.argv[2], sys.argv[3])))
    elif len(sys.argv) == 3 and sys.argv[1] == "png":
        print("\n".join(png_summary(sys.argv[2])))
    else:
        sys.exit(__doc__)
