"""Synthetic datasets with known truth, written to Zarr chunk by chunk.

The model: ``x = mu + (c_y + z) V + noise * e`` with ``V`` (rank x d) orthonormal rows,
``z ~ N(0, diag(signal_variances))``, class offsets ``c_y`` inside the signal subspace,
``e ~ N(0, I)``, and per-feature means ``mu ~ N(offset, 5^2)``. The population covariance is
then ``V^T (diag(signal_variances) + S_c) V + noise^2 I`` (``S_c`` the covariance of the class
offsets), whose eigendecomposition is stored beside the data as the truth that PCA, PPCA
and the classifiers are scored against.

Two seeds: ``seed`` draws the *population* (``mu``, ``V``, the class offsets), ``sample_seed``
the *sample* (the rows). Datasets with the same ``seed`` (and ``n_features``, ``rank``,
``n_classes``, ``offset``, ``noise``) and different sample seeds are independent samples of
one population: a model fitted on one is tested on the other.

Each chunk draws from its own ``default_rng([seed, sample_seed, chunk_index, ...])`` stream, so
the dataset is reproducible, independent of the scheduler, and never held in memory as a
whole.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from ddr.io.outputs import IfExists, write_zarr
from ddr.linalg.signs import component_signs

__all__ = [
    "DEMO_KINDS",
    "DemoSpec",
    "default_chunk_rows",
    "demo_spec",
    "demo_truth",
    "write_demo",
    "write_demo_data",
]


@dataclass(frozen=True)
class DemoSpec:
    """Parameters of a synthetic dataset (see the module docstring for the model).

    Parameters
    ----------
    n_samples, n_features : int
        Shape of ``X``.
    rank : int
        Dimension of the signal subspace, in ``[1, n_features]``.
    n_classes : int
        Number of classes of ``y`` (equal priors); their means differ inside the subspace.
    chunk_rows : int, optional
        Rows per Zarr chunk (default: :func:`default_chunk_rows`, several chunks).
    dtype : {"float32", "float64"}
        Stored dtype of ``X``.
    seed : int
        Seed of the population: the mean, the signal subspace and the class offsets.
    missing : float
        Fraction of entries of ``X`` set to NaN, in ``[0, 1)``.
    offset : float
        Added to every feature mean (data on a large offset).
    noise : float
        Standard deviation of the isotropic noise.
    sample_seed : int
        Seed of the sample: the rows drawn from the population. Another value draws a new,
        independent sample of the same population.
    """

    n_samples: int = 100_000
    n_features: int = 50
    rank: int = 10
    n_classes: int = 5
    chunk_rows: int | None = None
    dtype: str = "float32"
    seed: int = 0
    missing: float = 0.0
    offset: float = 0.0
    noise: float = 1.0
    sample_seed: int = 0

    def __post_init__(self) -> None:
        if self.chunk_rows is None:
            object.__setattr__(self, "chunk_rows", default_chunk_rows(self))
        checks = [
            (self.n_samples >= 1, f"n_samples must be >= 1; got {self.n_samples}"),
            (self.n_features >= 1, f"n_features must be >= 1; got {self.n_features}"),
            (
                1 <= self.rank <= self.n_features,
                f"rank must be in [1, n_features={self.n_features}]; got {self.rank}",
            ),
            (self.n_classes >= 1, f"n_classes must be >= 1; got {self.n_classes}"),
            (self.chunk_rows >= 1, f"chunk_rows must be >= 1; got {self.chunk_rows}"),
            (self.seed >= 0, f"seed must be >= 0; got {self.seed}"),
            (self.sample_seed >= 0, f"sample_seed must be >= 0; got {self.sample_seed}"),
            (
                self.dtype in ("float32", "float64"),
                f"dtype must be 'float32' or 'float64'; got {self.dtype!r}",
            ),
            (0.0 <= self.missing < 1.0, f"missing must be in [0, 1); got {self.missing}"),
            (self.noise > 0, f"noise must be positive; got {self.noise}"),
            (np.isfinite(self.offset), f"offset must be finite; got {self.offset}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def describe(self, seconds: float) -> str:
        """What ``ddr demo-data`` says it wrote, in ``seconds``.

        Parameters
        ----------
        seconds : float
            How long writing took.

        Returns
        -------
        str
            The shape, dtype, raw size and chunks of ``X``, what else is stored, the seeds.
        """
        size = self.n_samples * self.n_features * np.dtype(self.dtype).itemsize / 2**20
        n_chunks = -(-self.n_samples // self.chunk_rows)
        return (
            f"X {self.n_samples} x {self.n_features} {self.dtype} ({size:.0f} MiB raw) in "
            f"{n_chunks} chunk{'s' if n_chunks != 1 else ''} of {self.chunk_rows} rows, y, and "
            f"the true mean/components/variances (population seed {self.seed}, sample seed "
            f"{self.sample_seed}; {seconds:.1f} s)"
        )


#: the kinds of demo data: ``dense`` (:class:`DemoSpec`), ``counts``
#: (:class:`ddr.demo_counts.CountsSpec`), ``gridded`` (:class:`ddr.demo_gridded.GriddedSpec`)
DEMO_KINDS = ("dense", "counts", "gridded")


def demo_spec(kind: str, **params: Any) -> Any:
    """The spec of a demo dataset of ``kind``, from its parameters (None: the default).

    Parameters
    ----------
    kind : {"dense", "counts", "gridded"}
        A low-rank signal plus noise with class labels (:class:`DemoSpec`), word counts
        drawn from a topic model (:class:`ddr.demo_counts.CountsSpec`), or a time x lat x
        lon field with a land mask and known spatial modes
        (:class:`ddr.demo_gridded.GriddedSpec`).
    **params
        The spec's parameters; those that are None take the spec's defaults.

    Returns
    -------
    DemoSpec, CountsSpec or GriddedSpec
        Checked (a ValueError names a parameter out of range).
    """
    from ddr.demo_counts import CountsSpec
    from ddr.demo_gridded import GriddedSpec

    classes = {"dense": DemoSpec, "counts": CountsSpec, "gridded": GriddedSpec}
    if kind not in classes:
        raise ValueError(f"kind must be one of {', '.join(DEMO_KINDS)}; got {kind!r}")
    return classes[kind](**{k: v for k, v in params.items() if v is not None})


def write_demo(
    path: str | os.PathLike,
    spec: Any,
    *,
    if_exists: IfExists = "error",
    storage_options: Mapping[str, Any] | None = None,
) -> bool:
    """Write the demo dataset of ``spec`` (from :func:`demo_spec`) to a Zarr group at
    ``path``: :func:`write_demo_data`, :func:`ddr.demo_counts.write_counts_data` or
    :func:`ddr.demo_gridded.write_gridded_data`.

    Parameters
    ----------
    path : str or path
        A local path or a URL.
    spec : DemoSpec, CountsSpec or GriddedSpec
        What to write.
    if_exists : {"error", "overwrite", "skip-if-complete"}
        What to do with an existing group (see :func:`ddr.io.write_zarr`):
        ``"skip-if-complete"`` keeps a complete group written from the same spec.
    storage_options : mapping, optional
        For a URL, as :func:`ddr.io.write_zarr` takes them.

    Returns
    -------
    bool
        True when the group was written, False when a complete one of the same spec was
        kept (``if_exists="skip-if-complete"``).
    """
    from ddr.demo_counts import CountsSpec, write_counts_data
    from ddr.demo_gridded import write_gridded_data

    write = (
        write_demo_data
        if isinstance(spec, DemoSpec)
        else write_counts_data
        if isinstance(spec, CountsSpec)
        else write_gridded_data
    )
    return write(path, spec, if_exists=if_exists, storage_options=storage_options)


#: ``chunk_rows`` by default: the rows split into this many chunks (so even the default demo
#: is read by several workers in parallel), each at most ``_MAX_CHUNK_BYTES``
DEFAULT_CHUNKS = 8
_MAX_CHUNK_BYTES = 64 * 2**20


def default_chunk_rows(spec: DemoSpec) -> int:
    """Rows per chunk when none are given: ``n_samples`` in :data:`DEFAULT_CHUNKS` chunks,
    fewer rows when a chunk would exceed 64 MiB."""
    row_bytes = (
        max(spec.n_features, 1)
        * np.dtype(spec.dtype if spec.dtype in ("float32", "float64") else "float64").itemsize
    )
    by_count = -(-max(spec.n_samples, 1) // DEFAULT_CHUNKS)
    return max(1, min(by_count, _MAX_CHUNK_BYTES // row_bytes))


def _model(spec: DemoSpec) -> dict[str, np.ndarray]:
    """The random but fixed parameters of the generator (small: O(rank x d))."""
    rng = np.random.default_rng([spec.seed, 2**31 - 1])
    d, r, k = spec.n_features, spec.rank, spec.n_classes
    q, _ = np.linalg.qr(rng.standard_normal((d, r)))
    signal_variances = np.geomspace(100.0, 4.0, r) if r > 1 else np.array([100.0])
    mu = rng.normal(spec.offset, 5.0, size=d)
    class_offsets = rng.normal(0.0, 1.5, size=(k, r))
    return {
        "components": q.T,  # (r, d), orthonormal rows
        "signal_variances": signal_variances,
        "mu": mu,
        "class_offsets": class_offsets,
        "priors": np.full(k, 1.0 / k),
    }


def demo_truth(spec: DemoSpec) -> dict[str, Any]:
    """Population mean, principal axes and variances of the dataset ``spec`` describes."""
    m = _model(spec)
    c_bar = m["priors"] @ m["class_offsets"]
    dc = m["class_offsets"] - c_bar
    s_c = (dc * m["priors"][:, None]).T @ dc
    evals, evecs = np.linalg.eigh(np.diag(m["signal_variances"]) + s_c)
    order = np.argsort(evals)[::-1]
    evals, evecs = evals[order], evecs[:, order]
    components = evecs.T @ m["components"]
    signs = component_signs(components, axis=1)  # ddr's convention, as a PCA fit gives
    noise_var = spec.noise**2
    return {
        "mean": m["mu"] + c_bar @ m["components"],
        "components": components * signs[:, None],
        "explained_variance": evals + noise_var,
        "noise_variance": noise_var,
        "class_means": m["mu"] + m["class_offsets"] @ m["components"],
        "priors": m["priors"],
    }


def _rng(spec: DemoSpec, index: int, stream: int) -> np.random.Generator:
    """The random stream of chunk ``index`` of the sample (0: labels, 1: values)."""
    return np.random.default_rng([spec.seed, spec.sample_seed, index, stream])


def _labels_block(spec: DemoSpec, index: int, n: int) -> np.ndarray:
    return _rng(spec, index, 0).integers(0, spec.n_classes, size=n)


def _x_block(spec: DemoSpec, model: dict[str, np.ndarray], block_info: Any = None) -> np.ndarray:
    info = block_info[None]
    index = info["chunk-location"][0]
    lo, hi = info["array-location"][0]
    n = hi - lo
    dtype = np.dtype(spec.dtype)
    rng = _rng(spec, index, 1)
    y = _labels_block(spec, index, n)
    z = rng.standard_normal((n, spec.rank), dtype=dtype) * np.sqrt(model["signal_variances"])
    z += model["class_offsets"][y]
    x = z.astype(dtype) @ model["components"].astype(dtype)
    x += rng.standard_normal((n, spec.n_features), dtype=dtype) * dtype.type(spec.noise)
    x += model["mu"].astype(dtype)
    if spec.missing > 0:
        x[rng.random((n, spec.n_features)) < spec.missing] = np.nan
    return x


def _y_block(spec: DemoSpec, block_info: Any = None) -> np.ndarray:
    info = block_info[None]
    lo, hi = info["array-location"][0]
    return _labels_block(spec, info["chunk-location"][0], hi - lo)


def demo_dataset(spec: DemoSpec) -> xr.Dataset:
    """The dataset as a lazy xarray Dataset (X and y are generated chunk by chunk)."""
    model = _model(spec)
    rows = da.core.normalize_chunks((spec.chunk_rows,), (spec.n_samples,))[0]
    X = da.map_blocks(
        _x_block,
        spec,
        model,
        chunks=(rows, (spec.n_features,)),
        dtype=spec.dtype,
        name=f"ddr-demo-X-{spec.seed}-{da.core.tokenize(spec)}",
        meta=np.empty((0, 0), spec.dtype),
    )
    y = da.map_blocks(
        _y_block,
        spec,
        chunks=(rows,),
        dtype=np.int64,
        name=f"ddr-demo-y-{spec.seed}-{da.core.tokenize(spec)}",
        meta=np.empty((0,), np.int64),
    )
    truth = demo_truth(spec)
    attrs = {
        "title": "ddr synthetic dataset: low-rank signal + isotropic noise, class means",
        "ddr:demo": asdict(spec),
        "true_noise_variance": truth["noise_variance"],
    }
    return xr.Dataset(
        {
            "X": (("sample", "feature"), X),
            "y": (("sample",), y),
            "true_mean": (("feature",), truth["mean"]),
            "true_components": (("component", "feature"), truth["components"]),
            "true_explained_variance": (("component",), truth["explained_variance"]),
            "class_means": (("class", "feature"), truth["class_means"]),
            "priors": (("class",), truth["priors"]),
        },
        attrs=attrs,
    )


def write_demo_data(
    path: str | os.PathLike,
    spec: DemoSpec,
    *,
    if_exists: IfExists = "error",
    storage_options: Mapping[str, Any] | None = None,
) -> bool:
    """Generate ``spec``'s dataset and write it to a Zarr group at ``path`` (a local path or
    a URL; ``storage_options`` as for :func:`ddr.io.write_zarr`).

    ``X`` is stored with chunks of ``chunk_rows`` complete rows (zstd), ``y`` with the same
    row chunks, and the truth arrays beside them. Writing follows the protocol of
    :mod:`ddr.io.outputs`: an interrupted run leaves a store marked incomplete. Returns
    False when a complete group of the same spec was kept (``if_exists="skip-if-complete"``).
    """
    ds = demo_dataset(spec)
    pending = write_zarr(
        ds,
        path,
        if_exists=if_exists,
        encoding={
            "X": {"chunks": (spec.chunk_rows, spec.n_features)},
            "y": {"chunks": (spec.chunk_rows,)},
        },
        fingerprint=da.core.tokenize(asdict(spec)),
        storage_options=storage_options,
    )
    return not pending.skipped
