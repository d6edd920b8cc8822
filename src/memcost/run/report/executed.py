"""The report's links to the executed notebooks, each with an HTML export beside it.

The runner keeps every executed notebook in the run directory (``notebooks/`` and
``<dataset>/notebooks/``); the report exports each to HTML with nbconvert (once: an export newer
than its notebook is kept) so a reader without Jupyter can open what ran, outputs included.
"""

from __future__ import annotations

import functools
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


@functools.cache
def _exporter() -> Any:
    """One exporter for every notebook of a report: its templates are loaded once."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter()
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
    lines = ["## The executed notebooks", "",
             "Every notebook as it ran, outputs included (the HTML needs no Jupyter).", ""]
    for path in notebooks:
        rel = path.relative_to(root).as_posix()
        html = export_html(path) if export else None
        link = f"[HTML]({html.relative_to(root).as_posix()}) · " if html else ""
        lines.append(f"- `{rel}`: {link}[notebook]({rel})")
    return lines + [""]
