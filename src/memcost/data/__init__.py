"""The three benchmarks (notebook 00, paper §3.3), from their native files into one
normalised form."""

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
