"""The two memory systems of the serving study: Mem0-style facts and observational memory.

Observational memory fires its observer and reflector by the main study's rule
(:class:`memcost.systems.observational.ObservationGates`) and reads their replies as it does.

Both follow :class:`memcost.serving.systems.ServedSystem`: retrieve, answer, then the ingest
gate. The gate's decision and its reason are part of every row of the turn.
"""

from __future__ import annotations

from typing import Any

from memcost.prompts import MEMORY_EXTRACT, MEMORY_UPDATE, SERVING_OBSERVER, SERVING_REFLECTOR
from memcost.serving.engines import Call, Engine, Reply, parse_decisions, parse_facts
from memcost.serving.systems import (
    LexicalIndex,
    ServedSystem,
    ServingConfig,
    answer_call,
    fact_words,
    stage_row,
)
from memcost.serving.workload import Turn, render_line
from memcost.systems.observational import ObservationGates, reply_observations
from memcost.tokens import count_tokens

UPDATE_TOP_K = 10  # stored facts each new fact is compared with in the update phase


def _retrieve_row(turn: Turn, state: dict[str, Any]) -> dict[str, Any]:
    """The query embedding of the similarity search: the message's tokens, no output."""
    return stage_row("retrieve", Reply("", turn.tokens, 0, 0, 0, "local"), **state)


class Mem0(ServedSystem):
    name = "mem0"

    def __init__(self, config: ServingConfig):
        super().__init__(config)
        self.index = LexicalIndex()
        self.facts: dict[int, tuple[str, str, int]] = {}  # id -> (text, speaker, line tokens)
        self.pending: list[Turn] = []

    def state(self) -> dict[str, Any]:
        return {
            "memory_items": len(self.facts),
            "memory_tokens": sum(f[2] for f in self.facts.values()),
            "pending_tokens": sum(t.line_tokens for t in self.pending),
        }

    def _store(self, text: str, speaker: str) -> int:
        key = self.index.add(fact_words(text))
        self.facts[key] = (text, speaker, count_tokens(f"- {text}\n"))
        return key

    def step(self, turn: Turn, engine: Engine) -> list[dict[str, Any]]:
        state = self.state()
        rows = [_retrieve_row(turn, state)]
        hits = self.index.top_k(frozenset(fact_words(turn.text)), self.config.mem0_top_k)
        texts = [self.facts[k][0] for k in hits]
        call = answer_call(
            "Memories",
            [f"- {t}\n" for t in texts],
            [self.facts[k][2] for k in hits],
            turn,
            texts,
            [self.index.items[k] for k in hits],
            self.name,
        )
        rows.append(stage_row("answer", engine(call), **state))
        self.pending.append(turn)
        fired = len(self.pending) >= self.config.ingest_interval
        reason = (
            f"{len(self.pending)} turns since the last ingest (interval "
            f"{self.config.ingest_interval})"
            if fired
            else ""
        )
        if fired:
            rows += self._ingest(engine, state)
            self.pending = []
        for row in rows:
            row.update(gate_fired=fired, gate_reason=reason)
        return rows

    def _ingest(self, engine: Engine, state: dict[str, Any]) -> list[dict[str, Any]]:
        messages = [(t.speaker, t.text) for t in self.pending]
        people = " and ".join(sorted({t.speaker for t in self.pending}))
        lines = [f"[{i + 1}] {s}: {' '.join(x.split())}" for i, (s, x) in enumerate(messages)]
        head = f"Session date: not stated\nPeople: {people}\n\nMessages:\n"
        extract = engine(
            Call(
                "extract",
                MEMORY_EXTRACT,
                [head, "\n".join(lines)],
                payload=messages,
                tags={"system": self.name},
            )
        )
        rows = [stage_row("ingest_extract", extract, **state)]
        candidates = [(f["text"], str(f.get("speaker") or "")) for f in parse_facts(extract.text)]
        if not candidates:
            return rows
        if self.facts:
            rows.append(self._update(engine, candidates, state))
        else:
            for text, speaker in candidates:
                self._store(text, speaker)
        new_tokens = sum(count_tokens(text) for text, _ in candidates)
        rows.append(stage_row("ingest_embed", Reply("", new_tokens, 0, 0, 0, "local"), **state))
        return rows

    def _update(
        self, engine: Engine, candidates: list[tuple[str, str]], state: dict[str, Any]
    ) -> dict[str, Any]:
        short: dict[int, str] = {}
        compared = []
        for text, speaker in candidates:
            hits = [
                k
                for k in self.index.top_k(fact_words(text), UPDATE_TOP_K)
                if self.facts[k][1] == speaker
            ]
            for k in hits:
                short.setdefault(k, f"m{len(short) + 1}")
            compared.append(hits)
        memories = "\n".join(f"[{short[k]}] {self.facts[k][0]}" for k in short) or "(none)"
        facts = "\n".join(f"{i + 1}. {text}" for i, (text, _) in enumerate(candidates))
        names = sorted({s for _, s in candidates})
        payload = [
            {"text": text, "names": names, "compared": [(short[k], self.facts[k][0]) for k in hits]}
            for (text, _), hits in zip(candidates, compared, strict=True)
        ]
        user = MEMORY_UPDATE.user.format(memories=memories, when="latest conversation", facts=facts)
        reply = engine(
            Call("update", MEMORY_UPDATE, [user], payload=payload, tags={"system": self.name})
        )
        by_short = {v: k for k, v in short.items()}
        decided = {int(d.get("fact", 0)): d for d in parse_decisions(reply.text)}
        for i, (text, speaker) in enumerate(candidates, start=1):
            d = decided.get(i, {"event": "ADD"})
            target = by_short.get(str(d.get("memory_id")))
            event = str(d.get("event", "ADD")).upper()
            if event in ("UPDATE", "DELETE") and target is not None and target in self.facts:
                self.index.remove(target)
                del self.facts[target]
                if event == "UPDATE":
                    self._store(str(d.get("text") or text), speaker)
            elif event != "NOOP":
                self._store(text, speaker)
        return stage_row("ingest_update", reply, **state)


class Observational(ServedSystem):
    name = "observational"

    def __init__(self, config: ServingConfig):
        super().__init__(config)
        self.index = LexicalIndex()
        self.observations: dict[int, tuple[str, int]] = {}  # id -> (line, tokens)
        self.buffer: list[Turn] = []
        self.gates = ObservationGates(config.observer_tokens, config.reflector_tokens)

    @property
    def observation_tokens(self) -> int:
        return sum(n for _, n in self.observations.values())

    def state(self) -> dict[str, Any]:
        return {
            "memory_items": len(self.observations),
            "memory_tokens": self.observation_tokens,
            "pending_tokens": self.gates.pending,
        }

    def _replace(self, lines: list[str]) -> None:
        for line in lines:
            key = self.index.add(fact_words(line))
            self.observations[key] = (line, count_tokens(f"{line}\n"))

    def step(self, turn: Turn, engine: Engine) -> list[dict[str, Any]]:
        state = self.state()
        rows = [_retrieve_row(turn, state)]
        hits = self.index.top_k(frozenset(fact_words(turn.text)), self.config.om_top_k)
        lines = [self.observations[k][0] for k in hits]
        call = answer_call(
            "Observations",
            [f"{x}\n" for x in lines],
            [self.observations[k][1] for k in hits],
            turn,
            lines,
            [self.index.items[k] for k in hits],
            self.name,
        )
        rows.append(stage_row("answer", engine(call), **state))
        self.buffer.append(turn)
        reasons = []
        if self.gates.add(turn.line_tokens):
            reasons.append(
                f"observer: {self.gates.pending:,} un-observed tokens >= "
                f"{self.config.observer_tokens:,}"
            )
            rows.append(self._observe(engine, state))
            if self.gates.observed(self.observation_tokens):
                reasons.append(
                    f"reflector: {self.observation_tokens:,} observation tokens >= "
                    f"{self.config.reflector_tokens:,}"
                )
                rows.append(self._reflect(engine, state))
        for row in rows:
            row.update(gate_fired=bool(reasons), gate_reason="; ".join(reasons))
        return rows

    def _observe(self, engine: Engine, state: dict[str, Any]) -> dict[str, Any]:
        parts = ["Messages not observed yet:\n"] + [
            render_line(t.speaker, t.text) for t in self.buffer
        ]
        counts = [None] + [t.line_tokens for t in self.buffer]
        reply = engine(
            Call(
                "observer",
                SERVING_OBSERVER,
                parts,
                counts,
                payload=[(t.speaker, t.text) for t in self.buffer],
                tags={"system": self.name},
            )
        )
        self._replace(reply_observations(reply.text))
        self.buffer = []  # the gates are told by step(), which asks whether to reflect
        return stage_row("observer", reply, **state)

    def _reflect(self, engine: Engine, state: dict[str, Any]) -> dict[str, Any]:
        current = [line for line, _ in self.observations.values()]
        parts = ["Observations:\n"] + [f"{x}\n" for x in current]
        counts = [None] + [n for _, n in self.observations.values()]
        reply = engine(
            Call(
                "reflector",
                SERVING_REFLECTOR,
                parts,
                counts,
                payload=current,
                tags={"system": self.name},
            )
        )
        for key in list(self.observations):
            self.index.remove(key)
        self.observations = {}
        self._replace(reply_observations(reply.text))
        return stage_row("reflector", reply, **state)
