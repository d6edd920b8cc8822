"""The answers and judge votes handed between notebooks: each file's schema, writers and readers.

- ``<dataset>/answers/answers_<system>.jsonl``: one record per answer, from the answering
  notebooks (02, 03) to the judge (04);
- ``<dataset>/judgments.jsonl``: one record per judge vote; notebook 04 rewrites the votes that
  still apply and appends new ones as they arrive, notebook 05 and the report read them back;
- PersonaMem multiple choice, one contract for both sides: ``questions.parquet`` lists a
  question's options with the correct answer first; the answering notebooks show them in an
  order fixed by the question id and ask for a letter, and the judge parses the letter back
  (:func:`multiple_choice`), so they always agree on which letter is correct.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
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
    """``<kind>_<model slug>``, e.g. ``long_context_gpt-5-mini``."""
    if kind not in SYSTEM_KINDS[1:]:
        raise ValueError(f"unknown system kind {kind!r}; expected one of {SYSTEM_KINDS[1:]}")
    if not model:
        raise ValueError(f"system kind {kind!r} needs a model")
    return f"{kind}_{slug(model)}"


def system_kind(system: str) -> str:
    """The kind of a system name: ``long_context_gpt-5-mini`` → ``long_context``."""
    if not _SYSTEM_RE.match(system):
        raise ValueError(f"not a system name: {system!r}")
    return next(k for k in SYSTEM_KINDS if system.startswith(k + "_"))


def system_order(system: str) -> tuple[int, bool, str]:
    """Sort key of system names: by kind (memory first), the paper's memory first of its kind."""
    return SYSTEM_KINDS.index(system_kind(system)), system != PAPER_MEMORY, system


def in_system_order(table: pd.DataFrame, by: Sequence[str] = ("system",)) -> pd.DataFrame:
    """``table``'s rows sorted by the columns ``by``: names alphabetically, the paper's memory
    first of the memory systems (a stable sort: the order within equal keys is kept)."""
    if table.empty:
        return table

    def key(column: pd.Series) -> pd.Series:
        if column.name not in ("system", "memory_system"):
            return column
        return column.where(column != PAPER_MEMORY, "memory")  # before memory_<name>

    return table.sort_values(list(by), key=key, kind="stable").reset_index(drop=True)


def system_label(system: str, *, offline: bool = False, number: int | None = None) -> str:
    """How a system is named to a reader: ``long_context_gpt-5-mini`` → ``long context,
    gpt-5-mini``; ``memory_graph`` → ``memory graph``.

    Offline no model answered, so an offline system carries no model's name and says so:
    ``long context (offline)``, ``memory rag (offline)``, numbered when several models of one
    kind were configured (see :func:`system_labels`)."""
    kind = next((k for k in SYSTEM_KINDS[1:] if system.startswith(k + "_")), None)
    if kind is None:  # a memory system: its reader, extractor and judge were offline too
        words = f"memory {system.removeprefix('memory_')}"  # the name it is registered by
        return f"{words} (offline)" if offline else words
    words = kind.replace("_", " ")
    if offline:
        return f"{words} (offline)" + (f" {number}" if number else "")
    return f"{words}, {system[len(kind) + 1 :]}"


def in_words(name: str) -> str:
    """A name as prose writes it: ``long_context`` → ``long context``, a LongMemEval category
    ``single-session-user`` → ``single session user``, a served system ``full_history`` →
    ``full history``. (The main study's systems are named by :func:`system_label`.)"""
    return str(name).replace("_", " ").replace("-", " ")


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
    ``fingerprint`` (:mod:`memcost.manifest`), answers are keyed by question *and*
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
    return sorted(valid, key=system_order)


def load_answers(ds: DatasetPaths, system: str, *, writer_hint: str = "") -> pd.DataFrame:
    """The answers of one system as a DataFrame (one row per question).

    A missing file is an error naming the notebook that writes it.
    """
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
    """The questions a system cannot be asked, and why (notebook 03: the oracle where the
    history holds no evidence session): not failures, so the judge leaves them out. The rows
    of ``systems`` (this plan's) are replaced; another system's, from an earlier plan whose
    answers are still there, are kept."""
    path = not_asked_path(ds)
    kept = pd.read_csv(path, dtype=str) if path.is_file() else pd.DataFrame()
    if not kept.empty:
        kept = kept.loc[~kept["system"].isin(set(systems))]
    rows = pd.concat([kept, skipped], ignore_index=True) if not kept.empty else skipped
    write_csv(path, rows.reindex(columns=NOT_ASKED_COLUMNS))


def read_not_asked(ds: DatasetPaths) -> dict[str, dict[str, str]]:
    """``system -> {question_id: reason}`` of :func:`write_not_asked` (empty without a file)."""
    path = not_asked_path(ds)
    if not path.is_file():
        return {}
    out: dict[str, dict[str, str]] = {}
    for row in pd.read_csv(path, dtype=str).itertuples(index=False):
        out.setdefault(row.system, {})[row.question_id] = row.reason
    return out


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
    """A question's options in the order they are shown, with their letters.

    Built by :func:`multiple_choice` from ``questions.parquet``'s ``options`` (correct answer
    first); the answering notebooks render it into their prompts and the judge parses the
    letter back, so both sides agree on which letter is correct.
    """

    question_id: str
    options: tuple[str, ...]  # in display order
    correct_letter: str

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(MC_LETTERS[: len(self.options)])

    def render(self) -> str:
        """``A. ...`` one option per line, for the answer prompt."""
        return "\n".join(
            f"{letter}. {text}" for letter, text in zip(self.letters, self.options, strict=True)
        )

    def option(self, letter: str) -> str:
        return self.options[self.letters.index(letter)]


def multiple_choice(question_id: str, options: Sequence[str]) -> MultipleChoice:
    """Shuffle ``options`` (``[correct, *wrong]``) in an order fixed by the question id.

    The order sorts the options by a stable hash of (salt, question id, original position), so
    it is the same in every process, on every machine and in every Python version, and the
    correct answer lands on each letter about equally often (an unshuffled list would always
    put it first).
    """
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
    """The option letter an answer picked, or ``None`` when it names no single option.

    Accepts a bare letter (``B``, ``(B)``, ``**B.**``), a named one (``Answer: B``, ``I'd pick
    option C``), a leading ``B)``/``B.``, or the full text of exactly one option.
    """
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
    """How an offline answerer writes its pick among options in display order: ``(B) option
    text`` (what :func:`parse_choice` reads back)."""
    return f"({MC_LETTERS[index]}) {shown[index]}"


def longest_option(shown: Sequence[str]) -> int:
    """Index of the longest option: the no-context guess that exposes PersonaMem's bias (the
    correct option is the longest far more often than one time in four)."""
    return max(range(len(shown)), key=lambda i: (len(shown[i]), -i))


def best_supported_option(shown: Sequence[str], documents: Sequence[str]) -> int | None:
    """Index of the option whose words ``documents`` support best, or ``None`` when no option
    shares a content word with them.

    Each option is scored by its best BM25 match among the documents, divided by its number of
    distinct content words, so a long option gains nothing from length alone. The offline
    answerers use it over retrieved facts (memory) or history turns (long context).
    """
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
    """One vote as a record with every schema field, in order (a field not given is null)."""
    unknown = sorted(set(values) - set(JUDGMENT_FIELDS))
    if unknown:
        raise ValueError(f"not judgments.jsonl fields: {unknown}; known: {list(JUDGMENT_FIELDS)}")
    return {name: values.get(name) for name in JUDGMENT_FIELDS}


def rewrite_judgments(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> None:
    """Replace the file with ``records`` (the votes that still apply), atomically, in the line
    format :func:`judgment_appender` appends, so a rerun with nothing new rewrites it byte for
    byte."""
    write_jsonl(path, records)


def judgment_appender(path: str | os.PathLike[str]) -> JsonlAppender:
    """Append votes one line at a time as they arrive (flushed, not synced per vote)."""
    return JsonlAppender(path, fsync=False)


def read_judgments(source: DatasetPaths | str | os.PathLike[str]) -> pd.DataFrame:
    """One dataset's votes with every schema column (a missing or empty file: no rows)."""
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
    """Every dataset's votes in a run, with a ``dataset`` column first."""
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
    """The votes of the primary prompt (what Table 3 reports)."""
    return judgments.loc[judgments["primary"].astype(bool)].reset_index(drop=True)
