"""The report's result sections: Tables 1-2 (tokens) and Table 3 (accuracy)."""

from __future__ import annotations

import pandas as pd

from memcost import paper
from memcost.run.report.markdown import FEW_CONVERSATIONS, figure, md_table, pct, png
from memcost.run.report.view import DATASET_NAMES, JUDGE_WORDS, RunView, read_csv


def section_tokens(view: RunView) -> list[str]:
    if not view.datasets:
        return []  # notebook 00 did not run: no section
    lines = ["## Tables 1-2: tokens per conversation and per question", ""]
    for number, table_name, what in ((1, "table1", "conversation"), (2, "table2", "question")):
        frames = [
            t
            for ds in view.datasets
            if (t := read_csv(getattr(ds.paths.table, table_name))) is not None
        ]
        if not frames:
            continue  # notebook 00 did not run
        table = pd.concat(frames, ignore_index=True)
        rows = [
            ["this run", *r[:-1], f"{r[-1]:,.1f}" if number == 2 else r[-1]]
            for r in table.values.tolist()
        ]  # Table 2's mean to one decimal, as the paper prints it (12.0, not 12)
        published = paper.TABLE1 if number == 1 else paper.TABLE2
        rows += [
            [
                "the paper",
                DATASET_NAMES.get(ds.name, ds.name),
                *published[ds.name][:4],
                f"{published[ds.name][4]:,.1f}" if number == 2 else published[ds.name][4],
            ]
            for ds in view.datasets
            if ds.name in published
        ]  # means as the paper prints
        lines += [
            f"**Table {number} — o200k tokens per {what}**",
            "",
            md_table(rows, ["rows of", *table.columns], digits=1),
            "",
        ]
    lines += [
        "Counting conventions (paper §3.3): utterance texts joined by newlines, bare question "
        "text, upper median, mean rounded half up. The paper's rows are its Tables 1-2, "
        "over the whole datasets; whether this run's are comparable is in *Paper vs this "
        "run* below.",
        "",
    ]
    return lines


def accuracy_tables(view: RunView) -> dict[str, pd.DataFrame]:
    out = {}
    for ds in view.datasets:
        table = read_csv(ds.paths.table.table3)
        if table is not None:
            out[ds.name] = table
    return out


def _above_the_oracle(view: RunView, tables: dict[str, pd.DataFrame]) -> str | None:
    """Offline, why a system can score above the oracle (the evidence sessions themselves)."""
    if not view.offline:
        return None
    above = []
    for name, table in tables.items():
        by = table.set_index("system")["accuracy"]
        oracle = [s for s in by.index if str(s).startswith("oracle_")]
        if oracle:
            others = by.drop(oracle)
            best = others[others > by[oracle].max()]
            where = DATASET_NAMES.get(name, name)
            above += [f"{view.label(str(s))} on {where}" for s in best.index]
    if not above:
        return None
    return (
        f"Offline, {', '.join(above)} scored above the oracle, which is shown the evidence "
        "sessions themselves. That says nothing about the systems: every offline step is "
        "lexical (word-hashing embeddings, an answer copied from the message that best matches "
        "the question's words, a judge that matches words), so a system shown short text picked "
        "for its overlap with the question leaves the answerer fewer wrong messages to choose "
        "from than whole sessions do. With models, the oracle is the ceiling."
    )


def section_accuracy(view: RunView) -> list[str]:
    lines = ["## Table 3: accuracy", ""]
    tables = accuracy_tables(view)
    if not tables:
        return []  # notebook 04 did not run: no section
    by_judge: dict[str, list[str]] = {}  # datasets judged alike are named together
    for name, table in tables.items():
        for j in dict.fromkeys(str(j) for j in table.get("judge_model", [])):
            by_judge.setdefault(JUDGE_WORDS.get(j, j), []).append(DATASET_NAMES.get(name, name))
    judge = "; ".join(f"{', '.join(names)}: {who}" for who, names in by_judge.items())
    lines += [
        f"Majority of the judge's votes per question, in %, with the Wilson 95% interval and "
        f"the dialogue-cluster bootstrap 95% interval. Judge: {judge}. "
        "*Strict* counts answers that failed, could not be judged, or were never given as "
        'wrong: the paper\'s "correct ÷ all questions". The oracle is not asked a question '
        "whose evidence no session holds: those are left out of its n "
        "(`<dataset>/answers/not_asked.csv`).",
        "",
    ]
    rows, few = [], []
    for name, table in tables.items():
        for r in table.itertuples(index=False):
            clusters = int(getattr(r, "conversations", 0) or 0)
            flag = f" ⚠ {clusters} conv." if 0 < clusters < FEW_CONVERSATIONS else ""
            if flag and name not in few:
                few.append(name)
            rows.append(
                [
                    DATASET_NAMES.get(name, name),
                    view.label(str(r.system)),
                    int(r.n),
                    pct(r.accuracy),
                    f"{pct(r.wilson_low)}–{pct(r.wilson_high)}",
                    f"{pct(r.bootstrap_low)}–{pct(r.bootstrap_high)}{flag}",
                    f"{pct(r.vote_mean)} ± {pct(r.vote_std)}",
                    pct(r.strict_accuracy),
                ]
            )
    lines += [
        md_table(
            rows,
            [
                "dataset",
                "system",
                "n",
                "accuracy %",
                "Wilson 95%",
                "cluster bootstrap 95%",
                "mean ± std over votes",
                "strict %",
            ],
        ),
        "",
    ]
    if note := view.offline_places_note():
        lines += [note, ""]
    if note := _above_the_oracle(view, tables):
        lines += [note, ""]
    if few:
        names = ", ".join(DATASET_NAMES.get(n, n) for n in few)
        lines += [
            f"⚠ **Few conversations** ({names}): these intervals rest on fewer than "
            f"{FEW_CONVERSATIONS} conversations. The cluster bootstrap can only resample "
            "the few conversations there are, so its interval can come out *narrower* than "
            "Wilson's; neither is a reliable 95% interval here. Read the accuracies as "
            "descriptions of this sample, not estimates.",
            "",
        ]
    for ds in view.datasets:
        figure(
            lines,
            png(ds.paths.figure.accuracy_by_system),
            view.run.root,
            f"{ds.title}: accuracy by system",
        )
    return lines
