"""What every self-contained HTML page of gpuwarden shares (`trace analyze --html`, `fleet report
--html`): the Content-Security-Policy that forbids fetching anything, the base styles of text,
tables and SVG plots, and the tooltip script. Each page adds its own styles after these."""

from __future__ import annotations

from html import escape

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

BASE_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:920px;
color:#222;padding:0 12px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 4px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border-bottom:1px solid #e4e4e4;padding:3px 8px;text-align:right;vertical-align:top}
th:first-child,td:first-child{text-align:left} th{background:#f6f6f6} td.l,th.l{text-align:left}
svg.plot{display:block;max-width:100%;height:auto;margin:4px 0}
svg .label,svg .note,svg .legend{font-size:12px;fill:#333} svg .tick{font-size:11px;fill:#666}
svg .axis{stroke:#999;stroke-width:1} svg .mark:hover{opacity:.75}
#tip{position:absolute;display:none;background:#222;color:#fff;padding:4px 8px;border-radius:4px;
font-size:12px;pointer-events:none;max-width:420px}
footer{color:#777;font-size:12px;margin-top:32px} .scroll{overflow-x:auto}
.explain{color:#555;margin:0 0 8px}
"""

# Moves each mark's SVG <title> (the no-script tooltip) into data-tip, then shows the hovered
# mark's text next to the pointer: one styled tooltip instead of the browser's slow native one.
TOOLTIP_SCRIPT = """
(function () {
  var tip = document.getElementById("tip");
  if (!tip) { return; }
  var titles = document.querySelectorAll("svg.plot rect > title");
  for (var i = 0; i < titles.length; i++) {
    var t = titles[i];
    t.parentNode.setAttribute("data-tip", t.textContent);
    t.parentNode.removeChild(t);
  }
  document.addEventListener("mousemove", function (e) {
    var t = e.target;
    var text = t && t.getAttribute ? t.getAttribute("data-tip") : null;
    if (text) {
      tip.textContent = text;
      tip.style.left = (e.pageX + 14) + "px";
      tip.style.top = (e.pageY + 14) + "px";
      tip.style.display = "block";
    } else {
      tip.style.display = "none";
    }
  });
})();
"""


def html_document(title: str, css: str, body: str) -> str:
    """A whole self-contained page: the CSP that forbids fetching anything, ``css`` (BASE_CSS
    plus the page's own), ``body``, and the tooltip script. ``title`` is escaped here."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title>"
        f"<style>{css}</style></head><body>"
        + body
        + f'<div id="tip"></div><script>{TOOLTIP_SCRIPT}</script></body></html>\n'
    )
