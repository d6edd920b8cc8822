"""Long-context answering: prompt shape, token accounting, limits, baselines, scheduling.

Scheduling and request parameters are checked where they matter, at a local server that
speaks the OpenAI API (what arrived, and when); everything else on the bundled samples or small
conversations built here.
"""

from __future__ import annotations

import random
import threading

import pandas as pd
import pytest
from fake_api.openai_server import Action, FakeOpenAIServer, default_responder
from llm_helpers import TEST_KEY, api_client

from memcost import answers, data, longctx, prompts
from memcost import text as tokens
from memcost.answers import AnswerWriter, load_answers, median_ratios
from memcost.calls import read_calls
from memcost.catalog import cacheable as cacheable_tokens
from memcost.data.benchmark import SESSION_SEPARATOR, BenchmarkData
from memcost.llm import make_client
from memcost.llm.offline import prompt_tokens
from memcost.longctx.history import KINDS, generation_settings, shown_options
from memcost.longctx.plan import Planned, build_request
from memcost.offline import NO_HISTORY_ANSWER, NOT_MENTIONED
from memcost.paths import DATASETS
from memcost.text import count_tokens

GPT5 = "gpt-5-mini-2025-08-07"
OSS = "openai/gpt-oss-120b"
HISTORY_END = "</history>\n\n"


# --- small inputs --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def samples() -> dict[str, BenchmarkData]:
    return {name: data.load(data.resolve_source(name)) for name in DATASETS}


def conversation(cid: str, sessions: list[list[str]], *, start_day: int = 1) -> pd.DataFrame:
    """A conversation in notebook 00's schema: user and assistant alternate in each session."""
    rows = []
    position = 0
    for s, turns in enumerate(sessions):
        for t, text in enumerate(turns):
            role = "user" if t % 2 == 0 else "assistant"
            rows.append(
                {
                    "conversation_id": cid,
                    "session_index": s,
                    "session_id": f"{cid}-s{s}",
                    "session_datetime": f"2023-05-{start_day + s:02d}T10:{t:02d}:00",
                    "turn_index": t,
                    "position": position,
                    "speaker": role,
                    "role": role,
                    "text": text,
                    "dia_id": f"D{s + 1}:{t + 1}",
                    "has_answer": False,
                    "image_caption": None,
                }
            )
            position += 1
    return pd.DataFrame(rows)


def questions_for(
    cid: str,
    texts: list[str],
    *,
    dates: list[str | None] | None = None,
    evidence: list[list[str]] | None = None,
    options: list[list[str] | None] | None = None,
) -> pd.DataFrame:
    n = len(texts)
    return pd.DataFrame(
        {
            "question_id": [f"{cid}-q{i}" for i in range(n)],
            "conversation_id": [cid] * n,
            "question": texts,
            "answer": ["x"] * n,
            "question_date": dates or [None] * n,
            "evidence": evidence or [[] for _ in range(n)],
            "options": options or [None] * n,
        }
    )


def long_sessions(n_sessions: int, words_per_session: int, seed: int = 0) -> list[list[str]]:
    """Sessions of varied prose, about ``words_per_session`` words each."""
    rng = random.Random(seed)
    vocab = (
        "garden kettle harbour violin lantern meadow pottery ferry orchard canvas glacier "
        "bakery compass saddle marble quartz thistle ember willow falcon"
    ).split()
    out = []
    for s in range(n_sessions):
        turns = []
        for t in range(4):
            words = [rng.choice(vocab) for _ in range(words_per_session // 4)]
            turns.append(f"s{s}t{t} " + " ".join(words) + ".")
        out.append(turns)
    return out


def plan(questions, conversations, **options) -> Planned:
    histories = longctx.build_histories(conversations)
    options.setdefault("models", [GPT5])
    return longctx.plan_questions(questions, histories, **options)


def requests_of(planned: Planned, system: str) -> list:
    return [build_request(p, dataset="test") for p in planned.plans if p.system == system]


# --- prompt shape and accounting -----------------------------------------------------------------


def test_history_prefix_is_byte_identical_and_the_question_comes_last(samples):
    locomo = samples["locomo"]
    planned = plan(locomo.questions, locomo.conversations)
    by_conversation: dict[str, list] = {}
    for request in requests_of(planned, "long_context_gpt-5-mini"):
        by_conversation.setdefault(request.tags["conversation_id"], []).append(request)
    for cid, requests in by_conversation.items():
        assert len(requests) > 5
        history = data.render_history(locomo.conversation(cid))
        systems = {r.messages[0] for r in requests}
        assert len(systems) == 1 and requests[0].messages[0][0] == "system"
        users = [r.messages[1][1] for r in requests]
        prefixes = {u[: u.index(HISTORY_END) + len(HISTORY_END)] for u in users}
        assert len(prefixes) == 1  # one shared prefix, byte for byte
        (prefix,) = prefixes
        assert history + SESSION_SEPARATOR + HISTORY_END in prefix
        assert prefix.index("[Session 1 ") < 400  # the history comes first
        for request, user in zip(requests, users, strict=True):
            question = locomo.questions.set_index("question_id").loc[
                request.tags["question_id"], "question"
            ]
            assert user.endswith(f"Question: {question}\n")
            assert user.index(question) > len(prefix)


def test_question_date_follows_the_history_and_precedes_the_question():
    conv = conversation(
        "c1",
        [["I adopted a cat named Miso.", "Lovely!"], ["Miso knocked over my plant.", "Oh no."]],
    )
    qs = questions_for(
        "c1",
        ["What is my cat called?", "What did the cat break?"],
        dates=["2023-06-12T16:30:00", "2023-07-01T09:05:00"],
    )
    planned = plan(qs, conv)
    users = [r.messages[1][1] for r in requests_of(planned, "long_context_gpt-5-mini")]
    for user, date, question in zip(
        users,
        ["Monday 12 June 2023, 16:30", "Saturday 1 July 2023, 09:05"],
        qs["question"],
        strict=True,
    ):
        end = user.index(HISTORY_END)
        assert end < user.index(f"Current date: {date}") < user.index(f"Question: {question}")
    assert users[0][: users[0].index(HISTORY_END)] == users[1][: users[1].index(HISTORY_END)]


def test_planned_sizes_are_the_token_count_of_the_prompts_sent(samples):
    for name, bench in samples.items():
        planned = plan(
            bench.questions,
            bench.conversations,
            models=[GPT5, OSS],
            baseline_models=[GPT5],
            kinds=KINDS,
            mode="multiple_choice",
        )
        for p in planned.plans:
            request = build_request(p, dataset=name)
            assert p.prompt_tokens == prompt_tokens(request), (name, p.system, p.question_id)
            assert p.context.tokens == count_tokens(p.context.text)


def test_each_history_is_tokenised_once(samples, monkeypatch):
    bench = samples["locomo"]
    counted: list[int] = []
    original = tokens.count_tokens_batch

    def spy(texts, **kwargs):
        counted.append(sum(len(t) for t in texts))
        return original(texts, **kwargs)

    monkeypatch.setattr(longctx.history, "count_tokens_batch", spy)
    histories = longctx.build_histories(bench.conversations)
    history_chars = sum(len(data.render_history(bench.conversation(c))) for c in histories)
    # each history once, with the blank line that follows its last session
    assert sum(counted) == history_chars + len(SESSION_SEPARATOR) * len(histories)
    counted.clear()
    longctx.plan_questions(bench.questions, histories, models=[GPT5, OSS])
    assert sum(counted) < history_chars / 2  # planning counts question blocks, not histories


# --- context limits ------------------------------------------------------------------------------


def long_conversation() -> tuple[pd.DataFrame, pd.DataFrame]:
    """One conversation of ~140k tokens: too long for GPT-OSS-120B, fine for GPT-5-mini."""
    conv = conversation("huge", long_sessions(14, 10_000))
    qs = questions_for("huge", ["What did I say about the harbour?", "Which falcon was it?"])
    return conv, qs


def test_a_prompt_too_long_fails_before_any_call(run_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    conv, qs = long_conversation()
    histories = longctx.build_histories(conv)
    assert 131_072 < histories["huge"].tokens < 272_000
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        api_client(run_paths, server.url, tmp_path)  # a client ready to send
        with pytest.raises(longctx.ContextOverflow) as info:
            longctx.plan_questions(qs, histories, models=[GPT5, OSS])
        assert server.count(path=None) == 0
    message = str(info.value)
    size = max(p for p in info.value.fit["largest_prompt"])
    assert "conversation huge" in message and f"{size:,} tokens > 129,072" in message
    assert "openai/gpt-oss-120b" in message and "truncate_oldest" in message
    fit = info.value.fit.set_index("model")
    assert fit.loc[OSS, "over_limit"] == 2 and fit.loc[GPT5, "over_limit"] == 0


def test_truncate_oldest_drops_whole_oldest_sessions_and_records_them(run_paths):
    conv, qs = long_conversation()
    planned = plan(qs, conv, models=[GPT5, OSS], overflow="truncate_oldest")
    history = planned.histories["huge"]
    oss = [p for p in planned.plans if p.model == OSS]
    gpt5 = [p for p in planned.plans if p.model == GPT5]
    assert all(p.context.dropped_sessions == 0 and p.context.dropped_tokens == 0 for p in gpt5)
    contexts = {id(p.context) for p in oss}
    assert len(contexts) == 1  # the same sessions for every question: one shared prefix
    context = oss[0].context
    n = len(history.sessions)
    kept = context.sessions
    assert kept == tuple(range(n - len(kept) + 1, n + 1))  # the newest, in order
    dropped = history.sessions[: n - len(kept)]
    assert context.dropped_sessions == len(dropped) > 0
    assert context.dropped_tokens == sum(b.tokens for b in dropped)
    assert all(p.needed_tokens <= p.limit for p in oss)
    assert context.text.startswith(f"[Session {kept[0]} · ")
    # one more session would not have fitted
    assert max(p.needed_tokens for p in oss) + dropped[-1].tokens > oss[0].limit
    client = make_client(run_paths, progress=False)
    ds = run_paths.dataset("test").ensure()
    longctx.answer_questions(client, ds, planned, dataset="test")
    records = load_answers(ds, "long_context_gpt-oss-120b")
    assert set(records["dropped_sessions"]) == {len(dropped)}
    assert set(records["dropped_tokens"]) == {context.dropped_tokens}
    assert set(records["context_tokens"]) == {context.tokens}
    assert set(load_answers(ds, "long_context_gpt-5-mini")["dropped_tokens"]) == {0}


def test_context_limits_follow_the_model_table():
    limits = longctx.context_limits([GPT5, OSS]).set_index("model")
    assert limits.loc[GPT5, "prompt_limit"] == 272_000
    assert limits.loc[OSS, "prompt_limit"] == 131_072 - 2_000
    assert limits.loc[OSS, "context_window"] == 131_072
    bigger = longctx.context_limits([OSS], {"gpt-oss-120b": {"max_output_tokens": 8000}})
    assert bigger.loc[0, "prompt_limit"] == 131_072 - 8_000


def test_generation_settings_are_the_papers_and_can_be_overridden():
    assert generation_settings(GPT5) == {"reasoning_effort": "low"}
    assert generation_settings(OSS) == {"temperature": 0.0, "max_output_tokens": 2000}
    assert (
        generation_settings(GPT5, {"gpt-5-mini": {"reasoning_effort": "high"}})["reasoning_effort"]
        == "high"
    )
    with pytest.raises(ValueError, match="unknown keys"):
        generation_settings(OSS, {OSS: {"top_p": 0.5}})


# --- baselines -----------------------------------------------------------------------------------


def test_rolling_window_is_the_last_turns_before_the_question(samples):
    locomo = samples["locomo"]
    turns = locomo.conversation("conv-1").sort_values("position")
    last_session = turns["session_index"].max()
    window = int((turns["session_index"] == last_session).sum()) + 2  # crosses a session
    planned = plan(
        locomo.questions,
        locomo.conversations,
        baseline_models=[GPT5],
        kinds=("rolling_window",),
        window_turns=window,
    )
    p = next(p for p in planned.plans if p.conversation_id == "conv-1")
    expected = turns.tail(window)
    assert p.context.text == data.render_history(expected) + SESSION_SEPARATOR
    assert p.context.text.startswith(f"[Session {last_session} · ")  # the cut session's header
    assert p.context.text.count("\n") == window + 2 + 2
    shown = p.context.turns()
    assert [t.text for t in shown] == expected["text"].tolist()
    assert {q.context.key for q in planned.plans if q.conversation_id == "conv-1"} == {
        p.context.key
    }


def test_oracle_keeps_only_the_evidence_sessions(samples):
    lme = samples["longmemeval"]
    planned = plan(lme.questions, lme.conversations, baseline_models=[GPT5], kinds=("oracle",))
    assert len(planned.plans) == len(lme.questions)
    for p, evidence in zip(planned.plans, lme.questions["evidence"], strict=True):
        history = planned.histories[p.conversation_id]
        kept = {b.session_id for b in history.sessions if b.number in p.context.sessions}
        assert kept == set(evidence) and len(kept) < len(history.sessions)
        assert p.context.tokens == sum(b.tokens for b in history.sessions if b.session_id in kept)

    locomo = samples["locomo"]
    planned = plan(
        locomo.questions, locomo.conversations, baseline_models=[GPT5], kinds=("oracle",)
    )
    evidence = locomo.questions.set_index("question_id")["evidence"]
    assert len(planned.plans) == len(locomo.questions) and planned.skipped.empty
    for p in planned.plans:
        wanted = {int(e[1:].split(":")[0]) for e in evidence[p.question_id]}
        assert set(p.context.sessions) == wanted
        assert all(f"[Session {n} " in p.context.text for n in wanted)

    persona = samples["personamem_v2"]  # no evidence annotation: nothing to narrow down
    planned = plan(
        persona.questions, persona.conversations, baseline_models=[GPT5], kinds=("oracle",)
    )
    assert planned.plans == [] and len(planned.skipped) == len(persona.questions)


def test_no_context_sends_no_history(samples):
    locomo = samples["locomo"]
    planned = plan(
        locomo.questions, locomo.conversations, baseline_models=[GPT5], kinds=("no_context",)
    )
    for request in requests_of(planned, "no_context_gpt-5-mini"):
        user = request.messages[1][1]
        assert f"<history>\n{prompts.LONG_CONTEXT_NO_HISTORY}</history>" in user
        assert "[Session" not in user


# --- the offline method --------------------------------------------------------------------------


def test_offline_answers_extract_the_best_turn_with_its_date(run_paths):
    conv = conversation(
        "c1",
        [
            ["We walked along the harbour at sunset.", "Sounds calm."],
            ["My brother bought a secondhand violin from a shop in Porto.", "What a find!"],
        ],
    )
    qs = questions_for(
        "c1", ["Where did my brother buy the violin?", "What is the capital of Peru?"]
    )
    planned = plan(qs, conv, baseline_models=[GPT5], kinds=("long_context", "no_context"))
    ds = run_paths.dataset("test").ensure()
    longctx.answer_questions(make_client(run_paths, progress=False), ds, planned, dataset="test")
    answers = load_answers(ds, "long_context_gpt-5-mini").set_index("question_id")["answer"]
    assert answers["c1-q0"] == (
        "user (Tuesday 2 May 2023, 10:00): My brother bought a "
        "secondhand violin from a shop in Porto."
    )
    assert answers["c1-q1"] == NOT_MENTIONED
    none = load_answers(ds, "no_context_gpt-5-mini")["answer"]
    assert set(none) == {NO_HISTORY_ANSWER}


def test_offline_multiple_choice_no_context_picks_the_longest_option(run_paths):
    conv = conversation("c1", [["I switched to oat milk in my coffee.", "Noted."]])
    options = [
        ["Oat milk", "Whole milk, warmed, with a spoon of honey and cinnamon", "Soy", "None"]
    ]
    qs = questions_for("c1", ["What milk should I buy?"], options=options)
    for mode in ("multiple_choice", "open_ended"):
        planned = plan(
            qs, conv, baseline_models=[GPT5], kinds=("long_context", "no_context"), mode=mode
        )
        ds = run_paths.dataset(mode).ensure()
        longctx.answer_questions(
            make_client(run_paths, progress=False), ds, planned, dataset="test"
        )
        lc = load_answers(ds, "long_context_gpt-5-mini").iloc[0]
        nc = load_answers(ds, "no_context_gpt-5-mini").iloc[0]
        if mode == "open_ended":
            assert lc["options_shown"] is None and nc["answer"] == NO_HISTORY_ANSWER
            continue
        shown = list(lc["options_shown"])
        assert sorted(shown) == sorted(options[0])
        letter = "ABCD"[shown.index(options[0][1])]
        assert nc["answer"] == f"({letter}) {options[0][1]}"  # the longest
        oat = "ABCD"[shown.index("Oat milk")]
        assert lc["answer"] == f"({oat}) Oat milk"  # the history supports it
        assert lc["mode"] == "multiple_choice"
        # the judge reads the same letter back from the same order
        mc = answers.multiple_choice(lc["question_id"], options[0])
        assert answers.parse_choice(lc["answer"], mc) == oat and mc.option(oat) == "Oat milk"


def test_options_are_shown_in_a_fixed_shuffled_order():
    options = ["right", "wrong one", "wrong two", "wrong three"]
    orders = [shown_options(f"pm-{i}", options) for i in range(40)]
    assert orders == [shown_options(f"pm-{i}", options) for i in range(40)]
    assert sum(o[0] == "right" for o in orders) < 20  # not always first, as in the source
    assert all(sorted(o) == sorted(options) for o in orders)


def test_a_rerun_skips_answered_questions(samples, run_paths):
    locomo = samples["locomo"]
    planned = plan(
        locomo.questions,
        locomo.conversations,
        baseline_models=[GPT5],
        kinds=("long_context", "rolling_window"),
    )
    ds = run_paths.dataset("locomo").ensure()
    first = longctx.answer_questions(
        make_client(run_paths, progress=False), ds, planned, dataset="locomo"
    )
    assert set(first.values()) == {len(locomo.questions)}
    calls = len(read_calls(run_paths.calls))
    again = longctx.answer_questions(
        make_client(run_paths, progress=False), ds, planned, dataset="locomo"
    )
    assert set(again.values()) == {0} and len(read_calls(run_paths.calls)) == calls
    records = read_calls(run_paths.calls)
    assert {r["stage"] for r in records} == {"long_context"}
    assert {r["system"] for r in records} == {
        "long_context_gpt-5-mini",
        "rolling_window_gpt-5-mini",
    }
    assert all(
        r["dataset"] == "locomo" and r["conversation_id"] and r["question_id"] for r in records
    )


# --- at the server: scheduling, request parameters, cached tokens, retries ----------------------


@pytest.fixture
def api(run_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY, latency_s=0.15) as server:
        yield server, api_client(run_paths, server.url, tmp_path, max_concurrency=8)


def cached_conversations(n: int = 2, questions: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``n`` conversations of ~2k tokens (enough for a provider cache), ``questions`` each."""
    convs, qs = [], []
    for c in range(n):
        cid = f"c{c}"
        convs.append(conversation(cid, long_sessions(3, 400, seed=c)))
        qs.append(
            questions_for(
                cid, [f"Question {k} about {cid}: which ferry?" for k in range(questions)]
            )
        )
    return pd.concat(convs, ignore_index=True), pd.concat(qs, ignore_index=True)


def test_first_question_of_each_conversation_goes_alone(api, run_paths):
    """Concurrency is proved by meeting points, not by clocks: each group's requests wait at the
    server for one another, which only succeeds when the client sent them together."""
    server, client = api
    conv, qs = cached_conversations()
    planned = plan(qs, conv)
    ds = run_paths.dataset("test").ensure()
    groups = {
        "firsts": ["Question 0 about c0", "Question 0 about c1"],
        "c0 later": ["Question 1 about c0", "Question 2 about c0"],
        "c1 later": ["Question 1 about c1", "Question 2 about c1"],
    }
    meetings = {name: threading.Barrier(len(members)) for name, members in groups.items()}
    met: dict[str, list[bool]] = {name: [] for name in groups}

    def meet_then_answer(body):
        question = body["messages"][-1]["content"].rsplit("Question: ", 1)[1]
        for name, members in groups.items():
            if any(question.startswith(m) for m in members):
                try:
                    meetings[name].wait(timeout=20)
                    met[name].append(True)
                except threading.BrokenBarrierError:
                    met[name].append(False)
        return default_responder(body)

    server.responder = meet_then_answer
    longctx.answer_questions(client, ds, planned, dataset="test")
    assert met == {name: [True, True] for name in groups}  # each group was in flight together
    arrivals = {}
    for received in server.requests:
        question = received.user_text.rsplit("Question: ", 1)[1].strip()
        arrivals[question] = received
    for cid in ("c0", "c1"):
        first = arrivals[f"Question 0 about {cid}: which ferry?"]
        for k in (1, 2):
            later = arrivals[f"Question {k} about {cid}: which ferry?"]
            assert later.arrived >= first.finished  # only after the first has returned

    answers = load_answers(ds, "long_context_gpt-5-mini").set_index("question_id")
    assert answers.loc["c0-q0", "cached_prompt_tokens"] == 0
    later = answers.drop(index=["c0-q0", "c1-q0"])
    assert (later["cached_prompt_tokens"] >= 1024).all()
    summary = longctx.answers_summary(answers.reset_index(), planned).iloc[0]
    share = later["cached_prompt_tokens"].sum() / later["prompt_tokens"].sum()
    assert summary["cached_share_after_first"] == pytest.approx(share)
    assert 0.5 < share < 1.0 and summary["later_questions"] == 4


def test_request_parameters_by_model_family_at_the_server(api, run_paths):
    server, client = api
    conv, qs = cached_conversations(1, 1)
    planned = plan(qs, conv, models=[GPT5, OSS])
    longctx.answer_questions(client, run_paths.dataset("test").ensure(), planned, dataset="test")
    bodies = {r.body["model"]: r.body for r in server.requests}
    assert bodies[GPT5]["reasoning_effort"] == "low"
    assert not {"temperature", "max_tokens", "max_completion_tokens"} & set(bodies[GPT5])
    assert bodies[OSS]["temperature"] == 0 and bodies[OSS]["max_tokens"] == 2000
    assert not {"reasoning_effort", "max_completion_tokens"} & set(bodies[OSS])
    assert bodies[GPT5]["messages"] == bodies[OSS]["messages"]
    records = read_calls(run_paths.calls)
    assert {(r["model"], r["system"]) for r in records} == {
        (GPT5, "long_context_gpt-5-mini"),
        (OSS, "long_context_gpt-oss-120b"),
    }


def test_a_failed_answer_is_recorded_and_asked_again_on_rerun(api, run_paths):
    server, client = api
    conv, qs = cached_conversations(1, 2)
    planned = plan(qs, conv)
    ds = run_paths.dataset("test").ensure()
    server.on(
        lambda path, body: "Question 1 about" in body["messages"][-1]["content"],
        Action(status=500, retry_after_ms=1),
        times=None,
    )
    longctx.answer_questions(client, ds, planned, dataset="test")
    failed = load_answers(ds, "long_context_gpt-5-mini").set_index("question_id")
    assert failed.loc["c0-q1", "answer"] == "" and "500" in failed.loc["c0-q1", "error"]
    assert pd.isna(failed.loc["c0-q0", "error"])
    assert AnswerWriter(ds, "long_context_gpt-5-mini").pending(["c0-q0", "c0-q1"]) == ["c0-q1"]
    server.clear()
    written = longctx.answer_questions(client, ds, planned, dataset="test")
    assert written == {"long_context_gpt-5-mini": 1}
    fixed = load_answers(ds, "long_context_gpt-5-mini").set_index("question_id")
    assert pd.isna(fixed.loc["c0-q1", "error"]) and fixed.loc["c0-q1", "answer"]


# --- the walk of notebook 03: shared prefix and cached share ---------------------------------


def test_cacheable_tokens_follow_the_1024_and_128_grid():
    assert [cacheable_tokens(n) for n in (0, 1023, 1024, 1151, 1152, 5000)] == [
        0,
        0,
        1024,
        1024,
        1152,
        1024 + 31 * 128,
    ]


def test_prefix_share_of_two_questions_diverges_after_the_history():
    conv = conversation("c1", long_sessions(6, 400))
    qs = questions_for("c1", ["Which instrument came up first?", "Where is the ferry going?"])
    planned = plan(qs, conv)
    first, second = planned.plans
    share = longctx.prefix_share(first, second)
    assert (share.first_tokens, share.second_tokens) == (first.prompt_tokens, second.prompt_tokens)
    # everything through </history> and the instructions is shared; the question block is not
    assert first.prefix_tokens < share.shared_tokens < min(share.first_tokens, share.second_tokens)
    assert "Which instrument" in share.first_after and "ferry" in share.second_after
    assert share.first_after != share.second_after
    assert share.shared_tokens >= 1024
    assert share.cached_tokens == cacheable_tokens(share.shared_tokens)
    assert share.cached_tokens % 128 == 0 and share.shared_tokens - share.cached_tokens < 128
    assert share.cached_share == pytest.approx(share.cached_tokens / second.prompt_tokens)
    short = plan(questions_for("c2", ["a?", "b?"]), conversation("c2", [["hi", "hello"]]))
    assert longctx.prefix_share(*short.plans).cached_tokens == 0  # under 1,024 shared tokens


def test_median_ratios_compare_the_full_history_with_each_system():
    sizes = pd.DataFrame(
        {
            "system": ["memory_mem0_style"] * 2 + ["long_context_x"] * 2 + ["rolling_window_x"] * 2,
            "kind": ["memory"] * 2 + ["long_context"] * 2 + ["rolling_window"] * 2,
            "question_id": ["a", "b"] * 3,
            "context_tokens": [100, 300, 20_000, 20_000, 400, 400],
            "prompt_tokens": [0] * 6,
        }
    )
    ratios = median_ratios(sizes).set_index("system")["full_history_times"]
    assert ratios.to_dict() == {
        "memory_mem0_style": 100.0,
        "long_context_x": 1.0,
        "rolling_window_x": 50.0,
    }
