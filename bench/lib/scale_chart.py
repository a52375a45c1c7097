"""The chart of scripts/bench scale: small panels of grouped bars, drawn as plain SVG (no
plotting dependency, as report.py's chart).

    panels = [(title, categories, {series: [value or None per category]}), ...]
    write(path, heading, panels)
"""
import html
import os

COLORS = {"kafka-share": "#2b6cb0", "Java": "#dd6b20"}
PANEL_W, PANEL_H, COLS = 330, 190, 2


def panel(x0, y0, title, cats, series):
    out = [f'<text x="{x0}" y="{y0}" font-weight="bold">{html.escape(title)}</text>']
    vals = [v for vs in series.values() for v in vs if v is not None]
    top = max(vals) if vals else 1
    top = top or 1
    base, height = y0 + PANEL_H - 40, PANEL_H - 75
    group_w = (PANEL_W - 30) / max(1, len(cats))
    bar_w = min(36, (group_w - 14) / max(1, len(series)))
    out.append(f'<line x1="{x0}" y1="{base}" x2="{x0 + PANEL_W - 30}" y2="{base}" stroke="#999"/>')
    for i, cat in enumerate(cats):
        gx = x0 + i * group_w + 7
        for j, (name, vs) in enumerate(series.items()):
            v = vs[i]
            bx = gx + j * bar_w
            if v is None:
                out.append(f'<text x="{bx + bar_w / 2:.1f}" y="{base - 4}" text-anchor="middle" fill="#c53030">–</text>')
                continue
            h = max(1.0, v / top * height)
            out.append(f'<rect x="{bx:.1f}" y="{base - h:.1f}" width="{bar_w - 2:.1f}" height="{h:.1f}" '
                       f'fill="{COLORS.get(name, "#718096")}"/>')
            label = f"{v:,.0f}" if v >= 100 else (f"{v:.1f}" if v >= 10 else f"{v:.2f}")
            out.append(f'<text x="{bx + bar_w / 2 - 1:.1f}" y="{base - h - 3:.1f}" text-anchor="middle" '
                       f'font-size="10">{label}</text>')
        out.append(f'<text x="{gx + len(series) * bar_w / 2:.1f}" y="{base + 15}" text-anchor="middle">'
                   f'{html.escape(str(cat))}</text>')
    return out


def write(path, heading, panels):
    rows = (len(panels) + COLS - 1) // COLS
    w, h = 20 + COLS * PANEL_W, 50 + rows * PANEL_H + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="22" font-size="14" font-weight="bold">{html.escape(heading)}</text>']
    for k, (title, cats, series) in enumerate(panels):
        out += panel(10 + (k % COLS) * PANEL_W, 50 + (k // COLS) * PANEL_H, title, cats, series)
    out.append(f'<text x="10" y="{h - 8}" fill="#555">blue: kafka-share; orange: Java</text>')
    out.append("</svg>")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    open(path, "w").write("\n".join(out) + "\n")
