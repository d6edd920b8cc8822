"""Figures, in one visual style."""

# ruff: noqa: F401 - the names the notebooks use
from memcost.plots.costs import (
    plot_break_even_heatmap,
    plot_calibration_intervals,
    plot_cumulative_costs,
    plot_latency,
    plot_sensitivity,
    plot_stage_costs,
    plot_sustained_break_even,
    plot_token_vs_dollar_break_even,
)
from memcost.plots.style import apply_style, save_figure, save_figures
