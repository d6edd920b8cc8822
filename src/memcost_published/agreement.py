"""Judges on trial: how far one judge's repeated votes, and two judges on the same answers,
agree with each other."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from memcost.stats import majority_votes, mcnemar_exact
from memcost_published.runs import accepted, judged_rows, published_run

VOTE_AGREEMENT_COLUMNS = ["name", "judge_model", "votes", "n", "unanimous_pct", "fleiss_kappa"]
JUDGE_AGREEMENT_COLUMNS = [
    "answers", "judge_a", "judge_b", "n", "both_correct", "a_only", "b_only", "both_wrong",
    "accuracy_a_pct", "accuracy_b_pct", "cohen_kappa", "p_value",
]  # fmt: skip


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float:
    """Cohen's kappa of two judges' verdicts on the same answers: their agreement beyond what
    their own accept rates would give by chance. NaN when chance agreement is total."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    observed = float((a == b).mean())
    chance = float(a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean()))
    return float("nan") if chance == 1.0 else (observed - chance) / (1.0 - chance)


def fleiss_kappa(votes: Sequence[Sequence[bool]]) -> float:
    """Fleiss' kappa of accept/reject votes, the same number of votes per answer: the agreement
    beyond what the overall share of accepts would give by chance. NaN when every vote is the
    same (chance agreement is then total)."""
    table = np.asarray(votes, dtype=float)
    raters = table.shape[1]
    accepts = table.sum(axis=1)
    counts = np.column_stack([accepts, raters - accepts])  # answers x (accept, reject)
    per_answer = ((counts**2).sum(axis=1) - raters) / (raters * (raters - 1))
    shares = counts.sum(axis=0) / counts.sum()
    chance = float((shares**2).sum())
    return float("nan") if chance == 1.0 else (per_answer.mean() - chance) / (1.0 - chance)


def vote_agreement(aligned: pd.DataFrame, extra: str | Path | None = None) -> pd.DataFrame:
    """Per run whose judge voted more than once on each answer: ``n`` (answers with all their
    votes), the share on which the votes were unanimous and Fleiss' kappa."""
    rows = []
    for name, part in aligned.groupby("run", sort=False):
        run = published_run(str(name), extra)
        votes = [v for v in part["votes"] if run.votes > 1 and len(v) == run.votes]
        if not votes:
            continue
        unanimous = sum(len(set(v)) == 1 for v in votes)
        rows.append(
            {
                "name": name,
                "judge_model": run.judge_model,
                "votes": run.votes,
                "n": len(votes),
                "unanimous_pct": 100 * unanimous / len(votes),
                "fleiss_kappa": fleiss_kappa(votes),
            }
        )
    return pd.DataFrame(rows, columns=VOTE_AGREEMENT_COLUMNS)


def published_verdicts(aligned: pd.DataFrame, extra: str | Path | None = None) -> pd.DataFrame:
    """Each published judge's verdict (the majority of its votes) per paired answer, in the long
    form :func:`judge_agreement` reads: ``answers`` (the run), ``question_id``, ``judge``
    (``<model>/<prompt>``, the prompt as the registry names it), ``accepted``."""
    judged = judged_rows(aligned)
    return pd.DataFrame(
        {
            "answers": judged["run"],
            "question_id": judged["question_id"].astype(str),
            "judge": [published_run(str(r), extra).judge for r in judged["run"]],
            "accepted": judged["votes"].map(accepted).astype(bool),
        }
    )


def repository_verdicts(judgments: pd.DataFrame) -> pd.DataFrame:
    """This repository's judge's verdicts (the majority of its primary votes; unjudged votes
    left out, as in notebook 04) on published answers, as :func:`published_verdicts`: ``judge``
    is ``<judge_model>/<prompt>``."""
    primary = judgments[judgments["primary"].astype(bool)].assign(
        judge=lambda f: f["judge_model"].astype(str) + "/" + f["prompt_name"].astype(str)
    )
    votes = majority_votes(primary, ["system", "question_id", "judge"])
    votes = votes[votes["judged"]]
    return pd.DataFrame(
        {
            "answers": votes["system"],
            "question_id": votes["question_id"].astype(str),
            "judge": votes["judge"],
            "accepted": votes["correct"].astype(bool),
        }
    )


def judge_agreement(verdicts: pd.DataFrame) -> pd.DataFrame:
    """For each set of answers judged by more than one judge, each pair of judges on the answers
    both judged: the four cells of their 2x2 table, each judge's accuracy, Cohen's kappa and the
    exact McNemar p-value (does one judge accept more than the other?)."""
    rows = []
    for answers, part in verdicts.groupby("answers", sort=False):
        table = part.pivot_table(
            index="question_id", columns="judge", values="accepted", aggfunc="first"
        )
        judges = list(dict.fromkeys(part["judge"]))
        for i, judge_a in enumerate(judges):
            for judge_b in judges[i + 1 :]:
                both = table[[judge_a, judge_b]].dropna().astype(bool)
                if both.empty:
                    continue
                a, b = both[judge_a], both[judge_b]
                cells = mcnemar_exact(a.tolist(), b.tolist())
                rows.append(
                    {
                        "answers": answers,
                        "judge_a": judge_a,
                        "judge_b": judge_b,
                        "n": cells.n,
                        "both_correct": cells.both_correct,
                        "a_only": cells.a_only,
                        "b_only": cells.b_only,
                        "both_wrong": cells.both_wrong,
                        "accuracy_a_pct": 100 * a.mean(),
                        "accuracy_b_pct": 100 * b.mean(),
                        "cohen_kappa": cohen_kappa(a, b),
                        "p_value": cells.p_value,
                    }
                )
    return pd.DataFrame(rows, columns=JUDGE_AGREEMENT_COLUMNS)


def judge_spread(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per set of answers: how many judges judged it, and the lowest and highest accuracy among
    them (each judge on the answers it judged), with the judges that gave them."""
    by_judge = verdicts.groupby(["answers", "judge"], sort=False)["accepted"].agg(["mean", "size"])
    rows = []
    for answers, part in by_judge.groupby(level="answers", sort=False):
        part = part.droplevel("answers")
        rows.append(
            {
                "answers": answers,
                "judges": len(part),
                "low_pct": 100 * part["mean"].min(),
                "low_judge": part["mean"].idxmin(),
                "high_pct": 100 * part["mean"].max(),
                "high_judge": part["mean"].idxmax(),
            }
        )
    return pd.DataFrame(
        rows, columns=["answers", "judges", "low_pct", "low_judge", "high_pct", "high_judge"]
    )


def order_under_judges(verdicts: pd.DataFrame) -> pd.DataFrame:
    """For each two sets of answers to shared questions and each judge that judged both: which
    is ahead on the shared questions; ``holds``: the same one is ahead (or both tie) under every
    such judge."""
    table = verdicts.pivot_table(
        index="question_id", columns=["answers", "judge"], values="accepted", aggfunc="first"
    )
    names = list(dict.fromkeys(verdicts["answers"]))
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            judges = [j for j in table[a].columns if j in table[b].columns]
            leads = {}
            for judge in judges:
                both = pd.concat([table[a][judge], table[b][judge]], axis=1).dropna()
                if len(both):
                    leads[judge] = (
                        len(both),
                        100 * (both.iloc[:, 0].mean() - both.iloc[:, 1].mean()),
                    )
            if not leads:
                continue
            signs = {np.sign(round(lead, 9)) for _, lead in leads.values()}
            rows.append(
                {
                    "a": a,
                    "b": b,
                    "judges": len(leads),
                    "n_shared": min(n for n, _ in leads.values()),
                    "lead_min_pts": min(lead for _, lead in leads.values()),
                    "lead_max_pts": max(lead for _, lead in leads.values()),
                    "holds": len(signs) == 1,
                }
            )
    return pd.DataFrame(
        rows, columns=["a", "b", "judges", "n_shared", "lead_min_pts", "lead_max_pts", "holds"]
    )
