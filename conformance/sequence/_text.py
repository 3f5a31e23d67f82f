"""The sequence diagram (:mod:`._rows`) as plain text: one line per row, the lanes as columns."""

from __future__ import annotations

from ._rows import Diagram, Row, ms_label

__all__ = ["render_text"]

_TX = {"client": 0, "proxy": 30, "broker": 60}
_TEXT_WIDTH = 61
#: A connection's end at the lane of the side that ended it: FIN, reset, another error.
_END_MARK = {"fin": "F", "reset": "R"}


def _text_art(row: Row) -> str:
    cells = [" "] * _TEXT_WIDTH
    for x in _TX.values():
        cells[x] = "|"
    if row.kind in ("frame", "group", "refused"):
        rule = "=" if row.action == "duplicated" else "-" if row.kind == "frame" else "."
        stop = _TX["proxy"] if row.action in ("dropped", "cut", "refused") else None
        if row.direction == "both":
            for x in range(1, _TX["broker"]):
                cells[x] = rule
            cells[1], cells[_TX["broker"] - 1] = "<", ">"
        elif row.direction == "s2c":
            low = stop if stop is not None else _TX["client"]
            for x in range(low + 1, _TX["broker"]):
                cells[x] = rule
            if stop is None:
                cells[1] = "<"
        else:
            high = stop if stop is not None else _TX["broker"]
            for x in range(1, high):
                cells[x] = rule
            if stop is None:
                cells[high - 1] = ">"
        if stop is not None:
            cells[stop] = {"dropped": "X", "refused": "X", "cut": "#"}[row.action]
        elif row.action == "delayed":
            cells[_TX["proxy"]] = "@"
    elif row.kind == "boundary":
        cells = ["="] * _TEXT_WIDTH
    elif row.kind == "end":
        cells = ["_" if cell == " " else cell for cell in cells]
        cells[_TX[row.lane or "proxy"]] = _END_MARK.get(row.action, "E")
    elif row.kind in ("section", "anomaly"):
        cells = ["~" if row.kind == "section" else "!"] * _TEXT_WIDTH
    elif row.kind == "elided":
        for x in _TX.values():
            cells[x] = ":"
    elif row.kind == "note":
        cells[_TX["client" if row.lane == "client" else "proxy"]] = "*"
    return "".join(cells)


def render_text(d: Diagram) -> str:
    """The diagram as plain text: one line per row, the lanes as columns."""
    lines = [f"{d.heading}: {d.title}, {d.outcome}", *([f"example: {d.example}"] if d.example else [])]
    lines += [("FINDING: " if d.outcome == "finding" else "") + line for line in d.findings]
    lines += [f"note: {note}" for note in d.notes]
    if d.legend:
        lines.append(d.legend)
    lines.append("legend: -> forwarded, X dropped at the proxy, # cut (connection reset), @ delayed, = duplicated, "
                 ".. collapsed flow control and pings, * a note, !! the anomaly, ==== a connection opened, "
                 "__F__ / __R__ / __E__ a connection's end (FIN, reset, error) at the side that ended it")
    lines.append("")
    lines.append(f"{'time':>10}  {'client':<30}{'proxy':<30}broker")
    for row in d.rows:
        text = row.text
        if row.kind == "note":
            text = f"{row.lane}: {text}"
        if row.effect:
            text += f"  [{row.effect}]"
        if row.marks and row.kind != "anomaly":
            text += "  !! " + ", ".join(row.marks)
        lines.append(f"{ms_label(row.t_ns):>10}  {_text_art(row)}  {text}".rstrip())
    return "\n".join(lines) + "\n"
