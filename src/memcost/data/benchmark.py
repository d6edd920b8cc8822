"""A benchmark in memory, and the checks every reader of a native file shares.

:class:`BenchmarkData` is what each loader returns: the normalised ``conversations`` and
``questions`` tables with the provenance of the files they came from. The helpers below parse
and check native records so that bad input stops with a :class:`DataError` naming the file, the
record and the problem.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from memcost.data.sources import DataSource, RawFile, personamem_root, read_raw
from memcost.manifest import set_entry
from memcost.paths import DISPLAY_NAMES, DataError, RunPaths

ROLES = frozenset({"user", "assistant", "system"})


class DataWarning(UserWarning):
    """Input that loads but deserves attention (e.g. LoCoMo category counts that differ)."""


@dataclass
class BenchmarkData:
    """A benchmark in normalised form, with the provenance of the files it came from."""

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
        """The turns of one conversation (the first one by default)."""
        if conversation_id is None:
            conversation_id = self.conversations["conversation_id"].iloc[0]
        return self.conversations[self.conversations["conversation_id"] == conversation_id]


def as_source(source: DataSource | Path | str, dataset: str) -> DataSource:
    """A loader's argument as a :class:`DataSource` (a bare path is a local file)."""
    if isinstance(source, DataSource):
        if source.dataset != dataset:
            raise DataError(f"{source.path}: source is for {source.dataset}, not {dataset}")
        return source
    path = Path(source)
    root = personamem_root(path) if dataset == "personamem_v2" else path.resolve().parent
    return DataSource(dataset, path, root, "local")


def provenance(data: BenchmarkData) -> dict[str, Any]:
    """What the manifest records about the data: source, revision, every raw file's sha256,
    the selection and the checks."""
    return {
        **data.source.describe(),
        "files": [vars(f) for f in data.files],
        "selection": data.selection,
        "checks": data.checks,
    }


def record_provenance(run: RunPaths, data: BenchmarkData) -> None:
    """``manifest["provenance"][<dataset>]``, so a run names the exact bytes it used."""
    set_entry(run, "provenance", data.dataset, provenance(data))


# --- Checks shared by the readers of native files -----------------------------------------------


def iso_datetime(
    year: int, month: int, day: int, hour: int, minute: int, second: int, text: str
) -> str:
    """The ISO 8601 form of a parsed date; an impossible date names the text it came from."""
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
    """Which benchmark a parsed JSON document looks like, from its field names."""
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
    """Stop when a parsed file looks like another benchmark's, and say which one to pass."""
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
    """``obj[key]``, required and of ``types``; otherwise an error naming file and record."""
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


def short(value: Any, limit: int = 60) -> str:
    """A value as an error message quotes it: its repr, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def answer_text(value: Any) -> str:
    """Gold answers are strings everywhere downstream (LoCoMo has some integers)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def read_text(path: Path, files: list[RawFile]) -> str:
    """A raw text file (its bytes recorded in ``files``), UTF-8 with or without a BOM."""
    try:
        return read_raw(path, files).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start}): {exc.reason}") from None


def parse_csv(text: str, path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """A CSV's header and rows (any line endings, quoted newlines kept)."""
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        return list(reader.fieldnames or []), list(reader)
    except csv.Error as exc:
        raise DataError(f"{path}: not a readable CSV: {exc}") from None
