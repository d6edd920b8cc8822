"""``hierarchical``: memory as an operating system's memory hierarchy."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pandas as pd

from memcost.catalog import generation_params
from memcost.llm import CallResult, ChatRequest
from memcost.paper import EMBEDDING_MODEL, EXTRACTION_MODEL
from memcost_systems.live import HistoryLine, user_lines
from memcost_systems.offline import standin_summarise
from memcost_systems.prompts import MEMORY_SUMMARY
from memcost_systems.stored import StoredSystem, UserIngest, UserItems, item_rows, nearest, shown

EVICTION_POLICIES = ("lru", "fifo")


class WorkingSet:
    """L2's promoted items: at most ``capacity``, evicted by ``policy``."""

    def __init__(self, capacity: int, policy: str):
        if policy not in EVICTION_POLICIES:
            raise ValueError(f"eviction must be one of {EVICTION_POLICIES}, not {policy!r}")
        self.capacity, self.policy = capacity, policy
        self.items: OrderedDict[int, None] = OrderedDict()  # eviction order: first goes first
        self.evicted: list[int] = []

    def hit(self, row: int) -> None:
        """Promote ``row`` (or refresh it, under ``lru``), evicting past the capacity."""
        if row in self.items:
            if self.policy == "lru":
                self.items.move_to_end(row)
            return
        self.items[row] = None
        while len(self.items) > self.capacity:
            out, _ = self.items.popitem(last=False)
            self.evicted.append(out)

    def rows(self) -> list[int]:
        return list(self.items)


class _Layering(UserIngest):
    def __init__(self, system: HierarchicalMemory, user: str, lines: list[HistoryLine]):
        super().__init__(user, lines)
        self.system = system
        self.every = int(system.settings["summary_every"])
        self.summary = ""
        self.summarised = 0  # lines taken into the summary so far

    def requests(self) -> list[ChatRequest]:
        left = len(self.lines) - self.summarised
        if left <= 0:
            return []
        upto = self.summarised + min(self.every, left)
        return [
            self.system.summary_request(self.user, self.summary, self.lines[self.summarised : upto])
        ]

    def take(self, results: list[CallResult]) -> None:
        self.summary = results[0].text.strip()
        self.summarised = min(len(self.lines), self.summarised + self.every)

    def items(self) -> pd.DataFrame:
        window = int(self.system.settings["window_turns"])
        recent = self.lines[-window:] if window else []
        archived = self.lines[: len(self.lines) - len(recent)]
        last = self.lines[-1].session_datetime if self.lines else None
        rows = [
            {
                "item_id": "summary",
                "kind": "summary",
                "text": self.summary or "(nothing yet)",
                "session_datetime": last,
            }
        ]
        rows += [
            {
                "item_id": f"a{line.position}",
                "kind": "archive",
                "text": line.render(),
                "session_datetime": line.session_datetime,
                "positions": [line.position],
            }
            for line in archived
        ]
        rows += [
            {
                "item_id": f"t{line.position}",
                "kind": "turn",
                "text": line.render(),
                "session_datetime": line.session_datetime,
                "positions": [line.position],
            }
            for line in recent
        ]
        return item_rows(rows)


class HierarchicalMemory(StoredSystem):
    name = "hierarchical"
    answers_as = "memory_hierarchical"
    describes = "L1 recent turns, L2 running summary + promoted items, L3 archive; LRU eviction"
    write_passes = 1.0  # the summary rewrites read each message once; archive embeddings only
    write_update_phase = False
    write_model_setting = "summary_model"
    defaults = {
        "window_turns": 10,
        "summary_every": 10,
        "summary_words": 200,
        "archive_top_k": 5,
        "working_capacity": 5,
        "eviction": "lru",
        "summary_model": EXTRACTION_MODEL,
        "summary_reasoning_effort": "low",
        "embedding_model": EMBEDDING_MODEL,
    }
    embed_kinds = ("archive",)
    prompts = (MEMORY_SUMMARY.id,)

    @classmethod
    def read_context_tokens(cls, settings, history_tokens, turn_tokens):
        """The summary (4 tokens to 3 words), the last messages and a full working set."""
        shared = cls.read_shared_tokens(settings, history_tokens, turn_tokens)
        return min(shared + int(settings["working_capacity"]) * turn_tokens, history_tokens)

    @classmethod
    def read_shared_tokens(cls, settings, history_tokens, turn_tokens):
        """The summary and the last messages, shown first to every question."""
        summary = int(settings["summary_words"]) * 4 / 3
        return min(summary + int(settings["window_turns"]) * turn_tokens, history_tokens)

    @classmethod
    def write_calls(cls, settings, stats, segments):
        """A summary rewrite each ``summary_every`` messages of a conversation, across its
        sessions (the last for those left over), each reading its messages once."""
        every = int(settings["summary_every"])
        return int(sum(-(-int(n) // every) for n in stats["n_turns"])), 1.0

    def start(self, user: str, turns: pd.DataFrame) -> UserIngest:
        return _Layering(self, user, user_lines(turns))

    def summary_request(self, user: str, summary: str, lines: list[HistoryLine]) -> ChatRequest:
        model = self.settings["summary_model"]
        words = int(self.settings["summary_words"])
        return ChatRequest(
            model=model,
            messages=MEMORY_SUMMARY.messages(
                max_words=str(words),
                summary=summary or "(empty)",
                messages="\n".join(x.render() for x in lines),
            ),
            stage="extract",
            prompt_version=MEMORY_SUMMARY.id,
            payload={
                "summary": summary.splitlines(),
                "max_words": words,
                "messages": [(x.speaker, x.text, x.session_datetime) for x in lines],
            },
            tags=self.tags(user, memory_step="summary", through=lines[-1].position),
            **generation_params(model, self.settings["summary_reasoning_effort"]),
        )

    def offline(self, request: ChatRequest) -> str:
        p = request.payload
        return standin_summarise(p["summary"], p["messages"], p["max_words"])

    def new_state(self) -> WorkingSet:
        return WorkingSet(int(self.settings["working_capacity"]), str(self.settings["eviction"]))

    def search(self, memory: UserItems, question: dict, query: np.ndarray) -> pd.DataFrame:
        """The summary, L1, then the working set after this question's hits are promoted."""
        working = memory.state
        hits = nearest(
            memory.vectors, query, memory.of_kind("archive"), int(self.settings["archive_top_k"])
        )
        for row, _ in hits:
            working.hit(row)
        rows = [
            *np.flatnonzero(memory.of_kind("summary")),
            *np.flatnonzero(memory.of_kind("turn")),
            *working.rows(),
        ]
        out = shown(memory.items, rows, dict(hits))
        out["kind"] = [
            "working" if r in working.items else k for r, k in zip(rows, out["kind"], strict=True)
        ]
        return out

    @property
    def working_sets(self) -> dict[str, WorkingSet]:
        """Each user's working set as the last recall left it."""
        return dict(self.states)
