"""The report's first box: the paper's answer, today's, then this run's, each labelled by what
produced it (docs/architecture.md, "The report")."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from memcost import paper
from memcost.answers import in_words
from memcost.calls import read_calls
from memcost.catalog import canonical_name
from memcost.costs import today
from memcost.costs.estimate import JUDGE_OUTPUT_TOKENS, LC_OUTPUT_TOKENS, chosen_total
from memcost.run.report.markdown import FEW_CONVERSATIONS, pct, usd
from memcost.run.report.results import accuracy_tables
from memcost.run.report.section import briefs
from memcost.run.report.view import DATASET_NAMES, RunView, read_csv
from memcost.verify import JUDGED_SHARE, MEMORY, detectable_gap
from memcost.verify import LONG_CONTEXT as HEADLINE_LONG_CONTEXT

LONG_CONTEXT = "long_context_gpt-5-mini"  # the paper's long-context system, preferred if it ran
PAPER_CASE = "paper's break-even"  # notebook 07's headline table, its first case
PAPER_NAMES = {
    "locomo": "LoCoMo",
    "longmemeval": "LongMemEval",
    "personamem": 'PersonaMem (the paper\'s "PersonaMem v2", the 32k split)',
}


def _paper_answer() -> str:
    rows = "; ".join(
        f"{PAPER_NAMES.get(d, d)} memory {t[paper.PAPER_MEMORY]:.2f}% "
        f"vs long context {t[LONG_CONTEXT]:.2f}%"
        for d, t in paper.TABLE3.items()
    )
    cells = ", ".join(
        f"{int(n)} at {int(c) // 1000}k"
        for c, n in zip(paper.TABLE5["context_tokens"], paper.TABLE5["break_even_n"], strict=True)
    )
    return (
        f"**The paper's answer** (GPT-5-mini answering, GPT-5-nano extracting, 2025 prices): "
        f"long context is more accurate ({rows}; Table 3), and memory is cheaper per user "
        f"from question {cells} tokens of history (Table 5)."
    )


def today_answer(view: RunView) -> str | None:
    headline = read_csv(view.run.table.break_even_headline)
    if headline is None or headline.empty:
        return None
    cases = headline.set_index("case")

    def n(case: str) -> str:
        if case not in cases.index or pd.isna(cases.loc[case, "break_even_n"]):
            return "never"
        return str(int(cases.loc[case, "break_even_n"]))

    model = str(cases["lc_model"].iloc[1]) if len(cases) > 1 else "today's model"
    tokens = int(cases["context_tokens"].iloc[0])
    return (
        f"**Today's answer** (notebook 07, computed from today's dated prices): with "
        f"{model} for long context, memory is cheaper from question {n('today, back to back')}"
        f" back to back and from question {n('today, one question a day')} with one "
        f"question a day (the prompt cache expired), at {tokens:,} tokens of history, "
        f"against {n(PAPER_CASE)} at the paper's prices. Since the paper, "
        f"{today.what_moved()}."
    )


def command_line_changes(preset: dict[str, Any]) -> str:
    """The parameters ``-p`` set over the preset, in words ("" for none)."""
    return ", ".join(
        f"`{name}={value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}`"
        for name, value in (preset.get("command_line") or {}).items()
    )


def _what_ran(view: RunView) -> str:
    name = (view.manifest.get("preset") or {}).get("name")
    described = (view.manifest.get("preset") or {}).get("description")
    preset = (
        f"preset `{name}`" if name else "notebooks run without a preset (by hand or by papermill)"
    )
    preset += f" ({described.rstrip('.')})" if name and described else ""
    changed = command_line_changes(view.manifest.get("preset") or {})
    preset += f" with {changed} from the command line" if changed else ""
    notebooks = view.manifest.get("notebooks") or view.manifest.get("steps") or {}
    count = f"{len(notebooks)} notebook execution" + ("s" if len(notebooks) != 1 else "")
    if not view.datasets:
        return f"**What ran:** {preset}, {count}: the cost model only, no dataset."
    names = ", ".join(ds.title for ds in view.datasets)
    backend = ", ".join(view.backends or view.run_backends) or "no model calls"
    note = " (deterministic classical methods, not LLMs)" if view.offline else ""
    return f"**What ran:** {preset}, {count} on {names}; backend {backend}{note}." + _subset_note(
        view, name or ""
    )


def _served(view: RunView) -> str | None:
    """Which model answered each requested one (the ledger's ``served_model``), warning where they
    differ (a local server answers under any name)."""
    served: dict[str, set[str]] = {}
    for record in read_calls(view.run):
        if record.get("backend") != "offline" and record.get("served_model"):
            served.setdefault(str(record["model"]), set()).add(str(record["served_model"]))
    if not served:
        return None
    said, other = [], []
    for model, names in served.items():
        answered = ", ".join(f"`{n}`" for n in sorted(names))
        said.append(f"`{model}` as {answered}")
        if any(canonical_name(n) != canonical_name(model) for n in names):
            other.append(f"`{model}` was answered by {answered}")
    text = "**Models that answered** (as their servers reported): " + "; ".join(said) + "."
    if other:
        text += (
            " ⚠ " + "; ".join(other) + ": this run's results are those models', whatever "
            "its tables call them."
        )
    return text


def _subset_note(view: RunView, preset: str) -> str:
    """For a verify_* run: what its subset can and cannot show."""
    if not preset.startswith("verify_"):
        return ""
    said = []
    for ds in view.datasets:
        selection = ds.provenance.get("selection") or {}
        questions, conversations = selection.get("questions"), selection.get("conversations")
        if ds.name not in paper.TABLE3 or not questions or not conversations:
            continue
        judged = round(questions * JUDGED_SHARE.get(ds.name, 1.0))
        gap = detectable_gap(judged, judged / conversations, ds.name)
        row = paper.TABLE3[ds.name]
        paper_gap = (row[HEADLINE_LONG_CONTEXT] - row[MEMORY]) / 100
        verdict = (
            "so it can tell the paper's gap from zero"
            if gap <= paper_gap
            else "so it cannot confirm the paper's gap, only a larger one"
        )
        said.append(
            f"{ds.title}: about {judged} judged questions over {conversations} "
            f"conversations detect a gap of {100 * gap:.1f} points or more (the paper's: "
            f"{100 * paper_gap:.1f}), {verdict}; the subset does not estimate either "
            "system's accuracy closely or compare categories"
        )
    return (
        (" **What this subset can show** (memcost/verify.py): " + "; ".join(said) + ".")
        if said
        else ""
    )


def break_even_brief(view: RunView) -> str | None:
    """This run's Table 5 break-even and how many published cells it reproduced."""
    table5 = read_csv(view.run.table.table5)
    if table5 is None or table5.empty:
        return None
    found = ", ".join(
        f"{int(r.break_even_n)} at {int(r.context_tokens) // 1000}k"
        for r in table5.itertuples(index=False)
    )
    cheaper = f"memory is cheaper per user from question {found} tokens of history."
    model = view.cost_parameters.get("cost_model", "paper")
    if model != "paper":
        return f"**This run's Table 5** ({model} cost model): {cheaper}"
    cells = read_csv(view.run.table.table45_vs_paper)
    if cells is None or cells.empty:
        return None
    matched = int(cells["match"].sum())
    return (
        f"**This run's Tables 4-5** (notebook 05, the cost model of paper §3.5): {matched} of "
        f"{len(cells)} published cells reproduced to 4 decimals"
        + ("" if matched == len(cells) else " (the others: `tables/table45_vs_paper.csv`)")
        + f"; {cheaper}"
    )


def interval_note(row: Any) -> str:
    conversations = int(getattr(row, "conversations", 0) or 0)
    if not 0 < conversations < FEW_CONVERSATIONS:
        return ""
    return f" ⚠ {conversations} conversation" + ("s" if conversations != 1 else "")


def _long_context(bysys: pd.DataFrame) -> str | None:
    """The paper's long-context system if it ran, else the first."""
    if LONG_CONTEXT in bysys.index:
        return LONG_CONTEXT
    return next((s for s in bysys.index if str(s).startswith("long_context_")), None)


def _accuracy(view: RunView) -> list[str]:
    lines = []
    for name, table in accuracy_tables(view).items():
        bysys = table.set_index("system")
        lc = _long_context(bysys)
        if MEMORY not in bysys.index or lc is None:
            continue
        # offline systems carry no model name: no model answered
        lc_label = (
            "long context" if view.offline else f"long context ({lc[len('long_context_') :]})"
        )
        parts = []
        for system, label in ((MEMORY, "memory"), (lc, lc_label)):
            r = bysys.loc[system]
            parts.append(
                f"{label} {pct(r['accuracy'])}% (Wilson 95% {pct(r['wilson_low'])}–"
                f"{pct(r['wilson_high'])}, n = {int(r['n'])})"
            )
        few = interval_note(bysys.loc[MEMORY])
        lines.append(f"- {DATASET_NAMES.get(name, name)}: " + " vs ".join(parts) + few)
    if not lines:
        return []
    if view.offline:
        return [
            "**This run's accuracy, offline: the pipeline tested, not the models.** The "
            "offline stand-ins (sentence facts, lexical retrieval, extractive answers, a "
            "lexical judge) answered; these numbers measure those methods, not any model, "
            "and are not comparable with the paper's:",
            *lines,
        ]
    return [
        "**This run's accuracy**, memory vs long context (the run's models, judged by its "
        "LLM judge):",
        *lines,
    ]


def _failures(view: RunView) -> str | None:
    notebooks = view.manifest.get("notebooks") or {}
    failed = [k for k, v in notebooks.items() if v.get("status") not in (None, "ok")]
    errors = 0
    for table in accuracy_tables(view).values():
        for column in ("answer_errors", "judge_failures", "missing_answers"):
            if column in table:
                errors += int(pd.to_numeric(table[column], errors="coerce").fillna(0).sum())
    if not failed and not errors:
        return None
    parts = []
    if failed:
        parts.append(f"{len(failed)} notebook(s) did not finish ({', '.join(failed)})")
    if errors:
        parts.append(
            f"{errors} answers failed or could not be judged (counted wrong in *strict* accuracy)"
        )
    return "**Failures:** " + "; ".join(parts) + "."


def out_of_date(view: RunView) -> str | None:
    """The datasets whose answers changed after they were judged."""
    stale = [ds.title for ds in view.datasets if ds.paths.judged_before_answers()]
    if not stale:
        return None
    return (
        f"**Out of date:** {', '.join(stale)}: answers were written after notebook 04 judged "
        "them (notebook 02 or 03 ran again on its own); the accuracy and the costs per correct "
        "answer here are the earlier answers'. Run notebooks 04 and 05 again (`--steps 04,05`)."
    )


def ledger_replaced(view: RunView) -> str | None:
    """A store of calls set aside as damaged: its calls are in no table."""
    aside = sorted(p.name for p in view.run.root.glob(f"{view.run.calls.name}.damaged-*[0-9]"))
    if not aside:
        return None
    return (
        f"**Costs incomplete:** the run's store of calls was damaged and set aside "
        f"({', '.join(aside)}); the cost tables count only the calls made since, not those of "
        "the notebooks that had finished before it."
    )


def _bill(view: RunView) -> str | None:
    summary = read_csv(view.run.table.cost_summary)
    estimate = read_csv(view.run.table.estimate_before_run)
    if summary is None or summary.empty:
        return None
    parts = ~summary["component"].astype(str).str.endswith(": total")
    spent = float(summary.loc[parts, "spent_usd"].sum())
    ledger = float(summary.loc[parts, "total_usd"].sum())
    # Stages sent through the Batch API or Flex are priced at their discount, in the ledger as
    # in the estimate the runner printed last (its bill in the modes chosen)
    discounted = (
        estimate is not None
        and "execution" in estimate
        and bool((estimate["execution"] != "interactive").any())
    )
    text = (
        f"**The bill:** {usd(spent)} paid; the ledger's calls at list price"
        + (" (Batch and Flex at their discount)" if discounted else "")
        + f" come to {usd(ledger)}"
    )
    as_chosen = estimate is not None and not estimate.empty and chosen_total(estimate) is not None
    if as_chosen:
        estimate = estimate.assign(usd=estimate["usd_execution"])
    if (
        estimate is not None
        and not estimate.empty
        and round(float(estimate["usd"].sum()), 2) != round(ledger, 2)
    ):
        before = float(estimate["usd"].sum())
        text += f"; the estimate printed before the run was {usd(before)}"
        text += " in the execution modes chosen" if discounted and as_chosen else ""
        lower, higher = _stage_differences(estimate, read_csv(view.run.table.cost_by_stage))
        if lower or higher:
            text += " (" + "; ".join(lower + higher) + ")"
        text += (
            ". The estimate assumes the paper's models at work: about "
            f"{JUDGE_OUTPUT_TOKENS:,.0f} reasoning and output tokens per judge vote and "
            f"~{LC_OUTPUT_TOKENS:,.0f} output tokens per long-context answer "
            "(`memcost/costs/estimate.py`); the ledger prices the tokens this run's calls "
            "actually used"
        )
        if view.offline:
            text += " (offline calls have no reasoning tokens and short answers)"
        uncached = _cached_in_estimate_only(estimate, read_csv(view.run.table.cost_by_stage))
        if uncached:
            text += (
                f"; {' and '.join(uncached)} are priced as prompt-cache hits and none of the "
                "ledger's: "
                + (
                    "offline there is no provider cache"
                    if view.offline
                    else "the provider reported no cached tokens"
                )
            )
        if higher:
            text += (
                "; where the ledger is higher, the calls used more tokens than the estimate "
                "counted, or fewer of them cached (`tables/estimate_before_run.csv` against "
                "`tables/cost_by_stage.csv`)"
            )
    return text + "."


def _cached_in_estimate_only(estimate: pd.DataFrame, ledger: pd.DataFrame | None) -> list[str]:
    """Each stage the estimate expects cache hits in and the ledger has none (its gap is the cache,
    not the tokens)."""
    if ledger is None or ledger.empty or "cached_input_tokens" not in estimate:
        return []
    expected = estimate.groupby("ledger_stage")[["input_tokens", "cached_input_tokens"]].sum()
    found = ledger.groupby("stage")["cached_prompt_tokens"].sum()
    gaps = expected.loc[
        (expected["cached_input_tokens"] > 0) & expected.index.isin(found.index[found == 0])
    ]
    return [
        f"{100 * row.cached_input_tokens / row.input_tokens:.1f}%"
        + ("" if i else " of the estimate's input tokens")
        + f" in {in_words(str(stage))}"
        for i, (stage, row) in enumerate(gaps.iterrows())
    ]


def _stage_differences(
    estimate: pd.DataFrame, ledger: pd.DataFrame | None, most: int = 3
) -> tuple[list[str], list[str]]:
    """The stages whose ledger cost differs most from the estimate, lower and higher."""
    if ledger is None or ledger.empty or "ledger_stage" not in estimate:
        return [], []
    both = pd.concat(
        {
            "estimated": estimate.groupby("ledger_stage")["usd"].sum(),
            "ledger": ledger.groupby("stage")["cost_usd"].sum(),
        },
        axis=1,
    ).fillna(0.0)
    both["gap"] = both["ledger"] - both["estimated"]
    both = both.loc[both["gap"].abs().round(2) > 0].sort_values("gap", key=abs, ascending=False)

    def line(stage: str, row: Any) -> str:
        return f"{in_words(stage)} {usd(row.estimated)} estimated, {usd(row.ledger)} in the ledger"

    lower = [line(str(k), r) for k, r in both.loc[both["gap"] < 0].head(most).iterrows()]
    higher = [line(str(k), r) for k, r in both.loc[both["gap"] > 0].head(most).iterrows()]
    return lower, higher


def section_headline(view: RunView) -> list[str]:
    items = [
        *briefs(view, leading=True),  # a run of a study of its own leads with it
        _paper_answer(),
        *briefs(view, leading=False),
        today_answer(view),
        _what_ran(view),
        _served(view),
        break_even_brief(view),
        *_accuracy(view),
        out_of_date(view),
        ledger_replaced(view),
        _failures(view),
        _bill(view),
    ]
    body = [item for item in items if item]
    lines = ["## The answer in brief", ""]
    for item in body:
        lines += [f"> {item}", ">"]
    if lines[-1] == ">":
        lines.pop()
    few = any(
        interval_note(r) for t in accuracy_tables(view).values() for r in t.itertuples(index=False)
    )
    if few:
        lines += [
            "",
            f"⚠ marks intervals that rest on fewer than {FEW_CONVERSATIONS} "
            "conversations: questions of one conversation are not independent, so no "
            "interval over so few clusters is a reliable 95% interval.",
        ]
    return lines + [""]
