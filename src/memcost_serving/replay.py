"""Replaying workloads through the served systems, and where notebook 06's files live."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

import memcost_serving.workload as wl
from memcost.io import Bar, write_parquet
from memcost.llm import ChatRequest, LLMClient
from memcost.paths import RunPaths
from memcost_serving.prompts import SERVING_GENERATE
from memcost_serving.systems import (
    SERVED,
    SYSTEMS,
    Call,
    ClientEngine,
    Engine,
    FullHistory,
    OfflineEngine,
    RollingWindow,
    ServedSystem,
    ServingConfig,
    served_memory,
)
from memcost_serving.workload import Turn

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
    if name in BASELINES:
        return BASELINES[name](config)
    if name in SERVED:
        return served_memory(name, config, engine)
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
    """Every stage row of one run, ``labels`` copied into each."""
    served = make_system(system, config, engine)
    rows: list[dict[str, Any]] = []
    try:
        for turn in turns:
            for row in served.step(turn, engine):
                rows.append({**labels, "system": system, "turn": turn.turn, **row})
    finally:
        served.close()
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
    """``(system, N, L, seed)`` of every synthetic run: memory systems on the grid with every seed;
    baselines also on their extra cells (``baseline_repeats`` seeds); observational memory also
    on its long cells (``observational_repeats``)."""
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


# Served through a server of its own, minutes per run offline: the estimate before a paid
# replay runs one seed per cell of these and counts it for every seed of the cell
SAMPLED_FOR_ESTIMATE = ("hindsight",)


def estimate_plan(
    runs: Sequence[tuple[str, int, int, int]], sampled: Sequence[str] = SAMPLED_FOR_ESTIMATE
) -> tuple[list[tuple[str, int, int, int]], dict[tuple[str, int, int], int]]:
    """The runs the estimate replays offline (a ``sampled`` system's first seed per cell), and how
    many runs each stands for."""
    kept, counts = [], {}
    for run in runs:
        system, n, size, _ = run
        if system in sampled:
            key = (system, n, size)
            counts[key] = counts.get(key, 0) + 1
            if counts[key] > 1:
                continue
        kept.append(run)
    return kept, counts


def run_weights(rows: pd.DataFrame, stands_for: dict[tuple[str, int, int], int]) -> pd.Series:
    keys = zip(rows["system"], rows["n_turns"], rows["mean_tokens"], strict=True)
    return pd.Series([float(stands_for.get(k, 1)) for k in keys], index=rows.index)


def replay_synthetic(
    runs: Sequence[tuple[str, int, int, int]],
    workload: Callable[[int, int, int], Sequence[Turn]],
    engine: Engine,
    config: ServingConfig,
    *,
    model: str = "",
    reasoning_effort: str = "",
) -> pd.DataFrame:
    """Replay every planned run (``workload(N, L, seed)``), a bar counting turns."""
    rows: list[dict[str, Any]] = []
    label = f"serving replay {model} {reasoning_effort}".strip()
    turns = sum(n for _, n, _, _ in runs)
    with Bar(total=turns, desc=label, unit="turn", mininterval=1.0) as bar:
        for system, n, size, seed in runs:
            bar.set_postfix_str(f"{system} {cell_label(n, size)} seed {seed}", refresh=False)
            labels = run_labels(
                "synthetic", n, size, seed, f"synthetic-{n}-{size}-{seed}", model, reasoning_effort
            )
            rows += replay(system, workload(n, size, seed), engine, config, labels=labels)
            bar.update(n)
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
    """Replay real conversations, each its own cell ``(N, mean L)``."""
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
    """Offline token counts do not depend on the model: a copy of the rows per (model, effort)."""
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


@dataclass(frozen=True)
class ServingPaths:
    root: Path

    @classmethod
    def of(cls, run: RunPaths) -> ServingPaths:
        return cls(run.root / "serving")

    @property
    def workloads(self) -> Path:
        return self.root / "workloads"

    @property
    def turns(self) -> Path:
        return self.root / "turns.parquet"

    @property
    def real_turns(self) -> Path:
        return self.root / "turns_real.parquet"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    def ensure(self) -> ServingPaths:
        for folder in (self.root, self.workloads, self.tables, self.figures):
            folder.mkdir(parents=True, exist_ok=True)
        return self


def _parse_messages(count: int) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        start, end = text.find("{"), text.rfind("}")
        messages = json.loads(text[start : end + 1]).get("messages") if start >= 0 else None
        if not isinstance(messages, list) or len(messages) != count:
            raise ValueError(f"expected a JSON object with {count} messages")
        return [" ".join(str(m).split()) for m in messages]

    return parse


def llm_block_generator(
    client: LLMClient, model: str, reasoning_effort: str = "", seed: int = 0
) -> wl.BlockGenerator:
    """Blocks of 20 turns written by ``model`` through the client."""

    def generate(
        start: int, count: int, mean_tokens: int, speakers: Sequence[str], recent: Sequence[str]
    ) -> list[str]:
        user = SERVING_GENERATE.user.format(
            first=speakers[0],
            second=speakers[1],
            count=count,
            starter=speakers[start % 2],
            tokens=mean_tokens,
            recent="".join(recent) or "(the conversation starts here)\n",
        )
        request = ChatRequest(
            model=model,
            messages=(("system", SERVING_GENERATE.system), ("user", user)),
            stage="extract",
            prompt_version=SERVING_GENERATE.id,
            json_mode=True,
            reasoning_effort=reasoning_effort or None,
            sample_index=seed,
            tags={"system": "serving_workload", "serving_stage": "generate", "turn": start},
        )

        def offline(_request: object) -> str:
            rng = random.Random(f"llm-offline-{start}-{mean_tokens}-{seed}")
            texts = [wl.template_turn(rng, mean_tokens, 0)[0] for _ in range(count)]
            return json.dumps({"messages": texts})

        result = client.chat(request, offline=offline, parse=_parse_messages(count))
        if not result.ok:
            raise RuntimeError(
                f"workload block at turn {start} (L={mean_tokens}) failed: "
                f"{result.error or result.parse_error}"
            )
        return list(result.parsed)

    return generate


def workload_source(
    paths: ServingPaths,
    generator: str,
    client: LLMClient | None = None,
    model: str = "",
    reasoning_effort: str = "",
) -> Callable[[int, int, int], Sequence[wl.Turn]]:
    """``(N, L, seed) -> turns`` from the on-disk cache, generated on first use."""
    if generator == "template":
        return lambda n, length, s: wl.cached_workload(paths.workloads, n, length, s)
    if generator != "llm" or client is None:
        raise ValueError(
            f"workload_generator must be 'template' or 'llm' (with a client), got {generator!r}"
        )
    source = f"llm-{model.split('/')[-1]}"
    return lambda n, length, s: wl.cached_workload(
        paths.workloads,
        n,
        length,
        s,
        source=source,
        block_generator=llm_block_generator(client, model, reasoning_effort, s),
    )


def replay_all(
    runs: Sequence[tuple[str, int, int, int]],
    workload,
    config: ServingConfig,
    *,
    pairs: Sequence[tuple[str, str]],
    client: LLMClient | None = None,
    offline: bool = True,
) -> pd.DataFrame:
    """Every run as every (model, effort): one offline replay copied per model, or a replay per
    model through the client."""
    if offline:
        rows = replay_synthetic(runs, workload, OfflineEngine(), config)
        return with_models(rows, pairs)
    if client is None:
        raise ValueError("a replay through a model needs the client")
    parts = [
        replay_synthetic(
            runs,
            workload,
            ClientEngine(client, m, e, config.generation),
            config,
            model=m,
            reasoning_effort=e,
        )
        for m, e in pairs
    ]
    return pd.concat(parts, ignore_index=True)


def real_conversations(
    run: RunPaths, datasets: Sequence[str], limit: int
) -> tuple[dict[str, tuple[str, list[wl.Turn]]], dict[str, str]]:
    """Notebook 00's conversations as workloads (``limit`` each, id order), and what was found."""
    found: dict[str, tuple[str, list[wl.Turn]]] = {}
    status: dict[str, str] = {}
    for dataset in datasets:
        path = run.dataset(dataset).conversations
        if not path.is_file():
            status[dataset] = f"missing: {path} (run notebook 00 for {dataset} first)"
            continue
        frame = pd.read_parquet(path)
        ids = sorted(frame["conversation_id"].unique())[: limit or None]
        for cid in ids:
            found[f"{dataset}:{cid}"] = (
                dataset,
                wl.real_workload(frame[frame["conversation_id"] == cid]),
            )
        status[dataset] = f"{len(ids)} conversations from {path}"
    return found, status


class RecordingEngine(OfflineEngine):
    """The offline engine, keeping what each call sent."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.requests: list[ChatRequest] = []

    def __call__(self, call: Call):
        self.calls.append(call)
        return super().__call__(call)

    def chat(self, request: ChatRequest, offline, parse=None, *, stage: str = ""):
        self.requests.append(request)
        return super().chat(request, offline, parse, stage=stage)


def replay_with_calls(
    turns: Sequence[wl.Turn], system: str, config: ServingConfig, upto: int
) -> tuple[RecordingEngine, list[dict]]:
    engine = RecordingEngine()
    rows = replay(system, list(turns)[:upto], engine, config, labels={})
    return engine, rows
