"""The answers and judge votes handed between notebooks: each file's schema, writers and readers
(docs/architecture.md, "File schemas")."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from memcost.catalog import slug
from memcost.io import JsonlAppender, read_jsonl, write_csv, write_jsonl
from memcost.paper import PAPER_MEMORY
from memcost.paths import DatasetPaths, RunPaths
from memcost.text import stable_hash, words

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
# ``memory_<registered name>`` (``memory_mem0_style``, the paper's; ``memory_rag``, ...),
# ``<kind>_<model>``
MEMORY_SYSTEM_RE = re.compile(r"^memory(_[a-z0-9]+)+$")
_SYSTEM_RE = re.compile(
    rf"{MEMORY_SYSTEM_RE.pattern}|^(long_context|rolling_window|no_context|oracle)_[a-z0-9.-]+$"
)


def system_name(kind: str, model: str | None = None) -> str:
    if kind not in SYSTEM_KINDS[1:]:
        raise ValueError(f"unknown system kind {kind!r}; expected one of {SYSTEM_KINDS[1:]}")
    if not model:
        raise ValueError(f"system kind {kind!r} needs a model")
    return f"{kind}_{slug(model)}"


def is_system_name(name: str) -> bool:
    return bool(_SYSTEM_RE.match(name))


def system_kind(system: str) -> str:
    if not is_system_name(system):
        raise ValueError(f"not a system name: {system!r}")
    return next(k for k in SYSTEM_KINDS if system.startswith(k + "_"))


def system_order(system: str) -> tuple[int, bool, str]:
    """Sort key of system names: by kind, the paper's memory first of its kind."""
    return SYSTEM_KINDS.index(system_kind(system)), system != PAPER_MEMORY, system


def in_system_order(table: pd.DataFrame, by: Sequence[str] = ("system",)) -> pd.DataFrame:
    """``table`` stably sorted by the system columns ``by`` (:func:`system_order`)."""
    if table.empty:
        return table

    def key(column: pd.Series) -> pd.Series:
        if column.name not in ("system", "memory_system"):
            return column
        return column.where(column != PAPER_MEMORY, "memory")  # before memory_<name>

    return table.sort_values(list(by), key=key, kind="stable").reset_index(drop=True)


def system_label(system: str, *, offline: bool = False, number: int | None = None) -> str:
    """A system as a reader names it: ``long context, gpt-5-mini``; offline without a model's name,
    ``long context (offline)``, numbered where several (:func:`system_labels`)."""
    kind = next((k for k in SYSTEM_KINDS[1:] if system.startswith(k + "_")), None)
    if kind is None:  # a memory system: its reader, extractor and judge were offline too
        words = f"memory {system.removeprefix('memory_')}"  # the name it is registered by
        return f"{words} (offline)" if offline else words
    words = kind.replace("_", " ")
    if offline:
        return f"{words} (offline)" + (f" {number}" if number else "")
    return f"{words}, {system[len(kind) + 1 :]}"


def in_words(name: str) -> str:
    """``single-session-user`` → ``single session user``."""
    return str(name).replace("_", " ").replace("-", " ")


def system_labels(systems: Iterable[str], *, offline: bool = False) -> dict[str, str]:
    """Unique labels; offline, the systems of one kind are numbered in the order of their names, the
    same in every table (:func:`offline_places`)."""
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
    """Append one system's answers, skipping questions answered already: ``pending(ids)``, then
    ``write(record)``. A latest record with an ``error``, or (with a ``fingerprint``) made with
    other settings, is not done: a rerun asks again."""

    def __init__(
        self,
        ds: DatasetPaths,
        system: str,
        fingerprint: str | None = None,
        on_ledger: Collection[str] | None = None,
    ):
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
        if on_ledger is not None:
            # An answer whose call is not in the store of calls (its record lost with a full disk
            # or a deleted store) is asked again: the cost tables count every answer they show.
            unrecorded = self.done - set(on_ledger)
            if unrecorded:
                self.done -= unrecorded
                print(
                    f"memcost: {len(unrecorded)} answer(s) of {system} in {self.path.name} have "
                    "no call in the run's store of calls (its record was lost): asked again, so "
                    "that the cost tables count them",
                    file=sys.stderr,
                    flush=True,
                )
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
    names = [p.name[len("answers_") : -len(".jsonl")] for p in ds.answers.glob("answers_*.jsonl")]
    valid = [n for n in names if is_system_name(n)]
    return sorted(valid, key=system_order)


def load_answers(ds: DatasetPaths, system: str, *, writer_hint: str = "") -> pd.DataFrame:
    """One system's answers (a missing file is an error naming the notebook that writes it)."""
    path: Path = ds.answers_file(system)
    if not path.is_file():
        writer = writer_hint or (
            "02_answer_from_memory" if system_kind(system) == "memory" else "03_answer_long_context"
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


NOT_ASKED_COLUMNS = ["system", "question_id", "conversation_id", "reason"]


def not_asked_path(ds: DatasetPaths) -> Path:
    return ds.answers / "not_asked.csv"


def write_not_asked(ds: DatasetPaths, skipped: pd.DataFrame, systems: Iterable[str]) -> None:
    """The questions a system cannot be asked, and why (the oracle without an evidence session): not
    failures. ``systems``' rows are replaced, others kept."""
    path = not_asked_path(ds)
    kept = pd.read_csv(path, dtype=str) if path.is_file() else pd.DataFrame()
    if not kept.empty:
        kept = kept.loc[~kept["system"].isin(set(systems))]
    rows = pd.concat([kept, skipped], ignore_index=True) if not kept.empty else skipped
    write_csv(path, rows.reindex(columns=NOT_ASKED_COLUMNS))


def read_not_asked(ds: DatasetPaths) -> dict[str, dict[str, str]]:
    path = not_asked_path(ds)
    if not path.is_file():
        return {}
    out: dict[str, dict[str, str]] = {}
    for row in pd.read_csv(path, dtype=str).itertuples(index=False):
        out.setdefault(row.system, {})[row.question_id] = row.reason
    return out


def context_sizes(ds: DatasetPaths, systems: Iterable[str]) -> pd.DataFrame:
    """Per answered question and system, the tokens of context in front of the model (a memory's
    retrieved items, a long-context prompt's history)."""
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
    """Per system, its median context tokens and how many times larger kind ``of``'s median is."""
    medians = sizes.groupby("system", sort=False).agg(
        kind=("kind", "first"), median_context_tokens=("context_tokens", "median")
    )
    reference = medians.loc[medians["kind"] == of, "median_context_tokens"]
    top = float(reference.max()) if not reference.empty else float("nan")
    medians["full_history_times"] = top / medians["median_context_tokens"].clip(lower=1)
    return medians.reset_index()


# How questions that come with options are asked: open-ended (the question alone, judged against
# the correct answer) or multiple choice (options listed, a letter expected, exact match).
MODES = ("open_ended", "multiple_choice")

MC_LETTERS = "ABCDEFGH"
MC_SALT = "personamem-mc@v1"  # part of the shuffle seed: change it and every order changes
MC_ANSWER_INSTRUCTION = (
    "Choose the option that best fits this user. Reply with the option's letter only "
    "(for example: B)."
)


@dataclass(frozen=True)
class MultipleChoice:
    """A question's options in the order shown, with their letters (:func:`multiple_choice`)."""

    question_id: str
    options: tuple[str, ...]  # in display order
    correct_letter: str

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(MC_LETTERS[: len(self.options)])

    def render(self) -> str:
        return "\n".join(
            f"{letter}. {text}" for letter, text in zip(self.letters, self.options, strict=True)
        )

    def option(self, letter: str) -> str:
        return self.options[self.letters.index(letter)]


def multiple_choice(question_id: str, options: Sequence[str]) -> MultipleChoice:
    """``options`` (``[correct, *wrong]``) in an order fixed by a stable hash of the question id."""
    options = [str(o) for o in options]
    if len(options) < 2:
        raise ValueError(f"question {question_id!r}: a multiple-choice question needs 2+ options")
    if len(options) > len(MC_LETTERS):
        raise ValueError(f"question {question_id!r}: more than {len(MC_LETTERS)} options")
    order = sorted(range(len(options)), key=lambda i: stable_hash(f"{MC_SALT}\n{question_id}\n{i}"))
    shown = tuple(options[i] for i in order)
    return MultipleChoice(question_id, shown, MC_LETTERS[order.index(0)])


_LETTER_ALONE = re.compile(r"^[\s*_(\[\"'`]*([A-Ha-h])[\s*_)\]\"'`.:]*$")
# Keywords in any case, the letter itself upper case ("the answer is a dog" names no option).
_LETTER_NAMED = re.compile(
    r"\b(?i:answer|option|choice|pick|choose|select)(?:\s+(?i:is))?\s*[:\-]?\s*"
    r"[*_(\[\"']*([A-H])\b(?!')"
)
_LETTER_LEAD = re.compile(r"^[\s*_(\[]*([A-H])[).:\]]")


def parse_choice(text: str, choice: MultipleChoice) -> str | None:
    """The option letter an answer picked (``B``, ``(B)``, ``Answer: B``, one option's full text),
    or ``None``."""
    stripped = text.strip()
    letters = set(choice.letters)
    for pattern in (_LETTER_ALONE, _LETTER_LEAD):
        found = pattern.match(stripped)
        if found and found.group(1).upper() in letters:
            return found.group(1).upper()
    named = set(_LETTER_NAMED.findall(stripped)) & letters
    if len(named) == 1:
        return named.pop()
    normal = " ".join(words(stripped))
    quoted = [
        letter
        for letter, option in zip(choice.letters, choice.options, strict=True)
        if " ".join(words(option)) and " ".join(words(option)) in normal
    ]
    return quoted[0] if len(quoted) == 1 else None


def format_choice(shown: Sequence[str], index: int) -> str:
    """An offline answerer's pick: ``(B) option text``."""
    return f"({MC_LETTERS[index]}) {shown[index]}"


def longest_option(shown: Sequence[str]) -> int:
    """The no-context guess that exposes PersonaMem's bias (the correct option is most often the
    longest)."""
    return max(range(len(shown)), key=lambda i: (len(shown[i]), -i))


def best_supported_option(shown: Sequence[str], documents: Sequence[str]) -> int | None:
    """The option whose words ``documents`` support best (its best BM25 match over its distinct
    content words), or ``None``: the offline answerers' pick."""
    from memcost.text import BM25, content_words

    if not documents:
        return None
    index = BM25(list(documents))
    scores = []
    for option in shown:
        n_words = max(1, len(set(content_words(option))))
        scores.append(max(index.scores(option), default=0.0) / n_words)
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return best if scores[best] > 0 else None


# judgments.jsonl, one record per vote (docs/architecture.md), in this order.
JUDGMENT_FIELDS = (
    "question_id",
    "conversation_id",
    "system",
    "category",
    "vote",
    "label",
    "reason",
    "judge_model",
    "backend",
    "prompt_name",
    "prompt_version",
    "instruction",
    "mode",
    "primary",
    "unjudged_cause",
    "request_hash",
)


def judgment_record(**values: Any) -> dict[str, Any]:
    unknown = sorted(set(values) - set(JUDGMENT_FIELDS))
    if unknown:
        raise ValueError(f"not judgments.jsonl fields: {unknown}; known: {list(JUDGMENT_FIELDS)}")
    return {name: values.get(name) for name in JUDGMENT_FIELDS}


def rewrite_judgments(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> None:
    """Replace the file with the votes that still apply, in the appender's line format (a rerun with
    nothing new rewrites it byte for byte)."""
    write_jsonl(path, records)


def judgment_appender(path: str | os.PathLike[str]) -> JsonlAppender:
    return JsonlAppender(path, fsync=False)


def read_judgments(source: DatasetPaths | str | os.PathLike[str]) -> pd.DataFrame:
    path = source.judgments if isinstance(source, DatasetPaths) else Path(source)
    frame = pd.DataFrame.from_records(read_jsonl(path, missing_ok=True))
    for column in JUDGMENT_FIELDS:
        if column not in frame.columns:
            frame[column] = pd.Series(dtype="object")
    if not frame.empty:
        frame["vote"] = frame["vote"].astype(int)
        frame["primary"] = frame["primary"].fillna(True).astype(bool)
    return frame[list(JUDGMENT_FIELDS)]


def read_run_judgments(run: RunPaths) -> pd.DataFrame:
    frames = []
    for ds in run.datasets():
        frame = read_judgments(ds)
        if not frame.empty:
            frames.append(frame.assign(dataset=ds.name))
    if not frames:
        return pd.DataFrame(columns=["dataset", *JUDGMENT_FIELDS])
    out = pd.concat(frames, ignore_index=True)
    return out[["dataset", *JUDGMENT_FIELDS]]


def primary(judgments: pd.DataFrame) -> pd.DataFrame:
    """The votes of the primary prompt (Table 3's)."""
    return judgments.loc[judgments["primary"].astype(bool)].reset_index(drop=True)
