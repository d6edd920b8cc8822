"""What the systems that keep their own items share: their files, and their build."""

from __future__ import annotations

import hashlib
import json
import re
import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memcost.io import Bar, write_json
from memcost.llm import CallResult, ChatRequest, LLMClient
from memcost.memory.base import (
    ITEM_COLUMNS,
    MemorySystem,
    Recall,
    SystemBuild,
    read_done,
    read_failed,
    recorded_builds,
    rows_by_user,
    system_dir,
)
from memcost.memory.search import embed_questions
from memcost.paper import EMBEDDING_MODEL
from memcost.text import count_tokens
from memcost_systems.live import HistoryLine

# What a stored item is, whatever the system (a chunk, a triple, a summary, an observation, ...).
ITEM_SCHEMA = {
    "item_id": "str",  # unique within the user
    "kind": "str",  # chunk | triple | entity | summary | turn | archive | observation | fact
    "text": "str",  # what the reader is shown
    "session_datetime": "str | None",  # ISO date of the conversation it came from
    "tokens": "int",  # o200k tokens of the text
    "valid": "bool",  # false: superseded (graph relations are marked, never deleted)
    "detail": "str",  # JSON of the system's own fields (a triple's source, relation, ...)
    "positions": "list[int]",  # the turns it came from (evidence recall); [] for a summary
}
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def _user_file(folder: Path, user: str) -> Path:
    return folder / f"{_SAFE.sub('_', user)}.parquet"


def write_user(
    folder: Path,
    user: str,
    items: pd.DataFrame,
    vectors: np.ndarray | None,
    *,
    fingerprint: str,
    calls: int,
    info: dict[str, Any] | None = None,
) -> None:
    """One finished user: its items (with vectors), then its line in ``done.json`` (``info``: what
    the build says of it)."""
    missing = [c for c in ITEM_SCHEMA if c not in items.columns]
    if missing:
        raise ValueError(f"items of {user} lack columns {missing}")
    frame = items[list(ITEM_SCHEMA)].copy()
    frame["conversation_id"] = user
    if vectors is not None:
        if len(vectors) != len(frame):
            raise ValueError(f"{user}: {len(frame)} items but {len(vectors)} vectors")
        frame["vector"] = [np.asarray(v, dtype=np.float32).tolist() for v in vectors]
    folder.mkdir(parents=True, exist_ok=True)
    path = _user_file(folder, user)
    frame.to_parquet(path.with_suffix(".tmp"), index=False)
    path.with_suffix(".tmp").replace(path)
    done = read_done(folder)
    done[user] = {"fingerprint": fingerprint, "calls": int(calls), **(info or {})}
    write_json(folder / "done.json", done)
    failed = read_failed(folder)
    if failed.pop(user, None) is not None:
        write_json(folder / "failed.json", failed)


def record_failures(folder: Path, failures: dict[str, str]) -> None:
    if failures:
        write_json(folder / "failed.json", {**read_failed(folder), **failures})


def finished(folder: Path, users: list[str], fingerprint: str) -> dict[str, int]:
    """The users built with ``fingerprint``, each with the chat calls its build made."""
    done = read_done(folder)
    return {
        u: int(done[u].get("calls", 0))
        for u in users
        if done.get(u, {}).get("fingerprint") == fingerprint and _user_file(folder, u).is_file()
    }


def read_user(folder: Path, user: str) -> tuple[pd.DataFrame, np.ndarray | None]:
    path = _user_file(folder, user)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no memory for {user}; run notebook 01 first")
    frame = pd.read_parquet(path)
    vectors = None
    if "vector" in frame.columns:
        vectors = (
            np.stack([np.asarray(v, dtype=np.float32) for v in frame["vector"]])
            if len(frame)
            else np.zeros((0, 0), dtype=np.float32)
        )
        frame = frame.drop(columns=["vector"])
    return frame, vectors


def state_table(folder: Path) -> pd.DataFrame:
    """One row per finished user: valid items, tokens held, model calls made."""
    rows = []
    for user, entry in read_done(folder).items():
        path = _user_file(folder, user)
        if not path.is_file():
            continue
        items = pd.read_parquet(path, columns=["tokens", "valid"])
        held = items.loc[items["valid"]]
        rows.append(
            {
                "conversation_id": user,
                "items": len(held),
                "tokens": int(held["tokens"].sum()),
                "invalid_items": int((~items["valid"]).sum()),
                "calls": int(entry.get("calls", 0)),
                **{k: v for k, v in entry.items() if k not in ("fingerprint", "calls")},
            }
        )
    return pd.DataFrame(rows).reindex(
        columns=list(
            dict.fromkeys(
                [
                    "conversation_id",
                    "items",
                    "tokens",
                    "invalid_items",
                    "calls",
                    *[c for r in rows for c in r],
                ]
            )
        )
    )


def item_rows(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Stored items with every column of :data:`ITEM_SCHEMA` (tokens counted here)."""
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
    return pd.DataFrame(out, columns=list(ITEM_SCHEMA))


class UserIngest:
    """One user's ingest: ``requests()`` (the next wave; none when finished), ``take()`` their
    results, then ``items()``."""

    def __init__(self, user: str, lines: list[HistoryLine]):
        self.user, self.lines = user, lines
        self.calls = 0

    def requests(self) -> list[ChatRequest]:
        return []

    def take(self, results: list[CallResult]) -> None:
        raise NotImplementedError(f"{type(self).__name__} asked for requests it cannot take")

    @abstractmethod
    def items(self) -> pd.DataFrame: ...

    def info(self) -> dict[str, Any]:
        return {}


USERS_PER_BLOCK = 50  # users embedded and written together by a build


def users_bar(client: LLMClient, total: int, desc: str) -> Bar:
    """A bar over a build's users, off when the client's progress is."""
    return Bar(total=total, desc=desc, unit="user", disable=not total or not client.config.progress)


def run_waves(
    client: LLMClient, ingests: Mapping[str, UserIngest], offline: Any, desc: str, parse: Any = None
) -> dict[str, str]:
    """Drive every user's ingest to its end, a wave at a time (``parse``: a malformed reply
    re-asked); ``{user: reason}`` of the failed ones."""
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
    items: pd.DataFrame
    vectors: np.ndarray | None
    state: Any = None  # what :meth:`StoredSystem.new_state` made for this user

    def of_kind(self, *kinds: str) -> np.ndarray:
        return self.items["kind"].isin(kinds).to_numpy()


class StoredSystem(MemorySystem):
    """A system that keeps its own items; ``embed_kinds`` of them get vectors, ranked exactly
    against the question (:func:`nearest`)."""

    embed_kinds: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()  # ids of the prompts it sends (part of its fingerprint)
    parse: Any = None  # its replies to values (see run_waves); None: taken as text
    stages_in_turn = ("extract",)  # a user's next wave waits for its last (run_waves)

    @property
    def folder(self):
        return system_dir(self.ds, self.name)

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
        """The ingest of one user's conversation."""

    def offline(self, request: ChatRequest) -> str:
        """The offline stand-in for every request the system sends (by ``payload["step"]``)."""
        raise NotImplementedError(f"memory system {self.name} sends no chat requests")

    def build(self, client: LLMClient, conversations: pd.DataFrame) -> SystemBuild:
        t0 = time.perf_counter()
        groups = {str(k): g for k, g in conversations.groupby("conversation_id", sort=False)}
        report = SystemBuild(self.name, users=len(groups))
        fingerprint = self.fingerprint(client)
        done = finished(self.folder, list(groups), fingerprint)
        done = set(recorded_builds(client, self.answers_as, done))
        report.resumed = len(done)
        ingests = {u: self.start(u, g) for u, g in groups.items() if u not in done}
        report.failed = run_waves(
            client, ingests, self.offline, desc=f"{self.name}: ingest", parse=type(self).parse
        )
        built = [u for u in ingests if u not in report.failed]
        bar = users_bar(client, len(built), f"{self.name}: embed and write")
        # a block of users at a time: their embedding requests go out together, and their
        # vectors are let go once written (500 users' at once held 8.5 GB)
        for start in range(0, len(built), USERS_PER_BLOCK):
            block = built[start : start + USERS_PER_BLOCK]
            items = {u: ingests[u].items() for u in block}
            vectors = self._embed(client, items)
            for user in block:
                write_user(
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
        record_failures(self.folder, report.failed)
        report.built = len(built)
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
        arrays = client.embed_groups(
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
        """Each question against its user's items, loaded for that user's questions and let go after
        (LongMemEval's 500 users at once outgrew 24 GB)."""
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
        return state_table(self.folder)

    def items(self, user: str) -> pd.DataFrame:
        return read_user(self.folder, user)[0]

    @property
    def memory_files(self) -> list:
        return [self.folder / "done.json"]

    def load(self, user: str) -> tuple[pd.DataFrame, np.ndarray | None]:
        return read_user(self.folder, user)


def nearest(
    vectors: np.ndarray | None, query: np.ndarray, eligible: np.ndarray, k: int
) -> list[tuple[int, float]]:
    """The ``k`` eligible rows most similar to ``query`` (exact cosine), ties by row order."""
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
    """``items``' rows in that order with their scores (NaN: shown without a search)."""
    scores = scores or {}
    return items.iloc[list(rows)].assign(score=[scores.get(r, np.nan) for r in rows])
