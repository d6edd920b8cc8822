"""The report's section on the published runs (notebook 08), and its line in the brief."""

from __future__ import annotations

from typing import Any

import pandas as pd

from memcost.run.report.markdown import figure, md_table, usd
from memcost.run.report.view import DATASET_NAMES, RunView, read_csv

NONE_READ = (
    "no published run was read: each needs its file in published_dir, the download cache or a "
    "download."
)
KIND_WORDS = {"memory": "memory", "long_context": "long context", "probe": "probe"}


def _accuracy(view: RunView) -> pd.DataFrame | None:
    table = read_csv(view.run.tables / "published_accuracy.csv")
    return None if table is None or table.empty else table


def published_brief(view: RunView) -> str | None:
    """One line: the best memory and long-context runs per dataset, the judge's leniency and
    the gold ceiling, from real systems' published answers."""
    table, metrics = _accuracy(view), view.run_metrics("08_published_runs")
    if metrics is None:
        return None
    if table is None:
        return f"**What real systems scored on these questions:** {NONE_READ}"
    parts = []
    for dataset, part in table.groupby("dataset", sort=False):
        best = [
            f"{KIND_WORDS[kind]} {r.accuracy_pct:.1f}% ({r.name}, judged by {r.judge_model})"
            for kind in ("memory", "long_context")
            for r in part[part["kind"] == kind].nlargest(1, "accuracy_pct").itertuples()
        ]
        probes = part[part["kind"] == "probe"]
        if len(probes):
            lenient = probes.nlargest(1, "accuracy_pct").iloc[0]
            best.append(
                f"the judge accepted {lenient['accuracy_pct']:.1f}% of answers written wrong on "
                f"purpose ({lenient['name']})"
            )
        ceiling = (metrics.get("ceiling") or {}).get(dataset)
        if ceiling:
            best.append(f"wrong gold answers cap a perfect system at {ceiling['ceiling_pct']:.1f}%")
        spread = _widest_spread(metrics, set(part["name"]))
        if spread:
            best.append(
                f"the same answers score {spread['low_pct']:.1f}–{spread['high_pct']:.1f}% "
                f"depending on the judge ({spread['answers']}: {spread['low_judge']} to "
                f"{spread['high_judge']})"
            )
        parts.append(f"{DATASET_NAMES.get(dataset, dataset)}: " + "; ".join(best))
    return (
        "**What real systems scored on these questions** (their published answers and "
        "judgments, re-analysed): " + " — ".join(parts) + "."
    )


def _widest_spread(metrics: dict[str, Any], runs: set[str]) -> dict[str, Any] | None:
    """Of ``runs`` judged by more than one judge, the one whose accuracy varies most."""
    judged = [
        s for s in metrics.get("judge_spread") or [] if s["judges"] > 1 and s["answers"] in runs
    ]
    return max(judged, key=lambda s: s["high_pct"] - s["low_pct"], default=None)


def _block(caption: str, rows: list[list[Any]], header: list[str]) -> list[str]:
    return [caption, "", md_table(rows, header), ""] if rows else []


def _runs(table: pd.DataFrame) -> list[str]:
    rows = [
        [r.name, KIND_WORDS.get(r.kind, r.kind),
         r.answer_model if isinstance(r.answer_model, str) else "", f"{r.judge_model} × {r.votes}",
         r.n, f"{r.accuracy_pct:.2f}%", f"{r.cluster_low_pct:.1f}–{r.cluster_high_pct:.1f}%",
         r.license]
        for r in table.sort_values(["dataset", "accuracy_pct"], ascending=False).itertuples()
    ]  # fmt: skip
    header = ["run", "kind", "answered by", "judge × votes", "n", "accuracy", "95% interval"]
    return _block(
        "Each run's accuracy is the majority of its judge's votes (a probe's: wrong answers "
        "accepted); the interval resamples whole conversations. The judges differ between runs.",
        rows,
        [*header, "license"],
    )


def _pairs(view: RunView) -> list[str]:
    pairs = read_csv(view.run.tables / "published_pairs.csv")
    rows = [
        [r.a, r.b, r.n_shared, r.a_only, r.b_only, f"{r.p_value:.3g}",
         "yes" if r.same_judge else "no"]
        for r in (pairs.itertuples() if pairs is not None else [])
    ]  # fmt: skip
    return _block(
        "**Memory against long context, question by question** (exact McNemar; `a only`: "
        "questions only the memory run got right)",
        rows,
        ["memory run", "long-context run", "shared", "a only", "b only", "p", "same judge"],
    )


def _kappa(value: float) -> str:
    """Undefined (every verdict the same) as a dash; a rounding's -0.00 as 0.00."""
    return "–" if pd.isna(value) else f"{round(value, 2) + 0.0:.2f}"


def _judges(view: RunView) -> list[str]:
    table = read_csv(view.run.tables / "published_judge_agreement.csv")
    rows = [
        [r.answers, r.judge_a, r.judge_b, r.n, f"{r.accuracy_a_pct:.1f}%",
         f"{r.accuracy_b_pct:.1f}%", r.a_only, r.b_only, _kappa(r.cohen_kappa),
         f"{r.p_value:.3g}"]
        for r in (table.itertuples() if table is not None else [])
    ]  # fmt: skip
    lexical = (
        table is not None and table[["judge_a", "judge_b"]].stack().str.startswith("lexical/").any()
    )
    header = ["answers", "judge a", "judge b", "n", "a accepts", "b accepts", "a only", "b only"]
    return _block(
        "**The same answers under two judges** (a judge is `<model>/<prompt>`; `published`: the "
        "harness's own prompt"
        + ("; `lexical`: this repository's offline rule, not an LLM" if lexical else "")
        + "): Cohen's kappa, and the exact McNemar p-value of the two judges' accept rates",
        rows,
        [*header, "kappa", "p"],
    )


def _survives(view: RunView) -> list[str]:
    order = read_csv(view.run.tables / "published_order_under_judges.csv")
    rows = [
        [r.a, r.b, r.judges, r.n_shared, f"{r.lead_min_pts:+.1f} to {r.lead_max_pts:+.1f}",
         "yes" if r.holds else "no"]
        for r in (order.itertuples() if order is not None else [])
    ]  # fmt: skip
    return _block(
        "**What survives the judge**: the first run's lead over the second on their shared "
        "questions, under each judge that judged both, and whether the order holds under all",
        rows,
        ["a", "b", "judges", "shared", "lead of a (points)", "order holds"],
    )


def _votes(view: RunView) -> list[str]:
    table = read_csv(view.run.tables / "published_vote_agreement.csv")
    rows = [
        [r.name, f"{r.judge_model} × {r.votes}", r.n, f"{r.unanimous_pct:.1f}%",
         _kappa(r.fleiss_kappa)]
        for r in (table.itertuples() if table is not None else [])
    ]  # fmt: skip
    return _block(
        "**A judge against itself**: how often its votes on an answer were unanimous, and Fleiss' "
        "kappa (agreement beyond chance)",
        rows,
        ["run", "judge × votes", "n", "unanimous", "Fleiss' kappa"],
    )


def _cost(view: RunView) -> list[str]:
    cost = read_csv(view.run.tables / "published_cost.csv")
    rows = [
        [r.name, r.answer_model, usd(r.usd), usd(r.usd_per_question),
         "estimated, output only" if r.estimated else "recorded tokens"]
        for r in (cost.itertuples() if cost is not None else [])
    ]  # fmt: skip
    return _block(
        "**What the answers cost** at the answering model's list price of the paper's date "
        "(judges not included)",
        rows,
        ["run", "answered by", "cost", "per question", "tokens"],
    )


def _sources(metrics: dict[str, Any]) -> list[str]:
    """Where each run's file came from: its pin and the copy its bytes were read from."""
    rows = [
        [r["name"], r["system"], f"{r['repo']} @ {r['commit'][:12]} : {r['path']}",
         f"{r['sha256'][:12]}…", r["read_from"]]
        for r in metrics.get("sources") or []
    ]  # fmt: skip
    return _block(
        "**Where the files came from**: each pinned by a commit of its repository, its sha256 "
        "checked against the pin before it was read",
        rows,
        ["run", "system", "file (repository @ commit : path)", "sha256", "read from"],
    )


def section_published(view: RunView) -> list[str]:
    """Accuracy per run with its interval, the gold ceiling, McNemar pairs, the answers judged
    again, cost, licenses, where the files came from, the figure."""
    table, metrics = _accuracy(view), view.run_metrics("08_published_runs")
    if metrics is None:
        return []
    lines = ["## Published runs of real systems (notebook 08)", ""]
    lines += _block(
        "**Left out**: no copy of the file where this run could read it",
        [[name, reason] for name, reason in (metrics.get("missing") or {}).items()],
        ["run", "why"],
    )
    if table is None:
        return lines + [NONE_READ[0].upper() + NONE_READ[1:], ""]
    lines += _runs(table)
    unpaired = [
        f"{p['name']} ({p['answers'] - p['paired']:,} of {p['answers']:,})"
        for p in metrics.get("paired") or []
        if p["paired"] < p["answers"]
    ]
    if unpaired:
        lines += [
            f"**Answers that match no question of this run:** {', '.join(unpaired)}. They count "
            "in their run's accuracy (their file's own verdicts); the pairs, categories and gold "
            "ceiling leave them out (notebook 00 read other questions, or none, for their "
            "dataset).",
            "",
        ]
    for dataset, ceiling in (metrics.get("ceiling") or {}).items():
        lines += [
            f"**Gold ceiling, {DATASET_NAMES.get(dataset, dataset)}:** {ceiling['wrong_gold']} "
            f"of {ceiling['questions']:,} "
            f"gold answers are wrong by the audit ({ceiling['audited']} audited; a wrong citation "
            "alone does not count): a perfect system scores at most "
            f"{ceiling['ceiling_pct']:.2f}%.",
            "",
        ]
    lines += _pairs(view) + _judges(view) + _survives(view) + _votes(view)
    lines += _cost(view) + _sources(metrics)
    figure(
        lines,
        view.run.figures / "published_accuracy.png",
        view.run.root,
        "Published runs: accuracy with 95% conversation-bootstrap intervals and the gold ceiling",
    )
    figure(
        lines,
        view.run.figures / "published_judges.png",
        view.run.root,
        "The same answers under each of their judges (model/prompt), with Wilson 95% intervals",
    )
    return lines
