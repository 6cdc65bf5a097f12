"""The one way lavaflow's HTML reports embed charts: matplotlib figures as inline SVG.

Figures are drawn with the Agg backend and written as SVG with their ids made unique per
figure (several share one HTML document), matplotlib's page-wide ``<style>`` and the
XML prolog, DOCTYPE and RDF metadata dropped, so a report references nothing outside itself.
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

_SVG_REF_RE = re.compile(r'(\bid="|url\(#|href="#)([^")]+)')

#: What every report sets while drawing: deterministic ids, text as paths, a fixed dpi.
RC: dict[RcKeyType, Any] = {"svg.hashsalt": "lavaflow", "svg.fonttype": "path", "figure.dpi": 100}


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fig_to_svg(fig: Any, prefix: str) -> str:
    """Render a figure as an inline <svg> string with ids namespaced by *prefix*.

    The XML prolog / DOCTYPE and the RDF metadata block are dropped so the
    only URIs left are the SVG/XLink xmlns namespace declarations.
    """
    buf = io.StringIO()
    fig.savefig(
        buf,
        format="svg",
        bbox_inches="tight",
        metadata={"Creator": None, "Date": None, "Format": None, "Type": None},
    )
    svg = buf.getvalue()
    start = svg.find("<svg")
    svg = svg[start:] if start >= 0 else svg
    # matplotlib embeds a global "*{...}" <style>; inline in HTML it would leak to
    # the whole page, so drop it (the page CSS scopes the same rule to .plot svg).
    svg = re.sub(r"<style[^>]*>.*?</style>", "", svg, flags=re.DOTALL)
    # Several SVGs share one HTML document: make element ids unique per figure.
    ids = set(re.findall(r'\bid="([^"]+)"', svg))

    def repl(m: re.Match[str]) -> str:
        ident = m.group(2)
        return m.group(1) + (f"{prefix}-{ident}" if ident in ids else ident)

    return _SVG_REF_RE.sub(repl, svg).strip()


class Plotter:
    """Holds pyplot and a counter for unique SVG id prefixes; ``render`` embeds and closes a figure
    (in a ``<div class="plot">`` when ``wrap``)."""

    def __init__(self, plt: Any, wrap: bool = False) -> None:
        self.plt = plt
        self.wrap = wrap
        self.count = 0

    def render(self, fig: Any) -> str:
        self.count += 1
        try:
            svg = fig_to_svg(fig, f"lf{self.count}")
            return '<div class="plot">' + svg + "</div>" if self.wrap else svg
        finally:
            self.plt.close(fig)
