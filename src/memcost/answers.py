"""Answer files: the hand-over from the answering notebooks (02, 03) to the judge (04).

One JSONL file per system, ``<ds>/answers/answers_<system>.jsonl``, one record per question
(schema in docs/architecture.md). Records are appended and flushed one at a time; a rerun after a
crash skips the questions already answered, so nothing is asked twice and nothing is lost.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from memcost.io import JsonlAppender, read_jsonl
from memcost.models import slug
from memcost.paths import DatasetPaths

# Fields every answer record carries, whatever the system.
REQUIRED_FIELDS = (
    "question_id",
    "conversation_id",
    "system",
    "answer",
    "model",
    "backend",
    "prompt_version",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "latency_s",
    "error",
)
SYSTEM_KINDS = ("memory", "long_context", "rolling_window", "no_context", "oracle")
# ``memory`` (the paper's), ``memory_<architecture>`` (memcost.systems), ``<kind>_<model>``
_SYSTEM_RE = re.compile(
    r"^(memory(_[a-z0-9]+)?|(long_context|rolling_window|no_context|oracle)_[a-z0-9.-]+)$"
)


def system_name(kind: str, model: str | None = None) -> str:
    """``memory`` or ``<kind>_<model slug>``, e.g. ``long_context_gpt-5-mini``."""
    if kind not in SYSTEM_KINDS:
        raise ValueError(f"unknown system kind {kind!r}; expected one of {SYSTEM_KINDS}")
    if kind == "memory":
        return "memory"
    if not model:
        raise ValueError(f"system kind {kind!r} needs a model")
    return f"{kind}_{slug(model)}"


def system_kind(system: str) -> str:
    """The kind of a system name: ``long_context_gpt-5-mini`` → ``long_context``."""
    if not _SYSTEM_RE.match(system):
        raise ValueError(f"not a system name: {system!r}")
    return next(k for k in SYSTEM_KINDS if system == k or system.startswith(k + "_"))


def system_label(system: str, *, offline: bool = False, number: int | None = None) -> str:
    """How a system is named to a reader: ``long_context_gpt-5-mini`` → ``long context,
    gpt-5-mini``; ``memory_graph`` → ``memory graph``.

    Offline no model answered, so an offline system carries no model's name: ``long context
    (offline)``, numbered when several models of one kind were configured (see
    :func:`system_labels`)."""
    kind = next((k for k in SYSTEM_KINDS[1:] if system.startswith(k + "_")), None)
    if kind is None:
        return system.replace("_", " ")
    words = kind.replace("_", " ")
    if offline:
        return f"{words} (offline)" + (f" {number}" if number else "")
    return f"{words}, {system[len(kind) + 1 :]}"


def system_labels(systems: Iterable[str], *, offline: bool = False) -> dict[str, str]:
    """Readable, unique labels for a set of systems. Offline, the systems of one kind (two
    long-context models) are numbered 1, 2, … in the order of their names, so the same set gets
    the same numbers in every table and figure; :func:`offline_places` says which configured
    model each number stands in for."""
    names = sorted(set(systems))
    places = offline_places(names) if offline else {}
    return {
        s: system_label(s, offline=offline, number=places[s][1] if s in places else None)
        for s in names
    }


def offline_places(systems: Iterable[str]) -> dict[str, tuple[str, int]]:
    """``{system: (configured model slug, number)}`` for the kinds with more than one system."""
    by_kind: dict[str, list[str]] = {}
    for system in sorted(set(systems)):
        kind = system_kind(system)
        if kind != "memory":
            by_kind.setdefault(kind, []).append(system)
    return {
        s: (s[len(kind) + 1 :], i)
        for kind, group in by_kind.items()
        if len(group) > 1
        for i, s in enumerate(group, start=1)
    }


def validate_record(record: dict[str, Any]) -> None:
    missing = [f for f in REQUIRED_FIELDS if f not in record]
    if missing:
        raise ValueError(
            f"answer record for question {record.get('question_id')!r} lacks fields {missing}"
        )
    system_kind(record["system"])


class AnswerWriter:
    """Append answer records for one system, skipping questions answered by an earlier attempt.

    Use ``pending(question_ids)`` to get what is left to do, then ``write(record)`` per answer.
    A question whose latest record carries an ``error`` is not done: a rerun asks it again and
    appends the new record (readers keep the last record per question). With a
    ``fingerprint`` (:mod:`memcost.fingerprint`), answers are keyed by question *and*
    fingerprint: an answer made with other settings (another backend, model, prompt or memory)
    is not done either, so it is answered again rather than mixed in.
    """

    def __init__(self, ds: DatasetPaths, system: str, fingerprint: str | None = None):
        system_kind(system)
        self.system = system
        self.fingerprint = fingerprint
        self.path = ds.answers_file(system)
        self.done: set[str] = set()
        for r in read_jsonl(self.path, missing_ok=True):
            same = fingerprint is None or r.get("fingerprint") == fingerprint
            if r.get("error") or not same:
                self.done.discard(r["question_id"])
            else:
                self.done.add(r["question_id"])
        # Synced at most once a second, not per answer (the offline backend's largest cost per
        # answer): a kill loses nothing, a power cut at most the last second's answers, which a
        # rerun asks again (from the response cache where it kept them).
        self._out = JsonlAppender(self.path, sync_every_s=1.0)

    def pending(self, question_ids: Iterable[str]) -> list[str]:
        return [q for q in question_ids if q not in self.done]

    def write(self, record: dict[str, Any]) -> None:
        record = {"system": self.system, **record}
        if self.fingerprint is not None:
            record["fingerprint"] = self.fingerprint
        validate_record(record)
        if record["question_id"] in self.done:
            return
        self._out.write(record)
        if not record.get("error"):
            self.done.add(record["question_id"])

    def close(self) -> None:
        self._out.close()

    def __enter__(self) -> AnswerWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def answer_systems(ds: DatasetPaths) -> list[str]:
    """Systems with an answers file in this dataset folder, memory first."""
    names = [p.name[len("answers_") : -len(".jsonl")] for p in ds.answers.glob("answers_*.jsonl")]
    valid = [n for n in names if _SYSTEM_RE.match(n)]
    return sorted(valid, key=lambda n: (SYSTEM_KINDS.index(system_kind(n)), n))


def load_answers(ds: DatasetPaths, system: str, *, writer_hint: str = "") -> pd.DataFrame:
    """The answers of one system as a DataFrame (one row per question).

    A missing file is an error naming the notebook that writes it.
    """
    path: Path = ds.answers_file(system)
    if not path.is_file():
        writer = writer_hint or (
            "02_answer_from_memory" if system == "memory" else "03_answer_long_context"
        )
        raise FileNotFoundError(
            f"{path}: no answers for system {system!r}; run notebooks/{writer}.ipynb for dataset "
            f"{ds.name!r} first"
        )
    records = read_jsonl(path)
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        return pd.DataFrame(columns=list(REQUIRED_FIELDS))
    duplicated = frame["question_id"].duplicated(keep="last")
    return frame.loc[~duplicated].reset_index(drop=True)


def context_sizes(ds: DatasetPaths, systems: Iterable[str]) -> pd.DataFrame:
    """Per answered question and system: the tokens of context in front of the model, as its
    record says: a memory's retrieved items (``retrieved_tokens``, notebook 02) or the history
    part of a long-context prompt (``context_tokens``, notebook 03). Columns ``system, kind,
    question_id, context_tokens``; a system without an answers file is left out."""
    frames = []
    for system in systems:
        if not ds.answers_file(system).is_file():
            continue
        answers = load_answers(ds, system)
        kind = system_kind(system)
        column = "retrieved_tokens" if kind == "memory" else "context_tokens"
        if answers.empty or column not in answers:
            continue
        frames.append(
            pd.DataFrame(
                {
                    "system": system,
                    "kind": kind,
                    "question_id": answers["question_id"].astype(str),
                    "context_tokens": pd.to_numeric(answers[column], errors="coerce"),
                }
            ).dropna(subset=["context_tokens"])
        )
    columns = ["system", "kind", "question_id", "context_tokens"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def median_ratios(sizes: pd.DataFrame, of: str = "long_context") -> pd.DataFrame:
    """Per system: its median context tokens per question, and how many times larger the
    median of kind ``of`` (the full history) is."""
    medians = sizes.groupby("system", sort=False).agg(
        kind=("kind", "first"), median_context_tokens=("context_tokens", "median")
    )
    reference = medians.loc[medians["kind"] == of, "median_context_tokens"]
    top = float(reference.max()) if not reference.empty else float("nan")
    medians["full_history_times"] = top / medians["median_context_tokens"].clip(lower=1)
    return medians.reset_index()
