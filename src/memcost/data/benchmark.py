"""A benchmark in memory, notebook 00's hand-over files and their schemas, and the long-context
rendering of a history."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from memcost.data.sources import DataSource, RawFile, personamem_root, read_raw
from memcost.io import write_parquet
from memcost.manifest import set_entry
from memcost.paths import DISPLAY_NAMES, DataError, DatasetPaths, RunPaths
from memcost.text import spoken_datetime, with_caption

ROLES = frozenset({"user", "assistant", "system"})


class DataWarning(UserWarning): ...


@dataclass
class BenchmarkData:
    """A benchmark in normalised form, with the provenance of its files."""

    dataset: str
    conversations: pd.DataFrame
    questions: pd.DataFrame
    source: DataSource
    files: list[RawFile] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)  # e.g. LoCoMo category counts
    notes: list[str] = field(default_factory=list)  # anything the reader should look at
    selection: dict[str, Any] = field(default_factory=dict)

    @property
    def display_name(self) -> str:
        return DISPLAY_NAMES[self.dataset]

    def summary(self) -> str:
        return (
            f"{self.display_name}: {self.conversations['conversation_id'].nunique()} "
            f"conversations, {len(self.conversations)} turns, {len(self.questions)} questions"
        )

    def conversation(self, conversation_id: str | None = None) -> pd.DataFrame:
        if conversation_id is None:
            conversation_id = self.conversations["conversation_id"].iloc[0]
        return self.conversations[self.conversations["conversation_id"] == conversation_id]


def as_source(source: DataSource | Path | str, dataset: str) -> DataSource:
    if isinstance(source, DataSource):
        if source.dataset != dataset:
            raise DataError(f"{source.path}: source is for {source.dataset}, not {dataset}")
        return source
    path = Path(source)
    root = personamem_root(path) if dataset == "personamem_v2" else path.resolve().parent
    return DataSource(dataset, path, root, "local")


def provenance(data: BenchmarkData) -> dict[str, Any]:
    """What the manifest records of the data: source, revision, every raw file's sha256, the
    selection, the checks."""
    return {
        **data.source.describe(),
        "files": [vars(f) for f in data.files],
        "selection": data.selection,
        "checks": data.checks,
    }


def record_provenance(run: RunPaths, data: BenchmarkData) -> None:
    set_entry(run, "provenance", data.dataset, provenance(data))


# --- Checks shared by the readers of native files -----------------------------------------------


def iso_datetime(
    year: int, month: int, day: int, hour: int, minute: int, second: int, text: str
) -> str:
    """ISO 8601; an impossible date names the text it came from."""
    try:
        return datetime(year, month, day, hour, minute, second).isoformat(timespec="seconds")
    except ValueError as exc:
        raise DataError(f"cannot parse date {text!r}: {exc}") from None


def parse_json(data: bytes, path: Path, dataset: str | None = None) -> Any:
    """A raw file's JSON; a CSV given for a JSON benchmark, or broken JSON, stops here."""
    head = data[:2_000].lstrip()
    if dataset and head[:1] not in (b"[", b"{"):
        first_line = head.split(b"\n", 1)[0]
        if b"persona_id" in first_line and b"," in first_line:
            guess = "personamem" if b"shared_context_id" in first_line else "personamem_v2"
            raise DataError(
                f"{path}: this looks like {DISPLAY_NAMES[guess]}'s questions CSV, "
                f"not a {DISPLAY_NAMES[dataset]} JSON file; pass dataset='{guess}' "
                "or the right file"
            )
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno} "
            f"(char {exc.pos}): {exc.msg}"
        ) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start}): {exc.reason}") from None


def guess_json_dataset(obj: Any) -> str | None:
    first = obj[0] if isinstance(obj, list) and obj else obj
    if not isinstance(first, dict):
        return None
    if "haystack_sessions" in first or ("question_id" in first and "question_type" in first):
        return "longmemeval"
    if "conversation" in first and ("qa" in first or "sample_id" in first):
        return "locomo"
    if "chat_history" in first:
        return "personamem_v2"
    return None


def expect_dataset(obj: Any, dataset: str, path: Path) -> None:
    """Stop when a file looks like another benchmark's, saying which to pass."""
    guess = guess_json_dataset(obj)
    if guess is not None and guess != dataset:
        what = (
            "a PersonaMem-v2 release chat history"
            if guess == "personamem_v2"
            else (f"a {DISPLAY_NAMES[guess]} file")
        )
        raise DataError(
            f"{path}: this looks like {what}, not a {DISPLAY_NAMES[dataset]} file; "
            f"pass dataset='{guess}' or the right file"
        )


_TYPE_NAMES = {
    str: "a string",
    list: "a list",
    dict: "an object",
    int: "an integer",
    bool: "true/false",
    float: "a number",
}


def _type_name(types: type | tuple[type, ...]) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)


def required(
    obj: Mapping[str, Any], key: str, types: type | tuple[type, ...], path: Path, where: str
) -> Any:
    """``obj[key]`` of ``types``, else an error naming file and record."""
    if key not in obj:
        raise DataError(f"{path}: {where}: missing field '{key}'")
    value = obj[key]
    wanted = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted):
        raise DataError(
            f"{path}: {where}: field '{key}' should be {_type_name(types)}, "
            f"got {type(value).__name__} {short(value)}"
        )
    return value


def records(
    obj: Any, path: Path, what: str, noun: str, id_key: str, label: str = ""
) -> Iterator[tuple[dict[str, Any], str, str]]:
    """A file's list of ``what``, each with its ``id_key``: ``(record, id, where)`` for errors."""
    if not isinstance(obj, list):
        raise DataError(f"{path}: expected a JSON list of {what}, got {type(obj).__name__}")
    seen: set[str] = set()
    for index, item in enumerate(obj):
        if not isinstance(item, dict):
            raise DataError(
                f"{path}: {noun} {index}: expected an object, got {type(item).__name__}"
            )
        key = required(item, id_key, str, path, f"{noun} {index}")
        where = f"{label or id_key} {key!r} (index {index})"
        if key in seen:
            raise DataError(f"{path}: {where}: {id_key} appears twice")
        seen.add(key)
        yield item, key, where


def short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def answer_text(value: Any) -> str:
    """Gold answers as strings (LoCoMo has some integers)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def read_text(path: Path, files: list[RawFile]) -> str:
    """A raw text file, UTF-8 with or without a BOM, its bytes recorded in ``files``."""
    try:
        return read_raw(path, files).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start}): {exc.reason}") from None


def parse_csv(text: str, path: Path) -> tuple[list[str], list[dict[str, str]]]:
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        return list(reader.fieldnames or []), list(reader)
    except csv.Error as exc:
        raise DataError(f"{path}: not a readable CSV: {exc}") from None


CONVERSATION_SCHEMA = pa.schema(
    [
        ("conversation_id", pa.string()),
        ("session_index", pa.int64()),
        ("session_id", pa.string()),
        ("session_datetime", pa.string()),
        ("turn_index", pa.int64()),
        ("position", pa.int64()),
        ("speaker", pa.string()),
        ("role", pa.string()),
        ("text", pa.string()),
        ("dia_id", pa.string()),
        ("has_answer", pa.bool_()),
        ("image_caption", pa.string()),
    ]
)
QUESTION_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("conversation_id", pa.string()),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("adversarial_answer", pa.string()),
        ("category", pa.string()),
        ("category_id", pa.int64()),
        ("question_date", pa.string()),
        ("evidence", pa.list_(pa.string())),
        ("is_abstention", pa.bool_()),
        ("options", pa.list_(pa.string())),
        ("extra", pa.string()),
    ]
)
STATS_SCHEMA = pa.schema(
    [
        ("conversation_id", pa.string()),
        ("n_sessions", pa.int64()),
        ("n_turns", pa.int64()),
        ("n_questions", pa.int64()),
        ("text_tokens", pa.int64()),
        ("history_tokens", pa.int64()),
        ("first_session_datetime", pa.string()),
        ("last_session_datetime", pa.string()),
    ]
)
CONVERSATION_COLUMNS: tuple[str, ...] = tuple(CONVERSATION_SCHEMA.names)
QUESTION_COLUMNS: tuple[str, ...] = tuple(QUESTION_SCHEMA.names)


def frame(columns: Mapping[str, list[Any]], schema: pa.Schema) -> pd.DataFrame:
    """A DataFrame whose dtypes match ``schema`` (nullable ints and bools stay nullable)."""
    data: dict[str, Any] = {}
    for fld in schema:
        values = columns[fld.name]
        if pa.types.is_string(fld.type):
            data[fld.name] = pd.array(values, dtype="str")
        elif pa.types.is_int64(fld.type):
            nullable = any(v is None for v in values)
            data[fld.name] = (
                pd.array(values, dtype="Int64") if nullable else np.asarray(values, dtype=np.int64)
            )
        elif pa.types.is_boolean(fld.type):
            nullable = any(v is None for v in values)
            data[fld.name] = (
                pd.array(values, dtype="boolean") if nullable else np.asarray(values, dtype=bool)
            )
        else:  # lists stay Python objects; the parquet schema gives them their type
            data[fld.name] = pd.Series(values, dtype=object)
    return pd.DataFrame(data, columns=list(schema.names))


class Rows:
    """Column-wise accumulator (lists are the cheap way to build 250k-row tables)."""

    def __init__(self, names: Iterable[str]):
        self.columns: dict[str, list[Any]] = {name: [] for name in names}

    def add(self, **row: Any) -> None:
        for name, values in self.columns.items():
            values.append(row[name])


def conversation_stats_path(ds: DatasetPaths) -> Path:
    return ds.data / "conversation_stats.parquet"


def write_data_files(
    ds: DatasetPaths, conversations: pd.DataFrame, questions: pd.DataFrame, stats: pd.DataFrame
) -> dict[str, Path]:
    written = {
        "conversations": ds.conversations,
        "questions": ds.questions,
        "conversation_stats": conversation_stats_path(ds),
    }
    write_parquet(written["conversations"], conversations, schema=CONVERSATION_SCHEMA)
    write_parquet(written["questions"], questions, schema=QUESTION_SCHEMA)
    write_parquet(written["conversation_stats"], stats, schema=STATS_SCHEMA)
    return written


def _read(ds: DatasetPaths, path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: not found; run notebooks/00_prepare_data.ipynb for dataset {ds.name!r} "
            "into this run directory first"
        )
    return pd.read_parquet(path)


def read_conversations(ds: DatasetPaths) -> pd.DataFrame:
    return _read(ds, ds.conversations)


def read_questions(ds: DatasetPaths) -> pd.DataFrame:
    return _read(ds, ds.questions)


def read_prepared(ds: DatasetPaths) -> tuple[pd.DataFrame, pd.DataFrame]:
    return read_conversations(ds), read_questions(ds)


def read_conversation_stats(ds: DatasetPaths) -> pd.DataFrame:
    """``text_tokens`` (Table 1) and ``history_tokens`` (what is billed) per conversation."""
    return _read(ds, conversation_stats_path(ds))


# Between two sessions of a rendered history: a blank line.
SESSION_SEPARATOR = "\n\n"


def in_order(conversation: pd.DataFrame) -> pd.DataFrame:
    positions = conversation["position"]
    return (
        conversation
        if positions.is_monotonic_increasing
        else conversation.sort_values("position", kind="stable")
    )


def session_header(number: int, when: str | None) -> str:
    """``[Session 3 · Monday 8 May 2023, 13:56]`` (``[Session 3]`` without a date)."""
    if not when:
        return f"[Session {number}]"
    return f"[Session {number} · {spoken_datetime(when)}]"


def render_history(conversation: pd.DataFrame, *, captions: bool = True) -> str:
    """One user's history as long context sends it (paper §3.2): sessions in order headed by their
    date, turns ``Speaker: text``, a shared image ``[shares a photo: <caption>]``; sessions keep
    their own numbers."""
    return SESSION_SEPARATOR.join(
        text for _, text in render_sessions(conversation, captions=captions)
    )


def render_sessions(conversation: pd.DataFrame, *, captions: bool = True) -> list[tuple[int, str]]:
    """:func:`render_history` a session at a time, so each is rendered and counted once."""
    ordered = in_order(conversation)
    out: list[tuple[int, str]] = []
    lines: list[str] = []
    current: int | None = None
    for session, when, speaker, text, caption in zip(
        ordered["session_index"].tolist(),
        ordered["session_datetime"].tolist(),
        ordered["speaker"].tolist(),
        ordered["text"].tolist(),
        ordered["image_caption"].tolist(),
        strict=True,
    ):
        if session != current:
            if current is not None:
                out.append((current, "\n".join(lines)))
            current, lines = int(session), []
            lines.append(session_header(int(session) + 1, when if isinstance(when, str) else None))
        line = f"{speaker}: {text}"
        lines.append(with_caption(line, caption) if captions else line)
    if current is not None:
        out.append((current, "\n".join(lines)))
    return out
