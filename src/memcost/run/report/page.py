"""The report's page: the templates, the sections in order, what is read straight from the run
(failures, what ran, notebooks, files), and the HTML."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from memcost.io import atomic_path, write_text
from memcost.manifest import notebook_entries, wall_time_s
from memcost.paths import ASSETS_DIR, RunPaths
from memcost.plugins import Section
from memcost.run.checks import failed_stages
from memcost.run.report.analyses import ANALYSES
from memcost.run.report.comparison import section_paper
from memcost.run.report.costs import COST_MODEL, section_costs, section_figure1
from memcost.run.report.headline import command_line_changes, section_headline
from memcost.run.report.markdown import md_table
from memcost.run.report.results import section_accuracy, section_tokens
from memcost.run.report.section import arranged, render
from memcost.run.report.view import DATASET_NAMES, RunView

OFFLINE_NOTE = (
    "> **Offline backend.** Facts, answers and judgments in this run come from deterministic "
    "classical methods (sentence facts, lexical retrieval, extractive answers, a lexical "
    "judge), not from LLMs. Its accuracy numbers measure those methods on this run's data and "
    "are **not comparable** with the paper's; its dollar figures are **estimates** (offline "
    "token counts priced as the configured models)."
)


def section_what_ran(view: RunView) -> list[str]:
    note = [OFFLINE_NOTE, ""] if view.offline else []
    return [*note, md_table(what_ran(view), ["what", "value"])]


# The core's sections, in order; a plugin's are placed after the one it names.
SECTIONS = [
    Section("headline", lines=section_headline),
    Section("what_ran", "What ran", lines=section_what_ran),
    Section("tokens", lines=section_tokens),
    Section("accuracy", lines=section_accuracy),
    Section("costs", lines=section_costs),
    COST_MODEL,
    Section("figure1", lines=section_figure1),
    ANALYSES,
    Section("paper", lines=section_paper),
]


@cache
def templates() -> jinja2.Environment:
    """The report's templates (Markdown: nothing escaped)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ASSETS_DIR),
        autoescape=False,  # noqa: S701 - Markdown, and the HTML body is markdown's own output
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["table"] = lambda rows, header: md_table(rows, header).rstrip("\n")
    return env


def render_markdown(run: RunPaths) -> str:
    view = RunView.load(run)
    sections = [_block(render(section, view)) for section in arranged(SECTIONS)]
    text = (
        templates()
        .get_template("report.md.j2")
        .render(
            run_name=run.name,
            failures=failure_lines(view.manifest),
            stopped=bool(_stopped(view.manifest)),
            sections=sections,
            more_figures=figures_not_shown(run, "".join(sections)),
            notebooks=notebook_links(view),
            files=run_files(view),
        )
    )
    return text.rstrip() + "\n"


_SHOWN = re.compile(r"\]\(([^)\s]+\.png)\)")


def figures_not_shown(run: RunPaths, shown_in: str) -> list[tuple[str, list[str]]]:
    """Every figure the run drew that no section shows, by folder."""
    shown = set(_SHOWN.findall(shown_in))
    drawn = sorted(
        p.relative_to(run.root).as_posix()
        for p in run.root.rglob("*.png")
        if "notebooks" not in p.relative_to(run.root).parts
    )
    by_folder: dict[str, list[str]] = {}
    for path in drawn:
        if path not in shown:
            by_folder.setdefault(path.rsplit("/", 1)[0], []).append(path)
    return list(by_folder.items())


def _block(lines: Sequence[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""


def _stopped(manifest: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    notebooks = sorted((manifest.get("notebooks") or {}).items())
    return [(key, entry) for key, entry in notebooks if entry.get("status") not in (None, "ok")]


def _notebook_words(key: str) -> str:
    """``locomo/01_extract_facts`` → ``01_extract_facts [LoCoMo]``."""
    dataset, _, step = key.rpartition("/")
    return f"{step} [{DATASET_NAMES.get(dataset, dataset)}]" if dataset else step


def failure_lines(manifest: dict[str, Any]) -> list[str]:
    """A line per stage with failed items, per notebook that did not finish, and the notebooks that
    never ran because of it."""
    lines = []
    for stage in failed_stages(manifest):
        why = f": {stage.errors[0]}" if stage.errors else ""
        lines.append(
            f"**{_notebook_words(f'{stage.dataset}/{stage.step}')}**: {stage.status}, "
            f"{stage.failed} of {stage.total} {stage.item} failed{why}"
        )
    for key, entry in _stopped(manifest):
        why = f" in {entry['error'].rstrip('.')}" if entry.get("error") else ""
        lines.append(
            f"**{_notebook_words(key)}**: the notebook {entry['status']}{why}; the notebooks "
            "after it did not run"
        )
    planned = (manifest.get("preset") or {}).get("steps") or []
    ran = {key.split("/")[-1][:2] for key in manifest.get("notebooks") or {}}
    never = [step for step in planned if step not in ran]
    if _stopped(manifest) and never:
        lines.append(f"never ran: notebook{'s' if len(never) > 1 else ''} {', '.join(never)}")
    return lines


def what_ran(view: RunView) -> list[list[Any]]:
    m = view.manifest
    preset = m.get("preset") or {}
    changed = command_line_changes(preset)
    git = m.get("git") or {}
    notebooks = notebook_entries(m)
    wall = wall_time_s(m)
    # Datasets run side by side: their notebooks' own times add up to more than the wall time.
    busy = sum(float(v.get("wall_time_s") or 0) for v in notebooks.values())
    failed = [k for k, v in notebooks.items() if v.get("status") not in (None, "ok", "finished")]
    rows: list[list[Any]] = [
        ["run", f"`{view.run.name}` ({view.run.root})"],
        [
            "preset",
            f"{preset.get('name', '—')}: {preset.get('description', '')}".strip()
            + (f"; from the command line: {changed}" if changed else "")
            if preset
            else "none: notebooks run without a preset (by hand or by papermill)",
        ],
        [
            "git commit",
            f"{git.get('commit') or 'not a git checkout'}"
            + (" (uncommitted changes)" if git.get("dirty") else ""),
        ],
        ["created / updated", f"{m.get('created_at', '—')} / {m.get('updated_at', '—')}"],
        [
            "notebooks",
            f"{len(notebooks)} executed in {wall:,.0f} s"
            + (
                f" ({busy:,.0f} s of notebook time, datasets side by side)"
                if busy > wall + 1
                else ""
            )
            + (f"; not finished: {', '.join(failed)}" if failed else ""),
        ],
        ["backend", ", ".join(view.backends) or "no model calls"],
        ["vector store", _vector_stores(m)],
        [
            "python / tiktoken / faiss",
            " / ".join(
                str(x)
                for x in (
                    (m.get("tools") or {}).get("python"),
                    (m.get("packages") or {}).get("tiktoken"),
                    (m.get("packages") or {}).get("faiss-cpu"),
                )
            ),
        ],
    ]
    rows.append(["packages", _environment(m.get("environment"))])
    rows += [_data_row(ds) for ds in view.datasets]
    models = models_used(view)
    if models:
        # offline, these models answered nothing: they are what the run is priced as
        what = (
            "models (configured and priced; offline methods answered)" if view.offline else "models"
        )
        rows.append([what, "; ".join(models)])
    return rows


def _environment(status: dict[str, Any] | None) -> str:
    if not status:
        return "not compared with a lock (not run from a checkout)"
    if status.get("matches"):
        return f"every package at the version pinned in {status['lock']}"
    differs = status.get("differs") or {}
    parts = [
        f"{name} {v['installed']} (pinned {v['locked']})" for name, v in list(differs.items())[:8]
    ]
    if len(differs) > 8:
        parts.append(f"and {len(differs) - 8} more")
    text = f"{len(differs)} differ from {status['lock']}" + (
        f": {', '.join(parts)}" if parts else ""
    )
    extra = status.get("not_locked") or []
    if extra:
        more = "…" if len(extra) > 5 else ""
        text += f"; {len(extra)} installed but not pinned ({', '.join(extra[:5])}{more})"
    return text


def _vector_stores(manifest: dict[str, Any]) -> str:
    skip = {"vector_store", "layout", "hnsw_m", "ef_construction", "dims", "faiss", "server"}

    def versions(v: dict[str, Any]) -> str:
        found = [f"{k} {x}" for k, x in v.items() if k not in skip and not isinstance(x, dict)]
        server = (v.get("server") or {}).get("server")
        return f" ({', '.join(found + ([f'{server} server'] if server else []))})" if found else ""

    records = (manifest.get("vector_store") or {}).values()
    stores = {
        f"{v.get('vector_store')} {v.get('layout', '')}".strip() + versions(v) for v in records
    }
    return "; ".join(sorted(stores)) or "faiss per_user"


def _count(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int) else "?"


def _data_row(ds: Any) -> list[Any]:
    selection = ds.provenance.get("selection") or {}
    files = ds.provenance.get("files") or []
    digest = ", ".join(f"{Path(f['path']).name} sha256 {f['sha256'][:12]}…" for f in files[:2])
    origin = (
        "bundled sample (invented text in the benchmark's schema)"
        if ds.origin == "sample"
        else ds.origin
    )
    return [
        f"data: {ds.title}",
        f"{origin} — {_count(selection.get('conversations'))} conversations, "
        f"{_count(selection.get('questions'))} questions; {digest}",
    ]


def models_used(view: RunView) -> list[str]:
    out: list[str] = []
    seen = set()
    for ds in view.datasets:
        for step, keys in (
            ("01_extract_facts", ("extraction_model", "extraction_reasoning_effort")),
            ("02_answer_from_memory", ("reader_model", "reader_reasoning_effort")),
            ("04_judge_answers", ("judge_model", "reasoning_effort")),
        ):
            params = ds.parameters.get(step) or {}
            if keys[0] in params:
                label = f"{step[3:].replace('_', ' ')}: {params[keys[0]]}"
                if params.get(keys[1]):
                    label += f" ({params[keys[1]]})"
                if step == "04_judge_answers" and params.get("n_votes"):
                    n = params["n_votes"]
                    label += f", {n} vote" + ("s" if n != 1 else "")
                if label not in seen:
                    seen.add(label)
                    out.append(label)
        lc = ds.parameters.get("03_answer_long_context") or {}
        for model in lc.get("models") or []:
            label = f"long context: {model}"
            if label not in seen:
                seen.add(label)
                out.append(label)
    return out


def run_files(view: RunView) -> list[list[str]]:
    root = view.run.root
    items = [
        ("manifest.json", "parameters, commit, versions, timings, data provenance"),
        ("calls.sqlite", "one record per model call (the usage ledger)"),
        ("tables/", "run-wide tables (costs, Tables 4-5)"),
        ("figures/", "run-wide figures (Figure 1, cost figures)"),
    ]
    for ds in view.datasets:
        items.append(
            (
                f"{ds.name}/",
                "data, memory, answers, judgments, tables, figures, executed "
                "notebooks of this dataset",
            )
        )
    rows = [[f"`{name}`", what] for name, what in items if (root / name.rstrip("/")).exists()]
    return rows


def executed_notebooks(view: RunView) -> list[Path]:
    root = view.run.root
    found = sorted(root.glob("notebooks/*.ipynb")) + sorted(root.glob("*/notebooks/*.ipynb"))
    return [p for p in found if not p.name.startswith(".")]


# One thread exports notebooks to HTML while the runner waits on the next notebook's kernel:
# the export took as long as a short notebook, and nothing but the report reads it.
_exporter = ThreadPoolExecutor(1, thread_name_prefix="memcost-export")
_exports: list[Future] = []


def export_html_soon(notebook: Path) -> None:
    _exports.append(_exporter.submit(export_html, notebook))


def wait_for_exports() -> None:
    while _exports:
        _exports.pop().result()


def export_html(notebook: Path) -> Path | None:
    """``x.ipynb`` → ``x.html`` beside it, as ``jupyter nbconvert --to html`` makes it (``None``: it
    cannot); a newer export is kept."""
    target = notebook.with_suffix(".html")
    if target.is_file() and target.stat().st_mtime >= notebook.stat().st_mtime:
        return target
    try:
        import nbformat
        from nbconvert import HTMLExporter
        from traitlets.config import Config

        # exercise solutions stay hidden in the export, as they are in JupyterLab
        hide = Config({"TagRemovePreprocessor": {"enabled": True,
                                                 "remove_cell_tags": ["solution"]}})  # fmt: skip
        body, _ = HTMLExporter(config=hide).from_notebook_node(
            nbformat.read(notebook, as_version=4)
        )
    except Exception:  # noqa: BLE001 - a missing or broken exporter leaves the .ipynb link only
        return None
    with atomic_path(target) as tmp:  # a killed export leaves no torn file newer than its notebook
        tmp.write_text(body, encoding="utf-8")
    return target


def notebook_links(view: RunView, *, export: bool = True) -> list[tuple[str, str | None]]:
    root = view.run.root
    links = []
    for path in executed_notebooks(view):
        html = export_html(path) if export else None
        shown = html.relative_to(root).as_posix() if html else None
        links.append((path.relative_to(root).as_posix(), shown))
    return links


def render_html(markdown_text: str, root: Path) -> str:
    """The Markdown as a self-contained HTML page (figures embedded)."""
    import markdown as md

    def embed(match: re.Match[str]) -> str:
        alt, target = match.group(1), match.group(2)
        path = root / target
        if not path.is_file() or path.suffix.lower() != ".png":
            return match.group(0)
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"![{alt}](data:image/png;base64,{data})"

    embedded = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", embed, markdown_text)
    title = markdown_text.splitlines()[0].lstrip("# ").replace("`", "").strip()
    converter = md.Markdown(extensions=["tables"])
    # Text from presets, parameters and data is shown, never run: raw HTML in the Markdown is
    # escaped like any other text (the page's policy also refuses scripts).
    converter.preprocessors.deregister("html_block")
    converter.inlinePatterns.deregister("html")
    return (
        templates()
        .get_template("report.html.j2")
        .render(title=html.escape(title), body=converter.convert(embedded))
    )


def write_report(run: RunPaths) -> tuple[Path, Path]:
    wait_for_exports()
    text = render_markdown(run)
    write_text(run.report_md, text)
    write_text(run.report_html, render_html(text, run.root))
    return run.report_md, run.report_html
