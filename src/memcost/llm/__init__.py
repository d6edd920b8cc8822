"""Every model call of the study: one client, OpenAI-compatible, cached, metered, resilient.

Stage modules build :class:`ChatRequest` / :class:`EmbeddingRequest` values, pass their offline
method, and call :meth:`LLMClient.chat_many` (or ``chat_groups``, ``embed``) on the client a
notebook made with :func:`make_client`. See docs/architecture.md, "Model calls".
"""

from memcost.llm.cache import CACHE_MODES, ResponseCache
from memcost.llm.client import ClientStats, LLMClient, make_client
from memcost.llm.embeddings import HashingEmbedder, l2_normalise
from memcost.llm.errors import (
    BudgetExceeded,
    CacheMiss,
    FatalAPIError,
    ItemRejected,
    LLMError,
    MissingCredentials,
    ModelCapabilityError,
    QuotaExhausted,
)
from memcost.llm.ledger import record_cost
from memcost.llm.offline import OfflineMethod
from memcost.llm.parsing import parse_json, parse_json_object
from memcost.llm.providers import BACKENDS, check_credentials
from memcost.llm.requests import (
    STAGES,
    ChatRequest,
    ChatResult,
    EmbeddingRequest,
    EmbeddingResult,
    Usage,
)
from memcost.llm.retry import RetryPolicy

__all__ = [
    "BACKENDS",
    "CACHE_MODES",
    "STAGES",
    "BudgetExceeded",
    "CacheMiss",
    "ChatRequest",
    "ChatResult",
    "ClientStats",
    "EmbeddingRequest",
    "EmbeddingResult",
    "FatalAPIError",
    "HashingEmbedder",
    "ItemRejected",
    "LLMClient",
    "LLMError",
    "MissingCredentials",
    "ModelCapabilityError",
    "OfflineMethod",
    "QuotaExhausted",
    "ResponseCache",
    "RetryPolicy",
    "Usage",
    "check_credentials",
    "l2_normalise",
    "make_client",
    "parse_json",
    "parse_json_object",
    "record_cost",
]
