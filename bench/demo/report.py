#!/usr/bin/env python3
"""make demo's report: the side-by-side table and an SVG plot of
throughput and memory against connections, native vs goshim.
Usage: report.py results.tsv many.native.tsv many.goshim.tsv out.svg"""
import math
import re
import sys

res_path, many_native, many_goshim, svg_path = sys.argv[1:5]
rows = {}
with open(res_path) as f:
    next(f)
    for line in f:
        mode, conns, rps, p50, p99, rss, kt = line.rstrip("\n").split("\t")
        rows[(mode, int(conns))] = dict(rps=int(rps or 0), p50=int(p50 or 0), p99=int(p99 or 0),
                                        rss=int(rss or 0), kt=int(kt or 0))
conns = sorted({c for _, c in rows})


def many(path):
    try:
        mode, result, rss, rc = open(path).read().rstrip("\n").split("\t")
    except (OSError, ValueError):
        return {}
    d = dict(re.findall(r"(\w+)=(\S+)", result))
    d["rss"], d["rc"] = rss, rc
    return d


def fmt_int(v):
    return f"{v:,}" if v else "failed"


def ratio(a, b):
    return f"{b / a:.2f}x" if a and b else "-"


hdr = ("connections", "req/s native", "req/s goshim", "goshim/native", "p99 native", "p99 goshim",
       "RSS native", "RSS goshim", "threads native", "threads goshim")
print("  ".join(f"{h:>14}" for h in hdr))
for c in conns:
    n, g = rows.get(("native", c), {}), rows.get(("goshim", c), {})
    cells = (f"{c:,}", fmt_int(n.get("rps")), fmt_int(g.get("rps")), ratio(n.get("rps"), g.get("rps")),
             f"{n.get('p99', 0) / 1000:.2f} ms", f"{g.get('p99', 0) / 1000:.2f} ms",
             f"{n.get('rss', 0) / 1024:.0f} MiB", f"{g.get('rss', 0) / 1024:.0f} MiB",
             str(n.get("kt", "-")), str(g.get("kt", "-")))
    print("  ".join(f"{x:>14}" for x in cells))
print("  (threads: peak kernel threads of the server process)")

mn, mg = many(many_native), many(many_goshim)
print()
print(f"{'':>22}{'native':>26}{'goshim':>26}")
for key, label in (("reached", "threads created"), ("peak_live", "live at once"),
                   ("kernel_threads", "kernel threads"), ("rss", "peak RSS (KiB)"),
                   ("total_s", "wall time (s)"), ("error", "pthread_create error")):
    print(f"{label:>22}{mn.get(key, '-'):>26}{mg.get(key, '-'):>26}")

# ---- SVG -------------------------------------------------------------------
W, H, PAD = 460, 320, 60
colors = {"native": "#c0392b", "goshim": "#2471a3"}


def panel(x0, title, key, scale, unit):
    vals = [rows[k][key] * scale for k in rows if rows[k][key]]
    ymax = max(vals) * 1.15 if vals else 1
    lx = [math.log10(c) for c in conns]
    xmin, xmax = (min(lx) - 0.2, max(lx) + 0.2) if lx else (0, 1)

    def px(c):
        return x0 + PAD + (math.log10(c) - xmin) / (xmax - xmin) * (W - PAD - 20)

    def py(v):
        return 40 + (1 - v / ymax) * (H - 100)

    out = [f'<text x="{x0 + W / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">{title}</text>',
           f'<line x1="{x0 + PAD}" y1="{py(0)}" x2="{x0 + W - 20}" y2="{py(0)}" stroke="#333"/>',
           f'<line x1="{x0 + PAD}" y1="40" x2="{x0 + PAD}" y2="{py(0)}" stroke="#333"/>',
           f'<text x="{x0 + W / 2}" y="{H - 22}" text-anchor="middle" font-size="12">connections (log scale)</text>']
    for i in range(5):
        v = ymax * i / 4
        out.append(f'<text x="{x0 + PAD - 6}" y="{py(v) + 4}" text-anchor="end" font-size="11">{v:,.0f}</text>')
        out.append(f'<line x1="{x0 + PAD}" y1="{py(v)}" x2="{x0 + W - 20}" y2="{py(v)}" stroke="#ddd"/>')
    out.append(f'<text x="{x0 + 14}" y="{(40 + py(0)) / 2}" font-size="12" text-anchor="middle" '
               f'transform="rotate(-90 {x0 + 14} {(40 + py(0)) / 2})">{unit}</text>')
    for c in conns:
        out.append(f'<text x="{px(c)}" y="{py(0) + 16}" text-anchor="middle" font-size="11">{c:,}</text>')
    for mode, col in colors.items():
        pts = [(px(c), py(rows[(mode, c)][key] * scale)) for c in conns
               if (mode, c) in rows and rows[(mode, c)][key]]
        if len(pts) > 1:
            out.append(f'<polyline fill="none" stroke="{col}" stroke-width="2.5" points="'
                       + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
        out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{col}"/>' for x, y in pts]
    return out


body = panel(0, "Throughput", "rps", 1, "requests/s")
body += panel(W, "Server memory (peak RSS)", "rss", 1 / 1024, "MiB")
ly = H - 6
body.append(f'<rect x="{W - 120}" y="{ly - 10}" width="12" height="12" fill="{colors["native"]}"/>'
            f'<text x="{W - 104}" y="{ly}" font-size="12">native (kernel threads)</text>')
body.append(f'<rect x="{W + 60}" y="{ly - 10}" width="12" height="12" fill="{colors["goshim"]}"/>'
            f'<text x="{W + 76}" y="{ly}" font-size="12">goshim (goroutines)</text>')
if mn or mg:
    body.append(f'<text x="{W}" y="{H + 16}" text-anchor="middle" font-size="12">'
                f'{mn.get("of", "?")} live threads: native reached {mn.get("reached", "?")} '
                f'({mn.get("error", "?")}), goshim reached {mg.get("reached", "?")} '
                f'on {mg.get("kernel_threads", "?")} kernel threads</text>')
svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H + 26}" '
       f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>'
       + "".join(body) + "</svg>\n")
with open(svg_path, "w") as f:
    f.write(svg)
print(f"\nplot: {svg_path}")
