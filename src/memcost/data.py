"""The three benchmarks, read from their native files into one normalised form.

LoCoMo (``locomo10.json``), LongMemEval (``longmemeval_{s,m}_cleaned.json``,
``longmemeval_oracle.json``) and PersonaMem v2 (``benchmark/text/benchmark.csv`` plus one
chat-history JSON per user) become two tables with the schemas of ``docs/architecture.md``:
``conversations`` (one row per turn) and ``questions`` (one row per question). Every later stage
reads only those tables, so the quirks of each file format end here.

Bad input stops with a :class:`DataError` that names the file, the record and what is wrong;
nothing is written before the whole input has been read and checked.

The token conventions of the paper's Tables 1 and 2 (study §5) live here too: a conversation
counts the o200k tokens of its utterance texts joined by newlines; a question counts its bare
text; the median is the upper median; the mean is rounded half up.
"""

from __future__ import annotations

import ast
import calendar
import csv
import hashlib
import io
import json
import math
import random
import re
import urllib.error
import urllib.request
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from memcost import paper
from memcost.datasets import DATASETS, DISPLAY_NAMES, DataError, check_dataset
from memcost.io import atomic_path, write_csv, write_parquet, write_text
from memcost.paths import RAW_DIR, REPO_ROOT, SAMPLE_DIR, DatasetPaths, RunPaths

# --- Datasets, their files and their public homes ----------------------------------------------

# LoCoMo's own evaluation code numbers the categories this way (study §5, §10). Other papers
# label them differently; the published counts below are the check that the mapping is right.
LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi_hop",
    2: "temporal",
    3: "open_domain",
    4: "single_hop",
    5: "adversarial",
}
LOCOMO_CATEGORY_COUNTS: dict[int, int] = {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}
LOCOMO_FULL_SAMPLES = 10  # locomo10.json holds ten conversations
# Adversarial questions have no gold answer, only the trap (`adversarial_answer`); the correct
# behaviour is to say the conversation does not tell. LoCoMo's scorer accepts answers containing
# "not mentioned" or "no information available" for them.
LOCOMO_ABSTENTION_ANSWER = "Not mentioned in the conversation"
LOCOMO_FILE = "locomo10.json"

LONGMEMEVAL_FILES: dict[str, str] = {
    "s": "longmemeval_s_cleaned.json",
    "m": "longmemeval_m_cleaned.json",
    "oracle": "longmemeval_oracle.json",
}
LONGMEMEVAL_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "temporal-reasoning",
    "knowledge-update",
    "multi-session",
)

PERSONAMEM_CSV = "benchmark/text/benchmark.csv"
PERSONAMEM_HISTORY_DIR = "data/chat_history_32k"
PERSONAMEM_REQUIRED_COLUMNS: tuple[str, ...] = (
    "persona_id",
    "chat_history_32k_link",
    "user_query",
    "correct_answer",
    "incorrect_answers",
    "pref_type",
)
# The paper's PersonaMem v2 subset (study §5): how it was drawn is not stated.
PERSONAMEM_PAPER_HISTORIES = 222
PERSONAMEM_PAPER_QUESTIONS = 589

# Public homes. The revisions are the ones other public evaluations pin for these files; the
# sha256 of what was actually read is recorded in the manifest either way, and `revision`
# overrides them.
GITHUB_RAW = "https://raw.githubusercontent.com"
LOCOMO_REPO = "snap-research/locomo"
LOCOMO_REPO_FILE = "data/locomo10.json"
LOCOMO_REVISION = "3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376"
LONGMEMEVAL_REPO = "xiaowu0162/longmemeval-cleaned"
LONGMEMEVAL_REVISION = "98d7416c24c778c2fee6e6f3006e7a073259d48f"
PERSONAMEM_REPO = "bowen-upenn/PersonaMem-v2"
PERSONAMEM_REVISION = "b7b42b78917157afed063527a1c959e98f6109f2"

_ROLES = frozenset({"user", "assistant", "system"})
_HEX40 = re.compile(r"^[0-9a-f]{40}$")


class DataWarning(UserWarning):
    """Input that loads but deserves attention (e.g. LoCoMo category counts that differ)."""


# --- Table schemas (docs/architecture.md) -------------------------------------------------------

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
TABLE_COLUMNS: tuple[str, ...] = ("dataset", "n", "min", "max", "median", "mean")


def _frame(columns: Mapping[str, list[Any]], schema: pa.Schema) -> pd.DataFrame:
    """A DataFrame whose dtypes match ``schema`` (nullable ints and bools stay nullable)."""
    data: dict[str, Any] = {}
    for fld in schema:
        values = columns[fld.name]
        if pa.types.is_string(fld.type):
            data[fld.name] = pd.array(values, dtype="str")
        elif pa.types.is_int64(fld.type):
            nullable = any(v is None for v in values)
            data[fld.name] = pd.array(values, dtype="Int64") if nullable else np.asarray(
                values, dtype=np.int64
            )
        elif pa.types.is_boolean(fld.type):
            nullable = any(v is None for v in values)
            data[fld.name] = pd.array(values, dtype="boolean") if nullable else np.asarray(
                values, dtype=bool
            )
        else:  # lists stay Python objects; the parquet schema gives them their type
            data[fld.name] = pd.Series(values, dtype=object)
    return pd.DataFrame(data, columns=list(schema.names))


class _Rows:
    """Column-wise accumulator: appending to lists is the cheap way to build 250k-row tables."""

    def __init__(self, names: Iterable[str]):
        self.columns: dict[str, list[Any]] = {name: [] for name in names}

    def add(self, **row: Any) -> None:
        for name, values in self.columns.items():
            values.append(row[name])


# --- Dates ---------------------------------------------------------------------------------------

_MONTHS: dict[str, int] = {}
for _number in range(1, 13):
    _MONTHS[calendar.month_name[_number].lower()] = _number
    _MONTHS[calendar.month_abbr[_number].lower()] = _number
_MONTHS["sept"] = 9

_LOCOMO_DATETIME = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?"  # 1:56 pm
    r"\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?\s*,?\s*(\d{4})\s*$",  # on 8 May, 2023
    re.IGNORECASE,
)
_LONGMEMEVAL_DATETIME = re.compile(
    r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*"  # 2023/05/20
    r"(?:\(\s*[A-Za-z]{3}\s*\))?\s*"  # (Sat)
    r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*$"  # 02:21
)


def _iso(year: int, month: int, day: int, hour: int, minute: int, second: int, text: str) -> str:
    try:
        return datetime(year, month, day, hour, minute, second).isoformat(timespec="seconds")
    except ValueError as exc:
        raise DataError(f"cannot parse date {text!r}: {exc}") from None


def parse_locomo_datetime(text: str) -> str:
    """LoCoMo's ``"1:56 pm on 8 May, 2023"`` → ``"2023-05-08T13:56:00"`` (ISO 8601)."""
    match = _LOCOMO_DATETIME.match(text) if isinstance(text, str) else None
    if not match:
        raise DataError(f"cannot parse date {text!r}; expected a LoCoMo date like "
                        "'1:56 pm on 8 May, 2023'")
    hour, minute, half, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None:
        raise DataError(f"cannot parse date {text!r}: unknown month {month_name!r}")
    hour_12 = int(hour)
    if not 1 <= hour_12 <= 12:
        raise DataError(f"cannot parse date {text!r}: hour {hour_12} is not on a 12-hour clock")
    hour_24 = hour_12 % 12 + (12 if half.lower() == "p" else 0)
    return _iso(int(year), month, int(day), hour_24, int(minute), 0, text)


def parse_longmemeval_datetime(text: str) -> str:
    """LongMemEval's ``"2023/05/20 (Sat) 02:21"`` → ``"2023-05-20T02:21:00"`` (ISO 8601).

    The weekday in brackets is redundant with the date and is not checked.
    """
    match = _LONGMEMEVAL_DATETIME.match(text) if isinstance(text, str) else None
    if not match:
        raise DataError(f"cannot parse date {text!r}; expected a LongMemEval date like "
                        "'2023/05/20 (Sat) 02:21'")
    year, month, day, hour, minute, second = match.groups()
    return _iso(int(year), int(month), int(day), int(hour), int(minute), int(second or 0), text)


# --- Sources: the bundled sample, a local path, or a download ------------------------------------


@dataclass(frozen=True)
class DataSource:
    """Where a dataset's raw files are and where they came from (for the manifest).

    ``path`` is the file the loader opens (for PersonaMem v2 the benchmark CSV); ``root`` is the
    folder PersonaMem's chat-history links are relative to.
    """

    dataset: str
    path: Path
    root: Path
    origin: str  # "sample" | "local" | "download"
    url: str | None = None
    repo: str | None = None
    revision: str | None = None  # as requested
    resolved_revision: str | None = None  # the commit the request resolved to, when known

    def describe(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "origin": self.origin,
            "path": _display_path(self.path),
            "url": self.url,
            "repo": self.repo,
            "revision": self.revision,
            "resolved_revision": self.resolved_revision,
        }


def _display_path(path: Path) -> str:
    """Paths inside the repository are recorded relative to it, so manifests travel."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def sample_path(dataset: str, *, longmemeval_file: str = "s",
                sample_dir: Path = SAMPLE_DIR) -> Path:
    """The bundled sample's file for ``dataset`` (written by ``python -m memcost.samples``)."""
    check_dataset(dataset)
    if dataset == "locomo":
        return sample_dir / "locomo" / LOCOMO_FILE
    if dataset == "longmemeval":
        return sample_dir / "longmemeval" / _longmemeval_filename(longmemeval_file)
    return sample_dir / "personamem_v2" / PERSONAMEM_CSV


def _longmemeval_filename(variant: str) -> str:
    if variant not in LONGMEMEVAL_FILES:
        raise DataError(f"unknown LongMemEval file {variant!r}; valid: "
                        f"{', '.join(LONGMEMEVAL_FILES)} ({', '.join(LONGMEMEVAL_FILES.values())})")
    return LONGMEMEVAL_FILES[variant]


def _personamem_root(csv_path: Path) -> Path:
    """The dataset root of a benchmark CSV: links in the CSV are relative to it."""
    csv_path = csv_path.resolve()
    if csv_path.parent.name == "text" and csv_path.parent.parent.name == "benchmark":
        return csv_path.parent.parent.parent
    return csv_path.parent


def resolve_source(
    dataset: str,
    data_path: str | Path = "",
    *,
    download: bool = False,
    longmemeval_file: str = "s",
    revision: str = "",
    raw_dir: Path = RAW_DIR,
    endpoint: str | None = None,
) -> DataSource:
    """Decide which raw file to read: ``data_path`` if given, else a download (``download``),
    else the bundled sample. A folder is accepted where the dataset's file has a fixed name."""
    check_dataset(dataset)
    if data_path and download:
        raise DataError("give either data_path (a local file) or download=True, not both")
    if download:
        return download_dataset(dataset, revision=revision, longmemeval_file=longmemeval_file,
                                raw_dir=raw_dir, endpoint=endpoint)
    if not data_path:
        path = sample_path(dataset, longmemeval_file=longmemeval_file)
        if not path.is_file():
            raise DataError(
                f"{path}: bundled sample not found; rebuild it with `python -m memcost.samples`, "
                "or pass data_path to a local copy of the dataset"
            )
        root = _personamem_root(path) if dataset == "personamem_v2" else path.parent
        return DataSource(dataset, path, root, "sample")

    path = Path(data_path).expanduser()
    if path.is_dir():
        if dataset == "locomo":
            candidates = [path / LOCOMO_FILE, path / "data" / LOCOMO_FILE]
        elif dataset == "longmemeval":
            name = _longmemeval_filename(longmemeval_file)
            candidates = [path / name, path / name.replace("_cleaned", "")]
        else:
            candidates = [path / PERSONAMEM_CSV]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise DataError(f"{path}: folder has no {DISPLAY_NAMES[dataset]} file; looked for "
                            + ", ".join(str(c.relative_to(path)) for c in candidates))
        path = found
    elif not path.exists():
        raise DataError(f"{path}: file not found (data_path for {DISPLAY_NAMES[dataset]})")
    root = _personamem_root(path) if dataset == "personamem_v2" else path.parent
    return DataSource(dataset, path.resolve(), root, "local")


def _offline_hint(dataset: str, what: str) -> str:
    return (
        f"With no network, fetch {what} another way and pass data_path='/path/to/it' instead "
        f"(or leave data_path empty and download=False to use the bundled {DISPLAY_NAMES[dataset]} "
        "sample)."
    )


def download_dataset(
    dataset: str,
    *,
    revision: str = "",
    longmemeval_file: str = "s",
    raw_dir: Path = RAW_DIR,
    endpoint: str | None = None,
    timeout: float = 60.0,
) -> DataSource:
    """Fetch a dataset from its public home into ``raw_dir/<dataset>/<revision>/`` (once).

    A file already there is reused without touching the network; downloaded files are never
    modified. ``endpoint`` replaces the host (a GitHub-raw or Hugging Face mirror).
    """
    check_dataset(dataset)
    if dataset == "locomo":
        return _download_locomo(revision or LOCOMO_REVISION, raw_dir, endpoint or GITHUB_RAW,
                                timeout)
    if dataset == "longmemeval":
        return _download_longmemeval(revision or LONGMEMEVAL_REVISION,
                                     _longmemeval_filename(longmemeval_file), raw_dir, endpoint)
    return _download_personamem(revision or PERSONAMEM_REVISION, raw_dir, endpoint)


def _download_locomo(revision: str, raw_dir: Path, base: str, timeout: float) -> DataSource:
    url = f"{base.rstrip('/')}/{LOCOMO_REPO}/{revision}/{LOCOMO_REPO_FILE}"
    target = raw_dir / "locomo" / revision / LOCOMO_FILE
    resolved = revision if _HEX40.match(revision) else None
    if not target.is_file():
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
                payload = response.read()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise DataError(f"could not download LoCoMo from {url}: {exc}. "
                            + _offline_hint("locomo", LOCOMO_FILE)) from exc
        with atomic_path(target) as tmp:
            tmp.write_bytes(payload)
    return DataSource("locomo", target, target.parent, "download", url=url, repo=LOCOMO_REPO,
                      revision=revision, resolved_revision=resolved)


def _hf_resolved_revision(repo: str, revision: str, endpoint: str | None) -> str | None:
    """The commit a branch or tag points to (None when it cannot be asked)."""
    if _HEX40.match(revision):
        return revision
    try:
        from huggingface_hub import HfApi

        return HfApi(endpoint=endpoint).dataset_info(repo, revision=revision).sha
    except Exception:  # noqa: BLE001 - the revision is provenance only; the sha256 is recorded
        return None


def _download_longmemeval(revision: str, filename: str, raw_dir: Path,
                          endpoint: str | None) -> DataSource:
    folder = raw_dir / "longmemeval" / revision
    target = folder / filename
    url = (f"{endpoint or 'https://huggingface.co'}/datasets/{LONGMEMEVAL_REPO}/resolve/"
           f"{revision}/{filename}")
    if not target.is_file():
        try:
            from huggingface_hub import hf_hub_download

            hf_hub_download(LONGMEMEVAL_REPO, filename, repo_type="dataset", revision=revision,
                            local_dir=folder, endpoint=endpoint)
        except Exception as exc:  # noqa: BLE001 - network, auth, missing file: same advice
            raise DataError(f"could not download {filename} from {url}: {exc}. "
                            + _offline_hint("longmemeval", filename)) from exc
    return DataSource("longmemeval", target, folder, "download", url=url, repo=LONGMEMEVAL_REPO,
                      revision=revision,
                      resolved_revision=_hf_resolved_revision(LONGMEMEVAL_REPO, revision, endpoint))


_DOWNLOAD_MARKER = ".memcost-download-complete"


def _download_personamem(revision: str, raw_dir: Path, endpoint: str | None) -> DataSource:
    root = raw_dir / "personamem_v2" / revision
    url = f"{endpoint or 'https://huggingface.co'}/datasets/{PERSONAMEM_REPO}/tree/{revision}"
    marker = root / _DOWNLOAD_MARKER  # a snapshot can be interrupted half-way; only a complete
    if not marker.is_file():  # one is reused without asking the network
        try:
            from huggingface_hub import snapshot_download

            snapshot_download(PERSONAMEM_REPO, repo_type="dataset", revision=revision,
                              local_dir=root, endpoint=endpoint,
                              allow_patterns=[PERSONAMEM_CSV, f"{PERSONAMEM_HISTORY_DIR}/*"])
        except Exception as exc:  # noqa: BLE001
            raise DataError(f"could not download PersonaMem v2 from {url}: {exc}. "
                            + _offline_hint("personamem_v2", "the dataset folder (with "
                                            f"{PERSONAMEM_CSV} and {PERSONAMEM_HISTORY_DIR}/)")
                            ) from exc
        write_text(marker, revision + "\n")
    return DataSource("personamem_v2", root / PERSONAMEM_CSV, root, "download", url=url,
                      repo=PERSONAMEM_REPO, revision=revision,
                      resolved_revision=_hf_resolved_revision(PERSONAMEM_REPO, revision, endpoint))


# --- Reading raw files ---------------------------------------------------------------------------


@dataclass
class RawFile:
    """One raw file as read: enough to prove later which bytes a run used."""

    path: str
    sha256: str
    bytes: int


def _read(path: Path, files: list[RawFile]) -> bytes:
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    data = path.read_bytes()
    files.append(RawFile(_display_path(path), hashlib.sha256(data).hexdigest(), len(data)))
    return data


def _parse_json(data: bytes, path: Path, dataset: str | None = None) -> Any:
    head = data[:2_000].lstrip()
    if dataset and head[:1] not in (b"[", b"{"):
        first_line = head.split(b"\n", 1)[0]
        if b"persona_id" in first_line and b"," in first_line:
            raise DataError(f"{path}: this looks like PersonaMem v2's benchmark CSV, not a "
                            f"{DISPLAY_NAMES[dataset]} JSON file; pass dataset='personamem_v2' "
                            "or the right file")
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno} "
                        f"(char {exc.pos}): {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start}): {exc.reason}") from None


def _guess_json_dataset(obj: Any) -> str | None:
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


def _expect(obj: Any, dataset: str, path: Path) -> None:
    guess = _guess_json_dataset(obj)
    if guess is not None and guess != dataset:
        what = "a PersonaMem v2 chat history" if guess == "personamem_v2" else (
            f"a {DISPLAY_NAMES[guess]} file")
        raise DataError(f"{path}: this looks like {what}, not a {DISPLAY_NAMES[dataset]} file; "
                        f"pass dataset='{guess}' or the right file")


_TYPE_NAMES = {str: "a string", list: "a list", dict: "an object", int: "an integer",
               bool: "true/false", float: "a number"}


def _type_name(types: type | tuple[type, ...]) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)


def _field(obj: Mapping[str, Any], key: str, types: type | tuple[type, ...], path: Path,
           where: str) -> Any:
    """``obj[key]``, required and of ``types``; otherwise an error naming file and record."""
    if key not in obj:
        raise DataError(f"{path}: {where}: missing field '{key}'")
    value = obj[key]
    wanted = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted):
        raise DataError(f"{path}: {where}: field '{key}' should be {_type_name(types)}, "
                        f"got {type(value).__name__} {_short(value)}")
    return value


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _answer_text(value: Any) -> str:
    """Gold answers are strings everywhere downstream (LoCoMo has some integers)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --- LoCoMo --------------------------------------------------------------------------------------

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D\d+:\d+")
_LOCOMO_QA_FIELDS = frozenset({"question", "answer", "evidence", "category", "adversarial_answer"})


def _locomo_category(item: Mapping[str, Any], path: Path, where: str) -> int:
    if "category" not in item:
        raise DataError(f"{path}: {where}: missing field 'category'")
    value = item["category"]
    # Some items in the public file carry the category as a string ("5").
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value not in LOCOMO_CATEGORIES:
        raise DataError(f"{path}: {where}: field 'category' should be an integer 1-5, "
                        f"got {_short(value)}")
    return value


def _locomo_evidence(value: Any, path: Path, where: str) -> list[str]:
    """Dialogue ids cited as evidence. The public file has lists of ids, ids joined by ';' in
    one string, and (adversarial items) a list printed as a string: take every ``D<n>:<m>``."""
    if value is None:
        return []
    if isinstance(value, str):
        return _DIA_ID.findall(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [d for v in value for d in _DIA_ID.findall(v)]
    raise DataError(f"{path}: {where}: field 'evidence' should be a list of dialogue ids, "
                    f"got {_short(value)}")


def load_locomo(source: DataSource | Path) -> BenchmarkData:
    """Read ``locomo10.json``: one conversation per sample, sessions in numeric order."""
    source = _as_source(source, "locomo")
    path, files = source.path, []
    obj = _parse_json(_read(path, files), path, "locomo")
    _expect(obj, "locomo", path)
    if not isinstance(obj, list):
        raise DataError(f"{path}: expected a JSON list of LoCoMo samples, got {type(obj).__name__}")
    turns, questions = _Rows(CONVERSATION_COLUMNS), _Rows(QUESTION_COLUMNS)
    seen: set[str] = set()
    for index, sample in enumerate(obj):
        if not isinstance(sample, dict):
            raise DataError(f"{path}: sample {index}: expected an object, got "
                            f"{type(sample).__name__}")
        sample_id = _field(sample, "sample_id", str, path, f"sample {index}")
        where = f"sample {sample_id!r} (index {index})"
        if sample_id in seen:
            raise DataError(f"{path}: {where}: sample_id appears twice")
        seen.add(sample_id)
        conversation = _field(sample, "conversation", dict, path, where)
        qa = _field(sample, "qa", list, path, where)
        if _locomo_turns(conversation, sample_id, path, where, turns) == 0:
            raise DataError(f"{path}: {where}: the conversation has no turns")
        for k, item in enumerate(qa):
            _locomo_question(item, k, sample_id, path, f"{where}, qa[{k}]", questions)

    data = BenchmarkData(
        dataset="locomo",
        conversations=_frame(turns.columns, CONVERSATION_SCHEMA),
        questions=_frame(questions.columns, QUESTION_SCHEMA),
        source=source,
        files=files,
    )
    data.checks["locomo_category_counts"] = _check_locomo_counts(data.questions, len(obj), data)
    return data


def _locomo_turns(conversation: Mapping[str, Any], sample_id: str, path: Path, where: str,
                  rows: _Rows) -> int:
    """Append one sample's turns; returns how many."""
    # Numeric order: session_10 comes after session_9, not after session_1.
    numbers = sorted(int(m.group(1)) for key in conversation if (m := _SESSION_KEY.match(key)))
    position = session_index = 0
    previous: str | None = None
    for number in numbers:
        key = f"session_{number}"
        turns = _field(conversation, key, list, path, where)
        if not turns:
            continue  # an empty session adds nothing to the history
        date_key = f"{key}_date_time"
        date_text = _field(conversation, date_key, str, path, where)
        try:
            when = parse_locomo_datetime(date_text)
        except DataError as exc:
            raise DataError(f"{path}: {where}, {date_key}: {exc}") from None
        if previous is not None and when < previous:
            warnings.warn(f"{path}: {where}: {key} ({when}) is dated before the session before "
                          f"it ({previous}); sessions are kept in numeric order", DataWarning,
                          stacklevel=3)
        previous = when
        for t, turn in enumerate(turns):
            twhere = f"{where}, {key}[{t}]"
            if not isinstance(turn, dict):
                raise DataError(f"{path}: {twhere}: expected a turn object, got "
                                f"{type(turn).__name__}")
            speaker = _field(turn, "speaker", str, path, twhere)
            dia_id = _field(turn, "dia_id", str, path, twhere)
            twhere = f"{where}, {key}[{t}] (dia_id {dia_id})"
            text = _field(turn, "text", str, path, twhere)
            caption = turn.get("blip_caption")
            if caption is not None and not isinstance(caption, str):
                raise DataError(f"{path}: {twhere}: field 'blip_caption' should be a string, "
                                f"got {type(caption).__name__}")
            rows.add(conversation_id=sample_id, session_index=session_index, session_id=key,
                     session_datetime=when, turn_index=t, position=position, speaker=speaker,
                     role="user", text=text, dia_id=dia_id, has_answer=None,
                     image_caption=caption)
            position += 1
        session_index += 1
    return position


def _locomo_question(item: Any, k: int, sample_id: str, path: Path, where: str,
                     rows: _Rows) -> None:
    if not isinstance(item, dict):
        raise DataError(f"{path}: {where}: expected a question object, got {type(item).__name__}")
    question = _field(item, "question", str, path, where)
    category = _locomo_category(item, path, where)
    if item.get("answer") is None:
        if category != 5:
            raise DataError(f"{path}: {where}: missing field 'answer' (category {category})")
        answer = LOCOMO_ABSTENTION_ANSWER
    else:
        answer = _answer_text(_field(item, "answer", (str, int, float), path, where))
    adversarial = item.get("adversarial_answer")
    if adversarial is not None:
        adversarial = _answer_text(
            _field(item, "adversarial_answer", (str, int, float), path, where))
    extra = {key: value for key, value in item.items() if key not in _LOCOMO_QA_FIELDS}
    rows.add(question_id=f"{sample_id}-q{k}", conversation_id=sample_id, question=question,
             answer=answer, adversarial_answer=adversarial,
             category=LOCOMO_CATEGORIES[category], category_id=category, question_date=None,
             evidence=_locomo_evidence(item.get("evidence"), path, where),
             is_abstention=category == 5, options=None,
             extra=json.dumps(extra, ensure_ascii=False, sort_keys=True))


def _check_locomo_counts(questions: pd.DataFrame, n_samples: int,
                         data: BenchmarkData) -> dict[str, Any]:
    """On the full file, the category counts must be the published ones (study §10: label
    mix-ups are the most common error in published LoCoMo numbers)."""
    found = {int(k): int(v) for k, v in Counter(questions["category_id"].tolist()).items()}
    result: dict[str, Any] = {"checked": n_samples == LOCOMO_FULL_SAMPLES,
                              "expected": LOCOMO_CATEGORY_COUNTS, "found": found, "ok": None}
    if not result["checked"]:
        return result
    result["ok"] = found == LOCOMO_CATEGORY_COUNTS
    if not result["ok"]:
        lines = [f"  {cid} {LOCOMO_CATEGORIES[cid]:<12} expected {LOCOMO_CATEGORY_COUNTS[cid]:>4}, "
                 f"found {found.get(cid, 0):>4}" for cid in LOCOMO_CATEGORIES]
        message = ("\n" + "!" * 78 + "\nLoCoMo CATEGORY COUNTS DIFFER FROM THE PUBLISHED ONES "
                   f"({data.source.path}).\nThe file may be a different release, or categories "
                   "may be mislabelled; per-category results will not be comparable.\n"
                   + "\n".join(lines) + "\n" + "!" * 78)
        warnings.warn(message, DataWarning, stacklevel=3)
        data.notes.append(message.strip("\n!"))
    return result


# --- LongMemEval ---------------------------------------------------------------------------------


def load_longmemeval(source: DataSource | Path) -> BenchmarkData:
    """Read a LongMemEval file (S, M or oracle): each question is its own user, its haystack the
    history. Sessions are put in chronological order (the oracle file is not sorted).

    The file is parsed whole: fine for S (~280 MB, ~1.3 GB resident), but M (~2.7 GB) needs a
    machine with well over 10 GB of memory.
    """
    source = _as_source(source, "longmemeval")
    path, files = source.path, []
    obj = _parse_json(_read(path, files), path, "longmemeval")
    _expect(obj, "longmemeval", path)
    if not isinstance(obj, list):
        raise DataError(f"{path}: expected a JSON list of LongMemEval questions, got "
                        f"{type(obj).__name__}")
    turns, questions = _Rows(CONVERSATION_COLUMNS), _Rows(QUESTION_COLUMNS)
    seen: set[str] = set()
    known = {"question_id", "question_type", "question", "answer", "question_date",
             "haystack_session_ids", "haystack_dates", "haystack_sessions", "answer_session_ids"}
    for index, item in enumerate(obj):
        if not isinstance(item, dict):
            raise DataError(f"{path}: question {index}: expected an object, got "
                            f"{type(item).__name__}")
        qid = _field(item, "question_id", str, path, f"question {index}")
        where = f"question_id {qid!r} (index {index})"
        if qid in seen:
            raise DataError(f"{path}: {where}: question_id appears twice")
        seen.add(qid)
        qtype = _field(item, "question_type", str, path, where)
        question = _field(item, "question", str, path, where)
        answer = _answer_text(_field(item, "answer", (str, int, float), path, where))
        date_text = _field(item, "question_date", str, path, where)
        try:
            question_date = parse_longmemeval_datetime(date_text)
        except DataError as exc:
            raise DataError(f"{path}: {where}, question_date: {exc}") from None
        ids = _field(item, "haystack_session_ids", list, path, where)
        dates = _field(item, "haystack_dates", list, path, where)
        sessions = _field(item, "haystack_sessions", list, path, where)
        evidence = _field(item, "answer_session_ids", list, path, where)
        if not len(ids) == len(dates) == len(sessions):
            raise DataError(f"{path}: {where}: haystack_session_ids ({len(ids)}), haystack_dates "
                            f"({len(dates)}) and haystack_sessions ({len(sessions)}) must have "
                            "the same length")
        _longmemeval_turns(qid, ids, dates, sessions, path, where, turns)
        for e, value in enumerate(evidence):
            if not isinstance(value, str):
                raise DataError(f"{path}: {where}: answer_session_ids[{e}] should be a string, "
                                f"got {type(value).__name__}")
        extra = {key: value for key, value in item.items() if key not in known}
        questions.add(question_id=qid, conversation_id=qid, question=question, answer=answer,
                      adversarial_answer=None, category=qtype, category_id=None,
                      question_date=question_date, evidence=list(evidence),
                      is_abstention=qid.endswith("_abs"), options=None,
                      extra=json.dumps(extra, ensure_ascii=False, sort_keys=True))
    return BenchmarkData(
        dataset="longmemeval",
        conversations=_frame(turns.columns, CONVERSATION_SCHEMA),
        questions=_frame(questions.columns, QUESTION_SCHEMA),
        source=source,
        files=files,
    )


def _longmemeval_turns(qid: str, ids: list[Any], dates: list[Any], sessions: list[Any],
                       path: Path, where: str, rows: _Rows) -> None:
    parsed: list[str] = []
    for i, (session_id, date) in enumerate(zip(ids, dates, strict=True)):
        if not isinstance(session_id, str):
            raise DataError(f"{path}: {where}: haystack_session_ids[{i}] should be a string, "
                            f"got {type(session_id).__name__}")
        if not isinstance(date, str):
            raise DataError(f"{path}: {where}: haystack_dates[{i}] should be a string, got "
                            f"{type(date).__name__}")
        try:
            parsed.append(parse_longmemeval_datetime(date))
        except DataError as exc:
            raise DataError(f"{path}: {where}, haystack_dates[{i}] (session {session_id!r}): "
                            f"{exc}") from None
    # Stable sort: equal timestamps keep the file's order.
    order = sorted(range(len(parsed)), key=parsed.__getitem__)
    position = session_index = 0
    for i in order:
        session = sessions[i]
        swhere = f"{where}, session {ids[i]!r}"
        if not isinstance(session, list):
            raise DataError(f"{path}: {swhere}: expected a list of turns, got "
                            f"{type(session).__name__}")
        if not session:
            continue
        for t, turn in enumerate(session):
            twhere = f"{swhere} turn {t}"
            if not isinstance(turn, dict):
                raise DataError(f"{path}: {twhere}: expected a turn object, got "
                                f"{type(turn).__name__}")
            role = _field(turn, "role", str, path, twhere)
            if role not in _ROLES:
                raise DataError(f"{path}: {twhere}: unknown role {role!r} "
                                f"(expected {', '.join(sorted(_ROLES))})")
            content = _field(turn, "content", str, path, twhere)
            flag = turn.get("has_answer", False)
            if not isinstance(flag, bool):
                raise DataError(f"{path}: {twhere}: field 'has_answer' should be true/false, "
                                f"got {_short(flag)}")
            rows.add(conversation_id=qid, session_index=session_index, session_id=ids[i],
                     session_datetime=parsed[i], turn_index=t, position=position, speaker=role,
                     role=role, text=content, dia_id=None, has_answer=flag, image_caption=None)
            position += 1
        session_index += 1


# --- PersonaMem v2 -------------------------------------------------------------------------------


def _parse_literal(text: str) -> Any:
    """The CSV holds JSON or Python literals (``{'role': 'user', ...}``); accept both."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _resolve_link(root: Path, link: str) -> Path | None:
    """A chat-history link relative to the dataset root; a link that carries a machine-specific
    prefix before ``data/`` is re-rooted at that ``data/``."""
    relative = Path(link.replace("\\", "/"))
    candidates = [relative if relative.is_absolute() else root / relative]
    if "data" in relative.parts:
        candidates.append(root / Path(*relative.parts[relative.parts.index("data"):]))
    return next((c for c in candidates if c.is_file()), None)


def load_personamem_v2(source: DataSource | Path) -> BenchmarkData:
    """Read PersonaMem v2's benchmark CSV and the 32k chat histories its rows link to.

    One conversation per history file (its stem is the conversation id), one session holding
    the whole flat history (it has no sessions and no timestamps); one question per CSV row.
    """
    source = _as_source(source, "personamem_v2")
    path, root, files = source.path, source.root, []
    data = _read(path, files)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start}): {exc.reason}") from None
    if text.lstrip().startswith(("[", "{")):
        guess = _guess_json_dataset(_parse_literal(text) if len(text) < 50_000_000 else None)
        what = f"a {DISPLAY_NAMES[guess]} JSON file" if guess else "a JSON file"
        raise DataError(f"{path}: this looks like {what}, not PersonaMem v2's benchmark CSV "
                        f"({PERSONAMEM_CSV})" + (f"; pass dataset='{guess}'" if guess else ""))
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = list(reader.fieldnames or [])
        rows = list(reader)
    except csv.Error as exc:
        raise DataError(f"{path}: not a readable CSV: {exc}") from None
    missing = [c for c in PERSONAMEM_REQUIRED_COLUMNS if c not in header]
    if missing:
        raise DataError(f"{path}: not a PersonaMem v2 benchmark CSV: missing column(s) "
                        f"{', '.join(missing)} (found: {', '.join(header[:12]) or 'none'})")

    turns, questions = _Rows(CONVERSATION_COLUMNS), _Rows(QUESTION_COLUMNS)
    by_link: dict[str, str] = {}
    owners: dict[str, str] = {}
    options_count: Counter[int] = Counter()
    for row_index, row in enumerate(rows):
        qid = f"pm-{row_index}"
        where = f"row {row_index} ({qid}, line {row_index + 2}"
        where += f", persona_id {row.get('persona_id')!r})" if row.get("persona_id") else ")"
        if None in row or any(v is None for v in row.values()):
            raise DataError(f"{path}: {where}: the row has {'more' if None in row else 'fewer'} "
                            f"fields than the header ({len(header)})")
        for column in PERSONAMEM_REQUIRED_COLUMNS:
            if not row[column].strip():
                raise DataError(f"{path}: {where}: column '{column}' is empty")
        query = _parse_literal(row["user_query"])
        if isinstance(query, dict):
            content = query.get("content")
            if not isinstance(content, str) or not content.strip():
                raise DataError(f"{path}: {where}: column 'user_query' has no text 'content': "
                                f"{_short(row['user_query'])}")
            question = content
        elif row["user_query"].lstrip().startswith("{"):
            raise DataError(f"{path}: {where}: column 'user_query' is not a {{role, content}} "
                            f"literal: {_short(row['user_query'])}")
        else:
            question = row["user_query"]
        incorrect = _parse_literal(row["incorrect_answers"])
        if not isinstance(incorrect, list) or not all(isinstance(a, str) for a in incorrect):
            raise DataError(f"{path}: {where}: column 'incorrect_answers' should be a list of "
                            f"strings, got {_short(row['incorrect_answers'])}")
        options_count[1 + len(incorrect)] += 1
        link = row["chat_history_32k_link"].strip()
        if link not in by_link:
            by_link[link] = _personamem_history(root, link, path, where, owners, turns, files)
        extra = {k: v for k, v in row.items()
                 if k not in ("user_query", "correct_answer", "incorrect_answers", "pref_type")}
        questions.add(question_id=qid, conversation_id=by_link[link], question=question,
                      answer=row["correct_answer"], adversarial_answer=None,
                      category=row["pref_type"], category_id=None, question_date=None,
                      evidence=[], is_abstention=False,
                      options=[row["correct_answer"], *incorrect],
                      extra=json.dumps(extra, ensure_ascii=False, sort_keys=True))
    result = BenchmarkData(
        dataset="personamem_v2",
        conversations=_frame(turns.columns, CONVERSATION_SCHEMA),
        questions=_frame(questions.columns, QUESTION_SCHEMA),
        source=source,
        files=files,
    )
    odd = {n: c for n, c in options_count.items() if n != 4}
    if odd:
        result.notes.append(f"{path}: some rows do not have 4 options (options: rows) {odd}")
    return result


def _personamem_history(root: Path, link: str, csv_path: Path, where: str,
                        owners: dict[str, str], rows: _Rows, files: list[RawFile]) -> str:
    history_path = _resolve_link(root, link)
    if history_path is None:
        raise DataError(f"{csv_path}: {where}: chat history not found: {link!r} (relative to "
                        f"{root}); the history files belong under {root / PERSONAMEM_HISTORY_DIR}")
    conversation_id = history_path.stem
    if owners.setdefault(conversation_id, link) != link:
        raise DataError(f"{csv_path}: {where}: two different history links share the file name "
                        f"{conversation_id!r} ({owners[conversation_id]!r}, {link!r})")
    obj = _parse_json(_read(history_path, files), history_path)
    if isinstance(obj, dict) and "chat_history" in obj:
        messages = obj["chat_history"]
    elif isinstance(obj, list) and _guess_json_dataset(obj) is None:
        messages = obj
    else:
        _expect(obj, "personamem_v2", history_path)
        raise DataError(f"{history_path}: expected a chat history object with a "
                        "'chat_history' list")
    if not isinstance(messages, list) or not messages:
        raise DataError(f"{history_path}: 'chat_history' should be a non-empty list of "
                        "messages")
    for t, message in enumerate(messages):
        mwhere = f"chat_history[{t}]"
        if not isinstance(message, dict):
            raise DataError(f"{history_path}: {mwhere}: expected a message object, got "
                            f"{type(message).__name__}")
        role = _field(message, "role", str, history_path, mwhere)
        if role not in _ROLES:
            raise DataError(f"{history_path}: {mwhere}: unknown role {role!r} "
                            f"(expected {', '.join(sorted(_ROLES))})")
        content = _field(message, "content", str, history_path, mwhere)
        rows.add(conversation_id=conversation_id, session_index=0, session_id="history",
                 session_datetime=None, turn_index=t, position=t, speaker=role, role=role,
                 text=content, dia_id=None, has_answer=None, image_caption=None)
    return conversation_id


# --- Loading and selecting -----------------------------------------------------------------------


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
        return (f"{self.display_name}: {self.conversations['conversation_id'].nunique()} "
                f"conversations, {len(self.conversations)} turns, {len(self.questions)} questions")

    def conversation(self, conversation_id: str | None = None) -> pd.DataFrame:
        """The turns of one conversation (the first one by default)."""
        if conversation_id is None:
            conversation_id = self.conversations["conversation_id"].iloc[0]
        return self.conversations[self.conversations["conversation_id"] == conversation_id]


def _as_source(source: DataSource | Path | str, dataset: str) -> DataSource:
    if isinstance(source, DataSource):
        if source.dataset != dataset:
            raise DataError(f"{source.path}: source is for {source.dataset}, not {dataset}")
        return source
    path = Path(source)
    root = _personamem_root(path) if dataset == "personamem_v2" else path.parent
    return DataSource(dataset, path, root, "local")


_LOADERS = {
    "locomo": load_locomo,
    "longmemeval": load_longmemeval,
    "personamem_v2": load_personamem_v2,
}


def load(source: DataSource) -> BenchmarkData:
    """Read and check a dataset's raw files (see :func:`resolve_source` for which)."""
    return _LOADERS[check_dataset(source.dataset)](source)


def select(
    data: BenchmarkData,
    *,
    limit_conversations: int = 0,
    limit_questions: int = 0,
    sample_conversations: int = 0,
    sample_questions: int = 0,
    seed: int = 0,
) -> BenchmarkData:
    """Keep part of a dataset; 0 everywhere keeps all of it.

    Order of operations: a seeded sample of ``sample_conversations`` conversations, then the
    first ``limit_conversations`` of those; among their questions a seeded sample of
    ``sample_questions`` (which keeps at least one question per conversation when there are
    enough), then the first ``limit_questions``. Conversations left without a question are
    dropped (nothing would be asked about them). Everything keeps the source order, so the same
    parameters always select the same rows.
    """
    params = {"limit_conversations": limit_conversations, "limit_questions": limit_questions,
              "sample_conversations": sample_conversations, "sample_questions": sample_questions,
              "seed": seed}
    for name, value in params.items():
        if isinstance(value, bool) or not isinstance(value, int) or (value < 0 and name != "seed"):
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    conversation_ids = list(dict.fromkeys(data.conversations["conversation_id"].tolist()))
    if sample_conversations and sample_conversations < len(conversation_ids):
        rng = random.Random(f"memcost-conversations-{seed}")
        chosen = set(rng.sample(conversation_ids, sample_conversations))
        conversation_ids = [c for c in conversation_ids if c in chosen]
    if limit_conversations:
        conversation_ids = conversation_ids[:limit_conversations]

    questions = data.questions[data.questions["conversation_id"].isin(conversation_ids)]
    if sample_questions and sample_questions < len(questions):
        rng = random.Random(f"memcost-questions-{seed}")
        picked = _sample_covering(questions["conversation_id"].tolist(), sample_questions, rng)
        questions = questions.iloc[sorted(picked)]
    if limit_questions:
        questions = questions.iloc[:limit_questions]
    if questions.empty:
        raise DataError(f"{data.source.path}: the selection {params} leaves no questions")
    asked = set(questions["conversation_id"].tolist())
    kept = [c for c in conversation_ids if c in asked]
    conversations = data.conversations[data.conversations["conversation_id"].isin(kept)]
    selection = {**params, "conversations": len(kept), "questions": len(questions),
                 "of_conversations": len(dict.fromkeys(data.conversations["conversation_id"])),
                 "of_questions": len(data.questions)}
    return replace(data, conversations=conversations.reset_index(drop=True),
                   questions=questions.reset_index(drop=True), selection=selection,
                   notes=list(data.notes), checks=dict(data.checks))


def _sample_covering(groups: Sequence[str], n: int, rng: random.Random) -> list[int]:
    """``n`` indices drawn at random, at least one from every group when ``n`` allows it."""
    members: dict[str, list[int]] = defaultdict(list)
    for index, group in enumerate(groups):
        members[group].append(index)
    if n < len(members):
        return rng.sample(range(len(groups)), n)
    picked = [rng.choice(indices) for indices in members.values()]
    chosen = set(picked)
    rest = [i for i in range(len(groups)) if i not in chosen]
    return picked + rng.sample(rest, n - len(picked))


# --- The long-context rendering and the token conventions ----------------------------------------


def table_text(conversation: pd.DataFrame) -> str:
    """The text Table 1 counts (study §5): utterance texts joined by newlines, in order; no
    speakers, no dates."""
    ordered = _in_order(conversation)
    return "\n".join(ordered["text"].tolist())


def _in_order(conversation: pd.DataFrame) -> pd.DataFrame:
    positions = conversation["position"]
    return conversation if positions.is_monotonic_increasing else conversation.sort_values(
        "position", kind="stable")


def spoken_datetime(when: str) -> str:
    """``2023-05-08T13:56:00`` → ``Monday 8 May 2023, 13:56``: weekday and a written-out date,
    because the gold answers of temporal questions are phrased that way."""
    moment = datetime.fromisoformat(when)
    return (f"{calendar.day_name[moment.weekday()]} {moment.day} "
            f"{calendar.month_name[moment.month]} {moment.year}, {moment:%H:%M}")


def session_header(number: int, when: str | None) -> str:
    """``[Session 3 · Monday 8 May 2023, 13:56]`` (``[Session 3]`` without a date)."""
    if not when:
        return f"[Session {number}]"
    return f"[Session {number} · {spoken_datetime(when)}]"


# Between two sessions of a rendered history: a blank line.
SESSION_SEPARATOR = "\n\n"


def render_history(conversation: pd.DataFrame, *, captions: bool = True) -> str:
    """One user's history as the long-context baseline sends it (study §3.2): sessions in
    order, each headed by its date and time, each turn ``Speaker: text``; a shared image is
    described as ``[shares a photo: <caption>]`` after the text.

    Sessions keep their own numbers (``session_index + 1``), so a window over the last turns
    still says which session they come from.
    """
    return SESSION_SEPARATOR.join(text for _, text in render_sessions(conversation,
                                                                       captions=captions))


def render_sessions(conversation: pd.DataFrame, *,
                    captions: bool = True) -> list[tuple[int, str]]:
    """:func:`render_history` one session at a time: ``[(session_index, text), ...]`` in order,
    joined by :data:`SESSION_SEPARATOR` they are the history. Long-context prompts that keep only
    some sessions (the newest ones, or the evidence) are built from these pieces, so each session
    is rendered and counted once."""
    ordered = _in_order(conversation)
    out: list[tuple[int, str]] = []
    lines: list[str] = []
    current: int | None = None
    for session, when, speaker, text, caption in zip(
        ordered["session_index"].tolist(), ordered["session_datetime"].tolist(),
        ordered["speaker"].tolist(), ordered["text"].tolist(),
        ordered["image_caption"].tolist(), strict=True,
    ):
        if session != current:
            if current is not None:
                out.append((current, "\n".join(lines)))
            current, lines = int(session), []
            lines.append(session_header(int(session) + 1, when if isinstance(when, str) else None))
        line = f"{speaker}: {text}"
        if captions and isinstance(caption, str) and caption:
            line += f" [shares a photo: {caption}]"
        lines.append(line)
    if current is not None:
        out.append((current, "\n".join(lines)))
    return out


def _count(texts: list[str], desc: str) -> list[int]:
    """Token counts in batches (tiktoken's threads), with a progress bar for large inputs."""
    from tqdm import tqdm

    from memcost.tokens import count_tokens_batch

    total_chars = sum(len(t) for t in texts)
    if total_chars < 5_000_000:
        return count_tokens_batch(texts)
    counts: list[int] = []
    batch = 16
    with tqdm(total=len(texts), desc=desc, unit="text") as bar:
        for start in range(0, len(texts), batch):
            chunk = texts[start:start + batch]
            counts.extend(count_tokens_batch(chunk))
            bar.update(len(chunk))
    return counts


def conversation_stats(conversations: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Per conversation: sessions, turns, questions, Table-1 tokens (``text_tokens``) and the
    tokens of the long-context rendering (``history_tokens``, what is billed)."""
    ids: list[str] = []
    texts: list[str] = []
    rendered: list[str] = []
    sessions: list[int] = []
    turns: list[int] = []
    first: list[str | None] = []
    last: list[str | None] = []
    for conversation_id, group in conversations.groupby("conversation_id", sort=False):
        ids.append(str(conversation_id))
        texts.append(table_text(group))
        rendered.append(render_history(group))
        sessions.append(int(group["session_index"].nunique()))
        turns.append(len(group))
        dates = group["session_datetime"].dropna()
        first.append(str(dates.min()) if len(dates) else None)
        last.append(str(dates.max()) if len(dates) else None)
    asked = Counter(questions["conversation_id"].tolist())
    columns = {
        "conversation_id": ids,
        "n_sessions": sessions,
        "n_turns": turns,
        "n_questions": [asked.get(c, 0) for c in ids],
        "text_tokens": _count(texts, "tokens (utterances)"),
        "history_tokens": _count(rendered, "tokens (long-context rendering)"),
        "first_session_datetime": first,
        "last_session_datetime": last,
    }
    return _frame(columns, STATS_SCHEMA)


def question_tokens(questions: pd.DataFrame) -> list[int]:
    """Tokens of each bare question text (Table 2)."""
    return _count(questions["question"].tolist(), "tokens (questions)")


def round_half_up(value: Fraction | float | int, decimals: int = 0) -> int | float:
    """Round halves away from zero (the usual convention), exactly for fractions; Python's
    ``round`` rounds halves to even."""
    scaled = Fraction(value) * 10**decimals
    rounded = math.floor(scaled + Fraction(1, 2)) if scaled >= 0 else -math.floor(
        -scaled + Fraction(1, 2))
    return int(rounded) if decimals == 0 else rounded / 10**decimals


def summarize_counts(values: Sequence[int], *, mean_decimals: int) -> dict[str, int | float]:
    """``n, min, max, median, mean`` with the paper's conventions: the median is the upper
    median (``sorted[n // 2]``) and the mean is rounded half up to ``mean_decimals``."""
    ordered = sorted(int(v) for v in values)
    if not ordered:
        raise ValueError("no values to summarise")
    n = len(ordered)
    return {"n": n, "min": ordered[0], "max": ordered[-1], "median": ordered[n // 2],
            "mean": round_half_up(Fraction(sum(ordered), n), mean_decimals)}


def token_table(dataset: str, values: Sequence[int], *, mean_decimals: int) -> pd.DataFrame:
    """One row ``dataset,n,min,max,median,mean`` (the dataset as the paper names it)."""
    row = {"dataset": DISPLAY_NAMES.get(dataset, dataset),
           **summarize_counts(values, mean_decimals=mean_decimals)}
    return pd.DataFrame([row], columns=list(TABLE_COLUMNS))


def table1(dataset: str, stats: pd.DataFrame) -> pd.DataFrame:
    """Table 1: tokens per conversation; the mean rounded to an integer."""
    return token_table(dataset, stats["text_tokens"].tolist(), mean_decimals=0)


def table2(dataset: str, counts: Sequence[int]) -> pd.DataFrame:
    """Table 2: tokens per question; the mean rounded to one decimal."""
    return token_table(dataset, counts, mean_decimals=1)


def table_markdown(table: pd.DataFrame, *, title: str = "", note: str = "") -> str:
    """A small Markdown table (numbers with thousands separators, as in the paper)."""

    def cell(value: Any) -> str:
        if isinstance(value, bool) or value is None:
            return str(value)
        if isinstance(value, (int, np.integer)):
            return f"{int(value):,}"
        if isinstance(value, (float, np.floating)):
            return f"{float(value):,.1f}"
        return str(value)

    header = list(table.columns)
    lines = [f"**{title}**", ""] if title else []
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |"
              for row in table.itertuples(index=False)]
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def questions_per_category(questions: pd.DataFrame) -> pd.DataFrame:
    """Questions (and abstention questions) per category, LoCoMo in category-number order."""
    grouped = questions.groupby(["category"], sort=False).agg(
        category_id=("category_id", "first"),
        questions=("question_id", "size"),
        abstention=("is_abstention", "sum"),
    ).reset_index()
    grouped["abstention"] = grouped["abstention"].astype("int64")
    key = grouped["category_id"].fillna(10**6).astype("int64")
    return grouped.assign(_key=key).sort_values(["_key", "category"]).drop(columns="_key") \
        .reset_index(drop=True)[["category", "category_id", "questions", "abstention"]]


# --- Preparing and writing ------------------------------------------------------------------------


@dataclass
class Prepared:
    """Everything notebook 00 writes, computed before anything is written."""

    data: BenchmarkData
    stats: pd.DataFrame
    question_tokens: list[int]
    table1: pd.DataFrame
    table2: pd.DataFrame
    categories: pd.DataFrame


def prepare(data: BenchmarkData) -> Prepared:
    """Count tokens and build Tables 1 and 2 for a (selected) dataset."""
    stats = conversation_stats(data.conversations, data.questions)
    counts = question_tokens(data.questions)
    return Prepared(
        data=data,
        stats=stats,
        question_tokens=counts,
        table1=table1(data.dataset, stats),
        table2=table2(data.dataset, counts),
        categories=questions_per_category(data.questions),
    )




def paper_comparison(prepared: Prepared) -> pd.DataFrame:
    """Our Tables 1 and 2 next to the paper's rows, with a column saying whether they match."""
    rows = []
    for name, ours, published in (("Table 1 (conversation)", prepared.table1, paper.TABLE1),
                                  ("Table 2 (question)", prepared.table2, paper.TABLE2)):
        mine = tuple(ours.iloc[0][c] for c in TABLE_COLUMNS[1:])
        theirs = published[prepared.data.dataset]
        rows.append({"table": name, "source": "this run", **dict(zip(TABLE_COLUMNS[1:], mine,
                                                                     strict=True))})
        rows.append({"table": name, "source": "paper", **dict(zip(TABLE_COLUMNS[1:], theirs,
                                                                  strict=True))})
        rows[-2]["matches_paper"] = rows[-1]["matches_paper"] = bool(
            all(float(a) == float(b) for a, b in zip(mine, theirs, strict=True)))
    return pd.DataFrame(rows, dtype=object)  # object: integers stay integers next to 12.0


TABLE1_NOTE = ("o200k_base tokens of each conversation's utterance texts joined by newlines "
               "(no speakers, no dates); median = upper median; mean rounded half up.")
TABLE2_NOTE = ("o200k_base tokens of each bare question text; median = upper median; mean "
               "rounded half up to one decimal.")


def write_prepared(ds: DatasetPaths, prepared: Prepared) -> dict[str, Path]:
    """Write the data files and tables of one dataset (each file atomically)."""
    ds.ensure()
    name = prepared.data.display_name
    written = {
        "conversations": ds.conversations,
        "questions": ds.questions,
        "conversation_stats": ds.data / "conversation_stats.parquet",
        "table1": ds.tables / "table1_conversation_tokens.csv",
        "table1_md": ds.tables / "table1_conversation_tokens.md",
        "table2": ds.tables / "table2_question_tokens.csv",
        "table2_md": ds.tables / "table2_question_tokens.md",
        "questions_per_category": ds.tables / "questions_per_category.csv",
    }
    write_parquet(written["conversations"], prepared.data.conversations, schema=CONVERSATION_SCHEMA)
    write_parquet(written["questions"], prepared.data.questions, schema=QUESTION_SCHEMA)
    write_parquet(written["conversation_stats"], prepared.stats, schema=STATS_SCHEMA)
    write_csv(written["table1"], prepared.table1)
    write_text(written["table1_md"], table_markdown(
        prepared.table1, title=f"Table 1 — {name}: tokens per conversation", note=TABLE1_NOTE))
    write_csv(written["table2"], prepared.table2)
    write_text(written["table2_md"], table_markdown(
        prepared.table2, title=f"Table 2 — {name}: tokens per question", note=TABLE2_NOTE))
    write_csv(written["questions_per_category"], prepared.categories)
    return written


def provenance(data: BenchmarkData) -> dict[str, Any]:
    """What the manifest records about the data: source, revision, every raw file's sha256,
    the selection and the checks."""
    return {**data.source.describe(), "files": [vars(f) for f in data.files],
            "selection": data.selection, "checks": data.checks}


def record_provenance(run: RunPaths, data: BenchmarkData) -> None:
    """``manifest["provenance"][<dataset>]``, so a run names the exact bytes it used."""
    from memcost.manifest import set_entry

    set_entry(run, "provenance", data.dataset, provenance(data))


def prepare_metrics(prepared: Prepared,
                    written: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """The step's metrics (``metrics/00_prepare_data.json``), read by the report and tests."""
    from memcost.tokens import tokenizer_info

    data = prepared.data
    stats = prepared.stats
    return {
        "dataset": data.dataset,
        "source": data.source.describe(),
        "raw_files": len(data.files),
        "raw_sha256": data.files[0].sha256 if data.files else None,  # main file; all: manifest
        "selection": data.selection,
        "n_conversations": int(len(stats)),
        "n_questions": int(len(data.questions)),
        "n_sessions": int(stats["n_sessions"].sum()),
        "n_turns": int(stats["n_turns"].sum()),
        "table1": _plain(prepared.table1.iloc[0].to_dict()),
        "table2": _plain(prepared.table2.iloc[0].to_dict()),
        "matches_paper": {
            row.table: bool(row.matches_paper)
            for row in paper_comparison(prepared).drop_duplicates("table").itertuples()},
        "history_tokens": summarize_counts(stats["history_tokens"].tolist(), mean_decimals=0),
        "questions_per_category": {
            row.category: int(row.questions) for row in prepared.categories.itertuples()},
        "abstention_questions": int(data.questions["is_abstention"].sum()),
        "checks": data.checks,
        "notes": data.notes,
        "tokenizer": tokenizer_info(),
        "outputs": {k: _display_path(v) for k, v in (written or {}).items()},
    }


def _plain(row: Mapping[str, Any]) -> dict[str, Any]:
    """numpy scalars → Python numbers, so JSON files hold numbers, not strings."""
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in row.items()}


def plot_conversation_lengths(stats: pd.DataFrame, dataset: str) -> Any:
    """Histogram of tokens per conversation: the Table-1 text and the long-context rendering."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    values = np.concatenate([stats["text_tokens"].to_numpy(), stats["history_tokens"].to_numpy()])
    bins = np.histogram_bin_edges(values, bins=int(min(30, max(6, len(stats)))))
    series = (("utterance text (Table 1)", "text_tokens", "#1f77b4"),
              ("long-context rendering (speakers, dates)", "history_tokens", "#d62728"))
    for label, column, color in series:
        column_values = stats[column].to_numpy()
        ax.hist(column_values, bins=bins, alpha=0.55, color=color, label=label)
        median = sorted(column_values.tolist())[len(column_values) // 2]
        ax.axvline(median, color=color, linestyle="--", linewidth=1.2)
    ax.set_xlabel("o200k tokens per conversation (dashed: upper median)")
    ax.set_ylabel("conversations")
    ax.set_title(f"{DISPLAY_NAMES.get(dataset, dataset)}: conversation length "
                 f"(n = {len(stats)})")
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


__all__ = [
    "CONVERSATION_COLUMNS",
    "CONVERSATION_SCHEMA",
    "DATASETS",
    "read_conversations",
    "read_prepared",
    "read_questions",
    "DISPLAY_NAMES",
    "LOCOMO_ABSTENTION_ANSWER",
    "LOCOMO_CATEGORIES",
    "LOCOMO_CATEGORY_COUNTS",
    "QUESTION_COLUMNS",
    "QUESTION_SCHEMA",
    "STATS_SCHEMA",
    "TABLE_COLUMNS",
    "BenchmarkData",
    "DataError",
    "DataSource",
    "DataWarning",
    "Prepared",
    "RawFile",
    "check_dataset",
    "conversation_stats",
    "download_dataset",
    "load",
    "load_locomo",
    "load_longmemeval",
    "load_personamem_v2",
    "paper_comparison",
    "parse_locomo_datetime",
    "parse_longmemeval_datetime",
    "plot_conversation_lengths",
    "prepare",
    "prepare_metrics",
    "provenance",
    "question_tokens",
    "questions_per_category",
    "record_provenance",
    "render_history",
    "render_sessions",
    "resolve_source",
    "round_half_up",
    "sample_path",
    "select",
    "session_header",
    "spoken_datetime",
    "summarize_counts",
    "table1",
    "table2",
    "table_markdown",
    "table_text",
    "token_table",
    "write_prepared",
]


# --- Readers of notebook 00's files (the one place that reads them) ----------------------------


def _read_prepared(ds: DatasetPaths, path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: not found; run notebooks/00_prepare_data.ipynb for dataset {ds.name!r} "
            "into this run directory first"
        )
    return pd.read_parquet(path)


def read_conversations(ds: DatasetPaths) -> pd.DataFrame:
    """``data/conversations.parquet`` (schema :data:`CONVERSATION_SCHEMA`), one row per turn."""
    return _read_prepared(ds, ds.conversations)


def read_questions(ds: DatasetPaths) -> pd.DataFrame:
    """``data/questions.parquet`` (schema :data:`QUESTION_SCHEMA`), one row per question."""
    return _read_prepared(ds, ds.questions)


def read_prepared(ds: DatasetPaths) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(conversations, questions)`` as notebook 00 wrote them."""
    return read_conversations(ds), read_questions(ds)
