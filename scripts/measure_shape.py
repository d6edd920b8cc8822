"""Measure what the paper's Tables 1-2 do not say of a benchmark file, for the estimate.

``python scripts/measure_shape.py locomo data/raw/locomo/<revision>/locomo10.json`` prints the
file's :class:`memcost.costs.estimate.Shape`: tokens per turn, turns per session, the segments
notebook 01 cuts per 1,000 tokens (paper §3.1: ten messages, one session, 8,000 characters) and
the long-context rendering's tokens per Table-1 token, as notebooks 00 and 01 count them. The
estimate scales these to the paper's Tables 1-2 when a preset downloads its data
(``MEASURED_SHAPES`` in ``memcost/costs/estimate.py`` says which file each was measured on).
"""

from __future__ import annotations

import argparse

from memcost.costs.estimate import measured_shape
from memcost.data import load
from memcost.data.sources import resolve_source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", help="locomo | longmemeval | personamem")
    parser.add_argument("path", help="the dataset's file (or folder), as data_path takes it")
    args = parser.parse_args()
    data = load(resolve_source(args.dataset, args.path))
    shape = measured_shape(data.conversations, data.questions, args.path)
    print(
        f"{args.dataset} ({args.path}): {len(data.conversations):,} turns; "
        f"Shape({shape.rendered:.4f}, {shape.tokens_per_turn:.2f}, "
        f"{shape.turns_per_session:.2f}, {shape.segments_per_1k:.4f}, ...): rendering "
        f"x{shape.rendered:.4f}, {shape.tokens_per_turn:.2f} tokens a turn, "
        f"{shape.turns_per_session:.2f} turns a session, {shape.segments_per_1k:.4f} "
        "extraction segments per 1,000 tokens"
    )


if __name__ == "__main__":
    main()
