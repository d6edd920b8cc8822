"""Published runs: real systems' per-question answers and judgments on the study's questions."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from memcost.catalog import price_for
from memcost.data.locomo import LOCOMO_CATEGORIES
from memcost.data.sources import GITHUB_RAW, download_bytes
from memcost.io import atomic_path, yaml_problem
from memcost.judge.questions import JudgePlan, judge_item, scored_questions
from memcost.paths import DataError
from memcost.stats import cluster_bootstrap_interval, mcnemar_exact, wilson_interval
from memcost.text import count_tokens_batch

REGISTRY_FILE = Path(__file__).with_name("registry.yaml")
KINDS = ("memory", "long_context", "probe", "gold_audit")
DOWNLOAD_TIMEOUT_S = 60.0

# One row per published answer (a gold audit: per audited question).
COLUMNS = (
    "run",  # the registry name
    "source_id",  # the question's id in the source ("" where it has none)
    "conversation",  # LoCoMo: its position in locomo10.json ("0"); LongMemEval: the question id
    "question",
    "reference",  # the gold answer the source judged against
    "answer",  # the system's answer ("" for a gold audit)
    "category_id",  # LoCoMo's category (1-5); None for LongMemEval
    "category",  # this repository's name of it (LongMemEval: the question type)
    "votes",  # the judge's verdicts, True = accepted (empty: not judged)
    "latency_ms",  # search latency where the source records it
    "note",  # a gold audit: the error type
    "corrected",  # a gold audit: the answer the evidence supports
)


@dataclass(frozen=True)
class PublishedRun:
    """One registry entry (see ``memcost_published/registry.yaml``)."""

    name: str
    repo: str
    commit: str
    path: str
    sha256: str
    license: str
    dataset: str
    kind: str
    system: str
    answer_model: str
    judge_model: str
    votes: int
    schema: str
    top_k: int | None = None
    # the judge's prompt, as a judge is named (<judge_model>/<judge_prompt>): "published" for a
    # harness's own, or a name where the registry knows it ("mem0": Mem0's benchmark prompt)
    judge_prompt: str = "published"

    @property
    def judge(self) -> str:
        """Its judge as the agreement tables name one: ``<model>/<prompt>``."""
        return f"{self.judge_model}/{self.judge_prompt}"

    @property
    def url(self) -> str:
        return f"{GITHUB_RAW}/{self.repo}/{self.commit}/{self.path}"

    @property
    def file_name(self) -> str:
        """The name of its copy in a ``published_dir`` folder or the download cache."""
        return f"{self.name}.json"


@cache
def registry(extra: str | Path | None = None) -> dict[str, PublishedRun]:
    """Every published run, by name: the package's registry, then the entries of ``extra`` (a
    YAML file of the same fields: your own runs, or copies under other pins)."""
    out = _entries(REGISTRY_FILE)
    if extra:
        out.update(_entries(Path(extra)))
    return out


def _entries(path: Path) -> dict[str, PublishedRun]:
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"{path}: cannot read the registry of published runs ({exc})") from None
    except yaml.YAMLError as exc:
        raise DataError(
            f"{path}: the registry of published runs is not valid YAML at {yaml_problem(exc)}"
        ) from None
    if not isinstance(entries or {}, Mapping):
        raise DataError(
            f"{path}: the registry of published runs must map each run's name to its fields "
            f"(as memcost_published/registry.yaml does), not be a {type(entries).__name__}"
        )
    known = {f.name for f in fields(PublishedRun)} - {"name"}
    out = {}
    for name, entry in (entries or {}).items():
        if not isinstance(entry, Mapping):
            raise DataError(f"{path}: {name}: expected its fields (repo, commit, path, ...)")
        unknown = sorted(set(entry) - known)
        missing = sorted(known - set(entry) - {"top_k", "judge_prompt"})
        if unknown or missing:
            raise DataError(f"{path}: {name}: unknown field(s) {unknown}, missing {missing}")
        run = PublishedRun(name=name, **entry)
        if run.kind not in KINDS or run.schema not in PARSERS:
            raise DataError(
                f"{path}: {name}: kind {run.kind!r} (one of {KINDS}) or schema {run.schema!r} "
                f"(one of {sorted(PARSERS)}) unknown"
            )
        out[name] = run
    return out


def published_run(name: str, extra: str | Path | None = None) -> PublishedRun:
    runs = registry(extra)
    try:
        return runs[name]
    except KeyError:
        raise DataError(
            f"unknown published run {name!r}; the registry has: {', '.join(runs)}"
        ) from None


# --- Getting a file ------------------------------------------------------------------------------


class MissingCopy(DataError):
    """No copy of a run's file where this machine may read it: the run is left out, the others
    go on."""


def fetch(
    run: PublishedRun,
    *,
    published_dir: str | Path | None = None,
    cache_dir: Path,
    download: bool = True,
) -> tuple[bytes, str]:
    """The bytes of ``run``'s file and where they came from: ``published_dir/<name>.json`` when
    a folder is given (machines without network), else the download cache, else a download
    (kept in the cache). The sha256 is checked whichever way: a file that differs from the pin
    is an error naming both hashes."""
    if published_dir:
        path = Path(published_dir) / run.file_name
        if not path.is_file():
            raise MissingCopy(
                f"{path}: not found; published_dir must hold {run.file_name} (from {run.url})"
            )
        data, origin = path.read_bytes(), str(path)
    else:
        path = Path(cache_dir) / run.commit[:12] / run.file_name
        if path.is_file():
            data, origin = path.read_bytes(), str(path)
        elif not download:
            raise MissingCopy(
                f"{run.name}: no copy at {path} and download is off; set published_dir to a "
                f"folder holding {run.file_name} (from {run.url}), or allow the download"
            )
        else:
            data, origin = _download(run), run.url
            _check(run, data, origin, "the download is not kept")
            with atomic_path(path) as tmp:
                tmp.write_bytes(data)
    _check(run, data, origin, "remove the copy, and download it again or copy the pinned file")
    return data, origin


def _check(run: PublishedRun, data: bytes, origin: str, then: str) -> None:
    got = hashlib.sha256(data).hexdigest()
    if got != run.sha256:
        raise DataError(
            f"{origin}: sha256 {got} is not the pinned {run.sha256} of {run.name} "
            f"({run.repo} @ {run.commit[:12]}); {then}"
        )


def _download(run: PublishedRun) -> bytes:
    return download_bytes(
        run.url,
        what=run.name,
        timeout=DOWNLOAD_TIMEOUT_S,
        hint=f"Without network, save the file as {run.file_name} in a folder and set "
        "published_dir to it",
    )


def read_published(
    name: str,
    *,
    published_dir: str | Path | None = None,
    cache_dir: Path,
    download: bool = True,
    extra: str | Path | None = None,
) -> pd.DataFrame:
    """``name``'s answers as :data:`COLUMNS`, one row per question (see :func:`fetch`);
    ``frame.attrs``: ``origin`` (where the bytes came from) and ``usage`` (the token totals the
    file records, or ``None``)."""
    run = published_run(name, extra)
    data, origin = fetch(run, published_dir=published_dir, cache_dir=cache_dir, download=download)
    try:
        document = json.loads(data)
        rows = list(PARSERS[run.schema](document))
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise DataError(
            f"{origin}: not a {run.schema} file as {run.name} publishes it "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if not rows:
        raise DataError(
            f"{origin}: not a {run.schema} file as {run.name} publishes it (no answer in it)"
        )
    frame = pd.DataFrame(rows, columns=list(COLUMNS[1:]))
    frame.insert(0, "run", name)
    frame.attrs = {"origin": origin, "usage": recorded_usage(document)}
    return frame


def recorded_usage(document: Any) -> dict[str, int] | None:
    """The answering calls' token totals where a file records them (its ``metadata``)."""
    meta = document.get("metadata") if isinstance(document, Mapping) else None
    if not isinstance(meta, Mapping) or "total_prompt_tokens" not in meta:
        return None
    return {
        "prompt_tokens": int(meta["total_prompt_tokens"]),
        "completion_tokens": int(meta.get("total_completion_tokens") or 0),
    }


# --- One parser per schema -----------------------------------------------------------------------

Parser = Callable[[Any], Iterator[dict[str, Any]]]
PARSERS: dict[str, Parser] = {}


def parser(schema: str) -> Callable[[Parser], Parser]:
    """Register the parser of one schema (a function from the parsed JSON to rows)."""

    def add(function: Parser) -> Parser:
        PARSERS[schema] = function
        return function

    return add


def _row(**values: Any) -> dict[str, Any]:
    row = dict.fromkeys(COLUMNS[1:])
    row.update(values)
    row["votes"] = tuple(row["votes"] or ())
    return row


def _locomo_category(value: Any) -> tuple[int | None, str | None]:
    if value is None or value == "":
        return None, None
    number = int(value)
    return number, LOCOMO_CATEGORIES.get(number)


_TRAILING_NUMBER = re.compile(r"(\d+)$")


def _position(key: str) -> int:
    """``locomo_exp_user_3`` → 3: the conversation's position in locomo10.json."""
    found = _TRAILING_NUMBER.search(key)
    if not found:
        raise ValueError(f"cannot tell the conversation from {key!r}")
    return int(found.group(1))


# Mem0's benchmark verdicts. ERROR: no answer was produced (an empty answer); the source counts it
# wrong, and so does this repository.
MEM0_VERDICTS = {"CORRECT": True, "PASS": True, "WRONG": False, "FAIL": False, "ERROR": False}


@parser("mem0_benchmarks")
def _mem0_benchmarks(document: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Mem0's benchmark runs: ``evaluations``, one judgment per retrieval cut-off (one cut-off
    per file). LoCoMo rows carry ``conversation_idx`` and ``category``; LongMemEval rows the
    dataset's own ``question_id`` and ``question_type``; the judge says CORRECT / PASS. The
    open-source runs list questions twice, a record of the retrieval alone and the answered one:
    only answered records are read, so each question counts once."""
    for item in document["evaluations"]:
        if "cutoff_results" not in item:
            continue
        (result,) = item["cutoff_results"].values()
        judgment = str(result["judgment"]).upper()
        if judgment not in MEM0_VERDICTS:
            raise ValueError(
                f"question {item['question_id']}: verdict {result['judgment']!r} is none of "
                f"{', '.join(MEM0_VERDICTS)}"
            )
        if "conversation_idx" in item:
            conversation = str(int(item["conversation_idx"]))
            category_id, category = _locomo_category(item.get("category"))
        else:
            conversation, category_id = str(item["question_id"]), None
            category = item.get("question_type")
        yield _row(
            source_id=str(item["question_id"]),
            conversation=conversation,
            question=str(item["question"]),
            reference=str(item["ground_truth_answer"]),
            answer=str(result.get("generated_answer") or result.get("supporting_evidence") or ""),
            category_id=category_id,
            category=category,
            votes=[MEM0_VERDICTS[judgment]],
            # LongMemEval's files write 0.0 for every question: not measured, not instant
            latency_ms=item.get("search_latency_ms") or None,
        )


@parser("judged_answers")
def _judged_answers(document: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """LoCoMo answers judged several times: ``detailed_results`` per conversation
    (``locomo_exp_user_<k>``), each answer with ``llm_judgments`` ``judgment_1..n``."""
    for key, items in document["detailed_results"].items():
        for item in items:
            category_id, category = _locomo_category(item.get("category"))
            judgments = item["llm_judgments"]
            yield _row(
                source_id=str(item["question_id"]),
                conversation=str(_position(key)),
                question=str(item["question"]),
                reference=str(item["golden_answer"]),
                answer=str(item["generated_answer"]),
                category_id=category_id,
                category=category,
                votes=[bool(judgments[k]) for k in sorted(judgments, key=_position)],
            )


@parser("zep_grades")
def _zep_grades(document: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Zep's LoCoMo grades: per conversation (``locomo_experiment_user_<k>``) the answer and
    one ``grade``; no question ids."""
    for key, items in document.items():
        for item in items:
            category_id, category = _locomo_category(item.get("category"))
            yield _row(
                source_id="",
                conversation=str(_position(key)),
                question=str(item["question"]),
                reference=str(item["golden_answer"]),
                answer=str(item["answer"]),
                category_id=category_id,
                category=category,
                votes=[bool(item["grade"])],
            )


@parser("mem0_evaluation")
def _mem0_evaluation(document: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The evaluation harness of Mem0's paper and its forks (Memobase's among them): per
    conversation position (``"0"`` to ``"9"``) the answers, each with one ``llm_score`` (1:
    the judge accepted it); no question ids."""
    for key, items in document.items():
        for item in items:
            category_id, category = _locomo_category(item.get("category"))
            yield _row(
                source_id="",
                conversation=str(_position(key)),
                question=str(item["question"]),
                reference=str(item["answer"]),
                answer=str(item["response"]),
                category_id=category_id,
                category=category,
                votes=[bool(int(item["llm_score"]))],
            )


@parser("gold_errors")
def _gold_errors(document: list[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """The audit of LoCoMo's gold answers: ``question_id`` (``locomo_<k>_qa<i>``), the gold
    answer, the error type and the answer the evidence supports."""
    for item in document:
        category_id, category = _locomo_category(item.get("category"))
        source_id = str(item["question_id"])
        yield _row(
            source_id=source_id,
            conversation=str(int(source_id.split("_")[1])),
            question=str(item["question"]),
            reference=str(item["golden_answer"]),
            answer="",
            category_id=category_id,
            category=category,
            note=str(item["error_type"]),
            corrected=item.get("correct_answer"),
        )


# --- Pairing with this repository's questions ------------------------------------------------

_SPACE = re.compile(r"\s+")


def question_key(text: str) -> str:
    """A question's text as compared across sources: case, spacing and end punctuation aside."""
    return _SPACE.sub(" ", str(text)).strip().strip("?.!\"' ").lower()


def align(frame: pd.DataFrame, questions: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """``frame`` with this repository's ``question_id`` and ``conversation_id`` (``None`` where
    no question matches). LoCoMo: the conversation at the source's position in locomo10.json's
    order (the order of ``questions``), then the same question text, the n-th time it occurs
    there for its n-th occurrence in the source. LongMemEval: the source's id is the dataset's,
    kept when the texts agree."""
    out = frame.copy()
    out["question_id"] = None
    out["conversation_id"] = None
    if dataset == "longmemeval":
        texts = dict(zip(questions["question_id"].astype(str), questions["question"], strict=True))
        for i, row in out.iterrows():
            qid = str(row["conversation"])
            if qid in texts and question_key(texts[qid]) == question_key(row["question"]):
                out.at[i, "question_id"] = out.at[i, "conversation_id"] = qid
        return out
    order = list(dict.fromkeys(questions["conversation_id"].astype(str)))
    slots: dict[tuple[str, str], list[str]] = {}
    for qid, cid, text in zip(
        questions["question_id"], questions["conversation_id"], questions["question"], strict=True
    ):
        slots.setdefault((str(cid), question_key(text)), []).append(str(qid))
    seen: dict[tuple[str, str, str], int] = {}
    for i, row in out.iterrows():
        position = int(row["conversation"])
        if not 0 <= position < len(order):
            continue
        cid, key = order[position], question_key(row["question"])
        n = seen.get((row["run"], cid, key), 0)
        seen[(row["run"], cid, key)] = n + 1
        matches = slots.get((cid, key), [])
        if n < len(matches):
            out.at[i, "question_id"], out.at[i, "conversation_id"] = matches[n], cid
    return out


# --- What the runs say -----------------------------------------------------------------------

ACCURACY_COLUMNS = [
    "name", "dataset", "kind", "system", "answer_model", "judge_model", "votes", "top_k", "n",
    "correct", "accuracy_pct", "wilson_low_pct", "wilson_high_pct", "cluster_low_pct",
    "cluster_high_pct", "vote_mean_pct", "license",
]  # fmt: skip
COST_COLUMNS = [
    "name", "answer_model", "questions", "prompt_tokens", "completion_tokens", "usd",
    "usd_per_question", "price_date", "estimated", "note",
]  # fmt: skip
LENIENCY_COLUMNS = [
    "probe", "probe_judge", "false_acceptance_pct", "run", "run_judge", "same_judge",
    "accuracy_pct", "corrected_pct",
]  # fmt: skip


def accepted(votes: tuple[bool, ...]) -> bool | None:
    """The majority of an answer's votes (``None``: not judged). Three votes never tie; an even
    split counts as not accepted."""
    return sum(votes) * 2 > len(votes) if votes else None


def judged_rows(aligned: pd.DataFrame) -> pd.DataFrame:
    """The aligned rows that count: a question of the dataset, with the judge's votes."""
    return aligned[aligned["question_id"].notna() & (aligned["votes"].map(len) > 0)]


def published_accuracy(
    aligned: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    extra: str | Path | None = None,
) -> pd.DataFrame:
    """Per judged run, on every answer its file judged, paired with a dataset question or not:
    ``n``, ``correct`` (majority of votes; for a probe, wrong answers the judge accepted),
    ``accuracy_pct`` with its Wilson and conversation-cluster bootstrap intervals (clusters: the
    source's conversations), and ``vote_mean_pct`` (the mean of all votes, the other way some
    harnesses report three votes)."""
    rows = []
    judged = aligned[aligned["votes"].map(len) > 0]
    for name, part in judged.groupby("run", sort=False):
        run = published_run(str(name), extra)
        correct = part["votes"].map(accepted).astype(bool)
        n, k = len(part), int(correct.sum())
        low, high = wilson_interval(k, n)
        boot = cluster_bootstrap_interval(
            correct, part["conversation"].astype(str), n_resamples=n_resamples, seed=seed
        )
        votes = [v for vs in part["votes"] for v in vs]
        rows.append(
            {
                "name": name,
                "dataset": run.dataset,
                "kind": run.kind,
                "system": run.system,
                "answer_model": run.answer_model,
                "judge_model": run.judge_model,
                "votes": run.votes,
                "top_k": run.top_k,
                "n": n,
                "correct": k,
                "accuracy_pct": 100 * k / n,
                "wilson_low_pct": 100 * low,
                "wilson_high_pct": 100 * high,
                "cluster_low_pct": 100 * boot[0],
                "cluster_high_pct": 100 * boot[1],
                "vote_mean_pct": 100 * sum(votes) / len(votes),
                "license": run.license,
            }
        )
    return pd.DataFrame(rows, columns=ACCURACY_COLUMNS)


def category_accuracy(aligned: pd.DataFrame) -> pd.DataFrame:
    """Per judged run and category (LoCoMo's categories, LongMemEval's question types): ``n``,
    ``correct`` (majority of votes), ``accuracy_pct`` and its Wilson interval."""
    judged = judged_rows(aligned)
    rows = []
    for (name, category), part in judged.groupby(["run", "category"], sort=True):
        k, n = int(part["votes"].map(accepted).astype(bool).sum()), len(part)
        low, high = wilson_interval(k, n)
        rows.append(
            {"name": name, "category": category, "n": n, "correct": k,
             "accuracy_pct": 100 * k / n, "wilson_low_pct": 100 * low,
             "wilson_high_pct": 100 * high}
        )  # fmt: skip
    columns = ["name", "category", "n", "correct", "accuracy_pct", "wilson_low_pct"]
    return pd.DataFrame(rows, columns=[*columns, "wilson_high_pct"])


def published_pairs(aligned: pd.DataFrame, extra: str | Path | None = None) -> pd.DataFrame:
    """Each memory run against each long-context run of its dataset, on the questions both
    answered: exact McNemar (``a_only``: the memory run right and the long-context run wrong)."""
    judged = judged_rows(aligned)
    outcome = {
        name: part.set_index("question_id")["votes"].map(accepted).astype(bool)
        for name, part in judged.groupby("run", sort=False)
    }
    rows = []
    runs = {name: published_run(name, extra) for name in outcome}
    for a, b in [
        (a, b)
        for a in outcome
        for b in outcome
        if runs[a].kind == "memory"
        and runs[b].kind == "long_context"
        and runs[a].dataset == runs[b].dataset
    ]:
        shared = outcome[a].index.intersection(outcome[b].index)
        test = mcnemar_exact(outcome[a][shared], outcome[b][shared])
        rows.append(
            {
                "a": a,
                "b": b,
                "n_shared": test.n,
                "a_accuracy_pct": 100 * float(outcome[a][shared].mean()) if test.n else None,
                "b_accuracy_pct": 100 * float(outcome[b][shared].mean()) if test.n else None,
                "a_only": test.a_only,
                "b_only": test.b_only,
                "p_value": test.p_value,
                # two judges: a difference may be the judges' as much as the systems'
                "same_judge": runs[a].judge_model == runs[b].judge_model,
            }
        )
    columns = ["a", "b", "n_shared", "a_accuracy_pct", "b_accuracy_pct", "a_only", "b_only"]
    return pd.DataFrame(rows, columns=[*columns, "p_value", "same_judge"])


# An audited gold answer that is right, only its cited evidence is not: a correct answer is
# still judged correct against it.
ANSWER_UNCHANGED = frozenset({"WRONG_CITATION"})


def gold_ceiling(audit: pd.DataFrame, questions: int) -> dict[str, Any]:
    """The accuracy a perfect system gets when the wrong gold answers of ``audit`` (aligned
    rows of a ``gold_errors`` run) count against it, out of ``questions`` judged questions."""
    wrong = audit[~audit["note"].isin(ANSWER_UNCHANGED)]
    return {
        "questions": questions,
        "audited": len(audit),
        "wrong_gold": len(wrong),
        "by_type": {str(k): int(v) for k, v in audit["note"].value_counts().items()},
        "ceiling_pct": 100 * (1 - len(wrong) / questions) if questions else None,
    }


def published_cost(
    frames: Mapping[str, pd.DataFrame], extra: str | Path | None = None
) -> pd.DataFrame:
    """What each run's answers cost at its answering model's dated list price: from the token
    totals its file records, else ``estimated`` from the o200k count of its answers alone (no
    file of these records what the prompts held, so that is a lower bound: output only)."""
    rows = []
    for name, frame in frames.items():
        run = published_run(name, extra)
        if not run.answer_model:
            continue  # probes and audits answer nothing
        usage = frame.attrs.get("usage")
        estimated = usage is None
        if estimated:
            usage = {"prompt_tokens": None, "completion_tokens": sum(count_tokens_batch(
                [str(a) for a in frame["answer"]]))}  # fmt: skip
        price = price_for(run.answer_model)
        prompt = usage["prompt_tokens"] or 0
        usd = (prompt * price.input + usage["completion_tokens"] * price.output) / 1e6
        rows.append(
            {
                "name": name,
                "answer_model": run.answer_model,
                "questions": len(frame),
                "prompt_tokens": usage["prompt_tokens"],
                "completion_tokens": usage["completion_tokens"],
                "usd": usd,
                "usd_per_question": usd / len(frame) if len(frame) else None,
                "price_date": price.date,
                "estimated": estimated,
                "note": "output tokens counted from the answers; prompts not recorded (a lower "
                "bound)"
                if estimated
                else "token totals recorded in the file (answers only, not the judge's calls)",
            }
        )
    return pd.DataFrame(rows, columns=COST_COLUMNS)


def false_acceptance(accuracy: pd.DataFrame) -> pd.DataFrame:
    """Per probe: the share of wrong answers its judge accepted (from :func:`published_accuracy`),
    and what that says of each judged run: an accuracy of ``a`` under a judge that accepts a
    wrong answer with probability ``f`` is consistent with a true accuracy of
    ``(a - f) / (1 - f)``, if the run's wrong answers are as persuasive as the probe's."""
    probes = accuracy[accuracy["kind"] == "probe"]
    runs = accuracy[accuracy["kind"] != "probe"]
    rows = []
    for probe in probes.itertuples(index=False):
        f = probe.accuracy_pct / 100
        for run in runs.itertuples(index=False):
            if run.dataset != probe.dataset:
                continue
            a = run.accuracy_pct / 100
            rows.append(
                {
                    "probe": probe.name,
                    "probe_judge": probe.judge_model,
                    "false_acceptance_pct": 100 * f,
                    "run": run.name,
                    "run_judge": run.judge_model,
                    "same_judge": run.judge_model == probe.judge_model,
                    "accuracy_pct": run.accuracy_pct,
                    "corrected_pct": 100 * max(0.0, (a - f) / (1 - f)) if f < 1 else None,
                }
            )
    return pd.DataFrame(rows, columns=LENIENCY_COLUMNS)


# --- The same answers, judged again -------------------------------------------------------


def judge_plan(
    aligned: pd.DataFrame, questions: pd.DataFrame, dataset: str, runs: list[str]
) -> JudgePlan:
    """A plan for this repository's judge (notebook 04's prompts and rules) over the paired
    answers of ``runs``: each run is a system, each answer judged against this repository's
    question and gold answer, so judges can be compared on identical answers."""
    scored, excluded = scored_questions(questions, dataset)
    by_id = {str(r["question_id"]): r for r in scored.to_dict("records")}
    items, missing, answers = {}, {}, {}
    for name in runs:
        mine = aligned[(aligned["run"] == name) & aligned["question_id"].isin(list(by_id))]
        answers[name] = mine
        items[name] = [
            judge_item(dataset, name, by_id[str(r["question_id"])], {"answer": r["answer"]},
                       "open_ended")
            for r in mine.to_dict("records")
        ]  # fmt: skip
        missing[name] = sorted(set(by_id) - set(mine["question_id"].astype(str)))
    return JudgePlan(
        dataset, "open_ended", scored, len(questions), excluded, items, missing, answers
    )


def repository_records(
    aligned: pd.DataFrame, extra: str | Path | None = None
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """The paired published answers as this repository's answer records (per run, the fields of
    ``answers_<system>.jsonl``, ``backend`` = ``published``) and their votes as its judgment
    records (``judgments.jsonl``), so its readers (``memcost.answers.read_judgments``, the
    accuracy tables) read them as they read a run's own."""
    answers: dict[str, list[dict[str, Any]]] = {}
    votes: list[dict[str, Any]] = []
    paired = judged_rows(aligned)
    for row in paired.to_dict("records"):
        run = published_run(row["run"], extra)
        common = {
            "question_id": row["question_id"],
            "conversation_id": row["conversation_id"],
            "system": run.name,
        }
        answers.setdefault(run.name, []).append(
            {
                **common,
                "answer": row["answer"],
                "model": run.answer_model or None,
                "backend": "published",
                "prompt_version": None,
                "prompt_tokens": None,
                "cached_prompt_tokens": None,
                "completion_tokens": None,
                "reasoning_tokens": None,
                "latency_s": None if row["latency_ms"] is None else row["latency_ms"] / 1000,
                "error": None,
                "source": f"{run.repo}@{run.commit[:12]}:{run.path}",
                "source_id": row["source_id"],
            }
        )
        for vote, accepted_ in enumerate(row["votes"]):
            votes.append(
                {
                    **common,
                    "category": row["category"],
                    "vote": vote,
                    "label": "CORRECT" if accepted_ else "WRONG",
                    "reason": None,
                    "judge_model": run.judge_model,
                    "backend": "published",
                    "prompt_name": "published",
                    "prompt_version": None,
                    "instruction": None,
                    "mode": "open_ended",
                    "primary": True,
                    "unjudged_cause": None,
                    "request_hash": None,
                }
            )
    return answers, votes
