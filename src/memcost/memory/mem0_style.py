"""``mem0_style``, the paper's memory (paper §3.1), built resumably in named steps and served turn
by turn (docs/architecture.md, "The paper's memory")."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import memcost.memory.facts as files
from memcost.llm import CallResult, LLMClient
from memcost.llm.scheduler import ProgressBar
from memcost.memory.base import (
    ITEM_COLUMNS,
    TOKENS_PER_RETRIEVED_ITEM,
    MemorySystem,
    Recall,
    SystemBuild,
    recorded_builds,
    register,
    rows_by_user,
)
from memcost.memory.facts import memory_users, user_stats
from memcost.memory.faiss_store import FaissStore, index_dir, recall_at_k
from memcost.memory.search import (
    SYSTEM,
    TOP_K,
    MemoryStore,
    embed_questions,
    open_store,
    store_class,
)
from memcost.memory.segments import (
    BATCH_SIZE,
    MAX_SEGMENT_CHARS,
    Candidate,
    Segment,
    UserPlan,
    candidates_from,
    extraction_request,
    parse_extraction,
    plan_users,
    segment_row,
    split_rows,
)
from memcost.memory.update import (
    UPDATE_TOP_K,
    Decision,
    UserMemory,
    apply_decisions,
    merged_rows,
    parse_update,
    plan_update,
    resolve_decisions,
    similar_facts,
)
from memcost.memory.vectors import EF_CONSTRUCTION, EF_SEARCH, HNSW_M, Change, VectorStore
from memcost.offline import offline_extract, offline_update
from memcost.paper import EMBEDDING_MODEL, EXTRACTION_MODEL
from memcost.paths import DatasetPaths, RunPaths
from memcost.prompts import MEMORY_EXTRACT, MEMORY_UPDATE


@register
class Mem0Style(MemorySystem):
    name = "mem0_style"
    answers_as = SYSTEM  # the paper's memory answers as ``memory``
    describes = "the paper's: extracted facts, the ADD/UPDATE/DELETE/NOOP update phase, top-20"
    defaults = {
        "extraction_model": EXTRACTION_MODEL,
        "extraction_reasoning_effort": "low",
        "embedding_model": EMBEDDING_MODEL,
        "batch_size": BATCH_SIZE,
        "max_segment_chars": MAX_SEGMENT_CHARS,
        "update_phase": True,
        "update_top_k": UPDATE_TOP_K,
        "hnsw": {"m": HNSW_M, "ef_construction": EF_CONSTRUCTION},
        "top_k": TOP_K,
        "ef_search": EF_SEARCH,
        "vector_store": "faiss",
        "pgvector_dsn": "",
        "pgvector_layout": "per_user",
        "pgvector_iterative_scan": "off",
    }
    parameters = tuple(defaults)  # notebooks 01 and 02 declare each of them

    @classmethod
    def in_turn(cls, settings):
        return ("update",) if settings.get("update_phase", True) else ()

    @classmethod
    def uses_run_server(cls, settings):
        return store_class(settings.get("vector_store", "faiss")).uses_run_server

    @classmethod
    def read_context_tokens(cls, settings, history_tokens, turn_tokens):
        """``top_k`` facts of the paper's measured size."""
        return int(settings["top_k"]) * TOKENS_PER_RETRIEVED_ITEM

    def __init__(self, ds, settings=None, *, dataset: str):
        super().__init__(ds, settings, dataset=dataset)
        self._store: VectorStore | None = None
        self._memory: tuple[int | None, MemoryStore] | None = None  # (facts.parquet's mtime, it)

    def open_store(self, client: LLMClient) -> VectorStore:
        """The run's vector store, opened once (:meth:`close` stops a server it started)."""
        if self._store is None:
            s = self.settings
            self._store = open_store(
                s["vector_store"],
                client.embed([""], model=s["embedding_model"]).shape[1],
                RunPaths(self.ds.root.parent),
                self.dataset,
                m=s["hnsw"]["m"],
                ef_construction=s["hnsw"]["ef_construction"],
                **{
                    k.removeprefix("pgvector_"): v
                    for k, v in s.items()
                    if k.startswith("pgvector_")
                },
            )
        return self._store

    @property
    def store(self) -> VectorStore:
        if self._store is None:
            raise RuntimeError("mem0_style: open_store(client) first")
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def config(self) -> MemoryConfig:
        return MemoryConfig.of(self.settings, self.dataset)

    def build(self, client: LLMClient, conversations: pd.DataFrame) -> SystemBuild:
        t0 = time.perf_counter()
        asked = pd.read_parquet(self.ds.questions) if self.ds.questions.is_file() else None
        users = memory_users(conversations, asked)
        builder = MemoryBuilder(client, self.ds, self.config(), self.open_store(client))
        done = builder.run(conversations, users)
        # a user with failed segments is written, incomplete, and rebuilt by a rerun
        failed = {u: "failed segments (rerun to retry them)" for u in done.incomplete}
        return SystemBuild(
            self.name,
            users=len(users),
            built=len(done.built) - len(failed),
            resumed=len(done.resumed),
            failed=failed,
            wall_s=time.perf_counter() - t0,
            details={
                "extraction_calls": done.extraction_calls,
                "update_calls": done.update_calls,
                "new_facts": done.candidates,
                "failed_segments": done.failed_segments,
            },
        )

    def recall(self, client: LLMClient, questions: pd.DataFrame) -> dict[str, Recall]:
        model, top_k, ef = (self.settings[k] for k in ("embedding_model", "top_k", "ef_search"))
        store = MemoryStore(self.ds, self.open_store(client), embedding_model=model)
        vectors = embed_questions(client, questions, dataset=self.dataset, model=model)
        ids = questions["question_id"].astype(str).tolist()
        out = {}
        for user, at in rows_by_user(questions["conversation_id"]).items():
            facts = store.get(user)
            # the exact top-k of all the user's questions at once (what HNSW is measured
            # against); each question's HNSW search alone, timed as a user would wait for it
            exact = facts.exact_search(vectors[at], top_k)[0] if len(facts) else None
            columns = {  # ITEM_COLUMNS, the score's per question
                "item_id": facts.table["fact_id"].array,
                "kind": np.full(len(facts.table), "fact", dtype=object),
                "text": facts.table["text"].array,
                "session_datetime": facts.table["session_datetime"].array,
                "tokens": facts.table["tokens"].array,
                "positions": facts.table["source_positions"].array,
            }
            for j, i in enumerate(at):
                scores, rows, latency = facts.timed_search(vectors[i], top_k, ef_search=ef)
                keep = rows >= 0
                score = [round(float(x), 6) for x in scores[keep]]
                items = pd.DataFrame(
                    {n: score if n == "score" else columns[n][rows[keep]] for n in ITEM_COLUMNS}
                )
                details = {
                    "index_recall": None
                    if exact is None
                    else recall_at_k(scores[None], exact[[j]]),
                    "top_k": top_k,
                    "ef_search": ef,
                }
                out[ids[i]] = Recall(items, latency, details)
        return {qid: out[qid] for qid in ids}

    def items(self, user: str) -> pd.DataFrame:
        facts = self._memories().get(user).table
        return facts.assign(
            item_id=facts["fact_id"], kind="fact", valid=True, positions=facts["source_positions"]
        )

    def _memories(self) -> MemoryStore:
        """The users' memories while facts.parquet is unchanged, read in one pass (a store per user
        was 47 s of notebook 02's 53 on LongMemEval)."""
        path = self.ds.memory / "facts.parquet"
        stamp = path.stat().st_mtime_ns if path.is_file() else None
        if self._memory is None or self._memory[0] != stamp:
            self._memory = (stamp, MemoryStore(self.ds, self.store))
        return self._memory[1]

    @property
    def memory_files(self) -> list:
        return [self.ds.memory / "facts.parquet"]

    def state(self) -> pd.DataFrame:
        stats = user_stats(self.ds)
        return pd.DataFrame(
            {
                "conversation_id": stats["conversation_id"],
                "items": stats["active_facts"],
                "tokens": stats["fact_tokens"],
                "invalid_items": stats["superseded"] + stats["deleted"],
                "calls": stats["segments"],
            }
        )  # extraction calls (+ updates)


BUILT_BY = (  # the system's settings that change what is built, beside the HNSW's
    "extraction_model",
    "extraction_reasoning_effort",
    "embedding_model",
    "batch_size",
    "max_segment_chars",
    "update_phase",
    "update_top_k",
)


@dataclass(frozen=True)
class MemoryConfig:
    """The settings of notebook 01 that change what is built."""

    dataset: str
    extraction_model: str = EXTRACTION_MODEL
    extraction_reasoning_effort: str = "low"
    embedding_model: str = EMBEDDING_MODEL
    batch_size: int = BATCH_SIZE
    max_segment_chars: int = MAX_SEGMENT_CHARS
    update_phase: bool = True
    update_top_k: int = UPDATE_TOP_K
    hnsw_m: int = HNSW_M
    ef_construction: int = EF_CONSTRUCTION

    @classmethod
    def of(cls, settings: Mapping[str, Any], dataset: str) -> MemoryConfig:
        hnsw = settings["hnsw"]
        built = {k: settings[k] for k in BUILT_BY if k in settings}
        return cls(dataset, hnsw_m=hnsw["m"], ef_construction=hnsw["ef_construction"], **built)

    def fingerprint(self, client: LLMClient) -> str:
        material = {
            **asdict(self),
            "backends": {
                m: client.backend_for(m) for m in (self.extraction_model, self.embedding_model)
            },
            "base_url": client.base_url,
            "prompts": [MEMORY_EXTRACT.id, MEMORY_UPDATE.id],
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def conversation_hashes(conversations: pd.DataFrame) -> dict[str, str]:
    """Each user's turns as one hash: a changed turn changes that user's fingerprint only."""
    out = {}
    for user, rows in conversations.groupby("conversation_id", sort=False):
        text = rows.to_json(orient="records", date_format="iso", default_handler=str)
        out[str(user)] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


def user_fingerprint(settings: str, conversation: str | None) -> str:
    return hashlib.sha256(f"{settings}:{conversation}".encode()).hexdigest()[:16]


@dataclass
class UserState:
    plan: UserPlan
    memory: UserMemory
    candidates: dict[int, list[Candidate]] = field(default_factory=dict)
    segment_rows: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0  # extraction and update calls made (its ledger records, checked on resume)


@dataclass
class BuildReport:
    """What :meth:`MemoryBuilder.run` did."""

    users: int = 0
    built: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)  # finished by an earlier run: skipped
    incomplete: list[str] = field(default_factory=list)  # written with failed segments
    extraction_calls: int = 0
    update_calls: int = 0
    failed_segments: int = 0
    candidates: int = 0
    wall_s: float = 0.0


def extract_segments(
    client: LLMClient, config: MemoryConfig, segments: Sequence[Segment], *, desc: str
) -> list[CallResult]:
    """One extraction call per segment with a person's message."""
    requests = [
        extraction_request(
            s,
            dataset=config.dataset,
            model=config.extraction_model,
            reasoning_effort=config.extraction_reasoning_effort,
        )
        for s in segments
    ]
    if not requests:
        return []
    return client.chat_many(requests, offline=offline_extract, parse=parse_extraction, desc=desc)


def _tags(config: MemoryConfig, user: str) -> dict[str, Any]:
    return {"dataset": config.dataset, "conversation_id": user, "system": Mem0Style.answers_as}


def embed_candidates(
    client: LLMClient, config: MemoryConfig, candidates: Mapping[str, Sequence[Candidate]]
) -> int | None:
    """Embed each user's new facts (one group each) into their ``vector``; the dimensions, ``None``
    when none."""
    users = list(candidates)
    groups = [([c.text for c in candidates[u]], _tags(config, u)) for u in users]
    vectors = client.embed_groups(groups, model=config.embedding_model, desc="embed facts")
    dims = None
    for u, matrix in zip(users, vectors, strict=True):
        dims = matrix.shape[1]
        for cand, row in zip(candidates[u], matrix, strict=True):
            cand.vector = row
    return dims


def apply_planned(
    client: LLMClient,
    config: MemoryConfig,
    memories: Mapping[str, UserMemory],
    planned: Sequence[tuple[str, list[Decision]]],
) -> dict[str, list[dict[str, Any]]]:
    """Embed the UPDATEs' merged texts, then apply each user's decisions; each user's
    ``updates.jsonl`` records."""
    groups, where = [], []
    for u, decisions in planned:
        idx = merged_rows(decisions)
        if idx:
            groups.append(([decisions[i].text for i in idx], _tags(config, u)))
            where.append((u, idx))
    merged = client.embed_groups(
        groups, model=config.embedding_model, desc="embed merged facts", progress=False
    )
    vectors_of: dict[str, dict[int, np.ndarray]] = {}
    for (u, idx), matrix in zip(where, merged, strict=True):
        vectors_of[u] = {i: matrix[j] for j, i in enumerate(idx)}
    records: dict[str, list[dict[str, Any]]] = {}
    for u, decisions in planned:
        records.setdefault(u, []).extend(
            apply_decisions(memories[u], decisions, vectors_of.get(u, {}))
        )
    return records


def fail_segment(state: UserState, index: int, error: str) -> None:
    for row in state.segment_rows:
        if row["segment_index"] == index:
            row.update(status="failed", candidates=0, error=error)
            return
    raise KeyError(f"user {state.plan.user!r} has no segment {index}")


def extract(
    client: LLMClient, config: MemoryConfig, states: Mapping[str, UserState], report: BuildReport
) -> None:
    """Every pending user's segments extracted at once, into candidates and segment rows."""
    jobs = [(u, s) for u, st in states.items() for s in st.plan.segments if s.person_messages]
    results = extract_segments(client, config, [s for _, s in jobs], desc="extract facts")
    report.extraction_calls = len(jobs)
    for u, _ in jobs:
        states[u].calls += 1
    outcome = {(u, s.index): r for (u, s), r in zip(jobs, results, strict=True)}
    for u, state in states.items():
        for seg in state.plan.segments:
            result = outcome.get((u, seg.index))
            if result is None:
                row = segment_row(seg, status="no_person_messages", candidates=0, error=None)
            elif not result.ok:
                report.failed_segments += 1
                row = segment_row(
                    seg, status="failed", candidates=0, error=result.error or result.parse_error
                )
            else:
                cands = candidates_from(
                    seg,
                    result.parsed,
                    backend=result.backend,
                    prompt_version=result.request.prompt_version,
                )
                state.candidates[seg.index] = cands
                report.candidates += len(cands)
                row = segment_row(seg, status="ok", candidates=len(cands), error=None)
            state.segment_rows.append(row)


def update_wave(
    client: LLMClient,
    config: MemoryConfig,
    states: Mapping[str, UserState],
    w: int,
    report: BuildReport,
    desc: str = "update phase",
) -> None:
    """The update phase for segment ``w`` of every user; a call that failed makes the segment failed
    (none of its facts kept: adding them all would change what the phase decides), the user
    incomplete and rebuilt by a resume."""
    cfg = config
    calls, direct = [], []
    for u, state in states.items():
        cands = state.candidates.get(w)
        if not cands:
            continue
        compared = [
            [fid for fid, _ in row] for row in similar_facts(state.memory, cands, cfg.update_top_k)
        ]
        step = plan_update(
            state.memory,
            cands,
            compared,
            dataset=cfg.dataset,
            model=cfg.extraction_model,
            reasoning_effort=cfg.extraction_reasoning_effort,
            update_phase=cfg.update_phase,
        )
        (calls if step.needs_call else direct).append((u, cands, compared, step))
    results = (
        client.chat_many(
            [c[3].request for c in calls],
            offline=offline_update,
            parse=parse_update,
            desc=desc,
            progress=False,
        )
        if calls
        else []
    )
    report.update_calls += len(calls)
    for u, *_ in calls:
        states[u].calls += 1
    planned = []
    for (u, cands, compared, step), result in zip(calls, results, strict=True):
        if result.ok:
            planned.append(
                (u, resolve_decisions(cands, compared, result, step.request.payload["ids"]))
            )
        else:
            fail_segment(states[u], w, f"update phase: {result.error or result.parse_error}")
            report.failed_segments += 1
    planned += [
        (u, resolve_decisions(cands, compared, None, {}, note=step.note))
        for u, cands, compared, step in direct
    ]
    memories = {u: states[u].memory for u, _ in planned}
    for u, records in apply_planned(client, cfg, memories, planned).items():
        states[u].updates.extend(records)


class MemoryBuilder:
    """Builds every user's memory for one dataset into ``<ds>/memory/`` and ``store``."""

    def __init__(
        self,
        client: LLMClient,
        ds: DatasetPaths,
        config: MemoryConfig,
        store: VectorStore | None = None,
    ):
        self.client = client
        self.ds = ds
        self.config = config
        self.fingerprint = config.fingerprint(client)  # the settings; per user, with its turns
        self.inputs: dict[str, str] = {}  # user -> hash of its conversation (set by run)
        self.store = store or FaissStore(
            0, folder=index_dir(ds), m=config.hnsw_m, ef_construction=config.ef_construction
        )

    def user_dir(self, user: str) -> Path:
        return files.user_dir(self.ds, user)

    def user_fingerprint(self, user: str) -> str:
        return user_fingerprint(self.fingerprint, self.inputs.get(user))

    def is_done(self, user: str) -> bool:
        """Finished with the same settings and conversation, and no failed segment."""
        done = files.read_done(self.ds, user)
        if done is None or done.get("failed_segments"):
            return False
        return (
            done.get("fingerprint") == self.user_fingerprint(user)
            and done.get("conversation_id") == user
            and self.store.is_built(user)
        )

    def plan(self, conversations: pd.DataFrame, users: Sequence[str]) -> dict[str, UserPlan]:
        return plan_users(
            conversations,
            list(users),
            batch_size=self.config.batch_size,
            max_chars=self.config.max_segment_chars,
        )

    def run(
        self,
        conversations: pd.DataFrame,
        users: Sequence[str],
        *,
        on_user: Callable[[str], None] | None = None,
    ) -> BuildReport:
        """Build every user not finished yet, then the dataset-wide files (``on_user`` as each is
        written)."""
        t0 = time.perf_counter()
        plans = self.plan(conversations, users)
        self.inputs = conversation_hashes(conversations)
        report = BuildReport(users=len(plans))
        done = {u: files.read_done(self.ds, u) or {} for u in plans if self.is_done(u)}
        finished = {u: int(marker.get("calls", 0)) for u, marker in done.items()}
        report.resumed = recorded_builds(self.client, SYSTEM, finished)
        pending = [u for u in plans if u not in set(report.resumed)]
        states = {u: UserState(plans[u], UserMemory(u)) for u in pending}
        extract(self.client, self.config, states, report)
        dims = embed_candidates(
            self.client,
            self.config,
            {u: [c for cs in states[u].candidates.values() for c in cs] for u in pending},
        )
        if dims is None:
            dims = self.client.embed([""], model=self.config.embedding_model).shape[1]
        waves = max((len(plans[u].segments) for u in pending), default=0)
        for u in pending:
            if not plans[u].segments:
                self.finish(states[u], dims, on_user)
                report.built.append(u)
        # the update phase goes a segment index at a time through every user (each wave's calls
        # are the users' next segments): its calls have no bar of their own, so one bar counts
        # the segments, a wave's at a time
        bar = (
            ProgressBar(
                sum(len(plans[u].segments) for u in pending),
                "update phase",
                lambda: f"calls={report.update_calls}",
                "segment",
            )
            if waves and self.client.config.progress
            else None
        )
        for w in range(waves):
            desc = f"update phase, segment {w + 1}/{waves}"
            update_wave(self.client, self.config, states, w, report, desc)
            for u in pending:
                if len(plans[u].segments) == w + 1:
                    self.finish(states[u], dims, on_user)
                    report.built.append(u)
            if bar is not None:
                bar.update(sum(len(plans[u].segments) > w for u in pending))
        if bar is not None:
            bar.close()
        files.write_dataset_files(self.ds, list(plans), split_rows(plans))
        report.incomplete = [u for u in report.built if files.read_incomplete(self.ds, u)]
        report.wall_s = time.perf_counter() - t0
        return report

    def finish(
        self, state: UserState, dims: int, on_user: Callable[[str], None] | None = None
    ) -> None:
        """Write one user's files atomically, ``done.json`` last (``incomplete.json`` with failed
        segments)."""
        user = state.plan.user
        arrow = state.memory.arrow()
        files.write_user_files(self.ds, user, arrow, state.segment_rows, state.updates)
        facts = arrow.to_pandas()
        active = facts.loc[facts["status"] == "active"].reset_index(drop=True)
        vectors = (
            np.stack([state.memory.vector(f) for f in active["fact_id"]])
            if len(active)
            else np.zeros((0, dims), np.float32)
        )
        changes = [Change(r["decision"], r["fact_id"], r["target_fact_id"]) for r in state.updates]
        self.store.write_user(
            user,
            active["fact_id"].tolist(),
            vectors,
            changes=changes,
            vector_of=state.memory.vector,
        )
        files.mark_done(
            self.ds,
            user,
            self.user_fingerprint(user),
            embedding_model=self.config.embedding_model,
            facts=len(facts),
            active_facts=len(active),
            segments=len(state.plan.segments),
            calls=state.calls,
            failed_segments=sum(r["status"] == "failed" for r in state.segment_rows),
        )
        if on_user is not None:
            on_user(user)
