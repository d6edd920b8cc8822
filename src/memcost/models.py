"""What the code knows about each model, by capability: the registry request bodies are built from.

Per model: who serves it, its context window and output limit, whether it reasons and which
generation parameters it accepts (``temperature``, the ``reasoning_effort`` values, the name of
its output limit, ``response_format`` kinds), its tokenizer, its price key, and when it is shut
down and what replaces it. Nothing is guessed from a model's name: a model that is not here (and
not declared by the caller for a server of their own, see :func:`declare_model`) is an error that
says what to add. Prices live in :mod:`memcost.prices`, dated; lifecycle checks in
:mod:`memcost.lifecycle`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

# The paper's models (study §2-§4), by the snapshot the paper used where it names one.
EXTRACTION_MODEL = "gpt-5-nano-2025-08-07"  # §3.1: fact extraction, reasoning_effort=low
# §3.1: answers from retrieved facts, reasoning_effort=medium
READER_MODEL = "gpt-5-mini-2025-08-07"
LONG_CONTEXT_MODELS = ("gpt-5-mini-2025-08-07", "openai/gpt-oss-120b")  # §3.2
JUDGE_MODEL = "gpt-5-mini-2025-08-07"  # §3.4: reasoning_effort=high, three votes
EMBEDDING_MODEL = "text-embedding-3-small"  # §3.1: 1,536 dimensions

# The paper's settings, by notebook and parameter name (study §3). The notebooks' parameter
# defaults, the paper presets and the report's comparability check must agree with these; a
# test reads all of them.
PAPER_SETTINGS: dict[str, dict[str, object]] = {
    "01_extract_facts": {
        "extraction_model": EXTRACTION_MODEL,
        "extraction_reasoning_effort": "low",  # §3.1
        "embedding_model": EMBEDDING_MODEL,
        "batch_size": 10,  # §3.1: messages per segment
        "max_segment_chars": 8000,  # §3.1: characters of content per segment
        "hnsw": {"m": 16, "ef_construction": 64},  # §3.1: HNSW index
    },
    "02_answer_from_memory": {
        "reader_model": READER_MODEL,
        "reader_reasoning_effort": "medium",  # §3.1
        "embedding_model": EMBEDDING_MODEL,
        "top_k": 20,  # §3.1: retrieved facts per question
        "ef_search": 40,  # pgvector's default hnsw.ef_search
    },
    "03_answer_long_context": {"models": list(LONG_CONTEXT_MODELS)},  # §3.2
    "04_judge_answers": {
        "judge_model": JUDGE_MODEL,
        "reasoning_effort": "high",  # §3.4
        "n_votes": 3,  # §3.4: majority of three votes
    },
}


# Sources of the facts below (checked 2026-11-30):
DEPRECATIONS_URL = "https://developers.openai.com/api/docs/deprecations"  # notice of 2026-06-11
GPT5_SHUTDOWN = "2026-12-11"  # gpt-5, -mini, -nano and their snapshots (DEPRECATIONS_URL)
OUTPUT_LIMIT_PARAMS = ("max_tokens", "max_completion_tokens")
RESPONSE_FORMATS = ("json_object", "json_schema")
_GPT5_EFFORTS = ("minimal", "low", "medium", "high")
# https://docs.litellm.ai/blog/gpt-6-1-terra (OpenAI's model page as quoted there, 2026-11-30)
_GPT61_EFFORTS = ("none", "low", "medium", "high", "xhigh", "max")
_GPT_OSS_EFFORTS = ("low", "medium", "high")


class UnknownModelError(KeyError):
    """A model the registry does not know, and the caller did not declare."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


@dataclass(frozen=True)
class ModelInfo:
    """Static facts about one model (not prices), by capability.

    ``context_window`` is the total tokens of prompt plus output the model accepts;
    ``max_output_tokens`` the most it can produce; ``max_input_tokens`` what is left for the
    prompt when the maximum output is reserved (how OpenAI documents GPT-5's 272k input limit).
    ``temperature``: the model accepts ``temperature`` (reasoning models of OpenAI reject it with
    HTTP 400). ``reasoning_efforts``: the ``reasoning_effort`` values it accepts (empty: none).
    ``output_limit_param``: the body field that carries the output limit. ``prompt_cache_key``:
    the provider routes by the ``prompt_cache_key`` field. ``shutdown_date`` (YYYY-MM-DD) and
    ``successor`` come from the provider's deprecations page.
    """

    name: str  # canonical name without provider prefix or snapshot date
    family: str  # "gpt-5" | "gpt-6" | "gpt-oss" | "embedding" | "other" | "declared"
    context_window: int
    max_output_tokens: int
    reasoning: bool  # produces reasoning tokens (billed as output)
    embedding_dims: int | None = None
    max_input_tokens: int | None = None
    providers: tuple[str, ...] = ("openai",)
    temperature: bool = True
    reasoning_efforts: tuple[str, ...] = ()
    output_limit_param: str = "max_tokens"
    response_formats: tuple[str, ...] = ("json_object",)
    prompt_cache_key: bool = False
    tokenizer: str = "o200k_base"
    price_key: str = ""  # "" = the name
    shutdown_date: str | None = None
    successor: str | None = None
    source: str = ""
    # Throughput floors that size a request's timeout (request_timeout_s = 0): a slow hour of
    # the provider, not its median (assumed, not measured; declare yours for a slow server).
    input_tokens_per_s: float = 5_000.0
    output_tokens_per_s: float = 50.0

    def __post_init__(self) -> None:
        if self.output_limit_param not in OUTPUT_LIMIT_PARAMS:
            raise ValueError(
                f"{self.name}: output_limit_param must be one of {OUTPUT_LIMIT_PARAMS}"
            )
        bad = sorted(set(self.response_formats) - set(RESPONSE_FORMATS))
        if bad:
            raise ValueError(f"{self.name}: unknown response formats {bad}")

    @property
    def prompt_limit(self) -> int:
        return self.max_input_tokens or (self.context_window - self.max_output_tokens)

    @property
    def price_name(self) -> str:
        return self.price_key or self.name


# A request's timeout when ``request_timeout_s`` is 0 ("sized"): see :func:`request_timeout`.
TIMEOUT_BASE_S = 60.0  # connecting, queueing and the first token
TIMEOUT_MAX_S = 3_600.0  # no single attempt waits longer than an hour
UNSET_OUTPUT_TOKENS = 4_096  # output expected of a request that sets no limit
REASONING_TIMEOUT_FACTOR = 3.0  # a reasoning model's hidden tokens come before its answer


def request_timeout(info: ModelInfo, prompt_tokens: int, max_output_tokens: int | None) -> float:
    """Seconds one attempt of a request may take: a base, plus the prompt at the model's input
    throughput, plus the output limit (or :data:`UNSET_OUTPUT_TOKENS`, at most the model's
    maximum) at its output throughput; the reading and writing times three for a reasoning
    model; at most :data:`TIMEOUT_MAX_S`. An embedding request has no output."""
    output = max_output_tokens or min(UNSET_OUTPUT_TOKENS, info.max_output_tokens)
    work = prompt_tokens / info.input_tokens_per_s + output / info.output_tokens_per_s
    if info.reasoning:
        work *= REASONING_TIMEOUT_FACTOR
    return round(min(TIMEOUT_MAX_S, TIMEOUT_BASE_S + work), 1)


def _gpt5(name: str, successor: str) -> ModelInfo:
    # OpenAI model pages: 400,000 context, 128,000 max output (so 272,000 for the prompt).
    return ModelInfo(
        name, "gpt-5", 400_000, 128_000, True, max_input_tokens=272_000, temperature=False,
        reasoning_efforts=_GPT5_EFFORTS, output_limit_param="max_completion_tokens",
        response_formats=RESPONSE_FORMATS, prompt_cache_key=True, shutdown_date=GPT5_SHUTDOWN,
        successor=successor, source=DEPRECATIONS_URL,
    )  # fmt: skip


def _gpt_oss(name: str) -> ModelInfo:
    # Open-weight model card: 131,072-token context; served by OpenRouter or your own vLLM.
    # Its reasoning tokens count against max_tokens, so its output limit must leave room for them.
    return ModelInfo(
        name, "gpt-oss", 131_072, 131_072, True, max_input_tokens=129_072,
        providers=("openrouter", "custom"), reasoning_efforts=_GPT_OSS_EFFORTS,
        source="https://openai.com/index/introducing-gpt-oss/",
    )  # fmt: skip


REGISTRY: dict[str, ModelInfo] = {
    info.name: info
    for info in (
        # The paper's models; shut down on 2026-12-11 (DEPRECATIONS_URL names the replacements:
        # gpt-6.1-sol for gpt-5, gpt-6.1-terra for gpt-5-mini, a GPT-6 model for gpt-5-nano; the
        # study names gpt-6-luna as the low-cost GPT-6 model).
        _gpt5("gpt-5", "gpt-6.1-sol"),
        _gpt5("gpt-5-mini", "gpt-6.1-terra"),
        _gpt5("gpt-5-nano", "gpt-6-luna"),
        _gpt_oss("gpt-oss-120b"),
        _gpt_oss("gpt-oss-20b"),
        # gpt-6.1-terra, launched 2026-10-26 (https://docs.litellm.ai/blog/gpt-6-1-terra,
        # https://apidog.com/de/blog/gpt-6-1-terra-pricing/): 1,050,000 context, 922,000 input,
        # 128,000 output; Chat Completions, Responses and Batch; default snapshot gpt-6.1-terra
        # and no shutdown date (OpenAI's page as translated at https://www.w3cschool.cn/
        # openai_api/openai_api-models-gpt-6-1-terra.html, checked 2026-11-30).
        ModelInfo(
            "gpt-6.1-terra",
            "gpt-6",
            1_050_000,
            128_000,
            True,
            max_input_tokens=922_000,
            temperature=False,
            reasoning_efforts=_GPT61_EFFORTS,
            output_limit_param="max_completion_tokens",
            response_formats=RESPONSE_FORMATS,
            prompt_cache_key=True,
            source="https://docs.litellm.ai/blog/gpt-6-1-terra",
        ),  # fmt: skip
        # gpt-6-luna, launched 2026-09-22: OpenAI's model page (Japanese edition,
        # https://developers.openai.com/ja-JP/api/docs/models/gpt-6-luna, checked 2026-11-30):
        # 1,050,000 context, 128,000 output, reasoning.effort none to max, Chat Completions and
        # Batch. Its input limit (922,000) is not on that page; it is quoted from OpenAI's in
        # https://docs.venice.ai/es/models/gpt-6-luna.md (checked 2026-11-30).
        ModelInfo(
            "gpt-6-luna",
            "gpt-6",
            1_050_000,
            128_000,
            True,
            max_input_tokens=922_000,
            temperature=False,
            reasoning_efforts=_GPT61_EFFORTS,
            output_limit_param="max_completion_tokens",
            response_formats=RESPONSE_FORMATS,
            prompt_cache_key=True,
            source="https://developers.openai.com/ja-JP/api/docs/models/gpt-6-luna",
        ),  # fmt: skip
        # gpt-6.1-sol, launched 2026-09-29 (snapshot gpt-6.1-sol-2026-09-29), OpenAI's successor
        # of gpt-5: 1,050,000 context, 922,000 input, 128,000 output (OpenAI's figures as listed
        # at https://documentation.s3ns.fr/gemini-enterprise-agent-platform/models/
        # partner-models/openai/gpt-6-1-sol); it rejects reasoning_effort none and minimal, and
        # Chat Completions takes at most xhigh (max only on the Responses API), per
        # https://docs.laozhang.ai/en/announcements/gpt-6-1-sol-2026-10.md. Both checked
        # 2026-11-30; OpenAI's own page was not among the pages we could search.
        ModelInfo(
            "gpt-6.1-sol",
            "gpt-6",
            1_050_000,
            128_000,
            True,
            max_input_tokens=922_000,
            temperature=False,
            reasoning_efforts=("low", "medium", "high", "xhigh"),
            output_limit_param="max_completion_tokens",
            response_formats=RESPONSE_FORMATS,
            prompt_cache_key=True,
            source="https://docs.laozhang.ai/en/announcements/gpt-6-1-sol-2026-10.md",
        ),  # fmt: skip
        ModelInfo(
            "gpt-4o-mini",
            "other",
            128_000,
            16_384,
            False,
            prompt_cache_key=True,
            response_formats=RESPONSE_FORMATS,
        ),
        ModelInfo(
            "gpt-4.1-mini",
            "other",
            1_047_576,
            32_768,
            False,
            prompt_cache_key=True,
            response_formats=RESPONSE_FORMATS,
        ),
        # Embeddings: no shutdown date on DEPRECATIONS_URL (2026-11-30), so 3-small stays.
        ModelInfo(
            "text-embedding-3-small",
            "embedding",
            8_191,
            0,
            False,
            embedding_dims=1_536,
            response_formats=(),
        ),
        ModelInfo(
            "text-embedding-3-large",
            "embedding",
            8_191,
            0,
            False,
            embedding_dims=3_072,
            response_formats=(),
        ),
    )
}
_REGISTRY = REGISTRY  # former private name

_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")
Declared = Mapping[str, "ModelInfo | Mapping[str, Any]"]


def canonical_name(model: str) -> str:
    """``openai/gpt-oss-120b`` → ``gpt-oss-120b``; ``gpt-5-mini-2025-08-07`` → ``gpt-5-mini``."""
    name = model.strip().split("/")[-1].split(":")[0].lower()
    return _SNAPSHOT.sub("", name)


_DECLARABLE = {f.name for f in fields(ModelInfo)} - {"name"}


def declare_model(model: str, facts: Mapping[str, Any] | None = None) -> ModelInfo:
    """A model served by your own server (Ollama, vLLM, llama.cpp), declared by the caller.

    Without further facts it is a plain chat model: ``temperature`` and ``max_tokens``, no
    reasoning effort, no prompt cache key. ``facts`` may set any :class:`ModelInfo` field, e.g.
    ``{"context_window": 131072, "reasoning_efforts": ["low", "medium", "high"]}``.
    """
    facts = dict(facts or {})
    unknown = sorted(set(facts) - _DECLARABLE)
    if unknown:
        raise ValueError(
            f"model_capabilities[{model!r}] has unknown field(s) {unknown}; valid: "
            f"{', '.join(sorted(_DECLARABLE))}"
        )
    for key in ("providers", "reasoning_efforts", "response_formats"):
        if key in facts:
            facts[key] = tuple(facts[key])
    base: dict[str, Any] = {
        "family": "declared", "context_window": 32_768, "max_output_tokens": 4_096,
        "reasoning": bool(facts.get("reasoning_efforts")), "providers": ("custom",),
        "source": "model_capabilities",
    }  # fmt: skip
    return ModelInfo(name=model, **{**base, **facts})


def per_model(settings: Mapping[str, Any] | None, model: str, default: Any = None) -> Any:
    """``model``'s entry in a per-model mapping (``model_backends``, ``rate_limits``, ...): by
    exact name, else by canonical name (snapshot date and provider prefix ignored)."""
    settings = settings or {}
    if model in settings:
        return settings[model]
    name = canonical_name(model)
    return next((v for k, v in settings.items() if canonical_name(k) == name), default)


def _declared(model: str, declared: Declared | None) -> ModelInfo | None:
    facts = per_model(declared, model)
    if facts is None:
        return None
    return facts if isinstance(facts, ModelInfo) else declare_model(model, facts)


def model_info(model: str, declared: Declared | None = None) -> ModelInfo:
    """Facts about ``model`` (a caller's declaration first); unknown is an error naming what to
    add, never a guess from the name."""
    info = _declared(model, declared)
    if info is not None:
        return info
    name = canonical_name(model)
    if name in REGISTRY:
        return REGISTRY[name]
    raise UnknownModelError(
        f"unknown model {model!r}: memcost.models has no capabilities for it (context window, "
        f"accepted parameters, output-limit field). Known: {', '.join(sorted(REGISTRY))}. "
        "Add a ModelInfo entry to REGISTRY in memcost/models.py, or, for a model on your own "
        f"server (Ollama, vLLM, llama.cpp), declare it: model_capabilities={{{model!r}: "
        "{'context_window': 32768}} (a plain chat model: temperature and max_tokens)."
    )


def is_known(model: str, declared: Declared | None = None) -> bool:
    try:
        model_info(model, declared)
    except UnknownModelError:
        return False
    return True


def generation_params(
    model: str, reasoning_effort: str, declared: Declared | None = None
) -> dict[str, Any]:
    """The generation settings a stage asks for: the reasoning effort when one is given, and
    temperature 0 where the model accepts a temperature (an undeclared model gets temperature 0:
    the client checks it against the model's declaration before sending)."""
    params: dict[str, Any] = {}
    if reasoning_effort:
        params["reasoning_effort"] = reasoning_effort
    accepts = model_info(model, declared).temperature if is_known(model, declared) else True
    if accepts:
        params["temperature"] = 0.0
    return params


def rejects_temperature(model: str) -> bool:
    """A registered model that answers ``temperature`` with HTTP 400 (unknown: ``False``)."""
    return is_known(model) and not model_info(model).temperature


def is_gpt5_family(model: str) -> bool:
    """Former name-based test, kept for callers: a registered GPT-5 model (by the registry's
    family, not by the name's prefix). Request bodies use the capabilities instead."""
    return is_known(model) and model_info(model).family == "gpt-5"


def encoding_name(model: str) -> str:
    """The tiktoken encoding of ``model``: the registry's, else tiktoken's, else o200k_base
    (``tiktoken.encoding_for_model`` raises ``KeyError`` for names newer than the library)."""
    if is_known(model):
        return model_info(model).tokenizer
    from tiktoken.model import encoding_name_for_model  # the name only: no download

    try:
        return encoding_name_for_model(canonical_name(model))
    except KeyError:
        return "o200k_base"


def slug(model: str) -> str:
    """A file-name-safe label: ``openai/gpt-oss-120b`` → ``gpt-oss-120b``,
    ``gpt-5-mini-2025-08-07`` → ``gpt-5-mini``. Used in answer-file and system names."""
    return re.sub(r"[^a-z0-9.]+", "-", canonical_name(model)).strip("-")


def known_models() -> list[str]:
    return sorted(REGISTRY)
