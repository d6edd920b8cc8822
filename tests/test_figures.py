"""Figures a reader can trust: labels with the precision of their tick step, readable sizes."""

from __future__ import annotations

import struct

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from memcost.paths import FIGURES_DIR  # noqa: E402
from memcost.plots.costs import plot_cumulative_costs  # noqa: E402
from memcost.plots.style import StepFormatter, step_decimals  # noqa: E402

MAX_WIDTH_PX = 1600  # at the repository's savefig.dpi of 150: about 10.7 inches


def png_size(path) -> tuple[int, int]:
    """Width and height from the PNG header (IHDR), without an image library."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def tick_labels(ax) -> list[str]:
    ax.figure.canvas.draw()
    return [t.get_text() for t in ax.get_yticklabels() if t.get_text()]


@pytest.mark.parametrize(
    ("step", "decimals"), [(0.025, 3), (0.5, 1), (10.0, 0), (0.005, 3), (0.0002, 4)]
)
def test_step_decimals(step, decimals):
    assert step_decimals(step) == decimals


def test_step_formatter_labels_every_tick_distinctly():
    formatter = StepFormatter(prefix="$")
    formatter.set_locs([0.0, 0.025, 0.05, 0.075])
    assert [formatter(v) for v in formatter.ticks] == ["$0.000", "$0.025", "$0.050", "$0.075"]


def test_cumulative_cost_ticks_have_the_precision_of_their_step():
    turns = np.arange(1, 21)
    memory = 0.045 + 0.0013 * (turns - 1)
    long_context = 0.0265 + 0.0036 * (turns - 1)
    fig = plot_cumulative_costs(turns, memory, long_context, 10)
    ax = fig.axes[0]
    locs = ax.get_yticks()
    step = float(np.min(np.diff(locs)))
    labels = tick_labels(ax)
    assert len(set(labels)) == len(labels)  # no two gridlines read the same
    for label, value in zip(
        labels, [v for v in locs if ax.get_ylim()[0] <= v <= ax.get_ylim()[1]], strict=False
    ):
        assert abs(float(label.lstrip("$").replace(",", "")) - value) < step / 10, label
    width, height = fig.get_size_inches() * fig.dpi
    assert 600 <= width <= 1800 and 400 <= height <= 1200


@pytest.mark.parametrize("path", sorted(FIGURES_DIR.glob("*.png")), ids=lambda p: p.stem)
def test_committed_figures_have_a_readable_size(path):
    width, height = png_size(path)
    # wide enough to read at 100%, not so wide that text shrinks when a page fits it: rows of
    # panels wrap into a grid (cost_sensitivity was 2,007 x 635, the intervals 1,963 x 450)
    assert 600 <= width <= MAX_WIDTH_PX, (path.name, width)
    assert 300 <= height <= 1800, (path.name, height)
    assert width / height <= 2.5, (path.name, width, height)


# --- Sizes of the figures as saved, and histograms that do not hide each other ------------------


def saved_size(fig, tmp_path, name: str) -> tuple[int, int]:
    """The PNG a notebook would write: the repository's style (dpi 150, tight bounding box)."""
    from memcost.plots.style import save_figure

    (path,) = save_figure(fig, tmp_path, name, svg=False)
    return png_size(path)


@pytest.fixture(autouse=True)
def repository_style():
    import matplotlib.pyplot as plt

    from memcost.plots import apply_style

    apply_style()
    yield
    plt.close("all")  # each test's figures, so the session never holds more than one test's


def sensitivity_inputs():
    import pandas as pd

    contexts = [30_000, 100_000, 200_000, 500_000]
    discount = pd.DataFrame(
        [
            {"context_tokens": L, "cache_discount": d, "break_even_n": 2 + 10 * d}
            for L in contexts
            for d in (0.0, 0.5, 0.9)
        ]
    )
    output = pd.DataFrame(
        [
            {"context_tokens": L, "output_tokens": n, "break_even_n": 40 - n / 200}
            for L in contexts
            for n in (0, 527, 2000, 4000)
        ]
    )
    scenarios = [
        "list prices",
        "batch write",
        "batch write + read",
        "batch long context",
        "batch everything",
    ]
    batch = pd.DataFrame(
        [
            {
                "context_tokens": L,
                "scenario": s,
                "break_even_n": float("nan") if s == "batch long context" else 9.0,
            }
            for L in contexts
            for s in scenarios
        ]
    )
    return discount, output, batch


def test_sensitivity_wraps_into_a_grid_of_readable_width(tmp_path):
    from memcost.plots import plot_sensitivity

    fig = plot_sensitivity(*sensitivity_inputs())
    width, height = saved_size(fig, tmp_path, "cost_sensitivity")
    assert 900 <= width <= MAX_WIDTH_PX, width  # one row of three was 2,007 px
    assert width / height <= 2.0, (width, height)
    # (c)'s scenarios have no order: dots only, no line joins them
    assert all(line.get_linestyle() == "None" for line in fig.axes[2].get_lines())


def test_calibration_intervals_wrap_into_two_columns(tmp_path):
    import pandas as pd

    from memcost.plots import plot_calibration_intervals
    from memcost.plots.costs import CONSTANT_TITLES

    intervals = pd.DataFrame(
        [
            {
                "constant": name,
                "unit": "units",
                "low": 1.0,
                "high": 2.0,
                "chosen": 1.5,
                "stated": 0.8 if i % 2 == 0 else 1.5,
            }
            for i, name in enumerate(CONSTANT_TITLES)
        ]
    )
    fig = plot_calibration_intervals(intervals, subtitle="test")
    width, height = saved_size(fig, tmp_path, "cost_calibration_intervals")
    assert width <= MAX_WIDTH_PX and width / height <= 2.5, (width, height)  # was 1,963 x 450
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == len(CONSTANT_TITLES)
    assert len({round(ax.get_position().x0, 3) for ax in visible}) == 2  # two columns
    assert [ax.get_title(loc="left") for ax in visible] == list(CONSTANT_TITLES.values())


def test_break_even_by_gap_wraps_three_scenarios(tmp_path):
    import pandas as pd

    from memcost.plots.today import plot_break_even_by_gap

    rows = [
        {
            "scenario": s,
            "price_date": "2026-11-30",
            "lc_model": "m",
            "policy": p,
            "policy_label": p,
            "context_tokens": 101_601,
            "gap_seconds": g,
            "break_even_n": n,
        }
        for s, n in (("paper", 10), ("current", 1), ("current (all gpt-6-luna)", 58))
        for p in ("in_memory", "none")
        for g in (60.0, 3_600.0, 604_800.0)
    ]
    fig = plot_break_even_by_gap(pd.DataFrame(rows))
    width, height = saved_size(fig, tmp_path, "break_even_by_gap")
    assert width <= MAX_WIDTH_PX and width / height <= 2.0, (width, height)  # was 2,041 x 649


def conversation_stats(n: int):
    import pandas as pd

    rng = np.random.default_rng(0)
    text = rng.integers(300, 600, n)
    return pd.DataFrame(
        {
            "conversation_id": [f"c{i}" for i in range(n)],
            "text_tokens": text,
            "history_tokens": text + rng.integers(80, 200, n),
        }
    )


def test_histograms_of_10_or_more_are_small_multiples_that_hide_nothing(tmp_path):
    from matplotlib.container import BarContainer

    from memcost.plots.study import plot_conversation_lengths

    stats = conversation_stats(11)
    fig = plot_conversation_lengths(stats, "longmemeval")
    histograms = [ax for ax in fig.axes if any(isinstance(c, BarContainer) for c in ax.containers)]
    assert len(histograms) == 2  # one panel per series, on a shared x axis
    for ax, column in zip(histograms, ("text_tokens", "history_tokens"), strict=True):
        (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]  # never two in one
        assert sum(p.get_height() for p in bars.patches) == len(stats)
        assert all(p.get_alpha() in (None, 1.0) for p in bars.patches)  # opaque, not blended
        assert f"median {np.median(stats[column]):,.0f}" in [t.get_text().strip() for t in ax.texts]
    assert histograms[0].get_shared_x_axes().joined(histograms[0], histograms[1])
    width, height = saved_size(fig, tmp_path, "conversation_tokens")
    assert 600 <= width <= MAX_WIDTH_PX and 400 <= height, (width, height)


def test_fewer_than_10_conversations_are_dots(tmp_path):
    from memcost.plots.study import plot_conversation_lengths

    fig = plot_conversation_lengths(conversation_stats(3), "locomo")
    (ax,) = fig.axes
    assert not ax.containers and len(ax.collections) == 2  # one dot series per row


def test_stage_costs_read_as_names_with_one_dollar_format():
    import pandas as pd

    from memcost.catalog import dollars
    from memcost.plots import plot_stage_costs

    assert [dollars(v) for v in (0.2169, 0.0017458, 0.000035, 0.0)] == [
        "$0.22",
        "$0.0017",
        "$0.000035",
        "$0",
    ]
    summary = pd.DataFrame(
        {
            "dataset": ["personamem"] * 5,
            "component": [
                "write: fact extraction",
                "answer: long_context_gpt-5-mini (gpt-5-mini)",
                "judge",
                "write: memory_graph",
                "read: memory_graph",
            ],
            "total_usd": [0.00069, 0.0040, 0.2169, 0.0011, 0.0012],
        }
    )
    fig = plot_stage_costs(summary, backend="offline")
    ax = fig.axes[0]
    fig.canvas.draw()
    assert ax.get_title(loc="left") == "PersonaMem (32k split)"
    labels = [t.get_text() for t in ax.get_yticklabels()]
    # offline no model answered: the bar is the stand-in's tokens at the model's prices
    assert "answer: long context (offline), priced as gpt-5-mini" in labels
    assert {"write: memory graph (offline)", "read: memory graph (offline)"} <= set(labels)
    assert not any("_" in t for t in labels)
    texts = sorted(t.get_text() for t in ax.texts)
    assert texts == ["$0.00069", "$0.0011", "$0.0012", "$0.0040", "$0.22"]
    # panels of different datasets share one log axis, so a tenfold difference looks tenfold
    two = pd.concat([summary, summary.assign(dataset="locomo", total_usd=summary.total_usd * 10)])
    fig = plot_stage_costs(two, backend="offline")
    assert [a.get_xscale() for a in fig.axes] == ["log", "log"]
    assert fig.axes[0].get_xlim() == fig.axes[1].get_xlim() == pytest.approx((1e-4, 2.169 * 5))


def test_evidence_recall_names_every_category_and_labels_zero_bars():
    import pandas as pd

    from memcost.plots.study import plot_evidence_recall

    categories = pd.DataFrame(
        {
            "category": ["knowledge_update", "single_session_assistant", "adversarial"],
            "with_evidence": [2, 1, 4],
            "evidence_in_memory": [0.75, 0.0, 1.0],
            "evidence_recall": [0.5, 0.0, 1.0],
        }
    )
    fig = plot_evidence_recall(categories, dataset="longmemeval", top_k=20, backend="offline")
    ax = fig.axes[0]
    fig.canvas.draw()
    # long names read along the y axis (on the x axis LongMemEval's ran into each other)
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "knowledge update (n = 2)",
        "single session assistant (n = 1)",
    ]
    values = sorted(t.get_text() for t in ax.texts if t.get_text()[0].isdigit())
    assert values == ["0.00", "0.00", "0.50", "0.75"]  # a bar of length 0 still says so


def test_serving_panels_wrap_instead_of_one_long_row(tmp_path):
    import pandas as pd

    from memcost_serving.plots import plot_cumulative

    panels = [("gpt-5-mini", "low"), ("gpt-5-mini", "high"), ("gpt-oss-20b", "")]
    curves = pd.DataFrame(
        [
            {
                "cell": "10×1000",
                "model": m,
                "reasoning_effort": e,
                "system": s,
                "turn": t,
                "cumulative": (t + 1) * (2 if s == "mem0" else 3),
            }
            for m, e in panels
            for s in ("mem0", "full_history")
            for t in range(1, 11)
        ]
    )
    break_even = pd.DataFrame(
        [
            {"cell": "10×1000", "model": m, "reasoning_effort": e, "system": "mem0", "t_be": 4}
            for m, e in panels
        ]
        + [
            {"cell": "10×1000", "model": m, "reasoning_effort": e, "system": "full_history"}
            for m, e in panels
        ]  # never (no t_be)
    )
    fig = plot_cumulative(curves, break_even, cell="10×1000", backend="offline")
    # each panel lists its break-evens in a corner, not beside the markers over the curves
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "sustained break-even\nfull history: never\nmem0: turn 4" in texts
    # offline no model answered: each panel is the stand-ins' tokens at that model's prices
    assert fig.axes[0].get_title() == "priced as gpt-5-mini (low) · N×L = 10×1000"
    width, height = saved_size(fig, tmp_path, "serving_cumulative")
    assert width <= MAX_WIDTH_PX and width / height <= 2.0, (width, height)  # was 3 x 5.2 in
    assert sum(ax.get_visible() for ax in fig.axes) == len(panels)
    # one legend for the figure, under the panels: inside a panel it hid a break-even's label
    assert all(ax.get_legend() is None for ax in fig.axes)
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["full history", "mem0", "sustained break-even t_BE"]
    online = plot_cumulative(curves, break_even, cell="10×1000", backend="openrouter")
    assert online.axes[0].get_title() == "gpt-5-mini (low) · N×L = 10×1000"


def test_tokens_per_turn_are_labelled_as_plain_counts():
    import pandas as pd

    from memcost_serving.plots import plot_cost_per_turn

    turns = pd.DataFrame(
        {
            "cell": "60×100",
            "seed": 0,
            "model": "gpt-oss-20b",
            "reasoning_effort": "low",
            "system": ["full_history"] * 3 + ["mem0"] * 3,
            "turn": [0, 1, 2] * 2,
            "C": [180, 2_400, 6_000, 250, 430, 3_000],
        }
    )
    fig = plot_cost_per_turn(turns, cell="60×100", backend="offline")
    fig.canvas.draw()
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    labels = [t.get_text() for t in ax.get_yticklabels() if low <= t.get_position()[1] <= high]
    assert labels == ["200", "500", "1,000", "2,000", "5,000"]  # once "6 × 10^3" beside one 10^3


def test_facts_vs_history_keeps_every_dot_inside_the_axes():
    import pandas as pd

    from memcost.plots.study import plot_facts_vs_history

    stats = pd.DataFrame(
        {"history_tokens": [863, 1205], "active_facts": [33, 46], "compression": [1.19, 1.23]}
    )
    fig = plot_facts_vs_history(stats, dataset="locomo", backend="offline")
    ax = fig.axes[0]
    assert ax.get_xlim()[1] > 1205 * 1.05 and ax.get_ylim()[1] > 46 * 1.05  # was at the edge
    assert ax.get_title() == "Facts per user vs history length (LoCoMo)"


def test_the_explorer_widgets_start_where_the_figure_above_them_does():
    """A browser snaps a slider's value to ``min + k * step``: each starting value lies on its
    slider's grid, so the widgets show the static figure's settings, not neighbours of them."""
    import math

    from memcost.plots.today import explorer_widgets

    start = {
        "context_tokens": 101_601,
        "questions": 60,
        "scenario": "current",
        "retention": "in_memory",
        "gap_seconds": 3600.0,
        "batch": False,
        "output_tokens": 527,
    }
    controls = explorer_widgets(start).children[:-1]
    for control in controls:
        if type(control).__name__ == "FloatLogSlider":
            steps = (math.log10(control.value) - control.min) / control.step
            assert abs(steps - round(steps)) < 1e-6, control.description
        elif type(control).__name__ == "IntSlider":
            assert (control.value - control.min) % control.step == 0, control.description
    widths = {c.style.description_width for c in controls}
    assert widths == {"230px"}  # the longest description fits in one line


def test_figure_1_says_where_an_invisible_boundary_is_and_marks_the_tier_seam():
    import numpy as np

    from memcost.plots import plot_break_even_heatmap

    contexts = np.array([1e4, 1e5, 5e5, 1e6])
    turns = np.arange(1, 11)
    difference = np.ones((len(turns), len(contexts)))  # memory cheaper everywhere
    fig = plot_break_even_heatmap(
        contexts,
        turns,
        difference,
        np.ones(len(contexts)),
        region_labels=False,
        tier_threshold=272_000,
    )
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "break-even at N = 1 (bar along the bottom)"
    # drawn inside the first row (y = 1), above the axis line at y = 0.5, over all four lengths
    bars = [line for line in ax.lines if list(line.get_ydata()) == [1.0, 1.0]]
    assert len(bars) == 4 and ax.get_ylim()[0] == 0.5
    assert any(t.get_text().startswith("272k: long-context\ntier") for t in ax.texts)
    fig = plot_break_even_heatmap(
        contexts, turns, difference, np.array([1, 3, 5, 7.0]), region_labels=False
    )
    assert fig.axes[0].get_legend().get_texts()[0].get_text() == "break-even boundary"


def test_figure_1_keeps_its_legend_its_reference_label_and_the_published_marks_apart():
    import numpy as np

    from memcost.plots import plot_break_even_heatmap

    contexts = np.geomspace(1e4, 1e6, 30)
    turns = np.arange(1, 101)
    difference = np.outer(turns, np.log(contexts)) - 100.0
    fig = plot_break_even_heatmap(
        contexts,
        turns,
        difference,
        np.ones(len(contexts)),
        marks={1e5: 10, 3e4: 13},
        reference_context=101_601,
        reference_label="LongMemEval-S\nL = 101,601",
        zero_contour=True,
        tier_threshold=272_000,
    )
    fig.canvas.draw()
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    texts = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts if t.get_text()}
    reference = texts.pop("LongMemEval-S\nL = 101,601")
    assert not legend.overlaps(reference)  # the label once sat under the legend
    assert not any(reference.overlaps(box) for box in texts.values()), texts


def test_a_saved_figure_is_shown_once_in_a_notebook_as_the_png_written(tmp_path):
    # the inline backend drew every saved figure a third time at the cell's end
    import base64
    import json

    import nbformat

    from memcost.run.runner import execute_notebook

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell("folder = ''", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\nfrom memcost import plots\n"
            "plots.apply_style()\nfig, ax = plt.subplots(figsize=(4, 3))\n"
            "ax.plot([1, 2, 3])\nwritten = plots.save_figure(fig, folder, 'line')\n"
            "print('after the figure')"
        ),
        nbformat.v4.new_code_cell("fig2, ax2 = plt.subplots()\nax2.plot([3, 2, 1])"),
    ]
    source = tmp_path / "figure.ipynb"
    source.write_text(nbformat.writes(nb), encoding="utf-8")
    execute_notebook(source, tmp_path / "out.ipynb", {"folder": str(tmp_path)})
    cells = json.loads((tmp_path / "out.ipynb").read_text(encoding="utf-8"))["cells"]
    saved = [o for o in cells[2]["outputs"] if "image/png" in o.get("data", {})]
    assert len(saved) == 1  # shown where it was saved, not again at the end of the cell
    assert base64.b64decode(saved[0]["data"]["image/png"]) == (tmp_path / "line.png").read_bytes()
    pixels = struct.unpack(">II", (tmp_path / "line.png").read_bytes()[16:24])
    size = saved[0]["metadata"]["image/png"]  # shown at the figure's size on screen (110 dpi)
    assert (size["width"], size["height"]) == tuple(round(p * 110 / 150) for p in pixels)
    assert "".join(cells[2]["outputs"][-1]["text"]) == "after the figure\n"
    drawn = [o for o in cells[3]["outputs"] if "image/png" in o.get("data", {})]
    assert len(drawn) == 1  # a figure nobody saved is shown by the inline backend, as before


def test_a_saved_figure_shows_nothing_outside_a_notebook(tmp_path, capsys):
    import matplotlib.pyplot as plt

    from memcost import plots

    fig, ax = plt.subplots()
    ax.plot([1, 2])
    plots.save_figure(fig, tmp_path, "quiet")
    assert capsys.readouterr().out == ""
    assert plt.fignum_exists(fig.number)  # left open: a script decides when to close it
    plt.close(fig)


def test_context_sizes_on_a_narrow_log_axis_get_more_than_one_labelled_tick():
    # LongMemEval's sample sizes (about 500 tokens) once drew a log axis labelled "1,000" alone
    import pandas as pd

    from memcost.plots.study import plot_context_sizes

    sizes = pd.DataFrame(
        {
            "system": ["long_context_gpt-5-mini"] * 3 + ["rolling_window_gpt-5-mini"] * 3,
            "kind": ["long_context"] * 3 + ["rolling_window"] * 3,
            "context_tokens": [480, 563, 650, 420, 499, 530],
        }
    )
    fig = plot_context_sizes(sizes, backend="offline")
    ax = fig.axes[0]
    fig.canvas.draw()
    low, high = ax.get_xlim()
    labels = [
        t.get_text()
        for t in ax.get_xticklabels()
        if t.get_text() and low <= t.get_position()[0] <= high
    ]
    assert labels == ["500", "1k", "2k", "5k"]


def test_context_sizes_over_three_decades_label_ticks_that_do_not_overlap():
    # the real LoCoMo: rolling windows of ~300 tokens beside histories of ~26,000 drew
    # "10,00020,000" and "50,000100,000", the labels run together
    import matplotlib.pyplot as plt
    import pandas as pd

    from memcost import plots
    from memcost.plots.study import plot_context_sizes

    tokens = {  # the real LoCoMo's medians, every memory system with its long label
        "memory_mem0_style": 523,
        "memory_graph": 316,
        "memory_hierarchical": 846,
        "memory_observational": 25_864,
        "memory_rag": 2_003,
        "long_context_gpt-5-mini": 21_637,
        "long_context_gpt-oss-120b": 21_637,
        "rolling_window_gpt-5-mini": 340,
    }
    sizes = pd.DataFrame(
        {
            "system": [s for s in tokens for _ in range(2)],
            "kind": [
                s.rsplit("_", 1)[0] if "context" in s or "window" in s else "memory"
                for s in tokens
                for _ in range(2)
            ],
            "context_tokens": [n * f for n in tokens.values() for f in (0.95, 1.15)],
        }
    )
    with plt.rc_context():
        plots.apply_style()  # a notebook's sizes
        fig = plot_context_sizes(sizes, backend="offline")
        fig.canvas.draw()
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    low, high = ax.get_xlim()
    shown = [t for t in ax.get_xticklabels() if t.get_text() and low <= t.get_position()[0] <= high]
    assert [t.get_text() for t in shown][-4:] == ["10k", "20k", "50k", "100k"]
    boxes = [t.get_window_extent(renderer) for t in shown]
    touching = [
        shown[i].get_text() + shown[i + 1].get_text()
        for i in range(len(boxes) - 1)
        if boxes[i].x1 > boxes[i + 1].x0
    ]
    assert touching == []


def test_published_accuracy_labels_a_probe_read_back_from_csv_and_keeps_values_readable(tmp_path):
    import pandas as pd

    from memcost_published.plots import plot_published_accuracy

    frame = pd.DataFrame(
        {
            "name": ["full_context", "probe"],
            "dataset": "locomo",
            "kind": ["long_context", "probe"],
            "answer_model": ["gpt-4.1-mini", None],
            "judge_model": "gpt-4o-mini",
            "votes": 3,
            "n": 1540,
            "accuracy_pct": [92.66, 62.73],
            "cluster_low_pct": [91.1, 57.6],
            "cluster_high_pct": [94.3, 69.3],
        }
    )
    frame.to_csv(tmp_path / "published_accuracy.csv", index=False)
    read_back = pd.read_csv(tmp_path / "published_accuracy.csv")  # None comes back as NaN
    fig = plot_published_accuracy(read_back, {"locomo": 93.57})
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "probe\nwrong on purpose · judge gpt-4o-mini × 3"  # once "nan · judge"
    value = next(t for t in ax.texts if t.get_text() == "92.7%")
    assert value.get_bbox_patch() is not None  # on white, over the gold ceiling's line


def test_latency_draws_a_time_under_the_records_resolution_at_the_left_edge_and_says_so():
    import pandas as pd

    from memcost.plots.costs import plot_latency

    rows = [
        ("memory_mem0_style", "search", 8e-5, 3e-4),
        ("memory_mem0_style", "total", 3e-4, 4e-4),
        ("long_context_gpt-5-mini", "total", 0.0, 1e-3),  # under 0.1 ms: recorded as 0
    ]
    table = pd.DataFrame(rows, columns=["system", "stage", "p50_s", "p95_s"])
    fig = plot_latency(table, backend="offline")
    total = fig.axes[1]
    dots = [tuple(c.get_offsets()[0]) for c in total.collections if len(c.get_offsets()) == 1]
    assert (pytest.approx(8e-5 / 3), 1.0) in dots  # the smallest time measured / 3, not 1e-6
    notes = [t.get_text() for t in fig.texts]
    assert "at the left edge: 0, a time under the 0.1 ms a call's record keeps" in notes
    table.loc[2, "p50_s"] = 2e-4
    assert [t.get_text() for t in plot_latency(table, backend="offline").texts] == [
        fig.texts[0].get_text()  # the title alone
    ]
