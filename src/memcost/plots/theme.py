"""The figures' theme: seaborn's ``whitegrid`` style in its ``notebook`` context.

These are the rcParams that ``seaborn.set_theme(context="notebook", style="whitegrid")`` sets
(seaborn 0.13), written out so that a notebook kernel does not import seaborn, and scipy.stats
with it, only to set them: 0.7 s of every kernel's start. ``tests/test_figures.py`` sets the
theme through seaborn and fails if it no longer gives these values.

Left out: ``image.cmap``, which seaborn sets to its own ``rocket`` colormap, a name matplotlib
knows only once seaborn is imported; every image in these figures names its colormap.
"""

from __future__ import annotations

from typing import Any

from cycler import cycler

# seaborn's "deep" palette, the colour cycle of lines and bars that name no colour
DEEP_PALETTE = [
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
]
SEABORN_LEFT_OUT = ("image.cmap",)

SEABORN_WHITEGRID: dict[str, Any] = {
    # style "whitegrid": light grey grid under the data, no tick marks on the left and bottom
    "axes.axisbelow": True,
    "axes.edgecolor": ".8",
    "axes.grid": True,
    "axes.labelcolor": ".15",
    "axes.linewidth": 1.25,
    "grid.color": ".8",
    "text.color": ".15",
    "xtick.color": ".15",
    "ytick.color": ".15",
    "xtick.bottom": False,
    "ytick.left": False,
    "lines.solid_capstyle": "round",
    "patch.edgecolor": "w",
    "patch.force_edgecolor": True,
    "font.sans-serif": [
        "Arial",
        "DejaVu Sans",
        "Liberation Sans",
        "Bitstream Vera Sans",
        "sans-serif",
    ],
    # context "notebook", font_scale 1
    "font.size": 12.0,
    "axes.labelsize": 12.0,
    "axes.titlesize": 12.0,
    "xtick.labelsize": 11.0,
    "ytick.labelsize": 11.0,
    "legend.fontsize": 11.0,
    "legend.title_fontsize": 12.0,
    "grid.linewidth": 1.0,
    "xtick.major.width": 1.25,
    "ytick.major.width": 1.25,
    "xtick.minor.width": 1.0,
    "ytick.minor.width": 1.0,
    "xtick.major.size": 6.0,
    "ytick.major.size": 6.0,
    "xtick.minor.size": 4.0,
    "ytick.minor.size": 4.0,
    # palette "deep"
    "axes.prop_cycle": cycler(color=DEEP_PALETTE),
}
