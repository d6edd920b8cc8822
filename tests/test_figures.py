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


def png_size(path) -> tuple[int, int]:
    """Width and height from the PNG header (IHDR), without an image library."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def tick_labels(ax) -> list[str]:
    ax.figure.canvas.draw()
    return [t.get_text() for t in ax.get_yticklabels() if t.get_text()]


@pytest.mark.parametrize(("step", "decimals"), [(0.025, 3), (0.5, 1), (10.0, 0), (0.005, 3),
                                                (0.0002, 4)])
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
    for label, value in zip(labels, [v for v in locs if ax.get_ylim()[0] <= v <= ax.get_ylim()[1]],
                            strict=False):
        assert abs(float(label.lstrip("$").replace(",", "")) - value) < step / 10, label
    width, height = fig.get_size_inches() * fig.dpi
    assert 600 <= width <= 1800 and 400 <= height <= 1200


@pytest.mark.parametrize("path", sorted(FIGURES_DIR.glob("*.png")), ids=lambda p: p.stem)
def test_committed_figures_have_a_readable_size(path):
    width, height = png_size(path)
    # wide enough to read at 100%, not so wide that text shrinks when a page fits it
    assert 600 <= width <= 2400, (path.name, width)
    assert 300 <= height <= 1800, (path.name, height)
    assert width / height <= 4.5, (path.name, width, height)  # a row of panels at most
