"""The served systems: gates fire exactly at their thresholds, and prompts are counted
incrementally with the same result as a full re-count."""

from __future__ import annotations

import pytest

from memcost.text import count_tokens
from memcost_serving import systems as engines
from memcost_serving.prompts import SERVING_ANSWER
from memcost_serving.replay import RecordingEngine, make_system, plan_runs, replay
from memcost_serving.systems import OfflineEngine, ServingConfig
from memcost_serving.workload import Turn, generate_workload, render_line
from memcost_systems.prompts import SERVING_OBSERVER


def hand_turns(n: int) -> list[Turn]:
    turns = []
    for i in range(n):
        speaker = ("Maya", "Jonas")[i % 2]
        text = (
            f"I have yoga every Tuesday at {6 + i % 12} o'clock now. "
            f"My sister Anna is moving to Lisbon on {1 + i % 28} May."
        )
        turns.append(
            Turn(
                i,
                speaker,
                text,
                count_tokens(text),
                count_tokens(render_line(speaker, text)),
                (),
                "ok",
            )
        )
    return turns


def gate_turns(rows, stage):
    return sorted({r["turn"] for r in rows if r["stage"] == stage})


def test_observer_fires_exactly_when_unobserved_tokens_reach_the_threshold():
    turns = hand_turns(12)
    first_five = sum(t.line_tokens for t in turns[:5])
    at = replay(
        "observational",
        turns,
        OfflineEngine(),
        ServingConfig(observer_tokens=first_five, reflector_tokens=10**9),
        labels={},
    )
    assert gate_turns(at, "observer")[0] == 4  # the fifth turn brings the buffer to the threshold
    fired = [r for r in at if r["turn"] == 4]
    assert all(r["gate_fired"] for r in fired)
    assert f"{first_five:,} un-observed tokens >= {first_five:,}" in fired[0]["gate_reason"]
    assert not any(r["gate_fired"] for r in at if r["turn"] < 4)
    one_more = replay(
        "observational",
        turns,
        OfflineEngine(),
        ServingConfig(observer_tokens=first_five + 1, reflector_tokens=10**9),
        labels={},
    )
    assert gate_turns(one_more, "observer")[0] == 5
    # after the observer the buffer is empty and the observations are what it wrote
    after = next(r for r in at if r["turn"] == 5 and r["stage"] == "answer")
    observer = next(r for r in at if r["stage"] == "observer")
    assert after["pending_tokens"] == 0  # the state it answered in: before turn 5 joined the buffer
    assert after["memory_items"] > 0 and observer["prompt_tokens"] > first_five


def test_reflector_fires_exactly_when_observation_tokens_reach_the_threshold():
    turns = hand_turns(12)
    threshold = sum(t.line_tokens for t in turns[:3])
    probe = replay(
        "observational",
        turns,
        OfflineEngine(),
        ServingConfig(observer_tokens=threshold, reflector_tokens=10**9),
        labels={},
    )
    first_observation = next(r["memory_tokens"] for r in probe if r["turn"] == 3)
    assert first_observation > 0
    exact = replay(
        "observational",
        turns,
        OfflineEngine(),
        ServingConfig(observer_tokens=threshold, reflector_tokens=first_observation),
        labels={},
    )
    assert gate_turns(exact, "reflector")[0] == 2  # same turn as the first observer
    reason = next(r["gate_reason"] for r in exact if r["stage"] == "reflector")
    assert f"reflector: {first_observation:,} observation tokens >= {first_observation:,}" in reason
    above = replay(
        "observational",
        turns,
        OfflineEngine(),
        ServingConfig(observer_tokens=threshold, reflector_tokens=first_observation + 1),
        labels={},
    )
    assert 2 not in gate_turns(above, "reflector")


def test_mem0_ingests_every_interval_turns():
    rows = replay(
        "mem0", hand_turns(25), OfflineEngine(), ServingConfig(ingest_interval=10), labels={}
    )
    assert gate_turns(rows, "ingest_extract") == [9, 19]
    assert gate_turns(rows, "ingest_update") == [19]  # the first ingest adds without a call
    assert {r["gate_reason"] for r in rows if r["gate_fired"]} == {
        "10 turns since the last ingest (interval 10)"
    }
    later = [r for r in rows if r["stage"] == "answer" and r["turn"] > 9]
    assert all(r["memory_items"] > 0 for r in later)


def test_rolling_window_stops_growing_after_the_window():
    rows = replay(
        "rolling_window", hand_turns(15), OfflineEngine(), ServingConfig(window=3), labels={}
    )
    assert [r["memory_items"] for r in rows][:5] == [0, 1, 2, 3, 3]


def test_incremental_count_equals_a_full_recount():
    turns = generate_workload(30, 60, seed=3)
    engine = RecordingEngine()
    for system in ("full_history", "observational"):
        replay(system, turns, engine, ServingConfig(observer_tokens=800), labels={})
    answers = [c for c in engine.calls if c.kind == "answer"]
    observers = [r for r in engine.requests if r.payload["step"] == "observer"]
    assert len(answers) == 60 and observers
    for call in answers:
        full = count_tokens(call.prompt.system) + count_tokens(call.user_text())
        assert call.prompt_tokens() == full
    # the parts are exactly the registered template filled in
    last = answers[29]
    history = "".join(render_line(t.speaker, t.text) for t in turns[:29])
    assert last.user_text() == SERVING_ANSWER.user.format(
        context_title="Conversation so far",
        context=history,
        speaker=turns[29].speaker,
        message=turns[29].text,
    )
    # the observer is observational memory's own request, with the served messages in it
    user = dict(observers[0].messages)["user"]
    assert user.startswith(SERVING_OBSERVER.user.split("{")[0])
    assert render_line(turns[0].speaker, turns[0].text) in user


def test_a_long_full_history_replay_never_retokenises_its_history(monkeypatch):
    counted: list[int] = []
    real = engines.count_tokens

    def counting(text: str) -> int:
        counted.append(len(text))
        return real(text)

    monkeypatch.setattr(engines, "count_tokens", counting)
    tokenised = {}
    for n in (100, 200):
        counted.clear()
        turns = generate_workload(n, 50, seed=0)
        replay("full_history", turns, OfflineEngine(), ServingConfig(), labels={})
        tokenised[n] = sum(counted)
    history_chars = sum(len(render_line(t.speaker, t.text)) for t in turns)
    # re-counting the history at every turn would tokenise ~N/2 whole histories and grow as N²;
    # incremental counting tokenises only the fixed parts and the latest message: linear in N
    assert tokenised[200] < 2.3 * tokenised[100]
    assert tokenised[200] < 5 * history_chars < 200 / 2 * history_chars


def test_unknown_system_and_run_plan():
    with pytest.raises(ValueError, match="unknown served system 'zep'; choose from .*hindsight"):
        make_system("zep", ServingConfig())
    runs = plan_runs(
        [(15, 50), (400, 200)],
        [0, 1, 2],
        ["full_history", "mem0"],
        baseline_cells=[(100, 200)],
        baseline_repeats=2,
    )
    assert sorted(r for r in runs if r[0] == "full_history") == [
        ("full_history", 15, 50, 0),
        ("full_history", 15, 50, 1),
        ("full_history", 100, 200, 0),
        ("full_history", 100, 200, 1),
        ("full_history", 400, 200, 0),
        ("full_history", 400, 200, 1),
    ]
    assert len([r for r in runs if r[0] == "mem0"]) == 6


def test_observational_memory_gets_its_long_cells_and_their_gates_are_counted():
    import pandas as pd

    from memcost_serving import analysis as tables
    from memcost_serving.replay import plan_runs

    runs = plan_runs(
        [(15, 50)],
        [0, 1, 2, 3],
        ["mem0", "observational"],
        observational_cells=[(800, 200), (15, 50)],
        observational_repeats=3,
    )
    assert sorted({(s, n, size) for s, n, size, _ in runs}) == [
        ("mem0", 15, 50),
        ("observational", 15, 50),
        ("observational", 800, 200),
    ]
    assert sum(1 for s, n, *_ in runs if (s, n) == ("observational", 800)) == 3
    rows = pd.DataFrame(
        [
            {
                "system": "observational",
                "cell": "800×200",
                "model": "m",
                "reasoning_effort": "low",
                "seed": seed,
                "conversation_id": "c",
                "turn": turn,
                "stage": stage,
            }
            for seed in (0, 1)
            for turn, stage in ((3, "answer"), (3, "observer"), (9, "observer"), (9, "reflector"))
        ]
    )
    gates = tables.gates_fired(rows).set_index("stage")
    assert gates.loc["observer", "fired"] == 4 and gates.loc["observer", "per_run"] == 2.0
    assert gates.loc["reflector", "runs"] == 2 and gates.loc["reflector", "per_run"] == 1.0
    # Mem0's gate cut into two segments (two extraction calls) at one turn fired once
    mem0 = rows.assign(system="mem0", stage="ingest_extract")
    assert tables.gates_fired(mem0).set_index("stage").loc["ingest_extract", "fired"] == 4


def test_hindsight_is_served_at_the_studys_interval_with_the_served_model(monkeypatch):
    config = ServingConfig(ingest_interval=7)
    settings = engines.served_settings("hindsight", config, "openai/gpt-oss-20b", "medium")
    # its calls are the served model's; it has no reasoning-effort setting to set
    assert settings == {"retain_interval": 7, "llm_model": "openai/gpt-oss-20b"}
    with pytest.raises(ValueError, match=r"unknown served system\(s\) \['zep'\]"):
        engines.check_served(["mem0", "zep"])
    monkeypatch.setenv("MEMCOST_HINDSIGHT_PYTHON", "/nowhere/python")
    with pytest.raises(ValueError, match="make setup-hindsight"):
        engines.check_served(["mem0", "hindsight"])
    engines.check_served(["full_history", "mem0", "observational"])  # nothing to set up


def test_the_paid_estimate_replays_one_hindsight_seed_per_cell_and_counts_it_for_all():
    import pandas as pd

    from memcost_serving.replay import estimate_plan, run_weights

    runs = plan_runs([(15, 50), (400, 200)], [0, 1, 2], ["full_history", "mem0", "hindsight"])
    kept, stands_for = estimate_plan(runs)
    assert [r for r in kept if r[0] == "hindsight"] == [
        ("hindsight", 15, 50, 0),
        ("hindsight", 400, 200, 0),
    ]
    others = [r for r in runs if r[0] != "hindsight"]
    assert [r for r in kept if r[0] != "hindsight"] == others  # every other run, every seed
    assert stands_for == {("hindsight", 15, 50): 3, ("hindsight", 400, 200): 3}
    rows = pd.DataFrame(
        {"system": ["hindsight", "mem0"], "n_turns": [400, 400], "mean_tokens": [200, 200]}
    )
    assert run_weights(rows, stands_for).tolist() == [3.0, 1.0]
