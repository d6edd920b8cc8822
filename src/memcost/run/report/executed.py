"""The report's links to the executed notebooks, each with an HTML export beside it.

The runner keeps every executed notebook in the run directory (``notebooks/`` and
``<dataset>/notebooks/``); the report exports each to HTML with nbconvert (once: an export newer
than its notebook is kept) so a reader without Jupyter can open what ran, outputs included.
"""

from __future__ import annotations

import functools
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from memcost.io import atomic_path
from memcost.run.execute import skip_iri_format_checker
from memcost.run.report.view import RunView


def executed_notebooks(view: RunView) -> list[Path]:
    root = view.run.root
    found = sorted(root.glob("notebooks/*.ipynb")) + sorted(root.glob("*/notebooks/*.ipynb"))
    return [p for p in found if not p.name.startswith(".")]


def _own_html(html: Any) -> str:
    """The lab template passes every code cell's highlighted source through bleach (half the
    time of an export); the code is the repository's own and pygments has escaped it."""
    return html.decode() if isinstance(html, bytes) else str(html)


_TAG = re.compile(r"<(img|div)\b([^>]*)>")
_FOCUSABLE = frozenset({"jp-Cell-inputWrapper", "jp-OutputArea-output"})
NO_ALT = "No description has been provided for this image"  # nbconvert's own words


def _accessible(html: str) -> str:
    """What nbconvert's HTML exporter does to its rendered page through BeautifulSoup (60% of
    an export: parsing and writing the whole page again), done on the tags themselves: an
    image without alternative text gets nbconvert's, and the cells' input and output areas
    become focusable (``tabindex="0"``). The page is the same document, its markup not
    re-serialised."""

    def fix(found: re.Match) -> str:
        tag, attributes = found.group(1), found.group(2)
        closing = "/" if attributes.endswith("/") else ""
        body = attributes[:-1] if closing else attributes
        if tag == "img" and not re.search(r"\salt\s*=", body):
            body += f' alt="{NO_ALT}"'
        elif tag == "div" and "tabindex" not in body:
            classes = re.search(r'\sclass="([^"]*)"', body)
            if classes and _FOCUSABLE & set(classes.group(1).split()):
                body += ' tabindex="0"'
        return f"<{tag}{body}{closing}>"

    return _TAG.sub(fix, html)


@functools.cache
def _exporter() -> Any:
    """One exporter for every notebook of a report: its templates are loaded once."""
    from nbconvert import HTMLExporter
    from nbconvert.exporters.templateexporter import TemplateExporter
    from nbconvert.filters.highlight import Highlight2HTML
    from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

    class Exporter(HTMLExporter):
        def from_notebook_node(self, nb: Any, resources: Any = None, **kw: Any) -> Any:
            # HTMLExporter's own steps up to its BeautifulSoup pass, which _accessible does
            lexer = nb.metadata.get("language_info", {})
            lexer = lexer.get("pygments_lexer", lexer.get("name", None))
            resources = self._init_resources(resources)
            self.register_filter(
                "highlight_code",
                self.filters.get(
                    "highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)
                ),
            )
            self.register_filter(
                "filter_data_type",
                WidgetsDataTypeFilter(
                    notebook_metadata=self._nb_metadata, parent=self, resources=resources
                ),
            )
            html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
            return _accessible(html), resources

    exporter = Exporter()
    exporter.register_filter("clean_html", _own_html)  # sanitize_html stays off, as by default
    return exporter


def export_html(notebook: Path) -> Path | None:
    """``x.ipynb`` → ``x.html`` beside it; ``None`` when nbconvert cannot export it."""
    target = notebook.with_suffix(".html")
    if target.is_file() and target.stat().st_mtime >= notebook.stat().st_mtime:
        return target
    skip_iri_format_checker()
    try:
        import nbformat

        body, _ = _exporter().from_notebook_node(nbformat.read(notebook, as_version=4))
    except Exception:  # noqa: BLE001 - a missing or broken exporter leaves the .ipynb link only
        return None
    with atomic_path(target) as tmp:  # a killed export leaves no torn file newer than its notebook
        tmp.write_text(body, encoding="utf-8")
    return target


_BACKGROUND: list[Future] = []
_EXPORTS: ThreadPoolExecutor | None = None
_EXPORTS_LOCK = threading.Lock()


def export_in_background(notebook: Path) -> None:
    """Export a notebook that has just finished while the runner waits on the next one's
    kernel (it is idle meanwhile); the report then finds the export made."""
    global _EXPORTS
    with _EXPORTS_LOCK:  # notebooks of two datasets may finish at once
        if _EXPORTS is None:
            _EXPORTS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memcost-export")
        _BACKGROUND.append(_EXPORTS.submit(export_html, notebook))


def wait_for_exports() -> None:
    while _BACKGROUND:
        _BACKGROUND.pop().result()


def section_notebooks(view: RunView, *, export: bool = True) -> list[str]:
    wait_for_exports()  # one export of a notebook at a time
    notebooks = executed_notebooks(view)
    if not notebooks:
        return []
    root = view.run.root
    lines = [
        "## The executed notebooks",
        "",
        "Every notebook as it ran, outputs included (the HTML needs no Jupyter).",
        "",
    ]
    for path in notebooks:
        rel = path.relative_to(root).as_posix()
        html = export_html(path) if export else None
        link = f"[HTML]({html.relative_to(root).as_posix()}) · " if html else ""
        lines.append(f"- `{rel}`: {link}[notebook]({rel})")
    return lines + [""]
