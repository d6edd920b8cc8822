"""The report's first lines: the answer, before the details.

A box with what ran, the break-even of the cost model, memory's accuracy against long context's
(with intervals, flagged when they rest on few conversations), failures, and the bill, with why
the estimate printed before the run and the ledger's total differ.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from memcost.costs.estimate import JUDGE_OUTPUT_TOKENS, LC_OUTPUT_TOKENS
from memcost.run.report.markdown import FEW_CONVERSATIONS, pct, usd
from memcost.run.report.results import accuracy_tables
from memcost.run.report.view import DATASET_NAMES, RunView, read_csv

LONG_CONTEXT = "long_context_gpt-5-mini"  # the long-context system the headline sets memory against


def _what_ran(view: RunView) -> str:
    name = (view.manifest.get("preset") or {}).get("name")
    preset = f"preset `{name}`" if name else "notebooks run by hand with their defaults"
    notebooks = view.manifest.get("notebooks") or view.manifest.get("steps") or {}
    count = f"{len(notebooks)} notebook execution" + ("s" if len(notebooks) != 1 else "")
    if not view.datasets:
        return f"**What ran:** {preset}, {count}: the cost model only, no dataset."
    names = ", ".join(ds.title for ds in view.datasets)
    backend = ", ".join(view.backends) or "no model calls"
    note = " (deterministic classical methods, not LLMs)" if view.offline else ""
    return f"**What ran:** {preset}, {count} on {names}; backend {backend}{note}."


def _break_even(view: RunView) -> str | None:
    table5 = read_csv(view.run.table.table5)
    if table5 is None or table5.empty:
        return None
    model = view.cost_parameters.get("cost_model", "paper")
    cells = ", ".join(f"{int(r.break_even_n)} questions at {int(r.context_tokens) // 1000}k tokens"
                      for r in table5.itertuples(index=False))
    return (f"**Break-even** (Table 5, {model} cost model): memory is cheaper per user after "
            f"{cells} of history.")


def interval_note(row: Any) -> str:
    conversations = int(getattr(row, "conversations", 0) or 0)
    return f" ⚠ {conversations} conversations" if 0 < conversations < FEW_CONVERSATIONS else ""


def _accuracy(view: RunView) -> list[str]:
    lines = []
    for name, table in accuracy_tables(view).items():
        bysys = table.set_index("system")
        if "memory" not in bysys.index or LONG_CONTEXT not in bysys.index:
            continue
        parts = []
        for system, label in (("memory", "memory"), (LONG_CONTEXT, "long context (GPT-5-mini)")):
            r = bysys.loc[system]
            parts.append(f"{label} {pct(r['accuracy'])}% (Wilson 95% {pct(r['wilson_low'])}–"
                         f"{pct(r['wilson_high'])}, n = {int(r['n'])})")
        few = interval_note(bysys.loc["memory"])
        lines.append(f"- {DATASET_NAMES.get(name, name)}: " + " vs ".join(parts) + few)
    if not lines:
        return []
    return ["**Accuracy**, memory vs long context:", *lines]


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
        parts.append(f"{errors} answers failed or could not be judged (counted wrong in "
                     "*strict* accuracy)")
    return "**Failures:** " + "; ".join(parts) + "."


def _bill(view: RunView) -> str | None:
    summary = read_csv(view.run.table.cost_summary)
    estimate = read_csv(view.run.table.estimate_before_run)
    if summary is None or summary.empty:
        return None
    parts = ~summary["component"].astype(str).str.endswith(": total")
    spent = float(summary.loc[parts, "spent_usd"].sum())
    ledger = float(summary.loc[parts, "total_usd"].sum())
    text = (f"**The bill:** {usd(spent)} paid; the ledger's calls at list price come to "
            f"{usd(ledger)}")
    if estimate is not None and not estimate.empty:
        before = float(estimate["usd"].sum())
        text += (f"; the estimate printed before the run was {usd(before)}. They differ because "
                 f"the estimate assumes the paper's models at work: about "
                 f"{JUDGE_OUTPUT_TOKENS:,.0f} reasoning and output tokens per judge vote and "
                 f"~{LC_OUTPUT_TOKENS:,.0f} output tokens per long-context answer "
                 "(`memcost/costs/estimate.py`), while the ledger prices the tokens this run's "
                 "calls actually used")
        if view.offline:
            text += ", and offline calls have no reasoning tokens and short answers"
    return text + "."


def section_headline(view: RunView) -> list[str]:
    """The answer first, as a box (a block quote) above every other section."""
    items = [_what_ran(view), _break_even(view), *_accuracy(view), _failures(view), _bill(view)]
    body = [item for item in items if item]
    lines = ["## The answer in brief", ""]
    for item in body:
        lines += [f"> {item}", ">"]
    if lines[-1] == ">":
        lines.pop()
    few = any(interval_note(r) for t in accuracy_tables(view).values()
              for r in t.itertuples(index=False))
    if few:
        lines += ["", f"⚠ marks intervals that rest on fewer than {FEW_CONVERSATIONS} "
                  "conversations: questions of one conversation are not independent, so no "
                  "interval over so few clusters is a reliable 95% interval."]
    return lines + [""]
