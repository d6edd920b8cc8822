"""The run report: one page that puts this run and the paper side by side.

``runs/<run>/report.md`` (and a self-contained ``report.html`` with the figures embedded) is
assembled only from files the notebooks wrote into the run directory: the manifest, each
dataset's tables and metrics, and the run-wide cost tables. Nothing is recomputed here, so the
report can never disagree with the notebooks. A section whose inputs are missing (a preset that
ran only some notebooks) says so instead of failing.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memcost import paper
from memcost.io import write_text
from memcost.paths import DatasetPaths, RunPaths

DATASET_NAMES = {"longmemeval": "LongMemEval", "locomo": "LoCoMo", "personamem_v2": "PersonaMem v2"}
PAPER_ORDER = ("longmemeval", "locomo", "personamem_v2")  # the order of the paper's tables
# The three systems of the paper's Table 3, as this repository names them.
PAPER_SYSTEMS = ("memory", "long_context_gpt-5-mini", "long_context_gpt-oss-120b")
# The paper's settings (study §2-§4); a run that differs is not comparable on accuracy or cost.
PAPER_SETTINGS = {
    "01_extract_facts": {"extraction_model": "gpt-5-nano", "extraction_reasoning_effort": "low",
                         "embedding_model": "text-embedding-3-small", "batch_size": 10,
                         "max_segment_chars": 8000},
    "02_answer_from_memory": {"reader_model": "gpt-5-mini", "reader_reasoning_effort": "medium",
                              "top_k": 20},
    "04_judge_answers": {"judge_model": "gpt-5-mini", "reasoning_effort": "high", "n_votes": 3},
}
SECTIONS = (
    "What ran",
    "Tables 1-2: tokens per conversation and per question",
    "Table 3: accuracy",
    "Cost of this run",
    "Tables 4-5: the cost model",
    "Figure 1",
    "Paper vs this run",
    "Files",
)


# --------------------------------------------------------------------------------------------
# Reading the run
# --------------------------------------------------------------------------------------------
def _read_csv(path: Path) -> pd.DataFrame | None:
    return pd.read_csv(path) if path.is_file() else None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _metrics(ds: DatasetPaths, step: str) -> dict[str, Any]:
    return _read_json(ds.metrics / f"{step}.json").get("metrics", {})


def _step_parameters(manifest: dict[str, Any], key: str) -> dict[str, Any]:
    return (manifest.get("steps", {}).get(key) or {}).get("parameters", {}) or {}


@dataclass
class DatasetView:
    """What the report needs from one dataset folder."""

    paths: DatasetPaths
    provenance: dict[str, Any]
    parameters: dict[str, dict[str, Any]]  # notebook stem → its recorded parameters
    metrics: dict[str, dict[str, Any]]  # notebook stem → its metrics

    @property
    def name(self) -> str:
        return self.paths.name

    @property
    def title(self) -> str:
        return DATASET_NAMES.get(self.name, self.name)

    @property
    def origin(self) -> str:
        return str(self.provenance.get("origin") or "unknown")

    def backend(self, step: str) -> str | None:
        value = self.parameters.get(step, {}).get("backend")
        return None if value is None else str(value)

    def full_data(self) -> tuple[bool, str]:
        """Is this the data the paper used (the real file, nothing left out)?"""
        if self.origin == "sample":
            return False, "bundled sample data"
        selection = self.provenance.get("selection") or {}
        if self.name == "personamem_v2":
            wanted = (paper.TABLE1["personamem_v2"][0], paper.TABLE2["personamem_v2"][0])
            got = (selection.get("conversations"), selection.get("questions"))
            if got != wanted:
                return False, f"{got[0]} histories / {got[1]} questions, not the paper's 222 / 589"
            return True, "same subset size as the paper (how it drew its subset is not stated)"
        if selection.get("conversations") != selection.get("of_conversations") or selection.get(
            "questions"
        ) != selection.get("of_questions"):
            return False, "a subset of the dataset (limits or sampling)"
        if self.name == "longmemeval" and "longmemeval_s" not in str(self.provenance.get("path")):
            return False, "not the LongMemEval S file the paper used"
        return True, "the full dataset"

    def paper_settings(self) -> tuple[bool, str]:
        """Did notebooks 01-04 run with the paper's models and a real backend?"""
        for step, wanted in PAPER_SETTINGS.items():
            params = self.parameters.get(step)
            if not params:
                return False, f"{step} did not run"
            if params.get("backend") == "offline":
                return False, "offline backend (lexical methods, not LLMs)"
            for key, value in wanted.items():
                got = params.get(key)
                if isinstance(value, str) and isinstance(got, str):
                    same = got == value or got.startswith(value + "-20")
                else:
                    same = got == value
                if not same:
                    return False, f"{step}: {key} = {got!r}, the paper used {value!r}"
        lc = self.parameters.get("03_answer_long_context")
        if not lc:
            return False, "03_answer_long_context did not run"
        if lc.get("backend") == "offline":
            return False, "offline backend (lexical methods, not LLMs)"
        return True, "the paper's models and settings"


@dataclass
class RunView:
    run: RunPaths
    manifest: dict[str, Any]
    datasets: list[DatasetView] = field(default_factory=list)

    @classmethod
    def load(cls, run: RunPaths) -> RunView:
        manifest = _read_json(run.manifest)
        views = []
        for ds in run.datasets():
            steps = {key.split("/", 1)[1]: value for key, value in manifest.get("steps", {}).items()
                     if key.startswith(ds.name + "/")}
            metrics = {}
            for path in sorted(ds.metrics.glob("*.json")):
                metrics[path.stem] = _read_json(path).get("metrics", {})
            views.append(DatasetView(
                paths=ds,
                provenance=(manifest.get("provenance") or {}).get(ds.name, {}),
                parameters={k: (v or {}).get("parameters", {}) or {} for k, v in steps.items()},
                metrics=metrics,
            ))
        order = {name: i for i, name in enumerate(PAPER_ORDER)}
        views.sort(key=lambda v: order.get(v.name, len(order)))
        return cls(run=run, manifest=manifest, datasets=views)

    def dataset(self, name: str) -> DatasetView | None:
        return next((d for d in self.datasets if d.name == name), None)

    @property
    def backends(self) -> list[str]:
        found = []
        for view in self.datasets:
            for step in ("01_extract_facts", "02_answer_from_memory", "03_answer_long_context",
                         "04_judge_answers"):
                backend = view.backend(step)
                if backend and backend not in found:
                    found.append(backend)
        return found

    @property
    def offline(self) -> bool:
        return "offline" in self.backends

    @property
    def cost_parameters(self) -> dict[str, Any]:
        return _step_parameters(self.manifest, "05_analyse_costs")


# --------------------------------------------------------------------------------------------
# Markdown helpers
# --------------------------------------------------------------------------------------------
def _fmt(value: Any, *, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value.is_integer() and abs(value) >= 1:
            return f"{int(value):,}"
        return f"{value:,.{digits}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def md_table(rows: Sequence[Sequence[Any]], header: Sequence[str], *, digits: int = 4) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(v, digits=digits) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _pct(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{100 * float(value):.1f}"


def _usd(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    value = float(value)
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def _figure(lines: list[str], path: Path, root: Path, caption: str) -> None:
    if path.is_file():
        lines += [f"![{caption}]({path.relative_to(root).as_posix()})", ""]


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------
def _section_what_ran(view: RunView) -> list[str]:
    m = view.manifest
    preset = m.get("preset") or {}
    git = m.get("git") or {}
    notebooks = m.get("notebooks") or {}
    wall = sum(float(v.get("wall_time_s") or 0) for v in notebooks.values())
    failed = [k for k, v in notebooks.items() if v.get("status") not in (None, "ok")]
    rows: list[list[Any]] = [
        ["run", f"`{view.run.name}` ({view.run.root})"],
        ["preset", f"{preset.get('name', '—')}: {preset.get('description', '')}".strip()],
        ["git commit", f"{git.get('commit') or 'not a git checkout'}"
                       + (" (uncommitted changes)" if git.get("dirty") else "")],
        ["created / updated", f"{m.get('created_at', '—')} / {m.get('updated_at', '—')}"],
        ["notebooks", f"{len(notebooks)} executed in {wall:,.0f} s"
                      + (f"; not finished: {', '.join(failed)}" if failed else "")],
        ["backend", ", ".join(view.backends) or "no model calls"],
        ["python / tiktoken / faiss", " / ".join(str(x) for x in (
            (m.get("tools") or {}).get("python"), (m.get("packages") or {}).get("tiktoken"),
            (m.get("packages") or {}).get("faiss-cpu")))],
    ]
    for ds in view.datasets:
        selection = ds.provenance.get("selection") or {}
        files = ds.provenance.get("files") or []
        digest = ", ".join(f"{Path(f['path']).name} sha256 {f['sha256'][:12]}…" for f in files[:2])
        rows.append([f"data: {ds.title}",
                     f"{ds.origin} — {selection.get('conversations', '?')} conversations, "
                     f"{selection.get('questions', '?')} questions; {digest}"])
    models = _models_used(view)
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
    lines += [md_table(rows, ["", ""]), ""]
    return lines


def _models_used(view: RunView) -> list[str]:
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


def _section_tokens(view: RunView) -> list[str]:
    lines = ["## Tables 1-2: tokens per conversation and per question", ""]
    for number, stem, what in ((1, "table1_conversation_tokens", "conversation"),
                               (2, "table2_question_tokens", "question")):
        frames = [t for ds in view.datasets
                  if (t := _read_csv(ds.paths.tables / f"{stem}.csv")) is not None]
        if not frames:
            lines += [f"*Table {number}: notebook 00 has not run in this run.*", ""]
            continue
        table = pd.concat(frames, ignore_index=True)
        lines += [f"**Table {number} — o200k tokens per {what} (this run)**", "",
                  md_table(table.values.tolist(), list(table.columns), digits=1), ""]
    lines += ["Counting conventions (study §5): utterance texts joined by newlines, bare question "
              "text, upper median, mean rounded half up. The paper's rows are in "
              "*Paper vs this run* below.", ""]
    return lines


def _accuracy(view: RunView) -> dict[str, pd.DataFrame]:
    out = {}
    for ds in view.datasets:
        table = _read_csv(ds.paths.tables / "table3_accuracy.csv")
        if table is not None:
            out[ds.name] = table
    return out


def _section_accuracy(view: RunView) -> list[str]:
    lines = ["## Table 3: accuracy", ""]
    tables = _accuracy(view)
    if not tables:
        return lines + ["*Notebook 04 has not run in this run: no accuracy.*", ""]
    judge = sorted({str(j) for t in tables.values() for j in t.get("judge_model", [])})
    lines += [f"Majority of the judge's votes per question, in %, with the Wilson 95% interval and "
              f"the dialogue-cluster bootstrap 95% interval; judge: {', '.join(judge)}. "
              "*Strict* counts answers that failed or could not be judged as wrong (the paper's "
              "\"correct ÷ all questions\").", ""]
    rows = []
    for name, table in tables.items():
        for r in table.itertuples(index=False):
            rows.append([DATASET_NAMES.get(name, name), r.system, int(r.n), _pct(r.accuracy),
                         f"{_pct(r.wilson_low)}–{_pct(r.wilson_high)}",
                         f"{_pct(r.bootstrap_low)}–{_pct(r.bootstrap_high)}",
                         f"{_pct(r.vote_mean)} ± {_pct(r.vote_std)}", _pct(r.strict_accuracy)])
    lines += [md_table(rows, ["dataset", "system", "n", "accuracy %", "Wilson 95%",
                              "cluster bootstrap 95%", "mean ± std over votes", "strict %"]), ""]
    for ds in view.datasets:
        _figure(lines, ds.paths.figures / "accuracy_by_system.png", view.run.root,
                f"{ds.title}: accuracy by system")
    return lines


def _section_costs(view: RunView) -> list[str]:
    lines = ["## Cost of this run", ""]
    estimate = _read_csv(view.run.tables / "estimate_before_run.csv")
    if estimate is not None and not estimate.empty:
        by_dataset = estimate.groupby("dataset", sort=False)["usd"].sum()
        parts = ", ".join(f"{DATASET_NAMES.get(d, d)} {_usd(v)}" for d, v in by_dataset.items())
        lines += [f"**Estimated before the run** (notebook 00's token counts × list prices, "
                  f"assumptions in `memcost/estimate.py`): {_usd(float(estimate['usd'].sum()))} "
                  f"({parts}), about {float(estimate['minutes'].sum()) / 60:,.1f} hours of calls "
                  "at the run's concurrency — `tables/estimate_before_run.csv`.", ""]
    summary = _read_csv(view.run.tables / "cost_summary.csv")
    if summary is None or summary.empty:
        return lines + ["*No usage ledger was analysed (notebook 05 without model calls).*", ""]
    basis = sorted(set(summary["basis"].astype(str)))
    spent = float(summary.loc[~summary["component"].astype(str).str.endswith(": total"),
                              "spent_usd"].sum())
    lines += [f"Every call in `calls.jsonl`, priced with the dated price table "
              f"(`memcost.prices`); basis: {'; '.join(basis)}. Writing is shown per conversation, "
              f"answering and judging per question. Paid by this run: {_usd(spent)}. Details per "
              "stage, user and question: `tables/cost_*.csv`.", ""]
    names = [d for d in PAPER_ORDER if d in set(summary["dataset"])]
    rows = []
    for component in dict.fromkeys(summary["component"].astype(str)):
        row: list[Any] = [component]
        for name in names:
            hit = summary.loc[(summary["dataset"] == name) & (summary["component"] == component)]
            if hit.empty:
                row.append("—")
                continue
            r = hit.iloc[0]
            per, unit = ((r["usd_per_conversation"], "conv.") if component.startswith("write")
                         else (r["usd_per_question"], "q."))
            row.append(f"{_usd(r['total_usd'])} ({_usd(per)}/{unit})")
        rows.append(row)
    lines += [md_table(rows, ["component", *[DATASET_NAMES.get(n, n) for n in names]]), ""]
    _figure(lines, view.run.figures / "cost_by_component.png", view.run.root, "cost by component")
    return lines


def _rounded_cells(table: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    table = table.copy()
    for column in columns:
        table[column] = table[column].map(lambda v: round(float(v), 4))
    return table


def _section_cost_model(view: RunView) -> list[str]:
    lines = ["## Tables 4-5: the cost model", ""]
    table4 = _read_csv(view.run.tables / "table4_cumulative_cost.csv")
    table5 = _read_csv(view.run.tables / "table5_break_even.csv")
    if table4 is None or table5 is None:
        return lines + ["*Notebook 05 has not run in this run.*", ""]
    model = view.cost_parameters.get("cost_model", "paper")
    cells = _read_csv(view.run.tables / "table45_vs_paper.csv")
    matched = "" if cells is None else (
        f" **{int(cells['match'].sum())} of {len(cells)}** published cells reproduced "
        "(rounded to 4 decimals).")
    lines += [f"Cost model constants: **{model}** (study §8: `C_LC(N) = C_first + (N−1)·C_cached`, "
              f"`C_Mem(N) = C_write + N·C_read`, break-even from unrounded costs).{matched}", ""]
    t4 = _rounded_cells(table4, ("memory_usd", "long_context_usd"))
    lines += ["**Table 4 — cumulative cost per user at L = 101,601 tokens**", "",
              md_table(t4.values.tolist(), ["N", "memory ($)", "long context GPT-5-mini ($)"]), ""]
    t5 = _rounded_cells(table5, ("write_usd", "lc_turn1_usd", "lc_turn_n_usd"))
    lines += ["**Table 5 — break-even by context length**", "",
              md_table(t5.values.tolist(), ["L (tokens)", "write ($)", "LC turn 1 ($)",
                                            "LC turn N>1 ($)", "break-even N"]), ""]
    lines += ["The constants the paper's text states ($0.0435 per write, $0.0013 per read) do "
              "not reproduce these tables; the constants the tables imply do, and rounding the "
              "rows before computing the break-even gives 9 instead of 10 at 100k tokens. "
              "Notebook 05 derives each constant's feasible interval from the published cells.",
              ""]
    return lines


def _section_figure1(view: RunView) -> list[str]:
    lines = ["## Figure 1", ""]
    before = len(lines)
    _figure(lines, view.run.figures / "figure1_break_even_heatmap.png", view.run.root,
            "Figure 1: cumulative cost difference, long context minus memory")
    _figure(lines, view.run.figures / "figure1b_cumulative_cost.png", view.run.root,
            "Cumulative cost per user at L = 101,601 tokens")
    if len(lines) == before:
        lines += ["*Notebook 05 has not run in this run.*", ""]
    return lines


# --------------------------------------------------------------------------------------------
# Paper vs this run
# --------------------------------------------------------------------------------------------
@dataclass
class Comparison:
    section: str
    quantity: str
    paper: Any
    run: Any
    comparable: bool
    why: str

    def row(self) -> list[Any]:
        verdict = "yes" if self.comparable else "no"
        if self.comparable and _matches(self.paper, self.run):
            verdict = "yes, matches"
        money = "($)" in self.quantity
        return [self.section, self.quantity, _plain(self.paper, money), _plain(self.run, money),
                verdict, self.why]


def _plain(value: Any, money: bool) -> str:
    """A number as the paper prints it: dollars to 4 decimals (2 from $1), others without
    trailing zeros."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    if money:
        return f"{value:,.2f}" if abs(value) >= 1 else f"{value:.4f}"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.4f}".rstrip("0").rstrip(".")


def _matches(published: Any, ours: Any) -> bool:
    try:
        return round(float(published), 4) == round(float(ours), 4)
    except (TypeError, ValueError):
        return False


def paper_vs_run(view: RunView) -> list[Comparison]:
    """Every number the paper reports, with this run's value and whether they are comparable."""
    rows: list[Comparison] = []
    columns = ("n", "min", "max", "median", "mean")
    for number, published, stem in ((1, paper.TABLE1, "table1_conversation_tokens"),
                                    (2, paper.TABLE2, "table2_question_tokens")):
        for name in PAPER_ORDER:
            ds = view.dataset(name)
            table = None if ds is None else _read_csv(ds.paths.tables / f"{stem}.csv")
            comparable, why = (False, "dataset not in this run") if ds is None else ds.full_data()
            for column, value in zip(columns, published[name], strict=True):
                ours = None if table is None else table.iloc[0][column]
                rows.append(Comparison(f"Table {number}", f"{DATASET_NAMES[name]} {column}", value,
                                       None if ours is None else _number(ours), comparable, why))
    accuracy = _accuracy(view)
    for name in PAPER_ORDER:
        ds = view.dataset(name)
        table = accuracy.get(name)
        if ds is None:
            comparable, why = False, "dataset not in this run"
        else:
            data_ok, data_why = ds.full_data()
            settings_ok, settings_why = ds.paper_settings()
            comparable = data_ok and settings_ok
            why = "same data, models and judge" if comparable else (
                data_why if not data_ok else settings_why)
        for system in PAPER_SYSTEMS:
            ours = None
            if table is not None and system in set(table["system"]):
                ours = round(100 * float(table.set_index("system").loc[system, "strict_accuracy"]),
                             2)
            rows.append(Comparison("Table 3", f"{DATASET_NAMES[name]} {system} accuracy %",
                                   paper.TABLE3[name][system], ours, comparable, why))
    rows += _measured_rows(view)
    rows += _cost_model_rows(view)
    return rows


def _number(value: Any) -> Any:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return int(number) if number.is_integer() else number


def _measured_rows(view: RunView) -> list[Comparison]:
    """§4.1-4.2: the LongMemEval bill and the memory's compression."""
    ds = view.dataset("longmemeval")
    if ds is None:
        comparable, why = False, "LongMemEval not in this run"
    else:
        data_ok, data_why = ds.full_data()
        settings_ok, settings_why = ds.paper_settings()
        comparable = data_ok and settings_ok
        why = "same data and models" if comparable else (data_why if not data_ok else settings_why)
    summary = _read_csv(view.run.tables / "cost_summary.csv")
    lme = None if summary is None else summary.loc[summary["dataset"] == "longmemeval"]

    def component(prefix: str, column: str) -> Any:
        if lme is None or lme.empty:
            return None
        hit = lme.loc[lme["component"].astype(str).str.startswith(prefix)]
        return None if hit.empty else _number(hit.iloc[0][column])

    extract = _metrics(ds.paths, "01_extract_facts") if ds else {}
    read = _metrics(ds.paths, "02_answer_from_memory") if ds else {}
    measured = paper.MEASURED
    items = [
        ("extraction cost ($)", measured["extraction_usd"], component("write: fact extraction",
                                                                     "total_usd")),
        ("extraction cost per conversation ($)", measured["extraction_usd_per_conversation"],
         component("write: fact extraction", "usd_per_conversation")),
        ("extraction prompt tokens", measured["extraction_prompt_tokens"],
         component("write: fact extraction", "prompt_tokens")),
        ("extraction completion tokens", measured["extraction_completion_tokens"],
         component("write: fact extraction", "completion_tokens")),
        ("fact embedding cost ($)", measured["embedding_usd"],
         component("write: fact embeddings", "total_usd")),
        ("read cost ($)", measured["read_usd"], component("read:", "total_usd")),
        ("read cost per question ($)", measured["read_usd_per_question"],
         component("read:", "usd_per_question")),
        ("retrieved tokens per question", measured["read_retrieved_tokens_per_question"],
         read.get("retrieved_tokens_mean")),
        ("fact tokens per user", paper.FACT_TOKENS_PER_USER,
         extract.get("fact_tokens_per_user_mean")),
        ("history : fact tokens (x:1)", paper.COMPRESSION_RATIO, extract.get("compression_ratio")),
        ("LC GPT-5-mini cost ($)", measured["lc_gpt5_mini_usd"],
         component("answer: long_context_gpt-5-mini", "total_usd")),
        ("LC GPT-5-mini requests", measured["lc_gpt5_mini_requests"],
         component("answer: long_context_gpt-5-mini", "api_requests")),
        ("LC GPT-OSS-120B cost ($)", measured["lc_gpt_oss_120b_usd"],
         component("answer: long_context_gpt-oss-120b", "total_usd")),
        ("LC GPT-OSS-120B requests", measured["lc_gpt_oss_120b_requests"],
         component("answer: long_context_gpt-oss-120b", "api_requests")),
    ]
    return [Comparison("§4.2 LongMemEval", q, p, r, comparable, why) for q, p, r in items]


def _cost_model_rows(view: RunView) -> list[Comparison]:
    table4 = _read_csv(view.run.tables / "table4_cumulative_cost.csv")
    table5 = _read_csv(view.run.tables / "table5_break_even.csv")
    model = view.cost_parameters.get("cost_model", "paper")
    comparable = model == "paper"
    why = ("the paper's cost model with the constants its tables imply" if comparable else
           f"cost model from this run's measurements ({model})")
    rows: list[Comparison] = []
    ours4 = None if table4 is None else table4.set_index("n_turns")
    for r in paper.TABLE4.itertuples(index=False):
        for column, label in (("memory_usd", "memory"), ("long_context_usd", "long context")):
            value = None if ours4 is None or r.n_turns not in ours4.index else round(
                float(ours4.loc[r.n_turns, column]), 4)
            rows.append(Comparison("Table 4", f"N={r.n_turns} {label} ($)", getattr(r, column),
                                   value, comparable, why))
    ours5 = None if table5 is None else table5.set_index("context_tokens")
    for r in paper.TABLE5.itertuples(index=False):
        for column, label in (("write_usd", "write ($)"), ("lc_turn1_usd", "LC turn 1 ($)"),
                              ("lc_turn_n_usd", "LC turn N>1 ($)"),
                              ("break_even_n", "break-even N")):
            value = None
            if ours5 is not None and r.context_tokens in ours5.index:
                raw = ours5.loc[r.context_tokens, column]
                value = int(raw) if column == "break_even_n" else round(float(raw), 4)
            rows.append(Comparison("Table 5", f"L={r.context_tokens:,} {label}",
                                   getattr(r, column), value, comparable, why))
    return rows


def _section_paper(view: RunView) -> list[str]:
    rows = paper_vs_run(view)
    comparable = sum(r.comparable for r in rows)
    matched = sum(r.comparable and _matches(r.paper, r.run) for r in rows)
    lines = ["## Paper vs this run", "",
             f"Every number the paper reports, next to this run's. **Comparable** means the same "
             f"data and the same models and settings (for Tables 4-5: the paper's cost model). "
             f"{comparable} of {len(rows)} numbers are comparable in this run; {matched} of those "
             "match to 4 decimals.", "",
             md_table([r.row() for r in rows],
                      ["source", "quantity", "paper", "this run", "comparable", "why"]), ""]
    return lines


def _section_files(view: RunView) -> list[str]:
    root = view.run.root
    items = [("manifest.json", "parameters, commit, versions, timings, data provenance"),
             ("calls.jsonl", "one record per model call (the usage ledger)"),
             ("tables/", "run-wide tables (costs, Tables 4-5)"),
             ("figures/", "run-wide figures (Figure 1, cost figures)")]
    for ds in view.datasets:
        items.append((f"{ds.name}/", "data, memory, answers, judgments, tables, figures, executed "
                      "notebooks of this dataset"))
    rows = [[f"`{name}`", what] for name, what in items if (root / name.rstrip("/")).exists()]
    return ["## Files", "", md_table(rows, ["path (in the run directory)", "what"]), ""]


# --------------------------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------------------------
def render_markdown(run: RunPaths) -> str:
    view = RunView.load(run)
    lines = [f"# Fact memory vs. long context: run `{run.name}`", "",
             "Reproduction of *Beyond the Context Window: A Cost-Performance Analysis of "
             "Fact-Based Memory vs. Long-Context LLMs for Persistent Agents* "
             "(Pollertlam & Kornsuwannawit).", ""]
    for section in (_section_what_ran, _section_tokens, _section_accuracy, _section_costs,
                    _section_cost_model, _section_figure1, _section_paper, _section_files):
        lines += section(view)
    return "\n".join(lines).rstrip() + "\n"


_HTML_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; max-width: 1100px;
       margin: 2rem auto; padding: 0 1rem; line-height: 1.45; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
tr:nth-child(even) td { background: #fafafa; }
blockquote { border-left: 4px solid #d62728; margin: 1rem 0; padding: 0.5rem 1rem;
             background: #fff5f5; }
img { max-width: 100%; height: auto; margin: 0.5rem 0 1.5rem; }
code { background: #f3f3f3; padding: 0 0.2rem; }
"""


def render_html(markdown_text: str, root: Path) -> str:
    """The Markdown as a self-contained HTML page (figures embedded, so it can be mailed)."""
    import markdown as md

    def embed(match: re.Match[str]) -> str:
        alt, target = match.group(1), match.group(2)
        path = root / target
        if not path.is_file() or path.suffix.lower() != ".png":
            return match.group(0)
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"![{alt}](data:image/png;base64,{data})"

    embedded = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", embed, markdown_text)
    body = md.markdown(embedded, extensions=["tables"])
    title = markdown_text.splitlines()[0].lstrip("# ").strip()
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}</title><style>{_HTML_STYLE}</style></head>\n<body>\n{body}\n"
            "</body></html>\n")


def write_report(run: RunPaths) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` into the run directory; return their paths."""
    text = render_markdown(run)
    write_text(run.report_md, text)
    write_text(run.report_html, render_html(text, run.root))
    return run.report_md, run.report_html
