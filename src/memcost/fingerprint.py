"""The fingerprint of a stage's settings: what made an output, as one short hash.

Every item a stage hands over (a user's memory, an answer, a judge vote) records the
fingerprint of the settings that made it: the backend and endpoint of each model, the models,
the prompts (with their versions), the stage's parameters and hashes of its input files' content. A
resume keeps an item only when its fingerprint equals the one the stage computes now; any other
item is **redone** (never mixed in, never refused): switching a run from ``offline`` to an API
backend, changing a model, a prompt or ``top_k``, or rebuilding the memory answers the
questions again. Readers keep the last record per item, so the newest settings win
(docs/architecture.md, "Fingerprints").

An input file counts by what it holds, not by its bytes: a Parquet file's bytes carry the
versions of pandas and pyarrow that wrote it, and a fingerprint of bytes would redo every answer
after a package upgrade that changed no value.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

OFFLINE = "offline"
_CHUNK = 1 << 20


def content_hash(path: str | os.PathLike[str]) -> str | None:
    """The sha256 of what a file holds (``None`` when the file does not exist): a Parquet
    file's column names and rows as JSON, whichever library version wrote it; any other
    file's bytes."""
    path = Path(path)
    if not path.is_file():
        return None
    stat = path.stat()
    return _content_hash(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=256)
def _content_hash(path: str, size: int, mtime_ns: int) -> str:
    """:func:`content_hash` of one version of a file (its size and time in the key)."""
    digest = hashlib.sha256()
    if path.endswith(".parquet"):
        table = pq.ParquetFile(path)
        digest.update(json.dumps(table.schema_arrow.names).encode())
        for batch in table.iter_batches():
            for row in batch.to_pylist():
                digest.update(json.dumps(row, default=str, ensure_ascii=False).encode())
                digest.update(b"\n")
        return digest.hexdigest()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def backends_of(client: Any, models: Iterable[str]) -> dict[str, str]:
    """Each model's backend and endpoint as the client routes it (``offline`` without one).

    ``client`` is a :class:`memcost.llm.LLMClient` (duck-typed: this module is a foundation)."""
    out = {}
    for model in models:
        endpoint = client.endpoint_for(model)
        out[model] = OFFLINE if endpoint is None else str(endpoint.identity)
    return out


def fingerprint(
    *,
    stage: str,
    client: Any,
    models: Iterable[str],
    prompts: Iterable[str] = (),
    parameters: Mapping[str, Any] | None = None,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> str:
    """A 16-hex-digit hash of everything that made a stage's output."""
    material = {
        "stage": stage,
        "backends": backends_of(client, sorted(set(models))),
        "prompts": sorted(prompts),
        "parameters": dict(sorted((parameters or {}).items())),
        "inputs": {Path(p).name: content_hash(p) for p in inputs},
    }
    text = json.dumps(material, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
