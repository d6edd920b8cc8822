"""How robust is the break-even? Notebook 05's section 6.1.

The paper holds three things fixed that a reader may not: the provider's cached-input discount,
the long-context answer length (reasoning included), and list prices where the Batch API would
halve some of them. Each function varies one and reports the break-even per context length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from memcost.costs.model import CostConstants


def sensitivity_cache_discount(
    constants: CostConstants, discounts: Sequence[float], contexts: Sequence[float]
) -> pd.DataFrame:
    """Break-even as the provider's cached-input discount varies (paper: 90%)."""
    rows = [
        {
            "cache_discount": d,
            "context_tokens": int(L),
            "break_even_n": constants.with_cache_discount(d).at(L).break_even(),
        }
        for d in discounts
        for L in contexts
    ]
    return pd.DataFrame(rows)


def sensitivity_output_tokens(
    constants: CostConstants, output_tokens: Sequence[float], contexts: Sequence[float]
) -> pd.DataFrame:
    """Break-even as the long-context answer length (incl. reasoning) varies (paper: ~527)."""
    rows = [
        {
            "output_tokens": o,
            "context_tokens": int(L),
            "break_even_n": constants.replace(output_tokens=o).at(L).break_even(),
        }
        for o in output_tokens
        for L in contexts
    ]
    return pd.DataFrame(rows)


BATCH_SCENARIOS: dict[str, tuple[bool, bool, bool]] = {
    # name: (write, read, long context) billed at Batch-API prices
    "list prices": (False, False, False),
    "batch write": (True, False, False),
    "batch write + read": (True, True, False),
    "batch long context": (False, False, True),
    "batch everything": (True, True, True),
}


def sensitivity_batch(
    constants: CostConstants,
    contexts: Sequence[float],
    multiplier: float,
    scenarios: Mapping[str, tuple[bool, bool, bool]] = BATCH_SCENARIOS,
) -> pd.DataFrame:
    """Break-even when some components go through the Batch API (half price, 24 h window).

    Memory construction is offline work and suits batch pricing; interactive reads and
    long-context answers usually do not, which is why the scenarios are listed separately.
    """
    rows = []
    for name, (write, read, lc) in scenarios.items():
        for L in contexts:
            model = constants.at(L).scaled(
                write=multiplier if write else 1.0,
                read=multiplier if read else 1.0,
                long_context=multiplier if lc else 1.0,
            )
            rows.append(
                {"scenario": name, "context_tokens": int(L), "break_even_n": model.break_even()}
            )
    return pd.DataFrame(rows)
