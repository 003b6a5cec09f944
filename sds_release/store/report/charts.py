"""Inline SVG charts for the release report: grouped bars, stacked bar, heatmap.

Each function returns one ``<svg>`` element as text (no script, no external resource) whose
data marks carry ``class="mark"`` and a ``<title>`` tooltip, so a browser test can count them.
Pure string building on numbers it is given; :mod:`sds_release.store.report.page` decides which
numbers.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

WIDTH = 640
"""viewBox width of every chart (about an A4 text column at 96 dpi)."""
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#7f7f7f")
"""Series colours, colour-blind safe order (DP first, synthetic second)."""


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a bar chart: its name and a value per category (None = no value)."""

    name: str
    values: tuple[float | None, ...]


def esc(text: object) -> str:
    """HTML/SVG-escaped text."""
    return html.escape(str(text), quote=True)


def num(value: Any, fmt: str = ".4g") -> str:
    """A figure of the pages, formatted (``fmt``); empty where it is missing (None).

    >>> num(0.000123456, ".3g"), num(None), num(2)
    ('0.000123', '', '2')
    """
    return "" if value is None else format(float(value), fmt)


def eps_text(x: float) -> str:
    """ε as the pages print it (four significant digits)."""
    return num(x, ".4g")


def delta_text(x: float) -> str:
    """δ as the pages print it (three significant digits)."""
    return num(x, ".3g")


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values from 0 to at least ``top``.

    >>> nice_ticks(93)
    [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    >>> nice_ticks(0)
    [0.0, 1.0]
    """
    if not math.isfinite(top) or top <= 0:
        return [0.0, 1.0]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(top / step - 1e-9)
    return [float(round(i * step, 12)) for i in range(n + 1)]


def fmt_number(x: float) -> str:
    """Compact number for labels: integers with thousands separators, else 3 significant digits.

    >>> fmt_number(12500), fmt_number(0.0423), fmt_number(2.5)
    ('12,500', '0.0423', '2.5')
    """
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:.3g}"


def _legend(series: Sequence[Series], x: float, y: float) -> str:
    out, cx = [], x
    for i, s in enumerate(series):
        out.append(
            f'<rect x="{cx:.1f}" y="{y - 9:.1f}" width="10" height="10" '
            f'fill="{PALETTE[i % len(PALETTE)]}"/>'
            f'<text x="{cx + 14:.1f}" y="{y:.1f}" class="legend">{esc(s.name)}</text>'
        )
        cx += 24 + 7 * len(s.name)
    return "".join(out)


def _svg(height: float, label: str, body: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" '
        f'role="img" aria-label="{esc(label)}" class="chart-svg">{body}</svg>'
    )


def hbars(
    categories: Sequence[str],
    series: Sequence[Series],
    *,
    label: str,
    value_format: Callable[[float], str] = fmt_number,
    label_width: int = 170,
) -> str:
    """Horizontal grouped bars: one row per category, one bar per series in it."""
    n_s = max(len(series), 1)
    bar, gap = 9.0, 7.0
    row = bar * n_s + gap
    top, left, right = 34.0, float(label_width), 70.0
    height = top + row * len(categories) + 26
    vals = [v for s in series for v in s.values if v is not None and math.isfinite(v)]
    ticks = nice_ticks(max(vals, default=0.0))
    scale = (WIDTH - left - right) / ticks[-1]
    body = [_legend(series, left, 16)]
    for t in ticks:
        x = left + t * scale
        body.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 4:.1f}" y2="{height - 22:.1f}" '
            f'class="grid"/><text x="{x:.1f}" y="{height - 8:.1f}" class="tick" '
            f'text-anchor="middle">{esc(value_format(t))}</text>'
        )
    for i, cat in enumerate(categories):
        y0 = top + i * row
        short = cat if len(cat) <= label_width // 7 else cat[: label_width // 7 - 1] + "…"
        body.append(
            f'<text x="{left - 6:.1f}" y="{y0 + row / 2 + 1:.1f}" class="cat" '
            f'text-anchor="end"><title>{esc(cat)}</title>{esc(short)}</text>'
        )
        for j, s in enumerate(series):
            v = s.values[i]
            y = y0 + j * bar
            if v is None or not math.isfinite(v):
                body.append(
                    f'<text x="{left + 3:.1f}" y="{y + bar - 1:.1f}" class="na">'
                    f"{esc(s.name)}: not reported</text>"
                )
                continue
            w = max(v * scale, 0.0)
            body.append(
                f'<rect class="mark" x="{left:.1f}" y="{y:.1f}" width="{w:.2f}" '
                f'height="{bar - 1:.1f}" fill="{PALETTE[j % len(PALETTE)]}">'
                f"<title>{esc(cat)}: {esc(s.name)} {esc(value_format(v))}</title></rect>"
                f'<text x="{left + w + 3:.1f}" y="{y + bar - 1:.1f}" class="val">'
                f"{esc(value_format(v))}</text>"
            )
    return _svg(height, label, "".join(body))


def vbars(
    categories: Sequence[str],
    series: Sequence[Series],
    *,
    label: str,
    axis_label: str = "",
    value_format: Callable[[float], str] = fmt_number,
    top_value: float | None = None,
) -> str:
    """Vertical grouped bars: one group per category (lengths, count buckets...)."""
    n_s = max(len(series), 1)
    left, right, top, bottom = 56.0, 12.0, 34.0, 40.0
    height = 250.0
    plot_h = height - top - bottom
    group = (WIDTH - left - right) / max(len(categories), 1)
    bar = min(28.0, (group - 8) / n_s)
    vals = [v for s in series for v in s.values if v is not None and math.isfinite(v)]
    ticks = nice_ticks(top_value if top_value is not None else max(vals, default=0.0))
    scale = plot_h / ticks[-1]
    body = [_legend(series, left, 16)]
    for t in ticks:
        y = top + plot_h - t * scale
        body.append(
            f'<line x1="{left:.1f}" x2="{WIDTH - right:.1f}" y1="{y:.1f}" y2="{y:.1f}" '
            f'class="grid"/><text x="{left - 5:.1f}" y="{y + 4:.1f}" class="tick" '
            f'text-anchor="end">{esc(value_format(t))}</text>'
        )
    if axis_label:
        body.append(
            f'<text x="{left + (WIDTH - left - right) / 2:.1f}" y="{height - 4:.1f}" '
            f'class="axis" text-anchor="middle">{esc(axis_label)}</text>'
        )
    for i, cat in enumerate(categories):
        gx = left + i * group + (group - bar * n_s) / 2
        body.append(
            f'<text x="{left + (i + 0.5) * group:.1f}" y="{top + plot_h + 16:.1f}" class="cat" '
            f'text-anchor="middle">{esc(cat)}</text>'
        )
        for j, s in enumerate(series):
            v = s.values[i]
            if v is None or not math.isfinite(v):
                continue
            h = max(v * scale, 0.0)
            body.append(
                f'<rect class="mark" x="{gx + j * bar:.1f}" y="{top + plot_h - h:.2f}" '
                f'width="{bar - 2:.1f}" height="{h:.2f}" fill="{PALETTE[j % len(PALETTE)]}">'
                f"<title>{esc(cat)}: {esc(s.name)} {esc(value_format(v))}</title></rect>"
            )
    return _svg(height, label, "".join(body))


def stacked(
    parts: Sequence[tuple[str, float]], *, label: str, value_format: Callable[[float], str]
) -> str:
    """One horizontal bar split into named parts (e.g. a lifetime budget), with a legend."""
    total = sum(max(v, 0.0) for _, v in parts) or 1.0
    left, y, bar_h = 10.0, 40.0, 26.0
    width = WIDTH - 2 * left
    body, x = [], left
    legend = _legend([Series(f"{n}: {value_format(v)}", ()) for n, v in parts], left, 16)
    for i, (name, v) in enumerate(parts):
        w = max(v, 0.0) / total * width
        body.append(
            f'<rect class="mark" x="{x:.2f}" y="{y:.1f}" width="{w:.2f}" height="{bar_h:.1f}" '
            f'fill="{PALETTE[i % len(PALETTE)]}"><title>{esc(name)}: {esc(value_format(v))}'
            f"</title></rect>"
        )
        x += w
    return _svg(y + bar_h + 10, label, legend + "".join(body))


def heatmap(
    labels: Sequence[str],
    matrix: Sequence[Sequence[float | None]],
    *,
    label: str,
    value_format: Callable[[float], str] = lambda v: f"{v:.3f}",
) -> str:
    """A square matrix of values in [0, 1] as coloured cells (white 0 -> dark red 1).

    Cells that are None or NaN (the diagonal, missing pairs) are left blank and are not marks.
    """
    n = len(labels)
    left, top = 130.0, 120.0
    cell = min(32.0, (WIDTH - left - 10) / max(n, 1))
    height = top + cell * n + 50
    body = []
    for i, name in enumerate(labels):
        short = name if len(name) <= 18 else name[:17] + "…"
        body.append(
            f'<text x="{left - 5:.1f}" y="{top + (i + 0.65) * cell:.1f}" class="cat" '
            f'text-anchor="end">{esc(short)}</text>'
            f'<text transform="translate({left + (i + 0.6) * cell:.1f},{top - 5:.1f}) '
            f'rotate(-60)" class="cat">{esc(short)}</text>'
        )
        for j in range(n):
            v = matrix[i][j]
            if v is None or not math.isfinite(v):
                continue
            shade = max(0.0, min(1.0, v))
            r, g, b = 255, int(255 - 200 * shade), int(255 - 220 * shade)
            body.append(
                f'<rect class="mark" x="{left + j * cell:.1f}" y="{top + i * cell:.1f}" '
                f'width="{cell - 1:.1f}" height="{cell - 1:.1f}" fill="rgb({r},{g},{b})">'
                f"<title>{esc(labels[i])} × {esc(labels[j])}: {esc(value_format(v))}</title>"
                f"</rect>"
            )
            if cell >= 24:
                body.append(
                    f'<text x="{left + (j + 0.5) * cell:.1f}" y="{top + (i + 0.62) * cell:.1f}" '
                    f'class="cell" text-anchor="middle">{esc(f"{v:.2f}")}</text>'
                )
    y = top + n * cell + 18
    for k in range(11):
        v = k / 10
        body.append(
            f'<rect x="{left + k * 20:.1f}" y="{y:.1f}" width="20" height="10" '
            f'fill="rgb(255,{int(255 - 200 * v)},{int(255 - 220 * v)})"/>'
        )
    body.append(
        f'<text x="{left - 5:.1f}" y="{y + 9:.1f}" class="tick" text-anchor="end">0</text>'
        f'<text x="{left + 225:.1f}" y="{y + 9:.1f}" class="tick">1</text>'
    )
    return _svg(height, label, "".join(body))
