"""Figures, in one visual style (:mod:`~memcost.plots.style`: colours per system, the offline
label, PNG and SVG): ``study`` for the stages (notebooks 00-04), ``costs`` for the cost analysis
(05), ``today`` for today's prices and the workshop's explorer (07), ``serving`` for the serving
study (06)."""

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
