"""Price scenarios: which models and which dated price rows a cost-model result uses.

``paper`` is the paper's setting (study §8): gpt-5-mini answers with long context and reads
memory, gpt-5-nano extracts facts, at the prices of :data:`memcost.catalog.PRICE_TABLE_DATE`.
``current`` replaces each retired model by its successor
(:func:`memcost.catalog.price_successor`, from the model registry) at today's rows. Memory's
costs at today's prices are the paper's calibrated costs re-priced by the token mix the paper
measured (§4.2): the calibration stays, only the prices move.

Every assumption is a named field of :class:`Assumptions`, with the paper's value as default.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from memcost import paper
from memcost.catalog import CURRENT_PRICE_DATE, PRICE_TABLE_DATE, Price, price_for, price_successor
from memcost.costs.model import CostConstants
from memcost.paper import EMBEDDING_MODEL, EXTRACTION_MODEL, READER_MODEL
from memcost.today.timeline import (
    PAPER_OUTPUT_TOKENS,
    PAPER_QUESTION_TOKENS,
    PAPER_READ_USD,
    PAPER_WRITE_USD_PER_TOKEN,
    LongContext,
    Memory,
)

_PER_HISTORY_TOKEN = paper.MEASURED["conversations"] * paper.TABLE4_CONTEXT_TOKENS


@dataclass(frozen=True)
class Assumptions:
    """What the cost model assumes beyond prices; defaults are the paper's (section named)."""

    output_tokens: float = PAPER_OUTPUT_TOKENS  # §8: per long-context answer (Tables 4-5)
    question_tokens: float = PAPER_QUESTION_TOKENS  # §8: whole prompt cached from turn 2
    write_usd_per_token: float = PAPER_WRITE_USD_PER_TOKEN  # §8: paper write cost per token
    read_usd: float = PAPER_READ_USD  # §8: paper read cost per question
    # §4.2: 122.6M extraction prompt and 41.6M completion tokens, 1.842M embedding tokens, for
    # 500 histories of 101,601 tokens: the token mix behind the write cost.
    extraction_prompt_per_token: float = (
        paper.MEASURED["extraction_prompt_tokens"] / _PER_HISTORY_TOKEN
    )
    extraction_completion_per_token: float = (
        paper.MEASURED["extraction_completion_tokens"] / _PER_HISTORY_TOKEN
    )
    embedding_tokens_per_fact: float = (  # §4.2: 1.842M tokens for 103,183 facts
        paper.MEASURED["embedding_tokens"] / paper.MEASURED["embedding_facts"]
    )
    # §4.2: 1,046 retrieved fact tokens per question; + ~300 tokens of instructions and the
    # question (this repository's reader prompt, an assumption). The reader's output tokens are
    # then whatever makes the paper's read cost at gpt-5-mini prices (computed, not typed).
    reader_prompt_tokens: float = paper.MEASURED["read_retrieved_tokens_per_question"] + 300
    # §4.2: 103,183 facts for 500 histories of 101,601 tokens (memory grows with the history)
    facts_per_user: float = paper.MEASURED["embedding_facts"] / paper.MEASURED["conversations"]
    exact_cache: bool = True  # §8: every shared token billed as cached
    batch_write: bool = False  # extraction and embeddings through the Batch API
    flex_answers: bool = False  # long-context answers with Flex processing

    @property
    def embedding_per_token(self) -> float:
        """Embedding tokens per history token: facts per history token × tokens per fact."""
        return self.facts_per_user / paper.TABLE4_CONTEXT_TOKENS * self.embedding_tokens_per_fact


PAPER_ASSUMPTIONS = Assumptions()  # the paper's values throughout


@dataclass(frozen=True)
class PriceScenario:
    """Models and price date of one result."""

    name: str
    date: str  # YYYY-MM-DD: the price rows in force that day
    lc_model: str
    extraction_model: str
    reader_model: str
    embedding_model: str = EMBEDDING_MODEL
    paper_calibrated: bool = field(default=False)  # use the paper's costs as printed

    def price(self, model: str) -> Price:
        return price_for(model, on=self.date)

    @property
    def label(self) -> str:
        return f"{self.name}: long context {self.lc_model}, prices of {self.date}"


PAPER = PriceScenario(
    "paper", PRICE_TABLE_DATE, "gpt-5-mini", "gpt-5-nano", "gpt-5-mini", paper_calibrated=True
)
CURRENT = PriceScenario(
    "current",
    CURRENT_PRICE_DATE,
    price_successor(READER_MODEL),
    price_successor(EXTRACTION_MODEL),
    price_successor(READER_MODEL),
)
# Everything on the low-cost successor: long context and reader too (a deployer's cheap option).
CURRENT_LUNA = replace(
    CURRENT,
    name="current (all gpt-6-luna)",
    lc_model=price_successor(EXTRACTION_MODEL),
    reader_model=price_successor(EXTRACTION_MODEL),
)
SCENARIOS: dict[str, PriceScenario] = {s.name: s for s in (PAPER, CURRENT, CURRENT_LUNA)}


def scenario(name: str) -> PriceScenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ValueError(
            f"unknown price scenario {name!r}; known: {', '.join(SCENARIOS)}"
        ) from None


def _write_mix(s: PriceScenario, a: Assumptions, batch: bool) -> float:
    """USD per history token of extraction + embedding at ``s``'s prices (token mix of §4.2)."""
    extract, embed = s.price(s.extraction_model), s.price(s.embedding_model)
    usd = (
        a.extraction_prompt_per_token * extract.input
        + a.extraction_completion_per_token * extract.output
    ) * (extract.batch_rate() if batch else 1.0)
    usd += a.embedding_per_token * embed.input * (embed.batch_rate() if batch else 1.0)
    return usd / 1e6


def reader_output_tokens(a: Assumptions) -> float:
    """Reader output tokens that make the paper's read cost at the paper's reader prices."""
    p = PAPER.price(PAPER.reader_model)
    return (a.read_usd * 1e6 - a.reader_prompt_tokens * p.input) / p.output


def memory_for(s: PriceScenario, a: Assumptions = PAPER_ASSUMPTIONS) -> Memory:
    """Memory's costs in scenario ``s``: the paper's calibrated costs, re-priced."""
    write = a.write_usd_per_token * _write_mix(s, a, a.batch_write) / _write_mix(PAPER, a, False)
    if s.paper_calibrated:
        read = a.read_usd
    else:  # reader prompts: plain input (its cacheable prefix is instructions only, < 1,024)
        reader = s.price(s.reader_model)
        read = reader.cost(
            prompt_tokens=a.reader_prompt_tokens, completion_tokens=reader_output_tokens(a)
        )
    source = (
        f"{s.name}: write re-priced from the paper's by the §4.2 token mix at "
        f"{s.extraction_model}/{s.embedding_model}{' (Batch API)' if a.batch_write else ''}, "
        f"read at {s.reader_model}, prices of {s.date}"
    )
    return Memory(write_usd_per_token=write, read_usd=read, source=source, price_date=s.date)


def long_context_for(
    s: PriceScenario, policy: str, a: Assumptions = PAPER_ASSUMPTIONS
) -> LongContext:
    """The long-context model of ``s`` under cache ``policy``."""
    return LongContext.on(
        s.price(s.lc_model),
        policy,
        output_tokens=a.output_tokens,
        question_tokens=a.question_tokens,
        exact_cache=a.exact_cache,
        flex=a.flex_answers,
    )


def default_policy(s: PriceScenario) -> str:
    """The paper assumes the history is always cached; today's default is in-memory retention."""
    return "always" if s.paper_calibrated else "in_memory"


def constants_for(s: PriceScenario, a: Assumptions = PAPER_ASSUMPTIONS) -> CostConstants:
    """Eq. 1-2's constants for scenario ``s``, back to back under its default policy: the first
    turn pays the history at the cache-write price of that policy, later turns the cached
    price. Equal to the timeline below the long-context tier threshold (above it, use
    :mod:`memcost.today.break_even`, which bills the tier)."""
    lc = long_context_for(s, default_policy(s), a)
    memory = memory_for(s, a)
    return CostConstants(
        write_usd_per_token=memory.write_usd_per_token,
        read_usd=memory.read_usd,
        output_tokens=a.output_tokens,
        cached_share=1.0,
        input_usd_per_mtok=lc.price.write_rate(lc.retention.sold_as),
        cached_input_usd_per_mtok=lc.price.cached_rate,
        output_usd_per_mtok=lc.price.output,
        source=f"{s.label}; {lc.retention.policy} retention (first turn at the write price)",
    )
