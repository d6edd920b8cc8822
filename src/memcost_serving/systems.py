"""The served systems (notebook 06), stepped one turn at a time, and who answers their calls."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from memcost.catalog import (
    PRICE_TABLE_DATE,
    is_known,
    list_usd,
    model_info,
    price_for,
    rejects_temperature,
)
from memcost.llm import CallResult, ChatRequest, LLMClient
from memcost.llm.offline import HashingEmbedder, run_chat
from memcost.memory.base import open_system, system_class
from memcost.prompts import Prompt
from memcost.text import content_words, count_tokens
from memcost_serving.mem0_live import Mem0Live
from memcost_serving.prompts import SERVING_ANSWER
from memcost_serving.workload import Turn, render_line
from memcost_systems.live import HistoryLine

OFFLINE = "offline"
REPLY_WORDS = 30  # the offline answer quotes at most this many words of its best context item


@dataclass
class Call:
    kind: str  # answer
    prompt: Prompt
    parts: list[str]  # the user message, in newline-terminated parts (joined = the message)
    part_tokens: list[int | None] = field(default_factory=list)  # known counts (None: count)
    payload: Any = None  # what the offline method reads
    tags: dict[str, Any] = field(default_factory=dict)

    def user_text(self) -> str:
        return "".join(self.parts)

    def prompt_tokens(self) -> int:
        """The system and user messages' o200k tokens, summed part by part."""
        known = self.part_tokens + [None] * (len(self.parts) - len(self.part_tokens))
        total = count_tokens(self.prompt.system) if self.prompt.system else 0
        for part, n in zip(self.parts, known, strict=True):
            total += count_tokens(part) if n is None else n
        return total


@dataclass(frozen=True)
class Reply:
    text: str
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int  # visible output tokens (reasoning excluded)
    reasoning_tokens: int
    backend: str
    error: str | None = None


# --------------------------------------------------------------------------- offline methods
def standin_answer(message: str, items: Sequence[str], item_words: Sequence[frozenset[str]]) -> str:
    """A short reply quoting the context item that shares most content words with the message (the
    latest on ties), else an acknowledgement."""
    words = frozenset(content_words(message))
    best, best_score = -1, 0
    for i, other in enumerate(item_words):
        score = len(words & other)
        if score and score >= best_score:
            best, best_score = i, score
    if best < 0:
        return "Thanks for telling me, noted."
    quoted = " ".join(items[best].split()[:REPLY_WORDS])
    return f"Thanks for telling me. I remember this: {quoted}"


# --------------------------------------------------------------------------- engines
_EMBEDDER = HashingEmbedder()


def embed_locally(texts: list[str], *, model: str = "", tags: Any = None) -> np.ndarray:
    return _EMBEDDER.embed(texts)


def reply_of(result: CallResult) -> Reply:
    """A result as a serving row reads it (visible output, reasoning apart)."""
    usage = result.usage
    visible = max(usage.completion_tokens - usage.reasoning_tokens, 0)
    return Reply(
        result.text,
        usage.prompt_tokens,
        usage.cached_prompt_tokens,
        visible,
        usage.reasoning_tokens,
        result.backend,
        result.error or result.parse_error,
    )


class OfflineEngine:
    """Deterministic classical stand-ins; usage: the o200k counts of prompt and reply."""

    backend = OFFLINE
    embed = staticmethod(embed_locally)

    def __call__(self, call: Call) -> Reply:
        if call.kind != "answer":
            raise ValueError(f"no offline method for serving call kind {call.kind!r}")
        text = standin_answer(*call.payload)
        return Reply(text, call.prompt_tokens(), 0, count_tokens(text), 0, OFFLINE)

    def chat(
        self,
        request: ChatRequest,
        offline: Callable[[ChatRequest], str],
        parse: Callable[[str], Any] | None = None,
        *,
        stage: str = "",
    ) -> CallResult:
        """A memory system's request answered by its own stand-in (a reply its parser refuses
        fails)."""
        text, usage, latency = run_chat(offline, request)
        parsed, parse_error = None, None
        if parse is not None:
            try:
                parsed = parse(text)
            except ValueError as exc:
                parse_error = f"unusable reply: {exc}"
        return CallResult(
            request, "", OFFLINE, OFFLINE, usage, False, latency, 1, text=text, parsed=parsed,
            parse_error=parse_error,
        )  # fmt: skip


GENERATION_KEYS = ("temperature", "max_output_tokens")


class ClientEngine:
    """The same calls through the client, as one model at one effort; ``generation`` applies to
    every chat call, ingest calls included (Total Recall §3: 0.7, at most 32,768 tokens)."""

    def __init__(
        self,
        client: LLMClient,
        model: str,
        reasoning_effort: str = "",
        generation: Mapping[str, Any] | None = None,
    ):
        self.client, self.model, self.effort = client, model, reasoning_effort or None
        generation = dict(generation or {})
        unknown = sorted(set(generation) - set(GENERATION_KEYS))
        if unknown:
            raise ValueError(f"generation: unknown setting(s) {unknown}; valid: {GENERATION_KEYS}")
        if rejects_temperature(model):  # as generation_params: only where the model takes one
            generation.pop("temperature", None)
        if generation.get("max_output_tokens") and is_known(model):  # never above its own limit
            most = model_info(model).max_output_tokens
            generation["max_output_tokens"] = min(int(generation["max_output_tokens"]), most)
        self.generation = {k: v for k, v in generation.items() if v is not None}
        self.backend = client.backend_for(model)

    embed = staticmethod(embed_locally)

    def chat(
        self,
        request: ChatRequest,
        offline: Callable[[ChatRequest], str],
        parse: Callable[[str], Any] | None = None,
        *,
        stage: str = "",
    ) -> CallResult:
        """A memory system's request through the client at the replay's settings (the served effort
        where the system sets none)."""
        effort = request.reasoning_effort or self.effort
        served = replace(request, reasoning_effort=effort, **self.generation)
        return self.client.chat(served, offline=offline, parse=parse)

    def request(self, call: Call) -> ChatRequest:
        messages = (("system", call.prompt.system), ("user", call.user_text()))
        return ChatRequest(
            model=self.model,
            messages=messages,
            stage="read",
            prompt_version=call.prompt.id,
            reasoning_effort=self.effort,
            payload=call,
            tags={
                "system": call.tags.get("system"),
                "serving_stage": call.kind,
                **{k: v for k, v in call.tags.items() if k != "system"},
            },
            **self.generation,
        )

    def __call__(self, call: Call) -> Reply:
        result = self.client.chat(self.request(call), offline=lambda r: standin_answer(*r.payload))
        return reply_of(result)


Engine = Callable[[Call], Reply]


class TurnCalls:
    """A live memory's calls at one turn of one served system, tagged with the system, serving stage
    and turn."""

    def __init__(self, engine: Any, system: str, turn: int):
        self.engine, self.system, self.turn = engine, system, turn

    def chat(
        self,
        request: ChatRequest,
        offline: Callable[[ChatRequest], str],
        parse: Callable[[str], Any] | None = None,
        *,
        stage: str,
    ) -> CallResult:
        tags = {**request.tags, "system": self.system, "serving_stage": stage, "turn": self.turn}
        return self.engine.chat(replace(request, tags=tags), offline, parse, stage=stage)

    def embed(self, texts: list[str], *, model: str, tags: Any) -> np.ndarray:
        return self.engine.embed(texts, model=model, tags=tags)


EMBEDDING_STAGES = ("retrieve", "ingest_embed")


def price_rows(
    rows: pd.DataFrame,
    *,
    embedding_model: str,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """``rows`` with ``priced_as`` and ``usd``: each call at list price as the ledger prices it."""
    out = rows.copy()
    embed = out["stage"].isin(EMBEDDING_STAGES)
    out["priced_as"] = out["model"].where(~embed, embedding_model)
    prices = {m: price_for(str(m), price_overrides) for m in out["priced_as"].unique()}
    uncached, cached, output = list_usd(
        prices,
        out["priced_as"],
        out["prompt_tokens"],
        out["cached_tokens"],
        out["output_tokens"] + out["reasoning_tokens"],
    )
    out["usd"] = pd.Series(uncached + cached + output, index=out.index)
    return out


def prices_used(
    models: list[str],
    embedding_model: str,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    rows = []
    for model in [*models, embedding_model]:
        price = price_for(model, price_overrides)
        rows.append(
            {
                "model": model,
                "input": price.input,
                "cached_input": price.cached_input,
                "output": price.output,
                "date": price.date,
                "source": price.source,
                "price_table_date": PRICE_TABLE_DATE,
            }
        )
    return pd.DataFrame(rows)


SYSTEMS = ("full_history", "rolling_window", "mem0", "observational", "hindsight")
EMPTY_CONTEXT = "(nothing yet)\n"


@dataclass(frozen=True)
class ServingConfig:
    """The study's settings (Total Recall §3), all notebook parameters."""

    window: int = 10
    ingest_interval: int = 10
    mem0_top_k: int = 10
    om_top_k: int = 1
    observer_tokens: int = 30_000
    reflector_tokens: int = 40_000
    # every chat call of a replay through a model (ClientEngine); offline stand-ins ignore them
    temperature: float | None = 0.7
    max_output_tokens: int | None = 32_768

    @property
    def generation(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_output_tokens": self.max_output_tokens}


def fact_words(text: str) -> frozenset[str]:
    return frozenset(content_words(text.split(": ", 1)[-1]))


def stage_row(stage: str, reply: Reply, **extra: Any) -> dict[str, Any]:
    return {
        "stage": stage,
        "prompt_tokens": reply.prompt_tokens,
        "cached_tokens": reply.cached_tokens,
        "output_tokens": reply.output_tokens,
        "reasoning_tokens": reply.reasoning_tokens,
        "backend": reply.backend,
        "error": reply.error,
        **extra,
    }


def answer_call(
    title: str,
    lines: Sequence[str],
    line_tokens: Sequence[int],
    turn: Turn,
    items: Sequence[str],
    item_words: Sequence[frozenset[str]],
    system: str,
) -> Call:
    """The answer request: the context lines (counted) and the latest message."""
    context, counts = (list(lines), list(line_tokens)) if lines else ([EMPTY_CONTEXT], [None])
    tail = f"Latest message from {turn.speaker}:\n{' '.join(turn.text.split())}\n"
    return Call(
        "answer",
        SERVING_ANSWER,
        [f"{title}:\n", *context, tail],
        [None, *counts, None],
        payload=(turn.text, items, item_words),
        tags={"system": system, "turn": turn.turn},
    )


class ServedSystem:
    """The rows of one turn and the gate state of the last."""

    name = ""

    def __init__(self, config: ServingConfig):
        self.config = config

    def state(self) -> dict[str, Any]:
        return {"memory_items": 0, "memory_tokens": 0, "pending_tokens": 0}

    def step(self, turn: Turn, engine: Engine) -> list[dict[str, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        return None


class FullHistory(ServedSystem):
    name = "full_history"

    def __init__(self, config: ServingConfig):
        super().__init__(config)
        self.lines: list[str] = []
        self.counts: list[int] = []
        self.texts: list[str] = []
        self.words: list[frozenset[str]] = []

    def context(self) -> slice:
        return slice(0, len(self.lines))

    def state(self) -> dict[str, Any]:
        part = self.context()
        return {
            "memory_items": len(self.lines[part]),
            "memory_tokens": sum(self.counts[part]),
            "pending_tokens": 0,
        }

    def step(self, turn: Turn, engine: Engine) -> list[dict[str, Any]]:
        part = self.context()
        state = self.state()
        call = answer_call(
            "Conversation so far",
            self.lines[part],
            self.counts[part],
            turn,
            self.texts[part],
            self.words[part],
            self.name,
        )
        rows = [stage_row("answer", engine(call), gate_fired=False, gate_reason="", **state)]
        self.lines.append(render_line(turn.speaker, turn.text))
        self.counts.append(turn.line_tokens)
        self.texts.append(turn.text)
        self.words.append(frozenset(content_words(turn.text)))
        return rows


class RollingWindow(FullHistory):
    name = "rolling_window"

    def context(self) -> slice:
        return slice(max(0, len(self.lines) - self.config.window), len(self.lines))


@dataclass(frozen=True)
class Served:
    system: str  # the registered memory system
    title: str  # what the answer prompt calls what it recalls
    settings: dict[str, str]  # its setting -> the serving study's setting that sets it (§3)
    fixed: dict[str, Any]  # settings the serving study fixes
    # its settings naming the model and reasoning effort of its own calls ("": it has none)
    model_settings: tuple[str, str]


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
    # the Hindsight server itself (make setup-hindsight): a retain every ingest interval, a
    # recall at every turn with Hindsight's defaults
    "hindsight": Served(
        "hindsight", "Memories", {"retain_interval": "ingest_interval"}, {}, ("llm_model", "")
    ),
}


def check_served(names: Sequence[str]) -> None:
    """``ValueError`` in one line for an unknown served system, or one that cannot run here."""
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown served system(s) {unknown}; choose from {', '.join(SYSTEMS)}")
    for name in names:
        if name in SERVED:
            system_class(SERVED[name].system).check_available()


def served_settings(name: str, config: ServingConfig, model: str, effort: str) -> dict[str, Any]:
    """The settings the serving study gives a main-study system: top-k, gates, the served model."""
    spec = SERVED[name]
    settings = {key: getattr(config, study) for key, study in spec.settings.items()}
    settings.update(spec.fixed)
    if model:
        chosen = zip(spec.model_settings, (model, effort or "low"), strict=True)
        settings.update({name: value for name, value in chosen if name})
    return settings


class ServedMemory(ServedSystem):
    def __init__(self, name: str, config: ServingConfig, *, model: str = "", effort: str = ""):
        super().__init__(config)
        self.name = name
        self.title = SERVED[name].title
        # no dataset folder: a live memory keeps everything in memory and writes no file
        settings = served_settings(name, config, model, effort)
        opened = open_system(SERVED[name].system, None, dataset="serving", settings=settings)
        # the paper's memory served turn by turn is this study's own; the others', their systems'
        paper = SERVED[name].system == "mem0_style"
        self.live = (
            Mem0Live(name, opened.settings, dataset="serving") if paper else opened.live(name)
        )

    def state(self) -> dict[str, Any]:
        return self.live.state()

    def close(self) -> None:
        self.live.close()

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


def served_memory(name: str, config: ServingConfig, engine: Any) -> ServedMemory:
    model, effort = getattr(engine, "model", ""), getattr(engine, "effort", "") or ""
    return ServedMemory(name, config, model=model, effort=effort)
