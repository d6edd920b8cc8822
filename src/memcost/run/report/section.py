"""Report sections as the run's report renders them (:class:`memcost.plugins.Section`): the
core's and the plugins', in order."""

from __future__ import annotations

import pandas as pd

from memcost.plugins import Section, Table, contributed
from memcost.run.report.markdown import fmt, md_table
from memcost.run.report.view import DATASET_NAMES, RunView, read_csv


def table_frame(table: Table, view: RunView) -> pd.DataFrame | None:
    if "{dataset}" not in table.file:
        return read_csv(view.run.root / table.file)
    found = [read_csv(view.run.root / table.file.format(dataset=d.name)) for d in view.datasets]
    found = [f for f in found if f is not None]
    return pd.concat(found, ignore_index=True) if found else None


def table_lines(table: Table, view: RunView) -> list[str]:
    frame = table_frame(table, view)
    if frame is None or len(frame) < max(table.min_rows, 1):
        return []
    frame = frame.reindex(columns=list(table.columns))
    systems = [c for c in table.columns if "system" in (c, c[:6], c[-6:])]
    named = {c: view.label for c in systems}
    shown = {"dataset": lambda d: DATASET_NAMES.get(d, d), **named, **table.formats}
    rows = [
        [shown.get(c, fmt)(value) for c, value in zip(table.columns, row, strict=True)]
        for row in frame[list(table.columns)].itertuples(index=False)
    ]
    head = [f"### {table.title}", ""] if table.title else []
    caption = table.caption(view) if callable(table.caption) else table.caption
    return [
        *head,
        *([caption, ""] if caption else []),
        md_table(rows, list(table.columns.values())),
        "",
    ]


def render(section: Section, view: RunView) -> list[str]:
    body = [line for table in section.tables for line in table_lines(table, view)]
    for file, caption in section.figures:
        if (view.run.root / file).is_file():
            body += [f"![{caption}]({file})", ""]
    body += section.lines(view) if section.lines else []
    if not body:
        return []
    head = [f"## {section.title}", ""] if section.title else []
    text = section.text(view) if callable(section.text) else section.text
    return [*head, *([text, ""] if text else []), *body]


def arranged(core: list[Section]) -> list[Section]:
    """The core's sections in order, each plugin's placed after the one it names (at the end
    when that one is not there)."""
    out = list(core)
    for section in contributed("report_sections"):
        names = [s.name for s in out]
        at = names.index(section.after) + 1 if section.after in names else len(out)
        while at < len(out) and out[at].after == section.after and out[at] not in core:
            at += 1  # plugins that follow the same section keep their own order
        out.insert(at, section)
    return out


def briefs(view: RunView, *, leading: bool) -> list[str]:
    """The plugins' lines on the first screen, those that lead or the others."""
    sections = [s for s in contributed("report_sections") if s.brief and s.leads == leading]
    return [line for s in sections if (line := s.brief(view))]
