"""Cache-aware dispatch: the cached share of long-context input, old vs new dispatch.

Long-context answering sends every question of a conversation with the whole conversation as
its prefix. The provider caches that prefix, but above about 15 requests a minute for one prefix
it sends the overflow to machines that do not hold it (:mod:`memcost.catalog`). The old
dispatch took the lowest-numbered ready request, so once a conversation's first question had
returned all workers piled onto that one prefix; the new one sends ``prompt_cache_key`` (the
conversation) and interleaves conversations, at most ``prefix_requests_per_minute`` (15) per
prefix per minute.

Both run against the local server's simulated prefix cache (overflow above 15 a minute). A
minute is simulated as ``60 / time_scale`` seconds (``--time-scale``, default 10) so the
benchmark takes seconds. Prints, per dispatch: the cached share of long-context input tokens,
the largest number of requests a (simulated) minute per prefix, and the wall time.
Run: ``.venv/bin/python benchmarks/bench_dispatch.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memcost import catalog
from memcost.llm import ChatRequest, make_client, scheduler
from memcost.paths import RunPaths

# the local OpenAI-compatible server lives with the tests (tests/fake_api)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fake_api.openai_server import CHAT_PATH, FakeOpenAIServer  # noqa: E402

WORDS = ("garden", "sister", "yoga", "Berlin", "painting", "dog", "concert", "recipe", "trip")


def conversation(c: int, tokens: int) -> str:
    """A history of about ``tokens`` tokens, different for every conversation."""
    words = [f"{WORDS[(c * 7 + i) % len(WORDS)]}{c}-{i % 97}" for i in range(tokens // 4)]
    return f"Conversation {c}:\n" + " ".join(words)


def groups(n_conv: int, n_questions: int, tokens: int) -> list[list[ChatRequest]]:
    return [
        [
            ChatRequest(
                "gpt-5-mini-2025-08-07",
                (
                    ("system", "Answer from the conversation."),
                    ("user", f"{conversation(c, tokens)}\n\nQuestion {q}: what happened?"),
                ),
                "long_context",
                "bench_dispatch@v1",
                reasoning_effort="low",
                tags={"dataset": "bench", "conversation_id": f"conv-{c}", "question_id": f"q{q}"},
            )  # fmt: skip
            for q in range(n_questions)
        ]
        for c in range(n_conv)
    ]


@contextmanager
def scaled_minute(scale: float):
    """Make every per-minute rule count ``60 / scale`` seconds as a minute."""
    window = 60.0 / scale
    saved = catalog.OVERFLOW_WINDOW_S, scheduler._Ready.WINDOW_S
    catalog.OVERFLOW_WINDOW_S = scheduler._Ready.WINDOW_S = window
    try:
        yield window
    finally:
        catalog.OVERFLOW_WINDOW_S, scheduler._Ready.WINDOW_S = saved


def run_dispatch(new: bool, batches, *, window: float, concurrency: int) -> dict[str, Any]:
    """One dispatch against a fresh server; the measures the benchmark prints."""
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-local")
    with FakeOpenAIServer(latency_s=0.05, prefix_overflow_per_minute=15) as server, \
            tempfile.TemporaryDirectory() as tmp:  # fmt: skip
        client = make_client(
            RunPaths(Path(tmp) / "run"), backend="openai" if new else "custom",
            base_url=server.url, max_concurrency=concurrency, progress=False,
            env_file=Path(tmp) / "no.env",
        )  # fmt: skip
        t0 = time.perf_counter()
        results = client.chat_groups(batches, first_alone=True)
        wall = time.perf_counter() - t0
        client.close()
        arrivals: dict[str, list[float]] = defaultdict(list)
        for r in server.requests:
            if r.path == CHAT_PATH:
                first_line = r.body["messages"][1]["content"].split(":", 1)[0]
                arrivals[first_line].append(r.arrived)  # the per-minute rules run scaled
    flat = [r for group in results for r in group]
    prompt = sum(r.usage.prompt_tokens for r in flat)
    cached = sum(r.usage.cached_prompt_tokens for r in flat)
    peak = max(catalog.max_requests_per_minute(t) for t in arrivals.values())
    return {"dispatch": "new" if new else "old", "requests": len(flat),
            "cached_share": cached / prompt if prompt else 0.0,
            "max_requests_per_minute_per_prefix": peak, "wall_s": wall}  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=6)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--prefix-tokens", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--time-scale", type=float, default=10.0)
    args = parser.parse_args(argv)
    batches = groups(args.conversations, args.questions, args.prefix_tokens)
    rows = []
    with scaled_minute(args.time_scale) as window:
        for new in (False, True):
            rows.append(run_dispatch(new, batches, window=window, concurrency=args.concurrency))
    print(
        f"{args.conversations} conversations x {args.questions} questions, "
        f"~{args.prefix_tokens} prefix tokens, {args.concurrency} workers, a minute simulated "
        f"as {60 / args.time_scale:.1f} s, overflow above 15 requests/min per prefix"
    )
    for row in rows:
        print(
            f"  {row['dispatch']} dispatch: cached share of long-context input "
            f"{row['cached_share']:.1%}, max {row['max_requests_per_minute_per_prefix']} "
            f"requests/min per prefix, {row['requests']} requests in "
            f"{row['wall_s']:.1f} s"
        )
    return rows


if __name__ == "__main__":
    main()
