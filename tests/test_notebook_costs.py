"""Notebooks 05 and 07 end to end under papermill, executed once for the whole module: the paper
preset on an offline run that has a ledger and judgments (Tables 4-5, Figure 1, the hand-written
break-even loop, the estimated cost tables, and the break-even at today's prices)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from test_usage import record

from memcost.calls import CallStore
from memcost.io import read_json
from memcost.paths import FIGURES_DIR
from memcost.run import run_preset

# a hang guard; notebook executions are slow on a busy 2-core machine
pytestmark = pytest.mark.timeout(600)


def offline_ledger() -> list[dict]:
    """A small offline run: LoCoMo (2 users, 3 questions each, judged) and LongMemEval
    (2 users, 1 question each, not judged yet)."""
    records = []
    t = 0

    def add(stage, model, prompt, completion=0, **tags):
        nonlocal t
        t += 1
        records.append(
            record(
                stage,
                model,
                prompt,
                completion,
                provider="offline",
                backend="offline",
                timestamp=f"2026-11-01T10:{t // 60:02d}:{t % 60:02d}+00:00",
                request_hash=f"h{t}",
                latency_s=0.01,
                **{"question_id": None, "system": None, **tags},
            )
        )

    for dataset, users, questions, history in (
        ("locomo", 2, 3, 16_000),
        ("longmemeval", 2, 1, 100_000),
    ):
        for u in range(users):
            conv = f"{dataset}-c{u}"
            tags = {"dataset": dataset, "conversation_id": conv}
            for _segment in range(4):
                add("extract", "gpt-5-nano-2025-08-07", history // 4 + 800, 300, **tags)
            add("update", "gpt-5-nano-2025-08-07", 1_200, 100, **tags)
            add("embed", "text-embedding-3-small", 2_000, **tags)
            for q in range(questions):
                qid = f"{conv}-q{q}"
                qtags = {**tags, "question_id": qid}
                add("embed", "text-embedding-3-small", 12, system="memory_mem0_style", **qtags)
                add("read", "gpt-5-mini-2025-08-07", 1_100, 40, system="memory_mem0_style", **qtags)
                for model, system in (
                    ("gpt-5-mini-2025-08-07", "long_context_gpt-5-mini"),
                    ("openai/gpt-oss-120b", "long_context_gpt-oss-120b"),
                ):
                    add("long_context", model, history + 300, 30, system=system, **qtags)
                    if dataset == "locomo":
                        for _vote in range(3):
                            add("judge", "gpt-5-mini-2025-08-07", 400, 20, system=system, **qtags)
    return records


def write_offline_run(root) -> None:
    root.mkdir(parents=True)
    with CallStore(root) as store:
        for record in offline_ledger():
            store.add(record)
    judgments = []
    for u in range(2):
        for q in range(3):
            qid = f"locomo-c{u}-q{q}"
            for system, correct in (
                ("memory_mem0_style", q != 2),
                ("long_context_gpt-5-mini", True),
                ("long_context_gpt-oss-120b", q == 0),
            ):
                for vote in range(3):
                    judgments.append(
                        {
                            "question_id": qid,
                            "conversation_id": f"locomo-c{u}",
                            "system": system,
                            "category": "single_hop",
                            "vote": vote,
                            "label": "CORRECT" if correct else "WRONG",
                            "reason": "",
                            "judge_model": "gpt-5-mini",
                            "backend": "offline",
                            "prompt_name": "judge",
                            "prompt_version": "v1",
                        }
                    )
    for dataset, users, questions in (("locomo", 2, 3), ("longmemeval", 2, 1)):
        (root / dataset / "data").mkdir(parents=True)  # what notebook 00 would have prepared
        ids = [f"{dataset}-c{u}-q{q}" for u in range(users) for q in range(questions)]
        pd.DataFrame({"question_id": ids}).to_parquet(root / dataset / "data" / "questions.parquet")
    (root / "locomo" / "judgments.jsonl").write_text(
        "\n".join(json.dumps(j) for j in judgments) + "\n", encoding="utf-8"
    )


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The paper_cost_model preset on a run with an offline ledger and judgments, its figures
    also saved to a scratch "repository" folder; the repository's own figures/ before and after."""
    tmp_path = tmp_path_factory.mktemp("notebook05")
    root = tmp_path / "smoke"
    write_offline_run(root)
    repo_figures = tmp_path / "repo_figures"
    before = sorted(p.name for p in FIGURES_DIR.iterdir())
    run = run_preset(
        "paper_cost_model",
        run_name=str(root),
        stream=False,
        overrides={"repo_figures_dir": str(repo_figures)},
    )
    after = sorted(p.name for p in FIGURES_DIR.iterdir())
    metrics = read_json(run.root / "metrics" / "05_analyse_costs.json")["metrics"]
    return run, repo_figures, metrics, (before, after)


def test_paper_tables_4_and_5(executed):
    run, _, metrics, _ = executed
    table4 = pd.read_csv(run.table.table4)
    table5 = pd.read_csv(run.table.table5)
    assert list(table4.columns) == ["n_turns", "memory_usd", "long_context_usd"]
    assert list(table5.columns) == [
        "context_tokens",
        "write_usd",
        "lc_turn1_usd",
        "lc_turn_n_usd",
        "break_even_n",
    ]
    assert table4.round(4).to_dict("list") == {
        "n_turns": [1, 5, 10, 15, 20],
        "memory_usd": [0.0450, 0.0502, 0.0568, 0.0634, 0.0700],
        "long_context_usd": [0.0265, 0.0408, 0.0588, 0.0768, 0.0947],
    }
    assert table5.round(4).to_dict("list") == {
        "context_tokens": [30_000, 100_000, 200_000, 500_000],
        "write_usd": [0.0129, 0.0430, 0.0859, 0.2148],
        "lc_turn1_usd": [0.0086, 0.0261, 0.0511, 0.1261],
        "lc_turn_n_usd": [0.0018, 0.0036, 0.0061, 0.0136],
        "break_even_n": [13, 10, 9, 9],
    }
    assert metrics["paper_cells_matched"] == metrics["paper_cells"] == 26
    assert metrics["break_even_from_rounded_rows"] == [13, 9, 9, 9]
    assert all(row["chosen_inside"] for row in metrics["calibration_intervals"])


def test_break_even_loop_equals_the_library(executed):
    run, _, metrics, _ = executed
    assert metrics["loop_break_even"] == 10  # L = 101,601 with the paper's constants
    notebook = json.loads((run.notebooks / "05_analyse_costs.ipynb").read_text(encoding="utf-8"))
    printed = "".join(
        "".join(output.get("text", ""))
        for cell in notebook["cells"]
        if cell["cell_type"] == "code"
        and "for n in range(1, max_turns + 1)" in "".join(cell["source"])
        for output in cell["outputs"]
    )
    lines = [line for line in printed.splitlines() if line.startswith("N = ")]
    assert len(lines) == 10  # one line per question until memory is cheaper
    assert lines[0] == "N =  1   memory $0.0450   long context $0.0265"  # Table 4, N = 1
    assert lines[-1] == "N = 10   memory $0.0568   long context $0.0588"  # Table 4, N = 10


def test_figures_go_to_the_run_and_the_given_folder_only(executed):
    run, repo_figures, _, (before, after) = executed
    for folder in (run.figures, repo_figures):
        for ext in ("png", "svg"):
            assert (folder / f"{run.figure.figure1.name}.{ext}").stat().st_size > 10_000
            assert (folder / f"{run.figure.figure1b.name}.{ext}").is_file()
    for name in ("figure1", "cost_by_component", "cost_sensitivity"):
        assert getattr(run.figure, name).with_suffix(".png").is_file()
    assert after == before  # repository untouched


def test_offline_run_gets_estimated_cost_tables(executed):
    run, _, metrics, _ = executed
    summary = pd.read_csv(run.table.cost_summary)
    assert set(summary["dataset"]) == {"locomo", "longmemeval"}
    assert summary["basis"].str.startswith("estimate").all()
    lc = summary.set_index(["dataset", "component"]).loc[
        ("locomo", "answer: long_context_gpt-5-mini (gpt-5-mini)")
    ]
    assert lc["questions"] == 6 and lc["api_requests"] == 6
    assert lc["total_usd"] == pytest.approx(6 * (16_300 * 0.25 + 30 * 2.0) / 1e6)
    cpa = pd.read_csv(run.table.cost_per_correct_answer).set_index("system")
    assert cpa.loc["memory_mem0_style", "accuracy"] == pytest.approx(4 / 6)
    assert set(cpa.index) == {
        "memory_mem0_style",
        "long_context_gpt-5-mini",
        "long_context_gpt-oss-120b",
    }
    measured = pd.read_csv(run.table.cost_model_measured)
    assert len(measured) == 4  # two datasets × two long-context systems
    assert metrics["estimate"] is True and metrics["paper_cells_matched"] == 26
    assert metrics["ledger_records"] == len(offline_ledger())
    notebook = (run.notebooks / "05_analyse_costs.ipynb").read_text(encoding="utf-8")
    assert "ESTIMATE" in notebook


def test_measured_mode_without_ledger_fails_clearly():
    """What the notebook's measured mode calls, given a run that made no call."""
    from memcost import costs
    from memcost.costs.ledger import ledger_from_records

    empty = costs.price_calls(ledger_from_records([]))
    with pytest.raises(ValueError, match="needs a calls.sqlite with records"):
        costs.measured_constants(empty, "longmemeval", "long_context_gpt-5-mini")


def test_notebook_07_computes_the_break_even_today(executed):
    run = executed[0]
    metrics = read_json(run.root / "metrics" / "07_costs_today.json")["metrics"]
    headline = pd.read_csv(run.table.break_even_headline).set_index("case")
    assert headline.loc["paper's break-even", "break_even_n"] == 10
    assert headline.loc["today, one question a day", "price_date"] == "2026-11-30"
    today = pd.read_csv(run.table.table5_today)
    assert today.loc[today["scenario"] == "paper", "break_even_n"].tolist() == [13, 10, 9, 9]
    assert set(today["price_date"]) == {"2025-09-15", "2026-11-30"}
    by_gap = pd.read_csv(run.table.break_even_by_gap)
    assert by_gap["gap_seconds"].min() == 60 and by_gap["gap_seconds"].max() == 604_800
    assert set(by_gap["policy"]) == {"in_memory", "extended", "none"}
    for name in (
        "figure1_today",
        "break_even_by_gap",
        "break_even_by_context_today",
        "cost_explorer",
    ):
        assert getattr(run.figure, name).with_suffix(".png").stat().st_size > 10_000
    assert metrics["break_even_headline"][0]["break_even_n"] == 10
    assert metrics["tier_crossing_question"] == 172
    for name in (
        "price_schedules",
        "break_even_by_arrivals",
        "break_even_long_context_tier",
        "break_even_batch_write",
    ):
        assert getattr(run.table, name).is_file()
