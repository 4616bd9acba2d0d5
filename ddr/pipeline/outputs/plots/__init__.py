"""The plot kinds of ``kind: plot`` outputs, one module each (see
:mod:`ddr.pipeline.outputs.plots.base`): importing this package registers them, in the
order messages list them."""

from ddr.pipeline.outputs.plots.base import (
    ModelPlot,
    PlotKind,
    PlotOutput,
    component_name,
    natural_key,
    plot_kind,
    plot_kinds,
    plot_union,
    register_plot_kind,
    unregister_plot_kind,
)

# the order of registration is the order messages and docs list the plots
# isort: off
from ddr.pipeline.outputs.plots.scree import ScreePlot, draw_scree
from ddr.pipeline.outputs.plots.scatter import ScatterPlot, draw_scatter, sample_rows
from ddr.pipeline.outputs.plots.kde import KdePlot, draw_kde, kde_grid
from ddr.pipeline.outputs.plots.confusion import (
    ConfusionPlot,
    confusion_blocks,
    draw_confusion,
    merge_confusion,
)
from ddr.pipeline.outputs.plots.loglik import LoglikPlot, draw_loglik
from ddr.pipeline.outputs.plots.bic import BicPlot as BicPlot, draw_bic as draw_bic
from ddr.pipeline.outputs.plots.sizes import SizesPlot as SizesPlot, draw_sizes as draw_sizes
from ddr.pipeline.outputs.plots.search import SearchPlot as SearchPlot, draw_search as draw_search
from ddr.pipeline.outputs.plots.maps import MapsPlot as MapsPlot, draw_maps as draw_maps
# isort: on

__all__ = [
    "ConfusionPlot",
    "KdePlot",
    "LoglikPlot",
    "ModelPlot",
    "PlotKind",
    "PlotOutput",
    "ScatterPlot",
    "ScreePlot",
    "component_name",
    "confusion_blocks",
    "draw_confusion",
    "draw_kde",
    "draw_loglik",
    "draw_scatter",
    "draw_scree",
    "kde_grid",
    "merge_confusion",
    "natural_key",
    "plot_kind",
    "plot_kinds",
    "plot_union",
    "register_plot_kind",
    "sample_rows",
    "unregister_plot_kind",
]
