"""The three benchmarks, read from their native files into one normalised form (notebook 00).

LoCoMo, LongMemEval, PersonaMem's 32k split (the paper's "PersonaMem v2") and the PersonaMem-v2
release become two tables with the schemas of
``docs/architecture.md``: ``conversations`` (one row per turn) and ``questions`` (one row per
question). Every later stage reads only those tables, so the quirks of each file format end here.
Bad input stops with a :class:`DataError` that names the file, the record and what is wrong;
nothing is written before the whole input has been read and checked.

The modules follow notebook 00's sections:

- ``sources``: where the raw files come from (bundled sample, local copy, download) and the
  sha256 of every file read;
- ``benchmark``: the loaded benchmark in memory and the checks shared by the readers;
- ``locomo``, ``longmemeval``, ``personamem`` (the 32k split), ``personamem_v2``: one reader
  per native format;
- ``prepare``: select part of a dataset, compute everything, write it, the step's metrics;
- ``render``: the long-context rendering of a history (what is billed);
- ``tables``: Tables 1 and 2 with the paper's token conventions;
- ``prepared``: the hand-over files (schemas, writer, the one reader every later notebook uses).
"""

from memcost.data.benchmark import (
    BenchmarkData,
    DataWarning,
    provenance,
    record_provenance,
)
from memcost.data.locomo import (
    LOCOMO_ABSTENTION_ANSWER,
    LOCOMO_CATEGORIES,
    LOCOMO_CATEGORY_COUNTS,
    LOCOMO_FULL_SAMPLES,
    load_locomo,
    parse_locomo_datetime,
)
from memcost.data.longmemeval import LONGMEMEVAL_TYPES, load_longmemeval, parse_longmemeval_datetime
from memcost.data.personamem import (
    PERSONAMEM_32K_COLUMNS,
    PERSONAMEM_QUESTION_TYPES,
    load_personamem,
)
from memcost.data.personamem_v2 import PERSONAMEM_V2_REQUIRED_COLUMNS, load_personamem_v2
from memcost.data.prepare import (
    Prepared,
    load,
    native_excerpt,
    paper_comparison,
    prepare,
    prepare_metrics,
    select,
    write_prepared,
)
from memcost.data.prepared import (
    CONVERSATION_COLUMNS,
    CONVERSATION_SCHEMA,
    QUESTION_COLUMNS,
    QUESTION_SCHEMA,
    STATS_SCHEMA,
    conversation_stats_path,
    read_conversation_stats,
    read_conversations,
    read_prepared,
    read_questions,
)
from memcost.data.render import SESSION_SEPARATOR, render_history, render_sessions, session_header
from memcost.data.sources import (
    GITHUB_RAW,
    LOCOMO_FILE,
    LOCOMO_REPO,
    LOCOMO_REPO_FILE,
    LOCOMO_REVISION,
    LONGMEMEVAL_FILES,
    LONGMEMEVAL_REPO,
    LONGMEMEVAL_REVISION,
    PERSONAMEM_CONTEXTS,
    PERSONAMEM_QUESTIONS,
    PERSONAMEM_V2_CSV,
    PERSONAMEM_V2_HISTORY_DIR,
    PERSONAMEM_V2_REPO,
    PERSONAMEM_V2_REVISION,
    DataSource,
    RawFile,
    download_dataset,
    resolve_source,
    sample_path,
)
from memcost.data.tables import (
    TABLE1_NOTE,
    TABLE2_NOTE,
    TABLE_COLUMNS,
    conversation_stats,
    question_tokens,
    questions_per_category,
    round_half_up,
    summarize_counts,
    table1,
    table2,
    table_markdown,
    table_text,
    token_table,
)
from memcost.paths import DATASETS, DISPLAY_NAMES, PAPER_DATASETS, DataError, check_dataset

__all__ = [
    "CONVERSATION_COLUMNS",
    "CONVERSATION_SCHEMA",
    "DATASETS",
    "DISPLAY_NAMES",
    "PAPER_DATASETS",
    "GITHUB_RAW",
    "LOCOMO_ABSTENTION_ANSWER",
    "LOCOMO_CATEGORIES",
    "LOCOMO_CATEGORY_COUNTS",
    "LOCOMO_FILE",
    "LOCOMO_REPO",
    "LOCOMO_REPO_FILE",
    "LOCOMO_FULL_SAMPLES",
    "LOCOMO_REVISION",
    "LONGMEMEVAL_FILES",
    "LONGMEMEVAL_REPO",
    "LONGMEMEVAL_REVISION",
    "LONGMEMEVAL_TYPES",
    "PERSONAMEM_V2_CSV",
    "PERSONAMEM_V2_HISTORY_DIR",
    "PERSONAMEM_32K_COLUMNS",
    "PERSONAMEM_CONTEXTS",
    "PERSONAMEM_QUESTIONS",
    "PERSONAMEM_QUESTION_TYPES",
    "PERSONAMEM_V2_REPO",
    "PERSONAMEM_V2_REQUIRED_COLUMNS",
    "PERSONAMEM_V2_REVISION",
    "QUESTION_COLUMNS",
    "QUESTION_SCHEMA",
    "SESSION_SEPARATOR",
    "STATS_SCHEMA",
    "TABLE1_NOTE",
    "TABLE2_NOTE",
    "TABLE_COLUMNS",
    "BenchmarkData",
    "DataError",
    "DataSource",
    "DataWarning",
    "Prepared",
    "RawFile",
    "check_dataset",
    "conversation_stats",
    "conversation_stats_path",
    "download_dataset",
    "load",
    "load_locomo",
    "load_longmemeval",
    "load_personamem",
    "load_personamem_v2",
    "native_excerpt",
    "paper_comparison",
    "parse_locomo_datetime",
    "parse_longmemeval_datetime",
    "prepare",
    "prepare_metrics",
    "provenance",
    "question_tokens",
    "questions_per_category",
    "read_conversation_stats",
    "read_conversations",
    "read_prepared",
    "read_questions",
    "record_provenance",
    "render_history",
    "render_sessions",
    "resolve_source",
    "round_half_up",
    "sample_path",
    "select",
    "session_header",
    "summarize_counts",
    "table1",
    "table2",
    "table_markdown",
    "table_text",
    "token_table",
    "write_prepared",
]
