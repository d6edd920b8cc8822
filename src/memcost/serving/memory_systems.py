"""The serving study's two memory systems are the main study's, served turn by turn.

``mem0`` (the serving study's name) is :mod:`memcost.systems.mem0_style`, the paper's pipeline;
``observational`` is :mod:`memcost.systems.observational`. Each is made with the serving
study's settings (:func:`served_settings`) and asked for its live memory
(:class:`memcost.systems.live.LiveMemory`): its own prompts, offline stand-ins, segmentation,
update phase, gates and search. This module adds only what serving adds: at every turn the
retrieve row, the answer call with what the memory recalled, then the message handed to the
memory, and a row for each call its ingest gate made (the gate's decision and reason are part
of every row of the turn).
"""

from __future__ import annotations

from typing import Any

from memcost.serving.engines import Reply, TurnCalls, reply_of
from memcost.serving.systems import ServedSystem, ServingConfig, answer_call, fact_words, stage_row
from memcost.serving.workload import Turn
from memcost.systems.base import open_system
from memcost.systems.stored import HistoryLine

# The serving study's name of each memory system -> the main study's system, and the title of
# what it shows in the answer prompt.
MEMORY_SYSTEMS = {
    "mem0": ("mem0_style", "Memories"),
    "observational": ("observational", "Observations"),
}


def served_settings(name: str, config: ServingConfig, model: str, effort: str) -> dict[str, Any]:
    """The main-study system's settings that the serving study sets (study §3): its top-k, its
    gates, and the served model for its own calls (offline: the system's default)."""
    if name == "mem0":
        settings: dict[str, Any] = {
            "top_k": config.mem0_top_k,
            "batch_size": config.ingest_interval,  # the ingest gate: every N messages
        }
        keys = ("extraction_model", "extraction_reasoning_effort")
    else:
        settings = {
            "top_k": config.om_top_k,
            "observer_tokens": config.observer_tokens,
            "reflector_tokens": config.reflector_tokens,
            "unobserved_in_context": False,  # the study shows the top-k observations alone
        }
        keys = ("observer_model", "observer_reasoning_effort")
    if model:
        settings.update(zip(keys, (model, effort or "low"), strict=True))
    return settings


class ServedMemory(ServedSystem):
    """A main-study memory system, one user, served turn by turn."""

    def __init__(self, name: str, config: ServingConfig, *, model: str = "", effort: str = ""):
        super().__init__(config)
        self.name = name
        system, self.title = MEMORY_SYSTEMS[name]
        # no dataset folder: a live memory keeps everything in memory and writes no file
        opened = open_system(
            system, None, dataset="serving", settings=served_settings(name, config, model, effort)
        )
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
