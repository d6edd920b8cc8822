"""File helpers every stage shares: atomic writes (a killed run leaves the old file or the new one)
and append-only JSONL (a crash loses at most the item in flight)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm


def _file_mode() -> int:
    """The mode ``open()`` would give a new file under the umask (temporary files start at 0600)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path``, moved into place only if the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        if tmp.exists():
            os.chmod(tmp, _file_mode())  # readable as the umask allows, like any other file
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())


def json_safe(value: Any) -> Any:
    """Plain JSON values: numpy unwrapped, NaN and infinities null, other objects as text."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:  # most values: as they are
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):  # numpy scalar or array
        return json_safe(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    with atomic_open(path) as handle:
        json.dump(json_safe(obj), handle, indent=2, sort_keys=False)
        handle.write("\n")


_JSONL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # made once, not per line


def jsonl_line(record: Mapping[str, Any]) -> str:
    return _JSONL.encode(json_safe(record))


def write_jsonl(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> None:
    """Replace ``path`` with ``records`` atomically."""
    with atomic_open(path) as handle:
        for record in records:
            handle.write(jsonl_line(record) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    """A corrupt file is an error naming the file and the position."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno} (char {exc.pos}): "
            f"{exc.msg}"
        ) from exc


def yaml_problem(exc: Exception) -> str:
    """A YAML parse error in one line: ``line 4, column 1: expected ',' or ']'``."""
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return where + (getattr(exc, "problem", None) or str(exc).splitlines()[0])


def write_parquet(path: str | os.PathLike[str], frame: Any, **kwargs: Any) -> None:
    """Atomically; ``kwargs`` to ``to_parquet`` (a ``schema`` keeps an all-null column's type)."""
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False, **kwargs)


def write_csv(path: str | os.PathLike[str], frame: Any, **kwargs: Any) -> None:
    kwargs.setdefault("index", False)
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, **kwargs)


# A line that says a long wait is still alive (requests in flight, a rate limit, a batch being
# processed) starts with this on stderr; under the runner it also goes to the file the runner
# follows (PROGRESS_FILE), which shows it on the terminal even without --verbose.
SIGN_OF_LIFE = "[memcost] "
PROGRESS_FILE = "MEMCOST_PROGRESS_FILE"
PROGRESS_LABEL = "MEMCOST_PROGRESS_LABEL"  # the dataset, when datasets run side by side
# The size of every progress bar: measured, it is the size of the terminal the kernel inherited,
# and a terminal that reports none (a pseudo-terminal of 0 columns, in some containers and CI
# jobs) makes tqdm draw nothing at all.
BAR_SIZE = {"ncols": 100, "nrows": 20}


def tell_runner(line: str) -> None:
    if path := os.environ.get(PROGRESS_FILE):
        with open(path, "a", encoding="utf-8") as handle:  # one write: processes append too
            handle.write(f"{os.environ.get(PROGRESS_LABEL, '')}{line}\n")


def sign_of_life(line: str, stream: Any = None) -> None:
    print(SIGN_OF_LIFE + line, file=stream or sys.stderr, flush=True)
    tell_runner(line)


class Bar(tqdm):
    """tqdm at :data:`BAR_SIZE`, on stderr; under the runner its state (tqdm's line without the
    bar) is told to it at most once every ``every_s``, so a stage of hours shows how far it is."""

    every_s = 60.0

    def __init__(self, *args: Any, **kwargs: Any):
        self._told = time.time()
        super().__init__(*args, **{"file": sys.stderr, **BAR_SIZE, **kwargs})

    def display(self, msg: str | None = None, pos: int | None = None) -> Any:
        drawn = super().display(msg, pos)
        now = self._time()
        if os.environ.get(PROGRESS_FILE) and now - self._told >= self.every_s:
            self._told = now
            tell_runner(self.format_meter(**{**self.format_dict, "ncols": 0}))
        return drawn


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_open(path) as handle:
        handle.write(text)


class JsonlAppender:
    """Append-only JSONL, safe across threads, each record flushed (``fsync``: synced too, at most
    every ``sync_every_s``). A torn last line is skipped by :func:`read_jsonl` and cut off when
    the file is opened again."""

    def __init__(
        self, path: str | os.PathLike[str], *, fsync: bool = True, sync_every_s: float = 0.0
    ):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._sync_every_s = sync_every_s  # with fsync: at most one fsync this often
        self._synced_at = time.monotonic()
        self._lock = threading.Lock()
        self._repair_torn_tail()
        # Unbuffered, appending: each record goes out in one write() at the file's end, so
        # writers in several processes (two notebooks sharing the run's ledger) never
        # interleave within a line, and nobody ever sees half of one.
        self._handle = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed in close()

    def _repair_torn_tail(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) == b"\n":
                return
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - (1 << 20))  # a record is far shorter than 1 MiB
            handle.seek(start)
            tail = handle.read()
            cut = tail.rfind(b"\n")
            handle.truncate(start + cut + 1 if cut >= 0 else start)

    def write(self, record: dict[str, Any]) -> None:
        data = (jsonl_line(record) + "\n").encode("utf-8")
        with self._lock:
            written = self._handle.write(data)
            while written is not None and written < len(data):  # a short write: the rest
                written += self._handle.write(data[written:]) or 0
            if self._fsync and time.monotonic() - self._synced_at >= self._sync_every_s:
                os.fsync(self._handle.fileno())
                self._synced_at = time.monotonic()

    def close(self) -> None:
        with self._lock:
            if not self._handle.closed:
                os.fsync(self._handle.fileno())
                self._handle.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_jsonl(path: str | os.PathLike[str], *, missing_ok: bool = False) -> list[dict[str, Any]]:
    """Read a file :class:`JsonlAppender` wrote: a torn last line is skipped, any other bad line an
    error naming the file and line."""
    path = Path(path)
    if not path.exists():
        if missing_ok:
            return []
        raise FileNotFoundError(f"{path}: file not found")
    records: list[dict[str, Any]] = []
    lines = path.read_text(encoding="utf-8").split("\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            # A writer killed mid-record leaves its last line without the closing brace (and
            # the next writer cuts it off): skip only that.
            if number - 1 == last and not line.rstrip().endswith("}"):
                continue
            raise ValueError(f"{path}: line {number} is not valid JSON: {exc.msg}") from None
    return records
