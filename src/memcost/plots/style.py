"""One visual style for every figure: colours per system, the offline label, PNG and SVG."""

from __future__ import annotations

import shutil
import struct
import sys
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib import ticker

from memcost.io import atomic_path

# Colours per system, fixed so that a system has the same colour in every figure.
SYSTEM_COLORS = {
    # the other memory systems before the paper's "memory" (the first matching prefix wins)
    "memory_rag": "#17becf",
    "memory_graph": "#9467bd",
    "memory_hierarchical": "#8c564b",
    "memory_observational": "#e377c2",
    "memory": "#1f77b4",
    "long_context": "#d62728",
    "rolling_window": "#ff7f0e",
    "no_context": "#7f7f7f",
    "oracle": "#2ca02c",
}
OFFLINE_NOTE = "offline backend (lexical methods, not an LLM)"
SCREEN_DPI, SAVE_DPI = 110, 150  # a figure in a notebook, and in its PNG file


def apply_style() -> None:
    sns.set_theme(context="notebook", style="whitegrid")
    plt.rcParams.update(
        {
            "figure.dpi": SCREEN_DPI,
            "savefig.dpi": SAVE_DPI,
            "savefig.bbox": "tight",
            "axes.titleweight": "bold",
            "axes.spines.top": False,
            "axes.spines.right": False,
            "svg.hashsalt": "memcost",  # stable SVG ids, so re-running does not churn files
        }
    )


# The widest a saved figure should be (pixels at ``savefig.dpi``): wider, and a page or a screen
# that fits it shrinks its text below reading size. Rows of panels wrap into a grid instead.
MAX_WIDTH_PX = 1600
MAX_COLUMNS = 2


def panel_grid(
    n: int, *, panel_size: tuple[float, float], max_columns: int = MAX_COLUMNS, **kwargs: Any
) -> tuple[plt.Figure, list[plt.Axes]]:
    """``n`` panels wrapped into rows of at most ``max_columns``; unused cells switched off."""
    columns = max(1, min(n, max_columns))
    rows = -(-max(n, 1) // columns)
    width, height = panel_size
    fig, grid = plt.subplots(
        rows, columns, figsize=(width * columns, height * rows), squeeze=False, **kwargs
    )
    axes = list(grid.ravel())
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[: max(n, 1)]


def token_label(value: float, _pos: object = None) -> str:
    """10000 → '10k', 1000000 → '1M'."""
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def system_color(system: str) -> str:
    for prefix, color in SYSTEM_COLORS.items():
        if system.startswith(prefix):
            return color
    return "#9467bd"


def save_figure(fig: plt.Figure, folder: str | Path, name: str, *, svg: bool = True) -> list[Path]:
    """Write ``<folder>/<name>.png`` (and ``.svg``) atomically and, in a notebook, show it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for ext in ("png", "svg") if svg else ("png",):
        target = folder / f"{name}.{ext}"
        with atomic_path(target) as tmp:
            fig.savefig(tmp, format=ext, metadata={"Date": None} if ext == "svg" else None)
        written.append(target)
    show_saved(fig, written[0])
    return written


def show_saved(fig: plt.Figure, png: Path) -> None:
    """In a kernel, show the PNG just written at its screen size and close the figure (else the
    inline backend draws it a third time); elsewhere nothing."""
    shell = _kernel_shell()
    if shell is None:
        return
    from IPython.display import Image, display

    data = png.read_bytes()
    width, height = struct.unpack(">II", data[16:24])  # the PNG's IHDR chunk
    scale = SCREEN_DPI / SAVE_DPI
    display(
        Image(data=data, format="png", width=round(width * scale), height=round(height * scale))
    )
    plt.close(fig)


def _kernel_shell() -> Any:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell if getattr(shell, "kernel", None) is not None else None


def save_figures(fig: plt.Figure, folders: list[str | Path], name: str) -> list[Path]:
    """One figure drawn into the first folder and copied into the others."""
    if not folders:
        return []
    drawn = save_figure(fig, folders[0], name)
    written = list(drawn)
    for folder in folders[1:]:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for source in drawn:
            target = Path(folder) / source.name
            with atomic_path(target) as tmp:
                shutil.copyfile(source, tmp)
            written.append(target)
    return written


def label_backend(ax: plt.Axes, backend: str) -> None:
    """Stamp an offline figure so it is never taken for an LLM's result."""
    if backend == "offline":
        ax.text(
            0.99,
            0.01,
            OFFLINE_NOTE,
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=8,
            color="#555555",
            style="italic",
        )


# ---------------------------------------------------------------------------------------------
# Cost figures (notebook 05)
# ---------------------------------------------------------------------------------------------


def step_decimals(step: float, most: int = 6) -> int:
    """Decimals that show a tick step exactly: 0.025 → 3."""
    step = abs(step)
    for decimals in range(most + 1):
        if abs(step - round(step, decimals)) <= 1e-9 * max(step, 1e-12):
            return decimals
    return most


class StepFormatter(ticker.Formatter):
    """Tick labels at the step's precision ($0.025, not $0.03)."""

    def __init__(self, prefix: str = "", suffix: str = ""):
        self.prefix, self.suffix = prefix, suffix
        self.ticks: list[float] = []

    def set_locs(self, locs: Any) -> None:
        self.ticks = sorted(float(v) for v in locs)

    def __call__(self, x: float, pos: int | None = None) -> str:
        locs = self.ticks
        steps = [b - a for a, b in zip(locs, locs[1:], strict=False) if b > a]
        decimals = step_decimals(min(steps)) if steps else step_decimals(x)
        return f"{self.prefix}{x:,.{decimals}f}{self.suffix}"
