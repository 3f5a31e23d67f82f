"""The sequence diagram (:mod:`._rows`) as a standalone SVG: the lanes as vertical lines, one row per frame or
note, the anomaly's key in red, the whole frame as each row's tooltip."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from ._rows import Diagram, Row, ms_label

__all__ = ["render_svg"]

_W = 1320
_X_TIME = 66
_X_NOTE = 74
_X = {"client": 400, "proxy": 740, "broker": 1080}
_X_MARK = 1092
_ROW = 22
_CHAR = 6.6  # the width of a character of the 11 px monospace font
_RED, _GREY, _INK, _FAULT = "#c62828", "#9e9e9e", "#212121", "#d84315"
_LEGEND = ("arrow: a frame the proxy forwarded;  X at the proxy: dropped;  red bar: cut (the proxy resets the "
           "connection);  clock: delayed;  double line: duplicated;  grey: flow control and pings;  red: the "
           "anomaly's key;  blue line: a connection opened;  thin dashed line with a circle: a connection's end, "
           "at the side that ended it (open circle: FIN, filled: reset or error);  hover a row for the whole frame")
_BLUE = "#1565c0"


def _fit(text: str, width: float) -> str:
    room = max(int(width / _CHAR), 4)
    return text if len(text) <= room else text[:room - 3] + "..."


def _wrap(text: str, width: int) -> list[str]:
    words, lines, line = text.split(" "), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


def _t(x: float, y: float, text: str, *, anchor: str = "start", cls: str = "", fill: str | None = None,
       width: float | None = None) -> str:
    shown = text if width is None else _fit(text, width)
    attributes = f' x="{x:.1f}" y="{y:.1f}"' + (f' text-anchor="{anchor}"' if anchor != "start" else "")
    # a style, not a fill attribute: the style sheet's rule for text would win over an attribute
    attributes += (f' class="{cls}"' if cls else "") + (f' style="fill:{fill}"' if fill else "")
    return f"<text{attributes}>{escape(shown)}</text>"


def _line(x1: float, y1: float, x2: float, y2: float, colour: str, *, head: str | None = None, dash: bool = False,
          width: float = 1.2) -> str:
    extra = (f' marker-end="url(#{head})"' if head else "") + (' stroke-dasharray="4 3"' if dash else "")
    return (f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" '
            f'stroke-width="{width}"{extra}/>')


def _cross(x: float, y: float, colour: str = _RED) -> str:
    return (_line(x - 5, y - 5, x + 5, y + 5, colour, width=2.2) + _line(x - 5, y + 5, x + 5, y - 5, colour, width=2.2))


def _svg_frame(row: Row, y: float) -> list[str]:
    """An arrow (or, for a group going both ways, a double-headed line) with its label above it."""
    red = bool(row.marks)
    colour = _RED if red else _GREY if row.muted else _INK
    head = "hr" if red else "hg" if row.muted else "hk"
    start, end = ("client", "broker") if row.direction != "s2c" else ("broker", "client")
    stops_at_proxy = row.action in ("dropped", "cut", "refused")
    x1, x2 = _X[start], _X["proxy"] if stops_at_proxy else _X[end]
    ya = y + 6
    out = []
    if row.direction == "both":
        out.append(_line(_X["client"], ya, _X["broker"], ya, colour, head=head, dash=True))
        out.append(_line(_X["broker"], ya, _X["client"], ya, colour, head=head, dash=True))
    else:
        out.append(_line(x1, ya, x2 - (5 if x2 > x1 else -5) if stops_at_proxy else x2, ya, colour,
                         head=None if stops_at_proxy else head, dash=row.kind == "group"))
    proxy = _X["proxy"]
    if row.action in ("dropped", "refused"):
        out.append(_cross(proxy, ya))
    elif row.action == "cut":
        out.append(f'<rect x="{proxy - 3}" y="{y - 8}" width="6" height="{_ROW - 2}" fill="{_RED}"/>')
    elif row.action == "delayed":
        out.append(f'<circle cx="{proxy}" cy="{ya}" r="5" fill="white" stroke="{_FAULT}" stroke-width="1.6"/>'
                   + _line(proxy, ya, proxy, ya - 3.5, _FAULT) + _line(proxy, ya, proxy + 3, ya, _FAULT))
    elif row.action == "duplicated":
        far = _X[end]
        out.append(_line(proxy, ya + 3, far, ya + 3, _FAULT, head="hf"))
    label_x1, label_x2 = sorted((x1, x2))
    weight = "b" if red or row.kind != "frame" or not row.muted else ""
    cls = "lbl" + (" b" if weight and red else "") + (" m" if row.muted and not red else "")
    out.append(_t((label_x1 + label_x2) / 2, y + 1, row.text + (f"  [{row.effect}]" if row.effect and not
                                                               stops_at_proxy else ""),
                  anchor="middle", cls=cls, fill=_RED if red else None, width=label_x2 - label_x1 - 10))
    if stops_at_proxy and row.effect:
        if row.direction == "s2c":
            out.append(_t(proxy - 12, ya + 4, row.effect, anchor="end", cls="lbl b", fill=_FAULT,
                          width=proxy - 12 - _X_NOTE))
        else:
            out.append(_t(proxy + 12, ya + 4, row.effect, cls="lbl b", fill=_FAULT,
                          width=(_X["broker"] if row.marks else _W) - proxy - 20))
    return out


def _svg_end(row: Row, y: float) -> list[str]:
    """A connection's end: a thin dashed line across the lanes, a circle at the lane of the side that ended it (open:
    FIN; filled: reset or error) and the words beside it."""
    colour = _BLUE if row.action == "fin" else _FAULT
    x = _X[row.lane or "proxy"]
    room = x - 12 - _X_NOTE if row.lane == "broker" else _W - 10 - (x + 12)
    width = min(len(row.text) * _CHAR + 12, room)
    left = x - 12 - width if row.lane == "broker" else x + 12
    return [_line(_X["client"], y, _X["broker"], y, colour, dash=True, width=1.0),
            f'<circle cx="{x}" cy="{y:.1f}" r="5" fill="{"white" if row.action == "fin" else colour}" '
            f'stroke="{colour}" stroke-width="1.6"/>',
            f'<rect x="{left:.1f}" y="{y - 8:.1f}" width="{width:.1f}" height="16" rx="3" fill="white" '
            f'stroke="{colour}"/>',
            _t(left + 6, y + 4, row.text, cls="lbl b", fill=colour, width=width - 12)]


def _svg_row(row: Row, y: float) -> list[str]:
    out: list[str] = []
    if row.kind in ("frame", "group", "refused"):
        out += _svg_frame(row, y)
    elif row.kind == "note" and row.lane == "proxy":
        width = len(row.text) * _CHAR + 12
        out.append(f'<rect x="{_X["proxy"] - width / 2:.1f}" y="{y - 8}" width="{width:.1f}" height="{_ROW - 4}" '
                   f'rx="3" fill="#ffe0d6" stroke="{_FAULT}"/>')
        out.append(_t(_X["proxy"], y + 4, row.text, anchor="middle", cls="lbl b", fill=_FAULT))
    elif row.kind == "note":
        operation = row.text.startswith("op ")
        red = bool(row.marks)
        width = min(len(row.text), 120) * _CHAR + 10
        fill = "#ffebee" if red else "#fff3c4" if operation else "#f5f5f5"
        stroke = _RED if red else "#c8a600" if operation else "#d0d0d0"
        out.append(f'<rect x="{_X_NOTE}" y="{y - 8}" width="{width:.1f}" height="{_ROW - 4}" rx="3" fill="{fill}" '
                   f'stroke="{stroke}"/>')
        cls = "lbl" + (" b" if operation or red else "") + (" m" if row.muted else "")
        out.append(_t(_X_NOTE + 5, y + 4, row.text, cls=cls, fill=_RED if red else None, width=120 * _CHAR))
    elif row.kind == "boundary":
        out.append(_line(_X_NOTE, y, _W - 10, y, _BLUE, dash=True, width=1.5))
        width = len(row.text) * _CHAR + 16
        out.append(f'<rect x="{_X["proxy"] - width / 2:.1f}" y="{y - 8}" width="{width:.1f}" height="16" '
                   f'fill="#e3f2fd" stroke="{_BLUE}"/>')
        out.append(_t(_X["proxy"], y + 4, row.text, anchor="middle", cls="lbl b", fill=_BLUE))
    elif row.kind == "end":
        out += _svg_end(row, y)
    elif row.kind == "section":
        out.append(f'<rect x="{_X_NOTE}" y="{y - 9}" width="{_W - _X_NOTE - 10}" height="{_ROW - 2}" fill="#eceff1"/>')
        out.append(_t(_X_NOTE + 6, y + 4, row.text, cls="lbl b", fill="#37474f"))
    elif row.kind == "elided":
        out.append(_t(_X["proxy"], y + 4, row.text, anchor="middle", cls="lbl i m"))
    elif row.kind == "anomaly":
        out.append(f'<rect x="{_X_NOTE}" y="{y - 9}" width="{_W - _X_NOTE - 10}" height="{_ROW - 2}" '
                   f'fill="#ffebee" stroke="{_RED}"/>')
        out.append(_t(_X_NOTE + 6, y + 4, "!! " + row.text, cls="lbl b", fill=_RED))
        return out
    if row.marks:
        out.append(_t(_X_MARK, y + 4, "!! " + ", ".join(row.marks), cls="lbl b", fill=_RED, width=_W - _X_MARK - 6))
    return out


#: The style sheet's rules (scoped to the SVG's id when it is embedded in a page: a style element inside inline SVG
#: applies to the whole page).
_STYLE = ("text{font-size:11px;fill:#212121}", ".title{font-size:15px;font-weight:bold}", ".b{font-weight:bold}",
          ".m{fill:#757575}", ".i{font-style:italic}", ".lane{font-size:13px;font-weight:bold}",
          "g.r:hover rect.hl{fill:#fffde7}")


def render_svg(d: Diagram, *, svg_id: str = "") -> str:
    """The diagram as a standalone SVG document (no scripts, no external resources).  With ``svg_id`` the root
    element has that id and its style rules apply below it only, so the SVG can be inlined in an HTML page."""
    header: list[tuple[str, str, str | None]] = [(f"{d.heading}: {d.title}, {d.outcome}", "title", None)]
    if d.example:
        header += [(line, "lbl", None) for line in _wrap("example: " + d.example, 190)]
    for line in d.findings:
        header += [(part, "lbl b", _RED) for part in _wrap(("FINDING: " if d.outcome == "finding" else "") + line,
                                                           190)]
    for note in d.notes[:4]:
        header += [(part, "lbl m", None) for part in _wrap("note: " + note, 190)]
    header += [(line, "lbl m", None) for line in _wrap(_LEGEND, 190)]
    if d.legend:
        header.append((d.legend, "lbl m", None))
    top = 16 + 16 * len(header) + 8
    lanes_y = top + 30
    height = lanes_y + 10 + _ROW * len(d.rows) + 30
    scope = f"#{svg_id} " if svg_id else ""
    out = [f'<svg xmlns="http://www.w3.org/2000/svg"{f" id={quoteattr(svg_id)}" if svg_id else ""} width="{_W}" '
           f'height="{height}" viewBox="0 0 {_W} {height}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace">',
           "<style>" + "".join(scope + rule for rule in _STYLE) + "</style>",
           "<defs>" + "".join(
               f'<marker id="{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
               f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
               for name, colour in (("hk", _INK), ("hg", _GREY), ("hr", _RED), ("hf", _FAULT))) + "</defs>",
           f'<rect width="{_W}" height="{height}" fill="white"/>']
    for index, (text, cls, fill) in enumerate(header):
        out.append(_t(10, 24 + 16 * index, text, cls=cls, fill=fill))
    for lane, x in _X.items():
        title = {"client": "client (the kit's)", "proxy": "fault proxy", "broker": "broker"}[lane]
        out.append(_line(x, lanes_y + 12, x, height - 12, "#b0bec5", width=1.5))
        out.append(f'<rect x="{x - 80}" y="{lanes_y - 14}" width="160" height="26" rx="4" fill="#eceff1" '
                   f'stroke="#78909c"/>')
        out.append(_t(x, lanes_y + 4, title, anchor="middle", cls="lane"))
    for index, row in enumerate(d.rows):
        y = lanes_y + 10 + _ROW * index + _ROW / 2 + 4
        body = "".join(_svg_row(row, y))
        tooltip = f"<title>{escape(row.detail or row.text)}</title>"
        hl = f'<rect class="hl" x="0" y="{y - 10:.1f}" width="{_W}" height="{_ROW}" fill="white" fill-opacity="0"/>'
        out.append(f'<g class="r">{tooltip}{hl}{_t(_X_TIME, y + 4, ms_label(row.t_ns), anchor="end", cls="lbl m")}'
                   f"{body}</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
