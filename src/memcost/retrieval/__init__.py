"""Answering from memory (study §2; paper §3.1), one file per step of notebook 02.

- :mod:`~memcost.retrieval.search`: embed the question, search its own user's facts in the
  run's vector store (and, to measure it, exact search);
- :mod:`~memcost.retrieval.reader`: the reader's request (retrieved facts with their dates);
- :mod:`~memcost.retrieval.recall`: whether the retrieved facts, and the whole memory, cover
  the question's evidence;
- :mod:`~memcost.retrieval.answer`: every question, resumably, into ``answers_memory.jsonl``;
- :mod:`~memcost.retrieval.metrics`: what notebook 02 reports.

The offline reader is :mod:`memcost.offline.reader`; the figure :mod:`memcost.plots.memory`.
"""

from memcost.offline.reader import NO_INFORMATION, offline_reader
from memcost.retrieval.answer import ReadReport, answer_from_memory, answer_record, retrieval_record
from memcost.retrieval.metrics import lexical_match, read_metrics, scored_answers
from memcost.retrieval.reader import reader_request, render_memories, shown_options
from memcost.retrieval.recall import evidence_coverage, evidence_units, recall_by_category
from memcost.retrieval.search import (
    SYSTEM,
    TOP_K,
    MemoryStore,
    Retrieved,
    UserFacts,
    embed_questions,
    retrieve,
    search_quality,
    user_tables,
)

__all__ = [
    "NO_INFORMATION",
    "SYSTEM",
    "TOP_K",
    "MemoryStore",
    "ReadReport",
    "Retrieved",
    "UserFacts",
    "answer_from_memory",
    "answer_record",
    "embed_questions",
    "evidence_coverage",
    "evidence_units",
    "lexical_match",
    "offline_reader",
    "read_metrics",
    "recall_by_category",
    "reader_request",
    "render_memories",
    "retrieval_record",
    "retrieve",
    "search_quality",
    "scored_answers",
    "shown_options",
    "user_tables",
]
