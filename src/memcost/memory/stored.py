"""What the systems that keep their own items share, built once or served turn by turn.

A system's ingest of one user is a small state machine (:class:`UserIngest`): it says which
requests it needs next, takes their results, and in the end has its items. :func:`run_waves`
drives every pending user's machine at once, one wave of requests after another (users in
parallel, each user's calls in order). A user whose call fails stops there and is recorded as
failed; the others go on.

The serving study (notebook 06) replays a conversation one message at a time: a
:class:`LiveMemory` is one user's memory in that mode, made by the system itself
(:meth:`MemorySystem.live`) from the same prompts, stand-ins and search as its build; it sends
its calls through a :class:`Calls` (the serving engine).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np
import pandas as pd
from tqdm import tqdm

import memcost.memory.base as store
from memcost.io import BAR_SIZE
from memcost.llm import ChatRequest, ChatResult, LLMClient
from memcost.memory.base import (
    ITEM_COLUMNS,
    MemorySystem,
    Recall,
    SystemBuild,
    embed_groups,
    rows_by_user,
)
from memcost.memory.search import embed_questions
from memcost.memory.segments import segment_conversation
from memcost.paper import EMBEDDING_MODEL
from memcost.text import count_tokens, day_text


@dataclass(frozen=True)
class HistoryLine:
    """One message of a user's history, in order, as the systems read it."""

    position: int
    speaker: str
    text: str
    session_index: int
    session_datetime: str | None

    def render(self) -> str:
        """``[8 May 2023] Maya: text`` (the date only where the dataset gives one)."""
        day = day_text(self.session_datetime)
        return f"[{day}] {self.speaker}: {self.text}" if day else f"{self.speaker}: {self.text}"


def user_lines(turns: pd.DataFrame) -> list[HistoryLine]:
    """A user's messages in order, system messages left out, long messages whole (the memory
    stage's segmentation, read back as a stream)."""
    segments, _ = segment_conversation(turns, batch_size=10_000, max_chars=10**9)
    return [
        HistoryLine(m.position, m.speaker, m.text, s.session_index, s.session_datetime)
        for s in segments
        for m in s.messages
    ]


def item_rows(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Stored items with every column of :data:`store.ITEM_SCHEMA` (tokens counted here)."""
    out = []
    for r in rows:
        text = str(r["text"])
        out.append(
            {
                "item_id": str(r["item_id"]),
                "kind": str(r["kind"]),
                "text": text,
                "session_datetime": r.get("session_datetime"),
                "tokens": int(r.get("tokens") or count_tokens(text)),
                "valid": bool(r.get("valid", True)),
                "detail": json.dumps(r.get("detail") or {}, ensure_ascii=False),
                "positions": [int(x) for x in r.get("positions") or []],
            }
        )
    return pd.DataFrame(out, columns=list(store.ITEM_SCHEMA))


class UserIngest:
    """One user's ingest: ``requests()`` (the next wave; empty when finished), ``take()``."""

    def __init__(self, user: str, lines: list[HistoryLine]):
        self.user, self.lines = user, lines
        self.calls = 0

    def requests(self) -> list[ChatRequest]:
        """The next wave's requests; none (the default): the items need no model call."""
        return []

    def take(self, results: list[ChatResult]) -> None:
        raise NotImplementedError(f"{type(self).__name__} asked for requests it cannot take")

    @abstractmethod
    def items(self) -> pd.DataFrame: ...

    def info(self) -> dict[str, Any]:
        """What the build says about this user beside its items (``done.json``)."""
        return {}


USERS_PER_BLOCK = 50  # users embedded and written together by a build


def users_bar(client: LLMClient, total: int, desc: str) -> tqdm:
    """A bar over a build's users (stderr: notebooks and the run's log show it), off when the
    client's progress is."""
    return tqdm(
        total=total,
        desc=desc,
        unit="user",
        disable=not total or not client.config.progress,
        file=sys.stderr,
        **BAR_SIZE,
    )


def run_waves(
    client: LLMClient, ingests: Mapping[str, UserIngest], offline: Any, desc: str, parse: Any = None
) -> dict[str, str]:
    """Drive every user's ingest to its end; returns ``{user: reason}`` of the failed ones.

    ``parse`` (a reply to its value, raising ``ValueError`` when unusable) makes the client
    re-ask a malformed reply; one still unusable fails its user, like a failed call."""
    failed: dict[str, str] = {}
    active = dict(ingests)
    wave = calls = 0
    bar = users_bar(client, len(active), desc)
    while active:
        asked = {user: ingest.requests() for user, ingest in active.items()}
        asked = {u: r for u, r in asked.items() if r}
        bar.update(len(active) - len(asked))  # users with nothing more to ask are finished
        if not asked:
            break
        wave += 1
        flat = [r for rs in asked.values() for r in rs]
        calls += len(flat)
        # users of alike histories finish together: the calls made so far show the progress
        bar.set_postfix_str(f"wave {wave}: {len(flat)} calls, {calls:,} in all")
        results = client.chat_many(flat, offline=offline, parse=parse, progress=False)
        start = 0
        for user, requests in asked.items():
            mine = results[start : start + len(requests)]
            start += len(requests)
            bad = next((r for r in mine if not r.ok), None)
            active[user].calls += len(mine)
            if bad is not None:
                failed[user] = f"{bad.request.stage} call failed: {bad.error or bad.parse_error}"
                continue
            active[user].take(mine)
        bar.update(sum(1 for u in asked if u in failed))
        active = {u: i for u, i in active.items() if u in asked and u not in failed}
    bar.close()
    return failed


@dataclass
class UserItems:
    """One user's stored items and vectors while the questions are recalled."""

    items: pd.DataFrame
    vectors: np.ndarray | None
    state: Any = None  # what :meth:`StoredSystem.new_state` made for this user

    def of_kind(self, *kinds: str) -> np.ndarray:
        return self.items["kind"].isin(kinds).to_numpy()


class StoredSystem(MemorySystem):
    """A system whose items are written by :mod:`memcost.memory.base`; ``embed_kinds`` of them
    get vectors, which the exact search of :meth:`nearest` ranks against the question."""

    embed_kinds: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()  # ids of the prompts it sends (part of its fingerprint)
    parse: Any = None  # its replies to values (see run_waves); None: taken as text
    stages_in_turn = ("extract",)  # a user's next wave waits for its last (run_waves)

    @property
    def folder(self):
        return store.system_dir(self.ds, self.name)

    def fingerprint(self, client: LLMClient) -> str:
        material = {
            "system": self.name,
            "settings": self.settings,
            "prompts": self.prompts,
            "backend": client.backend,
            "base_url": client.base_url,
        }
        return hashlib.sha256(
            json.dumps(material, sort_keys=True, default=str).encode()
        ).hexdigest()[:16]

    @abstractmethod
    def start(self, user: str, turns: pd.DataFrame) -> UserIngest:
        """The ingest of one user's conversation (rows of ``conversations.parquet``)."""

    def offline(self, request: ChatRequest) -> str:
        """The offline stand-in for every request the system sends (by ``payload["step"]``)."""
        raise NotImplementedError(f"memory system {self.name} sends no chat requests")

    def build(self, client: LLMClient, conversations: pd.DataFrame) -> SystemBuild:
        t0 = time.perf_counter()
        groups = {str(k): g for k, g in conversations.groupby("conversation_id", sort=False)}
        report = SystemBuild(self.name, users=len(groups))
        fingerprint = self.fingerprint(client)
        done = store.finished(self.folder, list(groups), fingerprint)
        report.resumed = len(done)
        ingests = {u: self.start(u, g) for u, g in groups.items() if u not in done}
        report.failed = run_waves(
            client, ingests, self.offline, desc=f"{self.name}: ingest", parse=type(self).parse
        )
        finished = [u for u in ingests if u not in report.failed]
        bar = users_bar(client, len(finished), f"{self.name}: embed and write")
        # a block of users at a time: their embedding requests go out together, and their
        # vectors are let go once written (500 users' at once held 8.5 GB)
        for start in range(0, len(finished), USERS_PER_BLOCK):
            block = finished[start : start + USERS_PER_BLOCK]
            items = {u: ingests[u].items() for u in block}
            vectors = self._embed(client, items)
            for user in block:
                store.write_user(
                    self.folder,
                    user,
                    items[user],
                    vectors.get(user),
                    fingerprint=fingerprint,
                    calls=ingests[user].calls,
                    info=ingests[user].info(),
                )
            bar.update(len(block))
        bar.close()
        store.record_failures(self.folder, report.failed)
        report.built = len(finished)
        report.wall_s = time.perf_counter() - t0
        return report

    def _embed(self, client: LLMClient, items: Mapping[str, pd.DataFrame]) -> dict[str, np.ndarray]:
        if not self.embed_kinds:
            return {}
        users = list(items)
        groups = [
            (items[u].loc[items[u]["kind"].isin(self.embed_kinds), "text"].tolist(), self.tags(u))
            for u in users
        ]
        arrays = embed_groups(
            client,
            groups,
            model=self.settings.get("embedding_model", EMBEDDING_MODEL),
            progress=False,  # the build's bar counts the users embedded and written
        )
        width = max((a.shape[1] for a in arrays if a.ndim == 2), default=0)
        out = {}
        for user, array in zip(users, arrays, strict=True):
            frame = items[user]
            full = np.zeros((len(frame), width), np.float32)
            if len(array):
                full[frame["kind"].isin(self.embed_kinds).to_numpy()] = array
            out[user] = full
        return out

    def new_state(self) -> Any:
        """What the system keeps across one user's questions (the hierarchical working set)."""
        return None

    @abstractmethod
    def search(
        self, memory: UserItems, question: Mapping[str, Any], query: np.ndarray
    ) -> pd.DataFrame:
        """The rows of ``memory.items`` a question is shown, best first, with ``score``."""

    def recall(self, client: LLMClient, questions: pd.DataFrame) -> dict[str, Recall]:
        """Each question against its user's items, a user's questions in the order asked. A
        user's items and vectors are loaded for that user's questions and let go after them
        (LongMemEval's 500 users' held at once outgrew 24 GB); what the searches left in the
        user's state is kept (``self.states``)."""
        vectors = self.question_vectors(client, questions)
        records = questions.to_dict("records")
        out: dict[str, Recall] = {}
        self.states: dict[str, Any] = {}  # each user's search state after its questions
        for user, asked in rows_by_user(q["conversation_id"] for q in records).items():
            memory = UserItems(*self.load(user), self.new_state())
            for i in asked:
                t0 = time.perf_counter()
                rows = self.search(memory, records[i], vectors[i])
                out[str(records[i]["question_id"])] = Recall(
                    rows.reset_index(drop=True)[list(ITEM_COLUMNS)],
                    latency_s=time.perf_counter() - t0,
                )
            self.states[user] = memory.state
        return {str(q["question_id"]): out[str(q["question_id"])] for q in records}

    def question_vectors(self, client: LLMClient, questions: pd.DataFrame) -> np.ndarray:
        return embed_questions(
            client,
            questions,
            dataset=self.dataset,
            model=self.settings.get("embedding_model", EMBEDDING_MODEL),
            system=self.answers_as,
        )

    def state(self) -> pd.DataFrame:
        return store.state_table(self.folder)

    @property
    def memory_files(self) -> list:
        return [self.folder / "done.json"]

    def load(self, user: str) -> tuple[pd.DataFrame, np.ndarray | None]:
        return store.read_user(self.folder, user)


def nearest(
    vectors: np.ndarray | None, query: np.ndarray, eligible: np.ndarray, k: int
) -> list[tuple[int, float]]:
    """The ``k`` eligible rows most similar to ``query`` (inner product of unit vectors: exact
    cosine), best first, ties by row order."""
    if vectors is None or not len(vectors) or k <= 0:
        return []
    rows = np.flatnonzero(eligible)
    if not len(rows):
        return []
    scores = vectors[rows] @ query.astype(np.float32)
    order = np.lexsort((rows, -scores))[:k]  # best score first, then the earlier row
    return [(int(rows[j]), float(scores[j])) for j in order]


def shown(
    items: pd.DataFrame, rows: Sequence[int], scores: Mapping[int, float] | None = None
) -> pd.DataFrame:
    """``items``' rows ``rows`` in that order, with their search scores (NaN for a row shown
    without a search: a summary, recent messages)."""
    scores = scores or {}
    return items.iloc[list(rows)].assign(score=[scores.get(r, np.nan) for r in rows])


class Calls(Protocol):
    """Where a live memory sends its model calls (both return what the client would)."""

    def chat(
        self,
        request: ChatRequest,
        offline: Callable[[ChatRequest], str],
        parse: Callable[[str], Any] | None = None,
        *,
        stage: str,
    ) -> ChatResult:
        """``request`` answered (``offline`` without a key); ``stage``: the serving stage the
        call is (ingest_extract, ingest_update, observer, reflector), its ledger tag."""

    def embed(self, texts: list[str], *, model: str, tags: Mapping[str, Any]) -> np.ndarray:
        """``(len(texts), d)`` unit rows."""


def fact_line(text: str) -> str:
    """An item as a live recall shows it: one ``- text`` line."""
    return f"- {text}\n"


class Shown(NamedTuple):
    """One item a recall shows with the message."""

    text: str
    line: str  # as the prompt shows it, newline-terminated
    tokens: int  # of the line


@dataclass(frozen=True)
class IngestCall:
    """One model call of an ingest: its serving stage and what came back."""

    stage: str  # ingest_extract | ingest_update | observer | reflector
    result: ChatResult


@dataclass
class Ingest:
    """What handing one message to the memory did: the gates that fired (and why), the calls
    they made, and the tokens embedded for the items they stored."""

    reasons: list[str] = field(default_factory=list)
    calls: list[IngestCall] = field(default_factory=list)
    embedded_tokens: int = 0

    @property
    def fired(self) -> bool:
        return bool(self.reasons)


class LiveMemory(ABC):
    """One user's memory, served turn by turn."""

    @abstractmethod
    def recall(self, calls: Calls, text: str) -> list[Shown]:
        """The items shown with the message ``text``, best first."""

    @abstractmethod
    def add(self, calls: Calls, line: HistoryLine) -> Ingest:
        """Take the next message; run the ingest its gate asks for, if any."""

    @abstractmethod
    def state(self) -> dict[str, int]:
        """``memory_items``, ``memory_tokens`` (what a recall can show) and ``pending_tokens``
        (message tokens the memory has not processed yet)."""

    def close(self) -> None:
        """Let go of what the memory holds outside this process (a server's bank)."""
        return None
