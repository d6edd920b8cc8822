"""Offline reader (the stand-in for the memory reader model, study §2): extractive answers.

It answers with the retrieved fact that shares the most words with the question (BM25 over
content words), or says it has no information; with options (PersonaMem), the option the
retrieved facts support best. It cannot reason, count or subtract dates: it shows what
retrieval alone brings back. It reads the request's ``payload`` (``question``, ``facts``,
``options``), so it imports nothing of the retrieval stage.
"""

from __future__ import annotations

from memcost import answers
from memcost.llm import ChatRequest
from memcost.text import BM25

NO_INFORMATION = "I don't have that information."


def offline_reader(request: ChatRequest) -> str:
    """Offline reader: the retrieved fact with the highest lexical overlap with the question
    (BM25 over content words), or :data:`NO_INFORMATION` when none shares a word with it.

    With options, the option the retrieved facts support best (:data:`NO_INFORMATION` when they
    support none)."""
    facts = request.payload["facts"]
    options = request.payload.get("options")
    if options:
        pick = answers.best_supported_option(options, facts)
        return NO_INFORMATION if pick is None else answers.format_choice(options, pick)
    if not facts:
        return NO_INFORMATION
    best = BM25(facts).best(request.payload["question"])
    return NO_INFORMATION if best is None else facts[best[0]]
