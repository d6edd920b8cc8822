"""How long notebook 03 takes to build its prompts at LongMemEval-S scale.

Synthesises 500 conversations of about 100k o200k tokens (dated sessions of user/assistant
turns, every conversation's text its own, so no count is served from a cache) with one question
each, then times, in this process:

- histories: render every session and count its tokens, once (``build_histories``),
- plan: size every prompt of both paper models and check it against the model's window
  (``plan_questions``),
- requests: build every request (the full prompt strings) model by model, as
  ``answer_questions`` does, dropping one model's before the next.

It checks that a planned size equals the o200k count of the built prompt for a few requests.
Target on a 2-core machine: under 60 seconds in all.

    python benchmarks/bench_long_context.py [--conversations 500] [--tokens 100000]
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from datetime import datetime, timedelta

import pandas as pd

from memcost import longctx
from memcost.llm.offline import prompt_tokens
from memcost.longctx.plan import build_request
from memcost.paper import LONG_CONTEXT_MODELS
from memcost.text import count_tokens_batch

WORDS = (
    "the a to and of I you it is that in for my on with can what how this be have are your "
    "was do but about like so if me just would some more time think know get help make want "
    "need good could also one when there they them which use way work new really any "
    "recipe garden trip budget email meeting plan weekend project book music photo train city "
    "coffee yoga running dinner sister brother doctor school office weather movie museum "
    "recommend suggest explain example step first then after before maybe probably usually "
    "important different interesting better best idea question answer problem option choice "
    "Lisbon Kyoto bakery pottery camera beagle marathon violin chemistry sunrise harbour"
).split()


def _sentences(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 22))]
        text = " ".join(words)
        out.append(text[0].upper() + text[1:] + rng.choice([".", ".", "?", "!"]))
    return out


def synthesise(
    conversations: int, target_tokens: int, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Conversations and questions tables in notebook 00's schema."""
    rng = random.Random(seed)
    pool = _sentences(rng, 20_000)
    tokens_per_sentence = sum(count_tokens_batch(pool[:2000])) / 2000
    sentences_needed = int(target_tokens / (tokens_per_sentence + 0.3))
    columns: dict[str, list] = {
        c: []
        for c in (
            "conversation_id",
            "session_index",
            "session_id",
            "session_datetime",
            "turn_index",
            "position",
            "speaker",
            "role",
            "text",
            "dia_id",
            "has_answer",
            "image_caption",
        )
    }
    questions: dict[str, list] = {
        c: []
        for c in (
            "question_id",
            "conversation_id",
            "question",
            "answer",
            "question_date",
            "evidence",
            "options",
        )
    }
    for c in range(conversations):
        cid = f"bench{c:04d}"
        start = datetime(2023, 1, 1) + timedelta(days=rng.randint(0, 60))
        used, session, position = 0, 0, 0
        while used < sentences_needed:
            when = (start + timedelta(days=3 * session, minutes=rng.randint(0, 600))).isoformat()
            for turn in range(rng.randint(8, 14)):
                n = rng.randint(2, 30)
                # a per-turn nonce keeps every conversation's text its own
                text = f"({cid}.{position}) " + " ".join(rng.choices(pool, k=n))
                role = "user" if turn % 2 == 0 else "assistant"
                for name, value in (
                    ("conversation_id", cid),
                    ("session_index", session),
                    ("session_id", f"{cid}_s{session}"),
                    ("session_datetime", when),
                    ("turn_index", turn),
                    ("position", position),
                    ("speaker", role),
                    ("role", role),
                    ("text", text),
                    ("dia_id", None),
                    ("has_answer", False),
                    ("image_caption", None),
                ):
                    columns[name].append(value)
                used += n
                position += 1
            session += 1
        questions["question_id"].append(cid)
        questions["conversation_id"].append(cid)
        questions["question"].append("Which city did I say I want to visit for the pottery class?")
        questions["answer"].append("Kyoto")
        questions["question_date"].append((start + timedelta(days=3 * session + 2)).isoformat())
        questions["evidence"].append([f"{cid}_s{session // 2}"])
        questions["options"].append(None)
    return pd.DataFrame(columns), pd.DataFrame(questions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=500)
    parser.add_argument("--tokens", type=int, default=100_000)
    args = parser.parse_args()

    t0 = time.perf_counter()
    conversations, questions = synthesise(args.conversations, args.tokens)
    print(
        f"synthesised {args.conversations} conversations, {len(conversations):,} turns "
        f"in {time.perf_counter() - t0:.1f} s (not timed below)",
        flush=True,
    )

    models = list(LONG_CONTEXT_MODELS)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    histories = longctx.build_histories(conversations)
    timings["histories (render + count once)"] = time.perf_counter() - t
    t = time.perf_counter()
    planned = longctx.plan_questions(
        questions,
        histories,
        models=models,
        baseline_models=models[:1],
        kinds=("long_context", "rolling_window", "oracle"),
        overflow="truncate_oldest",
    )
    timings["plan (sizes and limits, 2 models + baselines)"] = time.perf_counter() - t
    t = time.perf_counter()
    built = 0
    samples = []
    for model in planned.models:
        settings = planned.generation[model]
        requests = [
            build_request(p, dataset="bench", settings=settings)
            for p in planned.plans
            if p.model == model
        ]
        built += len(requests)
        samples.extend(
            zip([p for p in planned.plans if p.model == model][:2], requests[:2], strict=True)
        )
        del requests
    timings["requests (prompt strings, model by model)"] = time.perf_counter() - t
    total = sum(timings.values())

    tokens = [h.tokens for h in histories.values()]
    print(
        f"history tokens per conversation: min {min(tokens):,}, median "
        f"{sorted(tokens)[len(tokens) // 2]:,}, max {max(tokens):,}; total {sum(tokens):,}"
    )
    print(planned.fit.to_string(index=False))
    for name, seconds in timings.items():
        print(f"  {name:<48} {seconds:7.1f} s")
    print(f"  {'total':<48} {total:7.1f} s  ({built} requests; target < 60 s)")
    for plan, request in samples:  # the planned size is the count of the prompt actually built
        assert plan.prompt_tokens == prompt_tokens(request), (plan.question_id, plan.model)
    print(f"planned sizes equal the o200k count of the built prompts ({len(samples)} checked)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {peak:,.0f} MB")
    sys.exit(0 if total < 60 else 1)


if __name__ == "__main__":
    main()
