"""What the code needs to know about each model: family, snapshot, context window.

The family decides which generation parameters a request may carry (GPT-5 models take
``reasoning_effort`` and ``max_completion_tokens`` and reject ``temperature``/``max_tokens``);
the context window decides whether a long-context prompt fits. Prices live in
:mod:`memcost.prices`, dated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The paper's models (study §2-§4), by the snapshot the paper used where it names one.
EXTRACTION_MODEL = "gpt-5-nano-2025-08-07"  # §3.1: fact extraction, reasoning_effort=low
READER_MODEL = "gpt-5-mini-2025-08-07"  # §3.1: answers from retrieved facts, reasoning_effort=medium
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
        "hnsw_m": 16,  # §3.1: HNSW index
        "ef_construction": 64,  # §3.1: HNSW index
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


@dataclass(frozen=True)
class ModelInfo:
    """Static facts about a model family (not prices).

    ``context_window`` is the total tokens of prompt plus output the model accepts;
    ``max_output_tokens`` the most it can produce; ``max_input_tokens`` what is left for the
    prompt when the maximum output is reserved (how OpenAI documents GPT-5's 272k input limit).
    """

    name: str  # canonical name without provider prefix or snapshot date
    family: str  # "gpt-5" | "gpt-oss" | "embedding" | "other"
    context_window: int
    max_output_tokens: int
    reasoning: bool  # produces reasoning tokens (billed as output)
    embedding_dims: int | None = None
    max_input_tokens: int | None = None

    @property
    def prompt_limit(self) -> int:
        return self.max_input_tokens or (self.context_window - self.max_output_tokens)


_REGISTRY: dict[str, ModelInfo] = {
    info.name: info
    for info in (
        # OpenAI model pages: 400,000 context, 128,000 max output (so 272,000 for the prompt).
        ModelInfo("gpt-5", "gpt-5", 400_000, 128_000, True, max_input_tokens=272_000),
        ModelInfo("gpt-5-mini", "gpt-5", 400_000, 128_000, True, max_input_tokens=272_000),
        ModelInfo("gpt-5-nano", "gpt-5", 400_000, 128_000, True, max_input_tokens=272_000),
        # Open-weight model card: 131,072-token context.
        ModelInfo("gpt-oss-120b", "gpt-oss", 131_072, 131_072, True, max_input_tokens=129_072),
        ModelInfo("gpt-oss-20b", "gpt-oss", 131_072, 131_072, True, max_input_tokens=129_072),
        ModelInfo("gpt-4o-mini", "other", 128_000, 16_384, False),
        ModelInfo("gpt-4.1-mini", "other", 1_047_576, 32_768, False),
        ModelInfo("text-embedding-3-small", "embedding", 8_191, 0, False, embedding_dims=1_536),
        ModelInfo("text-embedding-3-large", "embedding", 8_191, 0, False, embedding_dims=3_072),
    )
}

_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def canonical_name(model: str) -> str:
    """``openai/gpt-oss-120b`` → ``gpt-oss-120b``; ``gpt-5-mini-2025-08-07`` → ``gpt-5-mini``."""
    name = model.strip().split("/")[-1].split(":")[0].lower()
    return _SNAPSHOT.sub("", name)


def model_info(model: str) -> ModelInfo:
    """Facts about ``model``; an unknown model is an error that lists the known ones."""
    name = canonical_name(model)
    if name in _REGISTRY:
        return _REGISTRY[name]
    raise KeyError(
        f"unknown model {model!r}: memcost.models has no context window or family for it. "
        f"Known: {', '.join(sorted(_REGISTRY))}. Add it to memcost/models.py."
    )


def is_gpt5_family(model: str) -> bool:
    """GPT-5 models reject ``temperature`` and ``max_tokens``; decided by name so that unknown
    GPT-5 snapshots (``gpt-5.1-mini``) are still handled correctly."""
    return canonical_name(model).startswith("gpt-5")


def slug(model: str) -> str:
    """A file-name-safe label: ``openai/gpt-oss-120b`` → ``gpt-oss-120b``,
    ``gpt-5-mini-2025-08-07`` → ``gpt-5-mini``. Used in answer-file and system names."""
    return re.sub(r"[^a-z0-9.]+", "-", canonical_name(model)).strip("-")


def known_models() -> list[str]:
    return sorted(_REGISTRY)
