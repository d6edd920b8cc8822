"""Paper vs this run: every number the paper reports, with this run's and whether they compare."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd

from memcost import paper
from memcost.catalog import stand_ins
from memcost.io import write_csv
from memcost.judge.votes import LETTER_MATCH
from memcost.offline import LEXICAL
from memcost.params import backend_of, client_option, normalise_execution
from memcost.paths import PERSONAMEM_NAME_NOTE
from memcost.run.report.markdown import md_table, usd
from memcost.run.report.markdown import number as plain_number
from memcost.run.report.results import accuracy_tables
from memcost.run.report.view import (
    DATASET_NAMES,
    JUDGE_WORDS,
    PAPER_ORDER,
    PAPER_SYSTEMS,
    RunView,
    read_csv,
    step_metrics,
)


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
        return [
            self.section,
            self.quantity,
            _quoted(self.paper, money),
            _plain(self.run, money),
            verdict,
            self.why,
        ]


def _plain(value: Any, money: bool) -> str:
    """A number in the report's one format (dollars as :func:`usd`)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    if money:
        return usd(value)
    return plain_number(float(value))


def _quoted(value: Any, money: bool) -> str:
    """A paper's number as the paper prints it (92.85, not 92.8)."""
    if money or not isinstance(value, float) or math.isnan(value):
        return _plain(value, money)
    return f"{int(value):,}" if value.is_integer() else format(value, ",")


def _matches(published: Any, ours: Any) -> bool:
    try:
        return round(float(published), 4) == round(float(ours), 4)
    except (TypeError, ValueError):
        return False


def paper_vs_run(view: RunView) -> list[Comparison]:
    rows: list[Comparison] = []
    columns = ("n", "min", "max", "median", "mean")
    for number, published, table_name in ((1, paper.TABLE1, "table1"), (2, paper.TABLE2, "table2")):
        for name in PAPER_ORDER:
            ds = view.dataset(name)
            table = None if ds is None else read_csv(getattr(ds.paths.table, table_name))
            comparable, why = (False, "dataset not in this run") if ds is None else ds.full_data()
            for column, value in zip(columns, published[name], strict=True):
                ours = None if table is None else table.iloc[0][column]
                rows.append(
                    Comparison(
                        f"Table {number}",
                        f"{DATASET_NAMES[name]} {column}",
                        value,
                        None if ours is None else _number(ours),
                        comparable,
                        why,
                    )
                )
    accuracy = accuracy_tables(view)
    for name in PAPER_ORDER:
        ds = view.dataset(name)
        table = accuracy.get(name)
        if ds is None:
            comparable, why = False, "dataset not in this run"
        else:
            data_ok, data_why = ds.full_data()
            settings_ok, settings_why = ds.paper_settings()
            comparable = data_ok and settings_ok
            why = (
                "same data, models and judge"
                if comparable
                else (data_why if not data_ok else settings_why)
            )
        for system in PAPER_SYSTEMS:
            ours = None
            if table is not None and system in set(table["system"]):
                strict = float(table.set_index("system").loc[system, "strict_accuracy"])
                ours = f"{100 * strict:.2f}"  # at the paper's precision (92.85)
            rows.append(
                Comparison(
                    "Table 3",
                    f"{DATASET_NAMES[name]} {system} accuracy %",
                    f"{paper.TABLE3[name][system]:.2f}",  # as the paper prints Table 3
                    ours,
                    comparable,
                    why,
                )
            )
        rows.append(_gap_row(name, table, comparable, why))
    rows += _measured_rows(view)
    rows += _cost_model_rows(view)
    return rows


def _gap_row(name: str, table: pd.DataFrame | None, comparable: bool, why: str) -> Comparison:
    """Table 3's headline gap, long context with GPT-5-mini over memory, in points."""
    lc, memory = "long_context_gpt-5-mini", paper.PAPER_MEMORY
    published = paper.TABLE3[name][lc] - paper.TABLE3[name][memory]
    ours = None
    if table is not None and {lc, memory} <= set(table["system"]):
        strict = table.set_index("system")["strict_accuracy"].astype(float)
        ours = f"{100 * (strict[lc] - strict[memory]):.2f}"
    quantity = f"{DATASET_NAMES[name]} gap, long context GPT-5-mini − memory (points)"
    return Comparison("Table 3", quantity, f"{published:.2f}", ours, comparable, why)


def _number(value: Any) -> Any:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return int(number) if number.is_integer() else number


# §4.2's LongMemEval bill, row by row: (what, key in paper.MEASURED, component of this run's
# cost summary whose name starts with the prefix, its column).
_BILL_ROWS = (
    ("extraction cost ($)", "extraction_usd", "write: fact extraction", "total_usd"),
    (
        "extraction cost per conversation ($)",
        "extraction_usd_per_conversation",
        "write: fact extraction",
        "usd_per_conversation",
    ),
    (
        "extraction prompt tokens",
        "extraction_prompt_tokens",
        "write: fact extraction",
        "prompt_tokens",
    ),
    (
        "extraction completion tokens",
        "extraction_completion_tokens",
        "write: fact extraction",
        "completion_tokens",
    ),
    ("fact embedding cost ($)", "embedding_usd", "write: fact embeddings", "total_usd"),
    ("read cost ($)", "read_usd", "read:", "total_usd"),
    ("read cost per question ($)", "read_usd_per_question", "read:", "usd_per_question"),
)
_TOKENS = ("prompt_tokens", "completion_tokens")
_LONG_CONTEXT_ROWS = (
    ("LC GPT-5-mini cost ($)", "lc_gpt5_mini_usd", "gpt-5-mini", "total_usd"),
    (
        "LC GPT-5-mini cost per request ($)",
        "lc_gpt5_mini_usd_per_request",
        "gpt-5-mini",
        "usd_per_request",
    ),
    ("LC GPT-5-mini requests", "lc_gpt5_mini_requests", "gpt-5-mini", "api_requests"),
    ("LC GPT-OSS-120B cost ($)", "lc_gpt_oss_120b_usd", "gpt-oss-120b", "total_usd"),
    ("LC GPT-OSS-120B requests", "lc_gpt_oss_120b_requests", "gpt-oss-120b", "api_requests"),
    (
        "LC GPT-OSS-120B cost per request ($)",
        "lc_gpt_oss_120b_usd_per_request",
        "gpt-oss-120b",
        "usd_per_request",
    ),
)


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
    summary = read_csv(view.run.table.cost_summary)
    lme = None if summary is None else summary.loc[summary["dataset"] == "longmemeval"]

    def component(prefix: str, column: str) -> Any:
        if lme is None or lme.empty:
            return None
        hit = lme.loc[lme["component"].astype(str).str.startswith(prefix)]
        return None if hit.empty else _number(hit.iloc[0][column])

    extract = step_metrics(ds.paths, "01_extract_facts") if ds else {}
    read = step_metrics(ds.paths, "02_answer_from_memory") if ds else {}
    measured = paper.MEASURED
    items = [(q, measured[key], component(prefix, col)) for q, key, prefix, col in _BILL_ROWS]
    prompt, completion = (component("write: fact extraction", c) for c in _TOKENS)
    items += [
        (
            "extraction tokens (prompt + completion)",
            measured["extraction_tokens"],
            None if prompt is None or completion is None else prompt + completion,
        ),
        ("facts embedded", measured["embedding_facts"], extract.get("facts_written")),
        (
            "fact embedding tokens",
            measured["embedding_tokens"],
            component("write: fact embeddings", "prompt_tokens"),
        ),
    ]
    items += [
        (
            "retrieved tokens per question",
            measured["read_retrieved_tokens_per_question"],
            read.get("retrieved_tokens_mean"),
        ),
        (
            "fact tokens per user",
            paper.FACT_TOKENS_PER_USER,
            extract.get("fact_tokens_per_user_mean"),
        ),
        ("history : fact tokens (x:1)", paper.COMPRESSION_RATIO, extract.get("compression_ratio")),
    ]
    items += [
        (q, measured[key], component(f"answer: long_context_{model}", col))
        for q, key, model, col in _LONG_CONTEXT_ROWS
    ]
    return [Comparison("§4.2 LongMemEval", q, p, r, comparable, why) for q, p, r in items]


def _cost_model_rows(view: RunView) -> list[Comparison]:
    table4 = read_csv(view.run.table.table4)
    table5 = read_csv(view.run.table.table5)
    model = view.cost_parameters.get("cost_model", "paper")
    comparable = model == "paper" and (table4 is not None or table5 is not None)
    why = (
        "the paper's cost model with the constants its tables imply"
        if comparable
        else "the cost model did not run (notebook 05)"
        if table4 is None and table5 is None
        else f"cost model from this run's measurements ({model})"
    )
    rows: list[Comparison] = []
    ours4 = None if table4 is None else table4.set_index("n_turns")
    for r in paper.TABLE4.itertuples(index=False):
        for column, label in (("memory_usd", "memory"), ("long_context_usd", "long context")):
            value = (
                None
                if ours4 is None or r.n_turns not in ours4.index
                else round(float(ours4.loc[r.n_turns, column]), 4)
            )
            rows.append(
                Comparison(
                    "Table 4",
                    f"N={r.n_turns} {label} ($)",
                    getattr(r, column),
                    value,
                    comparable,
                    why,
                )
            )
    for turns, saves in paper.TABLE4_MEMORY_SAVES_PCT.items():
        value = None
        if ours4 is not None and turns in ours4.index:
            memory, lc = (float(ours4.loc[turns, c]) for c in ("memory_usd", "long_context_usd"))
            value = round(100 * (lc - memory) / lc)
        quantity = f"N={turns} memory cheaper than long context (%)"
        rows.append(Comparison("Table 4", quantity, saves, value, comparable, why))
    ours5 = None if table5 is None else table5.set_index("context_tokens")
    for r in paper.TABLE5.itertuples(index=False):
        for column, label in (
            ("write_usd", "write ($)"),
            ("lc_turn1_usd", "LC turn 1 ($)"),
            ("lc_turn_n_usd", "LC turn N>1 ($)"),
            ("break_even_n", "break-even N"),
        ):
            value = None
            if ours5 is not None and r.context_tokens in ours5.index:
                raw = ours5.loc[r.context_tokens, column]
                value = int(raw) if column == "break_even_n" else round(float(raw), 4)
            rows.append(
                Comparison(
                    "Table 5",
                    f"L={r.context_tokens:,} {label}",
                    getattr(r, column),
                    value,
                    comparable,
                    why,
                )
            )
    return rows


def _stand_ins(view: RunView) -> str:
    found = {old: new for ds in view.datasets for old, new in stand_ins(ds.parameters).items()}
    return ", ".join(f"{new} for {old}" for old, new in sorted(found.items()))


def _judge_line(view: RunView) -> str:
    """Who judged and how (the paper's: GPT-5-mini, high effort, three votes, one request at a
    time)."""
    ours = paper.PAPER_SETTINGS["04_judge_answers"]
    by_judge: dict[str, list[str]] = {}  # datasets judged alike are named together
    for ds in view.datasets:
        judged = ds.parameters.get("04_judge_answers")
        if not judged:
            continue  # notebook 04 did not run on this dataset
        if (ds.metrics.get("04_judge_answers") or {}).get("mode") == "multiple_choice":
            by_judge.setdefault(JUDGE_WORDS[LETTER_MATCH], []).append(ds.title)
            continue
        p = {**ours, **{k: v for k, v in judged.items() if v is not None}}
        mode = normalise_execution(client_option(p, "execution"))["judge"]
        model = p["judge_model"]
        judged_by = (  # an offline vote is a word-overlap rule's: never a model's name on it
            f"{JUDGE_WORDS[LEXICAL]} in the configured judge's place"
            if backend_of(model, p) == "offline"
            else f"{model} at reasoning effort {p['reasoning_effort']}"
        )
        votes = f"{p['n_votes']} vote" + ("s" if p["n_votes"] != 1 else "")
        by_judge.setdefault(f"{judged_by}, {votes}, {mode}", []).append(ds.title)
    said = [f"{', '.join(titles)}: {judge}" for judge, titles in by_judge.items()]
    if not said:
        return ""  # no dataset judged in this run: nothing to set beside the paper's judge
    return (
        f"Judge (the paper's: {ours['judge_model']} at reasoning effort "
        f"{ours['reasoning_effort']}, {ours['n_votes']} votes, interactive; a batched judge "
        "gets the same requests, answered within 24 hours): " + "; ".join(said) + "."
    )


def section_paper(view: RunView) -> list[str]:
    """The comparable numbers in a table, the others one counted line per reason (all in
    ``tables/paper_vs_run.csv``)."""
    rows = paper_vs_run(view)
    judge = _judge_line(view)
    comparable = [r for r in rows if r.comparable]
    matched = sum(_matches(r.paper, r.run) for r in comparable)
    header = ["source", "quantity", "paper", "this run", "comparable", "why"]
    view.run.tables.mkdir(parents=True, exist_ok=True)
    write_csv(view.run.table.paper_vs_run, pd.DataFrame([r.row() for r in rows], columns=header))
    lines = [
        "## Paper vs this run",
        "",
        f"Every number the paper reports, next to this run's. **Comparable** means the same "
        f"data and the same models and settings (for Tables 4-5: the paper's cost model). "
        f"{len(comparable)} of {len(rows)} numbers are comparable in this run; {matched} of "
        "those match to 4 decimals.",
        "",
        *(
            [f"Stand-ins for the paper's shut-down models: {_stand_ins(view)}.", ""]
            if _stand_ins(view)
            else []
        ),
        *([judge, ""] if judge else []),
        *(  # the paper's name for the split, where this run has it
            [PERSONAMEM_NAME_NOTE, ""]
            if any(ds.name.startswith("personamem") for ds in view.datasets)
            else []
        ),
    ]
    differ = [r for r in comparable if not _matches(r.paper, r.run)]
    for source in dict.fromkeys(r.section for r in comparable):  # the matches, one line each
        mine = [r for r in comparable if r.section == source]
        same = sum(_matches(r.paper, r.run) for r in mine)
        if same:
            lines += [
                f"- **{source}**: {same} of {len(mine)} comparable numbers match the "
                "paper's to 4 decimals (each in `tables/paper_vs_run.csv`)."
            ]
    if differ:  # the comparable numbers that do not match, each shown
        lines += ["", md_table([r.row() for r in differ], header)]
    lines += [""]
    reasons = Counter(r.why for r in rows if not r.comparable)
    if reasons:
        sources = {
            why: sorted({r.section for r in rows if r.why == why and not r.comparable})
            for why in reasons
        }
        lines += [
            f"**{sum(reasons.values())} numbers are not comparable in this run** (all of "
            "them, with this run's value, are in `tables/paper_vs_run.csv`):",
            "",
        ]
        lines += [
            f"- {count} ({', '.join(sources[why])}): {why}" for why, count in reasons.most_common()
        ]
        lines.append("")
    return lines
