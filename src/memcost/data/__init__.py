"""The three benchmarks (notebook 00, paper §3.3), read from their native files into one
normalised form: ``sources`` (the bundled sample, a local copy or a pinned download), one reader
per benchmark (``locomo``, ``longmemeval``, ``personamem``), ``benchmark`` (the normalised form
and the hand-over files), ``prepare`` (select, count, write; Tables 1-2).
"""

# ruff: noqa: F401 - the names the notebooks use
from memcost.data.benchmark import (
    read_prepared,
    read_questions,
    record_provenance,
    render_history,
)
from memcost.data.prepare import (
    load,
    native_excerpt,
    paper_comparison,
    prepare,
    prepare_metrics,
    select,
    table_markdown,
    table_text,
    write_prepared,
)
from memcost.data.sources import resolve_source
from memcost.paths import check_dataset
