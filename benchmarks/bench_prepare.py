"""How long notebook 00's work takes on a LongMemEval-S-sized input, and how much memory.

Synthesises a file in LongMemEval's native schema with 500 questions whose haystacks hold about
100k o200k tokens each (like ``longmemeval_s_cleaned.json``, ~280 MB), then, in a fresh process
so that neither the synthesis nor a warm token cache flatters the numbers, times:

- load: read, parse, check and normalise (``data.load``),
- count: Table-1 text and long-context rendering of every history, every question
  (``data.prepare``),
- write: the parquet files and tables (``data.write_prepared``),

and reports the peak resident memory of that process. Target on a 2-core machine: under two
minutes and under 4 GB.

    python benchmarks/bench_prepare.py [--questions 500] [--tokens 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

WORDS = (
    "the a to and of I you it is that in for my on with can what how this be have are your "
    "was do but about like so if me just would some more time think know get help make want "
    "need good could also one when there they them which use way work new really any also "
    "recipe garden trip budget email meeting plan weekend project book music photo train city "
    "coffee yoga running dinner sister brother doctor school office weather movie museum "
    "recommend suggest explain example step first then after before maybe probably usually "
    "important different interesting better best idea question answer problem option choice"
).split()


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 22))]
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice([".", ".", ".", "?", "!"])


def _turn_pool(rng: random.Random, size: int) -> list[str]:
    """Distinct chat turns of ~40-450 words; haystacks reuse them, as LongMemEval's filler
    sessions recur across questions."""
    pool = []
    for _ in range(size):
        pool.append(" ".join(_sentence(rng) for _ in range(rng.randint(3, 30))))
    return pool


def longmemeval_datetime(moment: datetime) -> str:
    """LongMemEval's date format: ``2023/05/20 (Sat) 02:21``."""
    return f"{moment:%Y/%m/%d} ({moment:%a}) {moment:%H:%M}"


def synthesise(path: Path, questions: int, target_tokens: int, seed: int = 0) -> None:
    from memcost.text import count_tokens_batch

    rng = random.Random(seed)
    pool = _turn_pool(rng, 3_000)
    pool_tokens = count_tokens_batch(pool)
    mean_turn = sum(pool_tokens) / len(pool_tokens)
    turns_needed = int(target_tokens / mean_turn)
    types = [
        "single-session-user",
        "single-session-assistant",
        "single-session-preference",
        "temporal-reasoning",
        "knowledge-update",
        "multi-session",
    ]
    items = []
    for q in range(questions):
        start = datetime(2023, 1, 1) + timedelta(days=rng.randint(0, 120))
        ids, dates, sessions = [], [], []
        made = 0
        s = 0
        while made < turns_needed:
            n = min(rng.randint(6, 14), turns_needed - made) or 1
            session = []
            for t in range(n):
                turn = {
                    "role": "user" if t % 2 == 0 else "assistant",
                    "content": pool[rng.randrange(len(pool))],
                }
                session.append(turn)
            if s == 3:
                session[0]["has_answer"] = True
            ids.append(f"answer_{q:08x}_1" if s == 3 else f"sharegpt_{rng.getrandbits(32):08x}_0")
            dates.append(longmemeval_datetime(start + timedelta(hours=20 * s)))
            sessions.append(session)
            made += n
            s += 1
        qid = f"{rng.getrandbits(32):08x}" + ("_abs" if q % 17 == 0 else "")
        items.append(
            {
                "question_id": qid,
                "question_type": types[q % len(types)],
                "question": _sentence(rng),
                "answer": _sentence(rng) if q % 5 else rng.randint(1, 20),
                "question_date": longmemeval_datetime(start + timedelta(hours=20 * s + 30)),
                "haystack_session_ids": ids,
                "haystack_dates": dates,
                "haystack_sessions": sessions,
                "answer_session_ids": [ids[3]],
            }
        )
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(items, handle)


def measure(path: Path, out: Path) -> dict:
    """The timed part; runs in its own process."""
    t0 = time.perf_counter()
    from memcost import data
    from memcost.io import json_safe
    from memcost.paths import DatasetPaths

    t_import = time.perf_counter()
    loaded = data.load(data.resolve_source("longmemeval", path))
    t_load = time.perf_counter()
    prepared = data.prepare(data.select(loaded))
    t_count = time.perf_counter()
    data.write_prepared(DatasetPaths(out / "longmemeval"), prepared)
    t_write = time.perf_counter()
    stats = prepared.stats
    return {
        "questions": len(loaded.questions),
        "turns": len(loaded.conversations),
        "tokens_table1_total": int(stats["text_tokens"].sum()),
        "tokens_rendered_total": int(stats["history_tokens"].sum()),
        "table1": json_safe(prepared.table1.iloc[0].to_dict()),
        "import_s": round(t_import - t0, 2),
        "load_normalise_s": round(t_load - t_import, 2),
        "count_tokens_s": round(t_count - t_load, 2),
        "write_s": round(t_write - t_count, 2),
        "total_s": round(t_write - t0, 2),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--tokens", type=int, default=100_000, help="tokens per haystack")
    parser.add_argument("--keep", type=Path, help="write the synthetic file here and keep it")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # child process
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.measure:
        print(json.dumps(measure(args.measure, args.out)))
        return 0

    with tempfile.TemporaryDirectory(prefix="bench_prepare_") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "longmemeval_s_cleaned.json"
        t0 = time.perf_counter()
        synthesise(path, args.questions, args.tokens)
        size_mb = path.stat().st_size / 1e6
        print(
            f"synthesised {path.name}: {args.questions} questions, ~{args.tokens:,} tokens "
            f"each, {size_mb:,.0f} MB in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        child = subprocess.run(
            [sys.executable, __file__, "--measure", str(path), "--out", str(Path(tmp) / "run")],
            capture_output=True,
            text=True,
            check=False,
        )
        if child.returncode != 0:
            print(child.stderr, file=sys.stderr)
            return child.returncode
        result = json.loads(child.stdout.strip().splitlines()[-1])
    print(
        f"questions {result['questions']:,}, turns {result['turns']:,}, "
        f"Table-1 tokens {result['tokens_table1_total']:,}, "
        f"rendered tokens {result['tokens_rendered_total']:,}"
    )
    print(f"Table 1 row: {result['table1']}")
    print(f"import            {result['import_s']:7.1f} s")
    print(f"load + normalise  {result['load_normalise_s']:7.1f} s")
    print(f"count tokens      {result['count_tokens_s']:7.1f} s")
    print(f"write outputs     {result['write_s']:7.1f} s")
    print(f"total             {result['total_s']:7.1f} s   (target < 120 s)")
    print(f"peak RSS          {result['peak_rss_gb']:7.2f} GB  (target < 4 GB)")
    ok = result["total_s"] < 120 and result["peak_rss_gb"] < 4
    print("within target" if ok else "OVER TARGET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
