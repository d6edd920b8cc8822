"""The OpenAI Batch API for stages that can wait: half the price, results within 24 hours.

:mod:`~memcost.llm.batch.prefill` decides which requests go and turns results into cache rows
and ledger records, before the client makes its calls; :mod:`~memcost.llm.batch.session`
submits, re-attaches and waits; :mod:`~memcost.llm.batch.files` writes and reads the JSONL files;
:mod:`~memcost.llm.batch.journal` owns ``batches.jsonl`` in the run directory;
:mod:`~memcost.llm.batch.transport` makes the calls.
See docs/architecture.md, "Batch API".
"""

from memcost.llm.batch.journal import BatchJournal, journal_path
from memcost.llm.batch.prefill import BATCH_BACKENDS, BatchPrefill, batch_refusal
from memcost.llm.batch.session import MAX_ROUNDS, BatchLost, BatchWaitExceeded
from memcost.llm.config import BATCH_RETRY_MODES, batch_options

__all__ = [
    "BATCH_BACKENDS",
    "BATCH_RETRY_MODES",
    "MAX_ROUNDS",
    "BatchJournal",
    "BatchLost",
    "BatchPrefill",
    "BatchWaitExceeded",
    "batch_options",
    "batch_refusal",
    "journal_path",
]
