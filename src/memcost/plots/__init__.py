"""Figures, with one visual style: ``style`` (colours, the offline label, saving), and one module
per pipeline stage whose figures they are (``costs`` and ``cost_robustness`` for notebook 05,
...)."""

from memcost.plots.cost_robustness import (
    plot_sensitivity,
    plot_sustained_break_even,
    plot_token_vs_dollar_break_even,
)
from memcost.plots.costs import (
    COST_CMAP,
    LC_CHEAPER_COLOR,
    MEMORY_CHEAPER_COLOR,
    plot_break_even_heatmap,
    plot_calibration_intervals,
    plot_cumulative_costs,
    plot_stage_costs,
)
from memcost.plots.latency import plot_latency
from memcost.plots.style import (
    OFFLINE_NOTE,
    SYSTEM_COLORS,
    apply_style,
    label_backend,
    save_figure,
    save_figures,
    system_color,
)

__all__ = [
    "COST_CMAP",
    "LC_CHEAPER_COLOR",
    "MEMORY_CHEAPER_COLOR",
    "OFFLINE_NOTE",
    "SYSTEM_COLORS",
    "apply_style",
    "label_backend",
    "plot_break_even_heatmap",
    "plot_calibration_intervals",
    "plot_cumulative_costs",
    "plot_latency",
    "plot_sensitivity",
    "plot_stage_costs",
    "plot_sustained_break_even",
    "plot_token_vs_dollar_break_even",
    "save_figure",
    "save_figures",
    "system_color",
]
