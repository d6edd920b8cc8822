"""The report's first and last sections: what ran (preset, commit, data, models) and its files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memcost.run.report.markdown import md_table
from memcost.run.report.view import RunView


def section_what_ran(view: RunView) -> list[str]:
    m = view.manifest
    preset = m.get("preset") or {}
    git = m.get("git") or {}
    # Notebooks run by hand record their steps but no runner entry: count those instead.
    notebooks = m.get("notebooks") or m.get("steps") or {}
    wall = sum(float(v.get("wall_time_s") or 0) for v in notebooks.values())
    failed = [k for k, v in notebooks.items() if v.get("status") not in (None, "ok", "finished")]
    rows: list[list[Any]] = [
        ["run", f"`{view.run.name}` ({view.run.root})"],
        [
            "preset",
            f"{preset.get('name', '—')}: {preset.get('description', '')}".strip()
            if preset
            else "none: notebooks run by hand with their own defaults",
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
        rows.append(["models", "; ".join(models)])
    lines = ["## What ran", ""]
    if view.offline:
        lines += [
            "> **Offline backend.** Facts, answers and judgments in this run come from "
            "deterministic classical methods (sentence facts, lexical retrieval, extractive "
            "answers, a lexical judge), not from LLMs. Its accuracy numbers measure those "
            "methods on this run's data and are **not comparable** with the paper's; its dollar "
            "figures are **estimates** (offline token counts priced as the configured models).",
            "",
        ]
    lines += [md_table(rows, ["what", "value"]), ""]
    return lines


def _environment(status: dict[str, Any] | None) -> str:
    """The installed packages against the lock `make setup` installs from."""
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
    """The memory's stores (notebooks 01-02), each with its server's versions."""
    stores = {
        f"{v.get('vector_store')} {v.get('layout', '')}".strip()
        + (
            f" (PostgreSQL {v['postgresql']}, pgvector {v['pgvector']}, "
            f"{(v.get('server') or {}).get('server', '')} server)"
            if "pgvector" in v
            else ""
        )
        for v in (manifest.get("vector_store") or {}).values()
    }
    return "; ".join(sorted(stores)) or "faiss per_user"


def _data_row(ds: Any) -> list[Any]:
    """One dataset: where it came from, its size and the digests of its files."""
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
        f"{origin} — {selection.get('conversations', '?')} conversations, "
        f"{selection.get('questions', '?')} questions; {digest}",
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
                    label += f", {params['n_votes']} votes"
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


def section_files(view: RunView) -> list[str]:
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
    return ["## Files", "", md_table(rows, ["path (in the run directory)", "what"]), ""]
