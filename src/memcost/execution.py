"""Which execution modes can serve which calls: the rule the runner, the client and the estimate
share (the ``execution`` parameter: :data:`memcost.params.EXECUTION_MODES`).

Batch and Flex are OpenAI's own: the Batch API (a file of requests, results within 24 hours) and
Flex processing (``service_tier: "flex"`` on ordinary requests, slower, sometimes a 429
``resource_unavailable``). Both are billed at half the list price. OpenRouter and servers of your
own (vLLM, Ollama: backend ``custom``) have neither, and a model is sold on them only where the
price table (:mod:`memcost.prices`) gives it a ``batch_multiplier`` / ``flex_multiplier``. A
stage whose mode cannot be served is refused before any call, in one line that names the stage,
the model and what to change (:func:`execution_problem`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from memcost.models import (
    EMBEDDING_MODEL,
    EXTRACTION_MODEL,
    JUDGE_MODEL,
    READER_MODEL,
    per_model,
)
from memcost.params import client_option
from memcost.prices import PRICE_TABLE_NAME, UnknownPriceError, price_for

# The backend that sells batch and flex execution.
DISCOUNT_BACKEND = "openai"
# Flex answers are slower (OpenAI's Flex guide raises its SDK's 10-minute default to 15
# minutes). The client's request timeout (300 s by default) is multiplied by this for Flex
# requests: 900 s, the guide's 15 minutes.
FLEX_TIMEOUT_FACTOR = 3.0
# The error code of OpenAI's Flex 429 when it lacks capacity (nothing is billed for it).
FLEX_UNAVAILABLE_CODE = "resource_unavailable"

# Which parameter names the model of each ledger stage (memcost.calls.STAGES), and its default.
STAGE_MODEL_PARAMETERS: dict[str, tuple[tuple[str, Any], ...]] = {
    "extract": (("extraction_model", EXTRACTION_MODEL),),
    "update": (("extraction_model", EXTRACTION_MODEL),),
    "embed": (("embedding_model", EMBEDDING_MODEL),),
    "read": (("reader_model", READER_MODEL),),
    "long_context": (("models", []), ("baseline_models", [])),
    "judge": (("judge_model", JUDGE_MODEL),),
}
# Every parameter that names a model some stage calls, in stage order.
MODEL_PARAMETERS: tuple[str, ...] = tuple(
    dict.fromkeys(name for pairs in STAGE_MODEL_PARAMETERS.values() for name, _ in pairs)
)
_NAMES = {"batch": "the Batch API", "flex": "Flex processing"}


def stage_models(stage: str, params: Mapping[str, Any]) -> Iterator[str]:
    """The models ``stage``'s calls go to under ``params`` (the notebooks' defaults filled in)."""
    for name, default in STAGE_MODEL_PARAMETERS.get(stage, ()):
        value = params.get(name, default)
        for model in value if isinstance(value, (list, tuple)) else [value]:
            if model:
                yield str(model)


def discount_multiplier(
    model: str, mode: str, price_overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> float | None:
    """What ``mode`` charges for ``model`` relative to its list price (1.0 for interactive;
    ``None``: the price table sells no such mode for it)."""
    if mode == "interactive":
        return 1.0
    try:
        price = price_for(model, price_overrides)
    except UnknownPriceError:
        return None
    return price.batch_multiplier if mode == "batch" else price.flex_multiplier


def execution_problem(
    stage: str,
    mode: str,
    model: str,
    backend: str,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> str | None:
    """One line saying why ``mode`` cannot serve ``stage``'s calls to ``model`` on ``backend``,
    or ``None`` when it can (interactive always can; the offline backend sends nothing)."""
    if mode == "interactive" or backend == "offline":
        return None
    what = _NAMES.get(mode, mode)
    fix = f"set execution {stage}: interactive"
    if backend != DISCOUNT_BACKEND:
        return (
            f"execution {stage}: {mode} cannot be used for {model}: backend '{backend}' has "
            f"no {what} (only OpenAI's own API does); {fix}, or route {model} to backend "
            f"openai"
        )
    if discount_multiplier(model, mode, price_overrides) is None:
        field = f"{mode}_multiplier"
        return (
            f"execution {stage}: {mode} cannot be used for {model}: {PRICE_TABLE_NAME} sells "
            f"no {what} for it ({field} is None); {fix}, or, if OpenAI now offers it, "
            f"-p 'price_overrides={{\"{model}\": {{{field}: 0.5}}}}'"
        )
    return None


def backend_of(model: str, params: Mapping[str, Any]) -> str:
    """The backend ``params`` route ``model`` to (``model_backends`` first, then ``backend``)."""
    return str(
        per_model(client_option(params, "model_backends"), model, params.get("backend", "offline"))
    )
