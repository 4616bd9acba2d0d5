"""Mergeable statistics and the one-pass reduction engine.

Every statistic is a small frozen value with ``from_block``, ``merge``, read-outs and
``to_dict``/``from_dict``; :func:`compute` evaluates one or several of them over numpy, dask
or xarray input in a single pass.
"""

from ddr.stats.base import (
    FEATURE_DIM,
    CheckData,
    Statistic,
    StatSpec,
    merge_all,
    statistic_from_dict,
)
from ddr.stats.categorical import CategoricalCounts
from ddr.stats.class_moments import ClassMoments
from ddr.stats.class_sums import ClassSums
from ddr.stats.engine import BlockRows, compute, compute_with_rows, lazy
from ddr.stats.gram_product import GramProduct
from ddr.stats.histogram import Histogram
from ddr.stats.kmeans_sums import KMeansSums
from ddr.stats.mixture_sums import GaussianMixtureSums
from ddr.stats.moments import Moments
from ddr.stats.pairwise_moments import PairwiseMoments
from ddr.stats.plsa_sums import PLSASums
from ddr.stats.ppca_sums import PPCASums
from ddr.stats.row_sample import RowSample
from ddr.stats.sketch import CentredProduct

__all__ = [
    "FEATURE_DIM",
    "BlockRows",
    "CategoricalCounts",
    "CentredProduct",
    "CheckData",
    "ClassMoments",
    "ClassSums",
    "GaussianMixtureSums",
    "GramProduct",
    "Histogram",
    "KMeansSums",
    "Moments",
    "PLSASums",
    "PPCASums",
    "PairwiseMoments",
    "RowSample",
    "StatSpec",
    "Statistic",
    "compute",
    "compute_with_rows",
    "lazy",
    "merge_all",
    "statistic_from_dict",
]
