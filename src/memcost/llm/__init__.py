"""Every model call of the study: one client, OpenAI-compatible, stored, metered, resilient
(docs/architecture.md, "Model calls")."""

# ruff: noqa: F401 - the public names
from memcost.llm.client import LLMClient, make_client
from memcost.llm.offline import HashingEmbedder, OfflineMethod, l2_normalise
from memcost.llm.providers import BACKENDS, check_credentials
from memcost.llm.requests import (
    BudgetExceeded,
    CacheMiss,
    CallResult,
    ChatRequest,
    EmbeddingRequest,
    FatalAPIError,
    ItemRejected,
    LLMError,
    MissingCredentials,
    ModelCapabilityError,
    QuotaExhausted,
    Usage,
    parse_json,
    parse_json_object,
)
