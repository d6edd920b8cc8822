"""The serving study's two memory systems are the main study's, served turn by turn.

``mem0`` (the serving study's name) is :mod:`memcost.memory.mem0_style`, the paper's pipeline;
``observational`` is :mod:`memcost.memory.observational`. Each is made with the serving
study's settings (:func:`served_settings`) and asked for its live memory
(:class:`memcost.memory.stored.LiveMemory`): its own prompts, offline stand-ins, segmentation,
update phase, gates and search. This module adds only what serving adds: at every turn the
retrieve row, the answer call with what the memory recalled, then the message handed to the
memory, and a row for each call its ingest gate made (the gate's decision and reason are part
of every row of the turn).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memcost.memory.base import open_system
from memcost.memory.stored import HistoryLine
from memcost.serving.engines import Reply, TurnCalls, reply_of
from memcost.serving.systems import ServedSystem, ServingConfig, answer_call, fact_words, stage_row
from memcost.serving.workload import Turn


@dataclass(frozen=True)
class Served:
    """How the serving study serves one of the main study's memory systems."""

    system: str  # the registered memory system
    title: str  # what the answer prompt calls what it recalls
    settings: dict[str, str]  # its setting -> the serving study's setting that sets it (§3)
    fixed: dict[str, Any]  # settings the serving study fixes
    model_settings: tuple[str, str]  # its settings naming the model and effort of its own calls


# The serving study's name of each memory system (the study's "Mem0" and "observational memory").
SERVED = {
    "mem0": Served(
        "mem0_style",
        "Memories",
        {"top_k": "mem0_top_k", "batch_size": "ingest_interval"},  # ingest every N messages
        {},
        ("extraction_model", "extraction_reasoning_effort"),
    ),
    "observational": Served(
        "observational",
        "Observations",
        {
            "top_k": "om_top_k",
            "observer_tokens": "observer_tokens",
            "reflector_tokens": "reflector_tokens",
        },  # fmt: skip
        {"unobserved_in_context": False},  # the study shows the top-k observations alone
        ("observer_model", "observer_reasoning_effort"),
    ),
}


def served_settings(name: str, config: ServingConfig, model: str, effort: str) -> dict[str, Any]:
    """The main-study system's settings that the serving study sets (study §3): its top-k, its
    gates, and the served model for its own calls (offline: the system's default)."""
    spec = SERVED[name]
    settings = {key: getattr(config, study) for key, study in spec.settings.items()}
    settings.update(spec.fixed)
    if model:
        settings.update(zip(spec.model_settings, (model, effort or "low"), strict=True))
    return settings


class ServedMemory(ServedSystem):
    """A main-study memory system, one user, served turn by turn."""

    def __init__(self, name: str, config: ServingConfig, *, model: str = "", effort: str = ""):
        super().__init__(config)
        self.name = name
        self.title = SERVED[name].title
        # no dataset folder: a live memory keeps everything in memory and writes no file
        settings = served_settings(name, config, model, effort)
        opened = open_system(SERVED[name].system, None, dataset="serving", settings=settings)
        self.live = opened.live(name)

    def state(self) -> dict[str, Any]:
        return self.live.state()

    def step(self, turn: Turn, engine: Any) -> list[dict[str, Any]]:
        calls = TurnCalls(engine, self.name, turn.turn)
        state = self.state()
        # the query's embedding: the message's tokens, no output
        rows = [stage_row("retrieve", Reply("", turn.tokens, 0, 0, 0, "local"), **state)]
        shown = self.live.recall(calls, turn.text)
        texts = [x.text for x in shown]
        call = answer_call(
            self.title,
            [x.line for x in shown],
            [x.tokens for x in shown],
            turn,
            texts,
            [fact_words(t) for t in texts],
            self.name,
        )
        rows.append(stage_row("answer", engine(call), **state))
        line = HistoryLine(turn.turn, turn.speaker, " ".join(turn.text.split()), 0, None)
        done = self.live.add(calls, line)
        rows += [stage_row(c.stage, reply_of(c.result), **state) for c in done.calls]
        if done.embedded_tokens:
            embedded = Reply("", done.embedded_tokens, 0, 0, 0, "local")
            rows.append(stage_row("ingest_embed", embedded, **state))
        for row in rows:
            row.update(gate_fired=done.fired, gate_reason="; ".join(done.reasons))
        return rows


def memory_system(name: str, config: ServingConfig, engine: Any) -> ServedMemory:
    """``name``'s served memory, its calls made as ``engine``'s model (offline: any)."""
    model, effort = getattr(engine, "model", ""), getattr(engine, "effort", "") or ""
    return ServedMemory(name, config, model=model, effort=effort)
