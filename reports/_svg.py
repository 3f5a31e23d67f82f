"""Inline SVG plots for the site (no JavaScript, no plotting library: a page opens from disk as is)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["Attempt", "schedule_plot"]


@dataclass(frozen=True)
class Attempt:
    """One plotted attempt: its position, the expected delay with its tolerance, and what was observed."""

    index: int
    expected_ms: float | None
    observed_ms: float | None
    allowed_ms: float | None
    outside: bool = False


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def schedule_plot(attempts: Sequence[Attempt], *, width: int = 520, height: int = 220, title: str = "") -> str:
    """Observed (dots; red outside the tolerance) against expected (line, tolerance band) per attempt index."""
    left, right, top, bottom = 56, 12, 14, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    indexes = [a.index for a in attempts] or [0]
    values: list[float] = []
    for a in attempts:
        if a.expected_ms is not None:
            values += [a.expected_ms + (a.allowed_ms or 0.0), max(0.0, a.expected_ms - (a.allowed_ms or 0.0))]
        if a.observed_ms is not None:
            values.append(a.observed_ms)
    low_x, high_x = min(indexes), max(max(indexes), min(indexes) + 1)
    high_y = max([*values, 1.0]) * 1.05

    def x(index: float) -> float:
        return left + (index - low_x) / (high_x - low_x) * plot_w

    def y(ms: float) -> float:
        return top + plot_h - ms / high_y * plot_h

    expected = sorted({(a.index, a.expected_ms, a.allowed_ms or 0.0) for a in attempts if a.expected_ms is not None})
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title or "schedule")}">',
             f'<title>{escape(title or "observed vs expected")}</title>',
             f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#ccc"/>']
    for fraction in (0.0, 0.5, 1.0):
        ms = high_y * fraction
        parts.append(f'<text x="{left - 4}" y="{y(ms) + 4:.1f}" font-size="10" text-anchor="end">{_fmt(ms)} ms</text>')
    for index in sorted(set(indexes)):
        parts.append(f'<text x="{x(index):.1f}" y="{height - bottom + 14}" font-size="10" '
                     f'text-anchor="middle">{index}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" font-size="10" '
                 'text-anchor="middle">attempt</text>')
    if expected:
        upper = " ".join(f"{x(i):.1f},{y(e + a):.1f}" for i, e, a in expected)
        lower = " ".join(f"{x(i):.1f},{y(max(0.0, e - a)):.1f}" for i, e, a in reversed(expected))
        parts.append(f'<polygon class="band" points="{upper} {lower}" fill="#cfe3f7" stroke="none"/>')
        line = " ".join(f"{x(i):.1f},{y(e):.1f}" for i, e, _ in expected)
        parts.append(f'<polyline class="expected" points="{line}" fill="none" stroke="#1f5f9f" stroke-width="1.5"/>')
    for a in attempts:
        if a.observed_ms is None:
            continue
        colour = "#c62828" if a.outside else "#2e7d32"
        parts.append(f'<circle class="observed" cx="{x(a.index):.1f}" cy="{y(a.observed_ms):.1f}" r="3" '
                     f'fill="{colour}"><title>attempt {a.index}: observed {_fmt(a.observed_ms)} ms, expected '
                     f'{_fmt(a.expected_ms) if a.expected_ms is not None else "?"} ms</title></circle>')
    parts.append("</svg>")
    return "".join(parts)
