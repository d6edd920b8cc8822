"""Mem0-style fact memory (study §2; paper §3.1), one file per step of notebook 01.

- :mod:`~memcost.memory.segment`: the history cut into segments of at most ``batch_size``
  messages and ``max_segment_chars`` characters, never across two sessions;
- :mod:`~memcost.memory.extract`: one extraction call per segment, parsed into candidate facts
  with their provenance (conversation, session, date, speaker, turns);
- :mod:`~memcost.memory.user`: one user's facts, their status and vectors;
- :mod:`~memcost.memory.update`: the update phase (Mem0's ``add``): each new fact against the
  most similar stored facts of the same user, ADD / UPDATE / DELETE / NOOP, applied;
- :mod:`~memcost.memory.build`: :class:`MemoryBuilder`, the same steps for every user, resumably,
  each finished user written to the run's vector store (:mod:`memcost.vectorstore`: FAISS files
  per user by default, or pgvector, the paper's store);
- :mod:`~memcost.memory.facts`: the owner of the memory's files (schema, writer, reader);
- :mod:`~memcost.memory.stats`: per-user sizes and notebook 01's metrics.

The offline stand-ins (sentence facts, the lexical update rule) are in :mod:`memcost.offline`;
the figures in :mod:`memcost.plots.memory`.
"""

from memcost.catalog import generation_params
from memcost.memory.build import (
    BuildReport,
    MemoryBuilder,
    MemoryConfig,
    UserState,
    apply_planned,
    embed_candidates,
    extract_segments,
)
from memcost.memory.embed import embed_groups
from memcost.memory.extract import (
    Candidate,
    candidates_from,
    describe_people,
    extraction_request,
    parse_extraction,
    render_segment,
)
from memcost.memory.facts import (
    FACT_SCHEMA,
    SEGMENT_SCHEMA,
    SPLIT_SCHEMA,
    index_dir,
    load_facts,
    load_updates,
    read_facts,
    read_segments,
    read_splits,
    read_updates,
)
from memcost.memory.segment import (
    BATCH_SIZE,
    MAX_SEGMENT_CHARS,
    PERSON_ROLE,
    Message,
    Segment,
    SplitMessage,
    UserPlan,
    message_content,
    plan_users,
    segment_conversation,
    segments_table,
    split_text,
    splits_table,
)
from memcost.memory.stats import (
    decision_counts,
    memory_metrics,
    memory_users,
    read_inputs,
    user_stats,
)
from memcost.memory.update import (
    DECISIONS,
    FACT_STATUSES,
    UPDATE_TOP_K,
    Decision,
    UpdatePlan,
    apply_decisions,
    merged_rows,
    parse_update,
    plan_update,
    render_memories_for_update,
    resolve_decisions,
    similar_facts,
    update_request,
)
from memcost.memory.user import UserMemory
from memcost.memory.vector_store import open_run_store
from memcost.offline.extract import (
    informative_sentence,
    offline_extract,
    offline_fact_text,
    person_name,
)
from memcost.offline.update import lexical_decision, offline_update

__all__ = [
    "BATCH_SIZE",
    "DECISIONS",
    "FACT_SCHEMA",
    "FACT_STATUSES",
    "MAX_SEGMENT_CHARS",
    "PERSON_ROLE",
    "SEGMENT_SCHEMA",
    "SPLIT_SCHEMA",
    "UPDATE_TOP_K",
    "BuildReport",
    "Candidate",
    "Decision",
    "MemoryBuilder",
    "MemoryConfig",
    "Message",
    "Segment",
    "SplitMessage",
    "UserMemory",
    "UserPlan",
    "UserState",
    "apply_decisions",
    "apply_planned",
    "candidates_from",
    "decision_counts",
    "describe_people",
    "embed_candidates",
    "embed_groups",
    "extract_segments",
    "extraction_request",
    "generation_params",
    "informative_sentence",
    "lexical_decision",
    "index_dir",
    "load_facts",
    "load_updates",
    "memory_metrics",
    "memory_users",
    "merged_rows",
    "message_content",
    "offline_extract",
    "offline_fact_text",
    "offline_update",
    "parse_extraction",
    "parse_update",
    "person_name",
    "open_run_store",
    "plan_update",
    "UpdatePlan",
    "plan_users",
    "read_facts",
    "read_inputs",
    "read_segments",
    "read_splits",
    "read_updates",
    "render_memories_for_update",
    "render_segment",
    "resolve_decisions",
    "segment_conversation",
    "segments_table",
    "similar_facts",
    "split_text",
    "splits_table",
    "update_request",
    "user_stats",
]
