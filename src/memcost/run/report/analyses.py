"""The report's analyses beyond Table 3, each a table a notebook wrote: cost per correct answer,
McNemar tests, judge sensitivity and the simulated prompt cache."""

from __future__ import annotations

import pandas as pd

from memcost.paths import DATASET_TABLES, RUN_TABLES
from memcost.plugins import Section, Table
from memcost.run.report.markdown import md_table, pct, usd
from memcost.run.report.view import DATASET_NAMES, RunView, read_csv


def _frames(view: RunView, table: str) -> list[pd.DataFrame]:
    frames = (read_csv(getattr(ds.paths.table, table)) for ds in view.datasets)
    return [t for t in frames if t is not None]


def _cpa_caption(view: RunView) -> str:
    table = read_csv(view.run.table.cost_per_correct_answer)
    basis = "; ".join(sorted(set(table["basis"].astype(str)))) if table is not None else ""
    return (
        f"Answering dollars divided by correct answers (notebook 05; basis: {basis}). "
        "Memory's second column adds its share of writing the memory. A system with no "
        "correct answer has no cost per correct answer (—)."
    )


COST_PER_CORRECT = Table(
    f"tables/{RUN_TABLES['cost_per_correct_answer']}.csv",
    {"dataset": "dataset", "system": "system", "correct": "correct", "questions": "questions",
     "cpa_usd": "$ per correct", "cpa_with_write_usd": "$ per correct, with writing"},
    title="Cost per correct answer",
    caption=_cpa_caption,
    formats={"cpa_usd": usd, "cpa_with_write_usd": usd},
)  # fmt: skip
MCNEMAR = Table(
    "{dataset}/tables/" + f"{DATASET_TABLES['mcnemar']}.csv",
    {"dataset": "dataset", "system_a": "first", "system_b": "second", "n_paired": "questions",
     "a_only_correct": "only first right", "b_only_correct": "only second right",
     "difference_b_minus_a": "difference (points)", "p_value": "p",
     "significant_5pct": "p < 0.05"},
    title="Paired tests (exact McNemar)",
    caption="Both systems answered the same questions, so they are compared on the questions "
    "where exactly one was right (notebook 04). Few discordant pairs cannot show a "
    "difference, whatever the accuracies say. The difference is the second system's "
    "accuracy minus the first's: positive when the second is more accurate.",
    formats={"difference_b_minus_a": lambda d: f"{100 * float(d):+.1f}",
             "p_value": lambda p: f"{float(p):.3g}"},
)  # fmt: skip


def _judge_sensitivity(view: RunView) -> list[str]:
    frames = _frames(view, "judge_sensitivity")
    if not frames:
        return []
    table = pd.concat(frames, ignore_index=True)
    wide = table.pivot_table(
        index=["dataset", "system"], columns="prompt_name", values="accuracy", aggfunc="first"
    )
    words = {"judge_lenient": "lenient", "judge": "default", "judge_strict": "strict"}
    prompts = [p for p in words if p in wide.columns]
    rows = [
        [DATASET_NAMES.get(d, d), view.label(str(s)), *[pct(wide.loc[(d, s), p]) for p in prompts]]
        for d, s in wide.index
    ]
    return [
        "### Judge sensitivity",
        "",
        "Accuracy in % under each judge prompt (notebook 04"
        + (
            "; offline, the lexical rule with lenient, default and strict thresholds"
            if view.offline
            else ""
        )
        + "): if the ranking of the systems changes between a lenient and a strict judge, the "
        "judge, not the system, decides.",
        "",
        md_table(rows, ["dataset", "system", *(words[p] for p in prompts)]),
        "",
    ]


def _simulated_cache(view: RunView) -> list[str]:
    """Notebook 03's replay of its prompts through the prefix-cache rule (with a provider, beside
    the ledger's cached share)."""
    frames = _frames(view, "simulated_prompt_cache")
    if not frames:
        return []
    table = pd.concat(frames, ignore_index=True)
    # a dataset whose every history is asked once has nothing to reuse: one line, not a row
    # per system of zeros
    asked_once = [
        d for d, g in table.groupby("dataset", sort=False) if (g["later_questions"] == 0).all()
    ]
    shown = table.loc[~table["dataset"].isin(asked_once)]
    ledger = read_csv(view.run.table.cost_lc_cached_share)
    measured = (
        {}
        if view.offline or ledger is None
        else {
            (r.dataset, r.system): r.cached_share
            for r in ledger.loc[ledger["basis"] == "measured"].itertuples(index=False)
        }
    )
    rows = [
        [
            DATASET_NAMES.get(r.dataset, r.dataset),
            view.label(str(r.system)),
            int(r.later_questions),
            pct(r.simulated_share_after_first),
            pct(r.simulated_cached_share),
            *(
                [pct(measured[r.dataset, r.system]) if (r.dataset, r.system) in measured else "—"]
                if measured
                else []
            ),
        ]
        for r in shown.itertuples(index=False)
    ]
    gaps = ", ".join(f"{g:g} s" for g in sorted(set(table["gap_s"])))
    header = [
        "dataset",
        "system",
        "later questions",
        "simulated share after the first",
        "simulated share of all input",
    ]
    if measured:
        title = "### Long-context prompt cache: the rule's prediction and the provider's report"
        text = (
            f"Notebook 03 replays its prompts through the prefix-cache rule (`memcost.catalog`), "
            f"questions {gaps} apart; the last column is the share the provider reported as "
            "cached (the ledger, notebook 05), the one every cost above uses. Shares in %."
        )
        header.append("provider's share of all input")
    else:
        title = "### Long-context prompt cache: SIMULATED, not measured"
        text = (
            f"The offline backend has no provider cache, so notebook 03 replays its prompts "
            f"through the prefix-cache rule (`memcost.catalog`), questions {gaps} apart. "
            "These shares are the rule's prediction in %: they are not in the ledger and not in "
            "any cost above."
        )
    lines = [title, "", text, ""]
    if rows:
        lines += [md_table(rows, header), ""]
    if asked_once:
        lines += [
            f"{', '.join(DATASET_NAMES.get(d, d) for d in asked_once)}: every history is "
            "asked one question, so no system reuses a cached prefix (0% for each).",
            "",
        ]
    return lines


def analyses_lines(view: RunView) -> list[str]:
    return _judge_sensitivity(view) + _simulated_cache(view)


ANALYSES = Section(
    "analyses",
    "Cost per correct answer, paired tests, judge sensitivity, simulated cache",
    tables=(COST_PER_CORRECT, MCNEMAR),
    lines=analyses_lines,
)
