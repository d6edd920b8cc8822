"""The golden record of the bundled-sample run: what the study computed, file by file, as
canonical text under ``tests/golden/smoke/`` (the run's own layout), and the comparison a
change to the code must pass.

What is recorded, and how:
- every table (``tables/*.csv``, ``<dataset>/tables/*.csv``) as its text, answers and judge
  votes (``*.jsonl``) one JSON object per line with sorted keys, and the hand-over data
  (``<dataset>/data/*.parquet``) as one JSON object per row, so that no library's file format
  or version is part of the record;
- left out, because they measure the machine rather than compute the study: columns and fields
  of latencies, timestamps and wall times; the run's own directory is written ``<run>``.

How it is compared (:func:`compare`): text, integers and the order of rows exactly; floats to
9 significant digits (``math.isclose`` with a relative tolerance of 1e-9 and an absolute one
of 1e-12 around zero, far below any printed digit), because the last digits of a float move
with the numpy release and the CPU's vector instructions without the study computing anything
else. ``-0.0`` equals ``0.0``. A failure names each file and shows its first differing rows.

Update the record only for an intended change of outputs:
``MEMCOST_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden_record.py``; files
that still compare equal are left as they are, so the diff shows only what changed.
Compare two runs: ``python tests/golden.py RUN_A RUN_B``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

GOLDEN = Path(__file__).parent / "golden" / "smoke"
REL_TOL = 1e-9  # 9 significant digits
ABS_TOL = 1e-12  # around zero, where a relative tolerance means nothing
MEASURED = re.compile(
    r"latency|timestamp|wall_time|(^|_)p(50|95)(_|$)|_s$|_ms$|started_at|finished_at"
)
PATTERNS = (
    "tables/*.csv",
    "*/tables/*.csv",
    "*/answers/*.jsonl",
    "*/judgments/*.jsonl",
    "*/data/*.parquet",
)


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if not MEASURED.search(k)}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _csv_text(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def canonical(path: Path, run: Path) -> tuple[str, str]:
    """``(record name, canonical text)`` of one output file of ``run``."""
    root = str(run.resolve())
    name = path.relative_to(run).as_posix()
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
        keep = [i for i, c in enumerate(rows[0]) if not MEASURED.search(c)] if rows else []
        text = _csv_text([[row[i] for i in keep] for row in rows])
    elif path.suffix == ".jsonl":
        lines = path.read_text(encoding="utf-8").splitlines()
        text = "".join(
            json.dumps(_clean(json.loads(line)), sort_keys=True, ensure_ascii=False) + "\n"
            for line in lines
            if line.strip()
        )
    else:  # Parquet: its rows, whichever pandas and pyarrow wrote them
        name += ".jsonl"
        rows = pq.read_table(path).to_pylist()
        text = "".join(
            json.dumps(_clean(r), sort_keys=True, ensure_ascii=False, default=str) + "\n"
            for r in rows
        )
    return name, text.replace(root, "<run>")


def run_record(run: Path) -> dict[str, str]:
    """``{record name: canonical text}`` of every recorded output of ``run``."""
    files = sorted({p for pattern in PATTERNS for p in run.glob(pattern)})
    return dict(canonical(p, run) for p in files)


def golden_record(folder: Path = GOLDEN) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# --- comparison -------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def same_value(expected: Any, got: Any) -> bool:
    """Equal as the study computes: floats to 9 significant digits, the rest exactly (lists
    and objects element by element)."""
    if isinstance(expected, dict) and isinstance(got, dict):
        return expected.keys() == got.keys() and all(
            same_value(expected[k], got[k]) for k in expected
        )
    if isinstance(expected, list) and isinstance(got, list):
        return len(expected) == len(got) and all(
            same_value(a, b) for a, b in zip(expected, got, strict=True)
        )
    if expected == got and type(expected) is type(got):
        return True
    a, b = _number(expected), _number(got)
    if a is None or b is None:
        return False
    if isinstance(expected, int) and isinstance(got, int):
        return False  # counts are exact
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def _rows(name: str, text: str) -> list[Any]:
    if name.endswith(".csv"):
        return list(csv.reader(io.StringIO(text)))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _fields(name: str, header: list[str] | None, expected: Any, got: Any) -> list[str]:
    """The columns or keys in which one row differs, with both values."""
    if isinstance(expected, list) and isinstance(got, list) and name.endswith(".csv"):
        names = header or [str(i) for i in range(max(len(expected), len(got)))]
        pairs = [
            (names[i] if i < len(names) else str(i), a, b)
            for i, (a, b) in enumerate(zip(expected, got, strict=False))
        ]
    elif isinstance(expected, dict) and isinstance(got, dict):
        pairs = [
            (k, expected.get(k, "<absent>"), got.get(k, "<absent>"))
            for k in sorted(expected.keys() | got.keys())
        ]
    else:
        return [f"expected {_short(expected)}, got {_short(got)}"]
    return [
        f"{field}: expected {_short(a)}, got {_short(b)}"
        for field, a, b in pairs
        if not same_value(a, b)
    ]


def _short(value: Any, width: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass(frozen=True)
class Difference:
    name: str
    lines: tuple[str, ...]

    def __str__(self) -> str:
        return "\n".join([f"- {self.name}", *(f"    {line}" for line in self.lines)])


def compare_file(name: str, expected: str, got: str, *, rows_shown: int = 3) -> Difference | None:
    """``None`` when ``got`` computes what ``expected`` recorded, else what differs."""
    old, new = _rows(name, expected), _rows(name, got)
    header = old[0] if name.endswith(".csv") and old else None
    lines: list[str] = []
    if len(old) != len(new):
        lines.append(f"{len(old)} rows recorded, {len(new)} now")
    shown = 0
    for i, (a, b) in enumerate(zip(old, new, strict=False)):
        if same_value(a, b):
            continue
        shown += 1
        if shown > rows_shown:
            rest = sum(not same_value(x, y) for x, y in zip(old[i:], new[i:], strict=False))
            lines.append(f"... and {rest} more differing rows")
            break
        label = "header" if header is not None and i == 0 else f"row {i}"
        lines.extend(f"{label} {field}" for field in _fields(name, header, a, b)[:6])
    return Difference(name, tuple(lines)) if lines else None


def compare(expected: dict[str, str], got: dict[str, str]) -> list[Difference]:
    """Every recorded file that is missing, new or computed differently."""
    out = [
        Difference(n, ("recorded, but the run wrote no such file",))
        for n in expected.keys() - got.keys()
    ]
    out += [
        Difference(n, ("the run wrote it, but it is not recorded",))
        for n in got.keys() - expected.keys()
    ]
    for name in sorted(expected.keys() & got.keys()):
        diff = compare_file(name, expected[name], got[name])
        if diff is not None:
            out.append(diff)
    return sorted(out, key=lambda d: d.name)


def update(got: dict[str, str], folder: Path = GOLDEN) -> list[str]:
    """Write the record of ``got``: new and changed files, and remove files no longer written.
    Files that still compare equal keep their text (their floats' last digits may differ)."""
    old = golden_record(folder) if folder.is_dir() else {}
    changed = {d.name for d in compare(old, got)}
    for name in changed:
        path = folder / name
        if name in got:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(got[name], encoding="utf-8")
        elif path.exists():
            path.unlink()
    for empty in sorted((p for p in folder.rglob("*") if p.is_dir()), reverse=True):
        if not any(empty.iterdir()):
            shutil.rmtree(empty)
    return sorted(changed)


def report(differences: list[Difference], limit: int = 8) -> Iterator[str]:
    for diff in differences[:limit]:
        yield str(diff)
    if len(differences) > limit:
        rest = [d.name for d in differences[limit:]]
        yield f"... and {len(rest)} more files: {rest}"


if __name__ == "__main__":
    import sys

    first, second = (run_record(Path(a)) for a in sys.argv[1:3])
    found = compare(first, second)
    print(f"{len(first)} files, {len(found)} differ")
    print("\n".join(report(found, limit=20)))
