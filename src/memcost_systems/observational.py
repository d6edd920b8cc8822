"""``observational``: observational memory (Mastra's, as the serving study measures it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from memcost.catalog import generation_params
from memcost.llm import CallResult, ChatRequest
from memcost.memory.base import TOKENS_PER_RETRIEVED_ITEM
from memcost.paper import EMBEDDING_MODEL, EXTRACTION_MODEL
from memcost.text import count_tokens
from memcost_systems.live import (
    Calls,
    HistoryLine,
    Ingest,
    IngestCall,
    LiveMemory,
    Shown,
    user_lines,
)
from memcost_systems.offline import standin_observe, standin_reflect
from memcost_systems.prompts import SERVING_OBSERVER, SERVING_REFLECTOR
from memcost_systems.stored import StoredSystem, UserIngest, UserItems, item_rows, nearest, shown

OBSERVER_TOKENS = 30_000  # Total Recall §3: un-observed message tokens that start the observer
REFLECTOR_TOKENS = 40_000  # ... observation tokens that start the reflector
TOP_K = 1  # ... observations retrieved
# For the pre-run estimate's count of reflector calls (write_calls): what one observer or
# reflector call adds to the observations is at most its completion, which the estimate prices
# as one segment's of the paper's memory: §4.2's 41.6M completion tokens (facts and reasoning)
# over LongMemEval's 43,348 segments (500 histories of 101,601 tokens, 0.8533 segments per 1,000)
CALL_COMPLETION_TOKENS = 960


def reply_observations(text: str) -> list[str]:
    """The observations of an observer's or a reflector's reply: its lines that start with
    "-" (both studies read replies with this)."""
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith("-")]


@dataclass
class ObservationGates:
    """The two gates of observational memory, one rule for both studies: the observer fires on
    the message that makes the un-observed message tokens reach ``observer_tokens`` (not
    before, not after); once it has run, the reflector fires when the observations reach
    ``reflector_tokens``."""

    observer_tokens: int
    reflector_tokens: int
    pending: int = 0  # message tokens not observed yet

    def add(self, tokens: int) -> bool:
        """A message of ``tokens`` joins the un-observed ones: does the observer fire now?"""
        self.pending += tokens
        return self.pending >= self.observer_tokens

    def observed(self, observation_tokens: int) -> bool:
        """The observer has run (nothing is left un-observed): does the reflector fire?"""
        self.pending = 0
        return observation_tokens >= self.reflector_tokens


class _Observing(UserIngest):
    def __init__(self, system: ObservationalMemory, user: str, lines: list[HistoryLine]):
        super().__init__(user, lines)
        self.system = system
        self.gates = ObservationGates(
            int(system.settings["observer_tokens"]), int(system.settings["reflector_tokens"])
        )
        self.next = 0  # the next line to read
        self.buffer: list[HistoryLine] = []
        # (line, date of its messages, the turns it came from)
        self.observations: list[tuple[str, str | None, list[int]]] = []
        self.reflect_due = False
        self.fired: list[dict] = []  # every gate that fired: where and why

    @property
    def observation_tokens(self) -> int:
        return sum(count_tokens(f"{text}\n") for text, _, _ in self.observations)

    def requests(self) -> list[ChatRequest]:
        if self.reflect_due:
            return [self.system.reflector_request(self.user, [t for t, _, _ in self.observations])]
        while self.next < len(self.lines):
            line = self.lines[self.next]
            self.next += 1
            self.buffer.append(line)
            if self.gates.add(count_tokens(line.render() + "\n")):
                self.fired.append(
                    {
                        "gate": "observer",
                        "position": line.position,
                        "tokens": self.gates.pending,
                        "reason": f"observer: {self.gates.pending:,} un-observed tokens >= "
                        f"{self.gates.observer_tokens:,}",
                    }
                )
                return [self.system.observer_request(self.user, self.buffer)]
        return []

    def take(self, results: list[CallResult]) -> None:
        text = results[0].text
        if self.reflect_due:  # what the reflector kept came from any of the observed turns
            when = self.observations[-1][1] if self.observations else None
            seen = sorted({p for _, _, ps in self.observations for p in ps})
            self.observations = [(x, when, seen) for x in reply_observations(text)]
            self.reflect_due = False
            return
        when = self.buffer[-1].session_datetime
        turns = [x.position for x in self.buffer]
        self.observations += [(x, when, turns) for x in reply_observations(text)]
        self.buffer = []
        held = self.observation_tokens
        if self.gates.observed(held):
            self.fired.append(
                {
                    "gate": "reflector",
                    "position": self.lines[self.next - 1].position,
                    "tokens": held,
                    "reason": f"reflector: {held:,} observation tokens >= "
                    f"{self.gates.reflector_tokens:,}",
                }
            )
            self.reflect_due = True

    def info(self) -> dict:
        return {
            "observer_fired": sum(g["gate"] == "observer" for g in self.fired),
            "reflector_fired": sum(g["gate"] == "reflector" for g in self.fired),
            "gates": self.fired,
        }

    def items(self) -> pd.DataFrame:
        rows = [
            {
                "item_id": f"o{i}",
                "kind": "observation",
                "text": text,
                "session_datetime": when,
                "positions": turns,
            }
            for i, (text, when, turns) in enumerate(self.observations)
        ]
        rows += [
            {
                "item_id": f"t{line.position}",
                "kind": "turn",
                "text": line.render(),
                "session_datetime": line.session_datetime,
                "positions": [line.position],
            }
            for line in self.buffer
        ]
        return item_rows(rows)


class ObservationalMemory(StoredSystem):
    name = "observational"
    answers_as = "memory_observational"
    describes = "observer at 30,000 un-observed tokens, reflector at 40,000; top-1 + raw tail"
    write_passes = 1.0  # the observer reads each message once; the reflector reads observations
    write_update_phase = False
    write_model_setting = "observer_model"
    defaults = {
        "observer_tokens": OBSERVER_TOKENS,
        "reflector_tokens": REFLECTOR_TOKENS,
        "top_k": TOP_K,
        # Mastra keeps the messages not observed yet in the prompt, raw; the serving study's
        # measurement shows the top-k observations alone.
        "unobserved_in_context": True,
        "observer_model": EXTRACTION_MODEL,
        "observer_reasoning_effort": "low",
        "embedding_model": EMBEDDING_MODEL,
    }
    embed_kinds = ("observation",)
    prompts = (SERVING_OBSERVER.id, SERVING_REFLECTOR.id)

    @classmethod
    def read_context_tokens(cls, settings, history_tokens, turn_tokens):
        """``top_k`` observations (sized as the paper's facts) and, where they stay in the
        context, the messages the observer has not read yet (what is left over its threshold)."""
        observed = int(settings["top_k"]) * TOKENS_PER_RETRIEVED_ITEM
        return observed + cls.read_shared_tokens(settings, history_tokens, turn_tokens)

    @classmethod
    def read_shared_tokens(cls, settings, history_tokens, turn_tokens):
        """The messages not observed yet, shown first to every question."""
        if not settings["unobserved_in_context"]:
            return 0.0
        return history_tokens % int(settings["observer_tokens"])

    @classmethod
    def write_calls(cls, settings, stats, segments):
        """An observer call for every ``observer_tokens`` of a conversation, each reading that
        many (a LoCoMo conversation, some 20,000 tokens, never reaches the 30,000 of the
        study: its messages stay raw), and a reflector call, reading the observations, whenever
        they reach ``reflector_tokens``: each call adds ``CALL_COMPLETION_TOKENS`` to them at
        most, so at the study's gates the reflector first fires after 42 observer calls (some
        1.3M tokens of history: on LongMemEval-M, not -S). The share read can pass 1."""
        gate, ceiling = int(settings["observer_tokens"]), int(settings["reflector_tokens"])
        calls, read = 0, 0.0
        for history in stats["history_tokens"]:
            held = 0  # observation tokens
            for _ in range(int(history // gate)):
                calls, read, held = calls + 1, read + gate, held + CALL_COMPLETION_TOKENS
                if held >= ceiling:  # the reflector reads them all and writes one call's worth
                    calls, read, held = calls + 1, read + held, CALL_COMPLETION_TOKENS
        return calls, read / max(1.0, float(stats["history_tokens"].sum()))

    def start(self, user: str, turns: pd.DataFrame) -> UserIngest:
        return _Observing(self, user, user_lines(turns))

    def _request(self, user: str, prompt, step: str, payload, **fields: str) -> ChatRequest:
        model = self.settings["observer_model"]
        return ChatRequest(
            model=model,
            messages=prompt.messages(**fields),
            stage="extract",
            prompt_version=prompt.id,
            payload={"step": step, "items": payload},
            tags=self.tags(user, memory_step=step),
            **generation_params(model, self.settings["observer_reasoning_effort"]),
        )

    def observer_request(self, user: str, lines: list[HistoryLine]) -> ChatRequest:
        return self._request(
            user,
            SERVING_OBSERVER,
            "observer",
            [(x.speaker, x.text, x.session_datetime) for x in lines],
            messages="\n".join(x.render() for x in lines),
        )

    def reflector_request(self, user: str, observations: list[str]) -> ChatRequest:
        return self._request(
            user,
            SERVING_REFLECTOR,
            "reflector",
            list(observations),
            observations="\n".join(observations),
        )

    def offline(self, request: ChatRequest) -> str:
        p = request.payload
        return (
            standin_observe(p["items"]) if p["step"] == "observer" else standin_reflect(p["items"])
        )

    def search(self, memory: UserItems, question: dict, query: np.ndarray) -> pd.DataFrame:
        """The messages not observed yet, then the most similar observation(s): the part every
        question of the user shares comes first, where a prompt cache can serve it."""
        picked = nearest(
            memory.vectors, query, memory.of_kind("observation"), int(self.settings["top_k"])
        )
        tail = (
            np.flatnonzero(memory.of_kind("turn")).tolist()
            if self.settings["unobserved_in_context"]
            else []
        )
        return shown(memory.items, tail + [r for r, _ in picked], dict(picked))

    def live(self, user: str) -> ObservationalLive:
        return ObservationalLive(self, user)


class ObservationalLive(LiveMemory):
    """One user's observational memory served turn by turn: the build's own ingest
    (:class:`_Observing`), fed one message at a time; a recall embeds the observations it has
    not seen yet and searches them as :meth:`ObservationalMemory.search` does."""

    def __init__(self, system: ObservationalMemory, user: str):
        self.system, self.user = system, user
        self.ingest = _Observing(system, user, [])
        self.vectors: dict[str, np.ndarray] = {}  # observation text -> its embedding
        self._key = -1  # the gates fired when the searchable items were last made
        self._cached: tuple[pd.DataFrame, np.ndarray | None] = (pd.DataFrame(), None)
        self._held = (0, 0)  # (gates fired, observation tokens then)

    def state(self) -> dict[str, int]:
        if self._held[0] != len(self.ingest.fired):  # observations change only when one fires
            self._held = (len(self.ingest.fired), self.ingest.observation_tokens)
        return {
            "memory_items": len(self.ingest.observations),
            "memory_tokens": self._held[1],
            "pending_tokens": self.ingest.gates.pending,
        }

    def add(self, calls: Calls, line: HistoryLine) -> Ingest:
        self.ingest.lines.append(line)
        seen = len(self.ingest.fired)
        done = Ingest()
        while requests := self.ingest.requests():
            results = [
                calls.chat(r, self.system.offline, stage=r.payload["step"]) for r in requests
            ]
            done.calls += [
                IngestCall(r.payload["step"], x) for r, x in zip(requests, results, strict=True)
            ]
            if not all(x.ok for x in results):  # asked again when the next message arrives
                break
            self.ingest.take(results)
        done.reasons = [g["reason"] for g in self.ingest.fired[seen:]]
        new = [t for t, _, _ in self.ingest.observations if t not in self.vectors]
        if new:
            vectors = calls.embed(
                new, model=self.system.settings["embedding_model"], tags=self.system.tags(self.user)
            )
            self.vectors.update(zip(new, vectors, strict=True))
            done.embedded_tokens = sum(count_tokens(t) for t in new)
        return done

    def recall(self, calls: Calls, text: str) -> list[Shown]:
        settings = self.system.settings
        items, vectors = self._searchable()
        query = None
        if vectors is not None:
            query = calls.embed(
                [text], model=settings["embedding_model"], tags=self.system.tags(self.user)
            )[0]
        if vectors is None and not len(items):
            return []
        rows = self.system.search(UserItems(items, vectors), {"question": text}, query)
        return [Shown(t, f"{t}\n", count_tokens(f"{t}\n")) for t in rows["text"].tolist()]

    def _searchable(self) -> tuple[pd.DataFrame, np.ndarray | None]:
        """The items a search sees and their vectors (none before the first observation).
        Without the raw tail they change only when a gate fires: kept until the next one."""
        if self.system.settings["unobserved_in_context"] or self._key != len(self.ingest.fired):
            items = self.ingest.items()
            if not self.system.settings["unobserved_in_context"]:
                items = items.loc[items["kind"] == "observation"].reset_index(drop=True)
            observed = items["kind"].eq("observation").to_numpy()
            vectors = None
            if observed.any():
                width = len(next(iter(self.vectors.values())))
                vectors = np.zeros((len(items), width), np.float32)
                texts = items.loc[observed, "text"]
                vectors[observed] = np.stack([self.vectors[t] for t in texts])
            self._cached = (items, vectors)
            self._key = len(self.ingest.fired)
        return self._cached
