"""Replay a workload through a served system turn by turn, and the file that records it.

``serving/turns.parquet`` (owned here: schema, writer, reader) has one row per turn and stage:
``source`` (``synthetic`` or the dataset of a real conversation), ``system``, ``model``,
``reasoning_effort``, ``cell`` (``N×L``), ``n_turns``, ``mean_tokens``, ``seed``,
``conversation_id``, ``turn`` (0-based), ``stage`` (``retrieve``, ``answer``,
``ingest_extract``, ``ingest_update``, ``ingest_embed``, ``observer``, ``reflector``), the
stage's ``prompt_tokens``, ``cached_tokens``, ``output_tokens`` (visible), ``reasoning_tokens``,
``backend`` (``offline`` for the stand-ins, ``local`` for the similarity search), ``error``,
``gate_fired`` and ``gate_reason`` (whether the ingest gate fired at this turn and why), and the
system's state when it answered: ``memory_items``, ``memory_tokens``, ``pending_tokens``.
Dollars are added by :mod:`memcost.serving.pricing`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from memcost.io import write_parquet
from memcost.serving.engines import Engine
from memcost.serving.memory_systems import SERVED, memory_system
from memcost.serving.systems import SYSTEMS, FullHistory, RollingWindow, ServedSystem, ServingConfig
from memcost.serving.workload import Turn

STAGES = (
    "retrieve",
    "answer",
    "ingest_extract",
    "ingest_update",
    "ingest_embed",
    "observer",
    "reflector",
)
TURN_COLUMNS = (
    "source",
    "system",
    "model",
    "reasoning_effort",
    "cell",
    "n_turns",
    "mean_tokens",
    "seed",
    "conversation_id",
    "turn",
    "stage",
    "prompt_tokens",
    "cached_tokens",
    "output_tokens",
    "reasoning_tokens",
    "backend",
    "error",
    "gate_fired",
    "gate_reason",
    "memory_items",
    "memory_tokens",
    "pending_tokens",
)
BASELINES: dict[str, type[ServedSystem]] = {
    "full_history": FullHistory,
    "rolling_window": RollingWindow,
}


def make_system(name: str, config: ServingConfig, engine: Engine | None = None) -> ServedSystem:
    """A served system; a memory system's own calls are made as ``engine``'s model."""
    if name in BASELINES:
        return BASELINES[name](config)
    if name in SERVED:
        return memory_system(name, config, engine)
    raise ValueError(f"unknown served system {name!r}; choose from {', '.join(SYSTEMS)}")


def cell_label(n_turns: int, mean_tokens: int) -> str:
    return f"{n_turns}×{mean_tokens}"


def replay(
    system: str,
    turns: Sequence[Turn],
    engine: Engine,
    config: ServingConfig,
    *,
    labels: dict[str, Any],
) -> list[dict[str, Any]]:
    """Every stage row of one run: ``system`` served ``turns`` in order. ``labels`` (source,
    model, cell, seed, ...) are copied into every row."""
    served = make_system(system, config, engine)
    rows: list[dict[str, Any]] = []
    for turn in turns:
        for row in served.step(turn, engine):
            rows.append({**labels, "system": system, "turn": turn.turn, **row})
    return rows


def run_labels(
    source: str,
    n_turns: int,
    mean_tokens: int,
    seed: int,
    conversation_id: str,
    model: str = "",
    reasoning_effort: str = "",
) -> dict[str, Any]:
    return {
        "source": source,
        "model": model,
        "reasoning_effort": reasoning_effort,
        "cell": cell_label(n_turns, mean_tokens),
        "n_turns": n_turns,
        "mean_tokens": mean_tokens,
        "seed": seed,
        "conversation_id": conversation_id,
    }


def plan_runs(
    grid: Iterable[Sequence[int]],
    seeds: Sequence[int],
    systems: Sequence[str],
    baseline_cells: Iterable[Sequence[int]] = (),
    baseline_repeats: int = 2,
    *,
    observational_cells: Iterable[Sequence[int]] = (),
    observational_repeats: int = 3,
) -> list[tuple[str, int, int, int]]:
    """``(system, N, L, seed)`` of every synthetic run: memory systems on the main grid with
    every seed; the deterministic baselines on the main grid and the extra cells with
    ``baseline_repeats`` seeds (the study: 8 cells × 2 repeats); observational memory also on
    its extra cells with ``observational_repeats`` seeds (the study: 800×200 and 800×400, three
    runs each: long enough for its observer and reflector to fire)."""
    grid = [(int(n), int(size)) for n, size in grid]
    extra = [(int(n), int(size)) for n, size in baseline_cells if (int(n), int(size)) not in grid]
    runs = []
    for system in systems:
        if system in BASELINES:
            cells, run_seeds = grid + extra, list(seeds)[:baseline_repeats]
        else:
            cells, run_seeds = grid, list(seeds)
        runs += [(system, n, size, s) for (n, size), s in itertools.product(cells, run_seeds)]
    if "observational" in systems:
        long = [
            (int(n), int(size))
            for n, size in observational_cells
            if (int(n), int(size)) not in grid
        ]
        runs += [
            ("observational", n, size, s)
            for (n, size), s in itertools.product(long, list(seeds)[:observational_repeats])
        ]
    return runs


def replay_synthetic(
    runs: Sequence[tuple[str, int, int, int]],
    workload: Callable[[int, int, int], Sequence[Turn]],
    engine: Engine,
    config: ServingConfig,
    *,
    model: str = "",
    reasoning_effort: str = "",
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Replay every planned run; ``workload(N, L, seed)`` gives the (cached) conversation."""
    rows: list[dict[str, Any]] = []
    for system, n, size, seed in runs:
        labels = run_labels(
            "synthetic", n, size, seed, f"synthetic-{n}-{size}-{seed}", model, reasoning_effort
        )
        rows += replay(system, workload(n, size, seed), engine, config, labels=labels)
        if progress:
            progress(f"{system} {cell_label(n, size)} seed {seed}")
    return as_frame(rows)


def replay_real(
    conversations: dict[str, tuple[str, Sequence[Turn]]],
    systems: Sequence[str],
    engine: Engine,
    config: ServingConfig,
    *,
    model: str = "",
    reasoning_effort: str = "",
) -> pd.DataFrame:
    """Replay real conversations (``{conversation_id: (dataset, turns)}``); the cell of a real
    conversation is its own ``(N, mean L)``, rounded."""
    rows: list[dict[str, Any]] = []
    for conversation_id, (dataset, turns) in conversations.items():
        if not turns:
            continue
        n = len(turns)
        mean = max(1, round(sum(t.tokens for t in turns) / n))
        labels = run_labels(dataset, n, mean, 0, conversation_id, model, reasoning_effort)
        for system in systems:
            rows += replay(system, turns, engine, config, labels=labels)
    return as_frame(rows)


def as_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(TURN_COLUMNS))
    frame["error"] = frame["error"].astype(object)
    return frame


def with_models(offline_rows: pd.DataFrame, pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """Offline token counts do not depend on the model: one copy of the rows per (model,
    reasoning effort) the study serves, so every model's dollars come from the same counts."""
    copies = [offline_rows.assign(model=m, reasoning_effort=e) for m, e in pairs]
    return pd.concat(copies, ignore_index=True) if copies else offline_rows


def write_turns(path: str | Path, frame: pd.DataFrame) -> None:
    write_parquet(path, frame[[c for c in frame.columns]])


def read_turns(path: str | Path) -> pd.DataFrame:
    frame = pd.read_parquet(path)
    missing = [c for c in TURN_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: not a serving turns file, missing columns {missing}")
    return frame
