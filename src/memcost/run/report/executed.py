"""The report's links to the executed notebooks, each with an HTML export beside it.

The runner keeps every executed notebook in the run directory (``notebooks/`` and
``<dataset>/notebooks/``); the report exports each to HTML with nbconvert (once: an export newer
than its notebook is kept) so a reader without Jupyter can open what ran, outputs included.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from memcost.run.execute import skip_iri_format_checker
from memcost.run.report.view import RunView


def executed_notebooks(view: RunView) -> list[Path]:
    root = view.run.root
    found = sorted(root.glob("notebooks/*.ipynb")) + sorted(root.glob("*/notebooks/*.ipynb"))
    return [p for p in found if not p.name.startswith(".")]


@functools.cache
def _exporter() -> Any:
    """One exporter for every notebook of a report: its templates are loaded once."""
    from nbconvert import HTMLExporter

    return HTMLExporter()


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
    target.write_text(body, encoding="utf-8")
    return target


def section_notebooks(view: RunView, *, export: bool = True) -> list[str]:
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
