"""Notebook 06's batch calls: where the serving files live, and the replays with either engine.

Offline, token counts do not depend on the model, so every run is replayed once by the offline
stand-ins and priced as each configured model. With a key, every (model, reasoning effort)
replays through the project's client, and the workloads themselves can be written by a model
(``workload_generator = "llm"``) with the same length control and cache.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from memcost.llm import ChatRequest, LLMClient
from memcost.paths import RunPaths
from memcost.prompts import SERVING_GENERATE
from memcost.serving import replay as rp
from memcost.serving import workload as wl
from memcost.serving.engines import Call, ClientEngine, OfflineEngine
from memcost.serving.systems import ServingConfig


@dataclass(frozen=True)
class ServingPaths:
    """``runs/<run>/serving/``: everything notebook 06 writes."""

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
    """Blocks of 20 turns written by ``model`` through the client (cached, metered)."""

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
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Every planned run, as every (model, effort): one offline replay copied per model, or one
    replay per model through the client."""
    if offline:
        rows = rp.replay_synthetic(runs, workload, OfflineEngine(), config, progress=progress)
        return rp.with_models(rows, pairs)
    if client is None:
        raise ValueError("a replay through a model needs the client")
    parts = [
        rp.replay_synthetic(
            runs,
            workload,
            ClientEngine(client, m, e),
            config,
            model=m,
            reasoning_effort=e,
            progress=progress,
        )
        for m, e in pairs
    ]
    return pd.concat(parts, ignore_index=True)


def real_conversations(
    run: RunPaths, datasets: Sequence[str], limit: int
) -> tuple[dict[str, tuple[str, list[wl.Turn]]], dict[str, str]]:
    """Notebook 00's conversations of ``datasets`` as workloads (at most ``limit`` each, in id
    order), and per dataset what was found."""
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
    """The offline engine, keeping what each call sent: the answers' :class:`Call` and the
    memory systems' own requests, so a notebook can show what one turn sends."""

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
    """Replay ``system`` over the first ``upto`` turns offline, keeping every call it made."""
    engine = RecordingEngine()
    rows = rp.replay(system, list(turns)[:upto], engine, config, labels={})
    return engine, rows
