"""What each memory system costs to write and to read, and how fast it searches, offline.

On the bundled samples of the three benchmarks, with the offline backend (classical stand-ins,
no key), in a scratch run directory: every registered memory system is built for every user and
recalls every question. Per dataset and system it prints

- write tokens per user: prompt + completion tokens of the system's write calls (extraction,
  update, graph, summary, observer and reflector calls, item embeddings), from the ledger;
- write calls per user;
- read tokens per question: the tokens of the items the reader is given;
- search p50 / p95 in milliseconds: the recall alone (the question's embedding excluded);
- the build's wall time.

Token counts are o200k counts of what the offline methods sent and returned: an estimate of a
model's, not a measurement; the latencies are this machine's, not a provider's.

    python benchmarks/bench_memory_systems.py [--datasets locomo,longmemeval]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from memcost.calls import read_calls
from memcost.data import load
from memcost.data.benchmark import as_source
from memcost.data.sources import sample_path
from memcost.llm import make_client
from memcost.memory import open_system, system_class, system_names
from memcost.paths import RunPaths

DATASETS = ("locomo", "longmemeval", "personamem")


def bench(dataset: str, root: Path) -> list[dict]:
    data = load(as_source(sample_path(dataset), dataset))
    run = RunPaths(root / dataset).ensure()
    ds = run.dataset(dataset).ensure()
    users = data.conversations["conversation_id"].nunique()
    rows = []
    for name in system_names():
        client = make_client(run, progress=False)
        t0 = time.perf_counter()
        system = open_system(name, ds, dataset=dataset)
        report = system.build(client, data.conversations)
        build_s = time.perf_counter() - t0
        recalls = system.recall(client, data.questions)
        client.close()
        answers_as = system_class(name).answers_as
        calls = pd.DataFrame(read_calls(run.calls))
        mine = calls["system"].fillna("memory_mem0_style") == answers_as
        write = calls.loc[mine & calls["question_id"].isna()]
        latency = np.array([r.latency_s for r in recalls.values()]) * 1000
        rows.append(
            {
                "dataset": dataset,
                "system": name,
                "users": users,
                "write_tokens_per_user": (write["prompt_tokens"] + write["completion_tokens"]).sum()
                / users,
                "write_calls_per_user": len(write.loc[write["stage"] != "embed"]) / users,
                "read_tokens_per_question": np.mean([r.tokens for r in recalls.values()]),
                "search_p50_ms": float(np.percentile(latency, 50)),
                "search_p95_ms": float(np.percentile(latency, 95)),
                "build_s": build_s,
                "failed_users": len(report.failed),
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [r for d in args.datasets.split(",") for r in bench(d.strip(), Path(tmp))]
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(
            "offline backend: token counts are o200k counts of the stand-ins' calls "
            "(an estimate), latencies this machine's"
        )
        print(table.round(2).to_string(index=False))
    return 0 if not table["failed_users"].any() else 1


if __name__ == "__main__":
    raise SystemExit(main())
