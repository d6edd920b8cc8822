"""Benchmark: how close the client runs to an account's rate limits without being refused.

The local OpenAI-compatible server emulates one model's limits as OpenAI counts them (buckets
refilled continuously; the prompt plus the output limit counted on arrival; 429
``rate_limit_exceeded`` and the ``x-ratelimit-*`` headers on every answer). Nothing is stated
to the client: it learns the limits from the headers. Two accounts:

1. bound by requests: 300 requests a minute, tokens plentiful;
2. bound by tokens: 20,000 tokens a minute with 500-token requests (about 40 a minute).

The minute is shortened to 10 s on both sides so that each case takes half a minute; the
figures are shares of the limit, which the shortening does not change. For each it prints the
requests and tokens admitted per minute after the first minute (the first one starts with a
full bucket) as a share of the limit, and the share of requests answered 429.
Target: at least 90% of the binding limit, at most 2% 429s.
Run: ``.venv/bin/python benchmarks/bench_rate_limits.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from memcost.llm import ChatRequest, make_client, transport
from memcost.paths import RunPaths

# the local OpenAI-compatible server lives with the tests (tests/fake_api)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fake_api.openai_server import AccountLimits, FakeOpenAIServer  # noqa: E402

MINUTE_S = 10.0
MODEL = "gpt-5-mini-2025-08-07"
LATENCY_S = 0.2
CASES = [  # name, rpm, tpm, requests, prompt words, output limit
    ("bound by requests", 300, 10_000_000, 900, 20, 100),
    ("bound by tokens", 10_000, 20_000, 160, 150, 300),
]


def requests(n: int, words: int, output: int, tag: str) -> list[ChatRequest]:
    filler = " ".join(f"word{i}" for i in range(words))
    return [
        ChatRequest(
            MODEL,
            (("system", filler), ("user", f"[{tag}] question {i}?")),
            "read",
            "bench@v1",
            reasoning_effort="low",
            max_output_tokens=output,
            tags={"dataset": "bench", "question_id": f"{tag}-{i}"},
        )
        for i in range(n)
    ]


def run_case(name: str, rpm: int, tpm: int, n: int, words: int, output: int) -> None:
    transport.WINDOW_S = MINUTE_S
    limits = AccountLimits(window_s=MINUTE_S)
    limits.set(MODEL, rpm=rpm, tpm=tpm)
    with (
        FakeOpenAIServer(latency_s=LATENCY_S, limits=limits) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        os.environ["MEMCOST_BENCH_KEY"] = "sk-bench"
        client = make_client(
            RunPaths(Path(tmp) / "run").ensure(),
            backend="custom",
            base_url=server.url,
            max_concurrency=32,
            progress=False,
        )
        t0 = time.monotonic()
        results = client.chat_many(requests(n, words, output, name.split()[-1]))
        elapsed = time.monotonic() - t0
        client.close()
        log = server.requests
    ok = [r for r in log if r.status == 200]
    if os.environ.get("BENCH_VERBOSE"):
        print([round(r.arrived - t0, 2) for r in log if r.status == 429])
    refused = sum(1 for r in log if r.status == 429)
    steady = [r for r in ok if r.arrived - t0 >= MINUTE_S]
    span = max(r.arrived for r in steady) - (t0 + MINUTE_S) if steady else 0.0
    per_request = _tokens(ok[0]) if ok else 0
    req_rate = len(steady) / span * MINUTE_S if span > 0 else float("nan")
    tok_rate = req_rate * per_request
    binding = min(req_rate / rpm, tok_rate / tpm, key=lambda x: -x)
    print(
        f"{name}: {n} requests in {elapsed:.1f} s ({elapsed / MINUTE_S:.1f} shortened "
        f"minutes), {sum(r.ok for r in results)} answered"
    )
    print(
        f"  after the first minute: {req_rate:,.0f} requests/min = {req_rate / rpm:.0%} of "
        f"{rpm:,}; {tok_rate:,.0f} tokens/min = {tok_rate / tpm:.0%} of {tpm:,}"
    )
    print(
        f"  binding limit used: {binding:.0%} (target >= 90%); answered 429: "
        f"{refused}/{len(log)} = {refused / len(log):.1%} (target <= 2%)"
    )


def _tokens(received) -> int:
    from fake_api.openai_server import _requested_tokens

    return _requested_tokens(received.path, received.body)


if __name__ == "__main__":
    for case in CASES:
        run_case(*case)
