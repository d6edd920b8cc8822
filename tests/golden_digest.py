"""What a run computed, as digests that ignore what it measured: the golden record of the
bundled-sample run (``tests/golden/smoke.json``), against which a change to the code must leave
every table, answer, judgment and hand-over file byte for byte the same.

Left out, because they measure this machine rather than compute the study: columns and fields
of latencies, timestamps and wall times; the run's own directory is written as ``<run>``.
Update the record only for an intended change of outputs:
``MEMCOST_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_byte_identity.py``.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

GOLDEN = Path(__file__).parent / "golden" / "smoke.json"
MEASURED = re.compile(
    r"latency|timestamp|wall_time|(^|_)p(50|95)(_|$)|_s$|_ms$|started_at|"
    r"finished_at"
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


def _content(path: Path, root: str) -> bytes:
    if path.suffix == ".csv":
        frame = pd.read_csv(path, keep_default_na=False, dtype=str)
        frame = frame[[c for c in frame.columns if not MEASURED.search(str(c))]]
        text = frame.to_csv(index=False)
    elif path.suffix == ".jsonl":
        lines = [
            json.dumps(_clean(json.loads(line)), sort_keys=True)
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        text = "\n".join(lines)
    else:
        buffer = io.StringIO()
        pd.read_parquet(path).to_csv(buffer, index=False)
        text = buffer.getvalue()
    return text.replace(root, "<run>").encode("utf-8")


def run_digest(run: Path) -> dict[str, str]:
    """``{path relative to the run: sha256 of its computed content}``."""
    root = str(run.resolve())
    files = sorted({p for pattern in PATTERNS for p in run.glob(pattern)})
    return {
        p.relative_to(run).as_posix(): hashlib.sha256(_content(p, root)).hexdigest() for p in files
    }


if __name__ == "__main__":
    import sys

    first, second = (run_digest(Path(a)) for a in sys.argv[1:3])
    changed = sorted(k for k in first.keys() | second.keys() if first.get(k) != second.get(k))
    print(f"{len(first)} files, {len(changed)} differ: {changed[:20]}")
