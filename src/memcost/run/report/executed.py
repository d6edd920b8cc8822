"""The report's links to the executed notebooks, each with an HTML export beside it.

The runner keeps every executed notebook in the run directory (``notebooks/`` and
``<dataset>/notebooks/``); the report exports each to HTML with nbconvert (once: an export newer
than its notebook is kept) so a reader without Jupyter can open what ran, outputs included.
"""

from __future__ import annotations

from pathlib import Path

from memcost.io import atomic_path
from memcost.run.report.view import RunView


def executed_notebooks(view: RunView) -> list[Path]:
    root = view.run.root
    found = sorted(root.glob("notebooks/*.ipynb")) + sorted(root.glob("*/notebooks/*.ipynb"))
    return [p for p in found if not p.name.startswith(".")]


def export_html(notebook: Path) -> Path | None:
    """``x.ipynb`` → ``x.html`` beside it (nbconvert's HTML exporter, as ``jupyter nbconvert
    --to html`` makes it); ``None`` when nbconvert cannot export it. An export newer than its
    notebook is kept."""
    target = notebook.with_suffix(".html")
    if target.is_file() and target.stat().st_mtime >= notebook.stat().st_mtime:
        return target
    try:
        import nbformat
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter().from_notebook_node(nbformat.read(notebook, as_version=4))
    except Exception:  # noqa: BLE001 - a missing or broken exporter leaves the .ipynb link only
        return None
    with atomic_path(target) as tmp:  # a killed export leaves no torn file newer than its notebook
        tmp.write_text(body, encoding="utf-8")
    return target


def section_notebooks(view: RunView, *, export: bool = True) -> list[str]:
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
