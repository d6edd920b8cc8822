"""Before and after each notebook: the response cache is readable and the ledger is whole.

The ledger (``calls.jsonl``) is the source of truth for costs and the budget. A deleted or
truncated ledger used to go unnoticed (the write cost vanished from the cost summary, the
budget's spend restarted at $0); a damaged cache surfaced as a bare ``DatabaseError`` inside a
notebook. :func:`check_run_stores` stops the run with a message that names the file and the way
out (``python -m memcost repair-ledger <run>``; moving the cache aside or ``cache_mode: off``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memcost.llm.cache import CacheCorrupted, CacheUnwritable, ResponseCache
from memcost.llm.config import DEFAULT_CACHE_PATH
from memcost.llm.ledger import LedgerDamaged, check_ledger, repair_ledger
from memcost.params import client_option
from memcost.paths import RUNS_DIR, RunPaths
from memcost.run.presets import Preset, PresetError


class StoresDamaged(PresetError):
    """The cache or the ledger cannot be trusted; nothing more runs until it is dealt with."""


def uses_cache(params: Mapping[str, Any]) -> bool:
    backends = {str(params.get("backend", "offline"))}
    backends |= {str(v) for v in (client_option(params, "model_backends") or {}).values()}
    return bool(backends - {"offline"}) and client_option(params, "cache_mode") != "off"


def check_run_stores(run: RunPaths, preset: Preset) -> None:
    """Open the cache with its integrity check and compare it with the run's ledger."""
    if not any(uses_cache(preset.parameters_for(d)) for d in preset.datasets or [None]):
        return
    if not DEFAULT_CACHE_PATH.is_file():
        return
    try:
        cache = ResponseCache(DEFAULT_CACHE_PATH)
    except (CacheCorrupted, CacheUnwritable) as exc:
        raise StoresDamaged(str(exc)) from None
    try:
        if run.run_id_file.is_file():
            name = run.name if run.root.parent == RUNS_DIR else str(run.root)
            check_ledger(run.calls, cache, run.run_id(), name)
    except LedgerDamaged as exc:
        raise StoresDamaged(str(exc)) from None
    finally:
        cache.close()


def repair(run: RunPaths) -> int:
    """Rebuild the ledger's missing records from the cache (``repair-ledger``)."""
    cache = ResponseCache(DEFAULT_CACHE_PATH)
    try:
        return repair_ledger(run.calls, cache, run.run_id())
    finally:
        cache.close()
