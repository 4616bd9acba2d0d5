"""A gridded field (time x lat x lon) with a land mask and known spatial modes, written to
Zarr chunked by time or by space: the shape of reanalysis and climate-model output, for EOF
analysis (PCA with ``sample_dims="time"``).

The model: ``T(t, p) = mu(p) + sum_k a_k(t) v_k(p) + noise * e(t, p)`` at the ocean points
``p`` (NaN over land, the same points at every time step), with ``v_k`` (``rank`` of them)
orthonormal over the ocean points (large-scale patterns: an equatorial dipole, a
north-south seesaw, a wave-2 pattern, ...), each amplitude ``a_k(t) = sqrt(l_k) (cos(2 pi t
/ P_k + phi_k) + sqrt(1/2) z_k(t))`` a seasonal cycle of period ``P_k = 12 / (k + 1)``
months plus white noise (variance ``l_k``: half the cycle, half the noise), and ``e ~ N(0,
1)``. The population covariance over the ocean points is ``V^T diag(l) V + noise^2 I``: its
leading eigenvectors are the ``v_k`` (the EOFs) with eigenvalues ``l_k + noise^2``, stored
beside the data as ``true_components`` (maps, NaN over land), ``true_explained_variance``
and the amplitudes ``true_amplitudes``; ``area_weight`` (``sqrt(cos(lat))``, on ``lat``) is
the area weight of an EOF analysis as eofs and xeofs weigh it.

``seed`` draws the population (the phases, the land's position); ``sample_seed`` the sample
(the noise of the amplitudes and of every point). Each block of ``chunk_rows`` time steps
draws from its own stream, so the field is reproducible, never held whole in memory, and the
same whichever way it is stored: chunked by time (``chunk_by="time"``, whole maps in a
chunk) or by space (``chunk_by="space"``: every time step of a quarter of the grid in a chunk).
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

__all__ = ["GriddedSpec", "gridded_dataset", "gridded_truth", "write_gridded_data"]

#: the field's chunks along time when none are given: the time steps in this many chunks
_DEFAULT_CHUNKS = 8


@dataclass(frozen=True)
class GriddedSpec:
    """Parameters of a synthetic gridded field (see the module docstring for the model).

    Parameters
    ----------
    n_samples : int
        Time steps (months), the samples of an EOF analysis.
    n_lat, n_lon : int
        Grid points along latitude (cell centres from pole to pole) and longitude.
    rank : int
        Spatial modes, at most 6.
    chunk_rows : int, optional
        Time steps per generated block, and per Zarr chunk when chunked by time (default:
        the time steps in 8 chunks).
    chunk_by : {"time", "space"}
        Store whole maps of ``chunk_rows`` time steps per chunk (``time``), or every time
        step of a quarter of the grid per chunk (``space``).
    dtype : {"float32", "float64"}
        Stored dtype of the field.
    seed : int
        Seed of the population: the cycles' phases and where the land is.
    sample_seed : int
        Seed of the sample: the amplitudes' noise and the noise at every point.
    noise : float
        Standard deviation of the noise at every point.
    """

    n_samples: int = 480
    n_lat: int = 36
    n_lon: int = 72
    rank: int = 3
    chunk_rows: int | None = None
    chunk_by: str = "time"
    dtype: str = "float32"
    seed: int = 0
    sample_seed: int = 0
    noise: float = 0.5

    def __post_init__(self) -> None:
        if self.chunk_rows is None:
            rows = -(-max(self.n_samples, 1) // _DEFAULT_CHUNKS)
            object.__setattr__(self, "chunk_rows", max(1, rows))
        checks = [
            (self.n_samples >= 2, f"n_samples must be >= 2 (time steps); got {self.n_samples}"),
            (self.n_lat >= 4, f"n_lat must be >= 4; got {self.n_lat}"),
            (self.n_lon >= 4, f"n_lon must be >= 4; got {self.n_lon}"),
            (1 <= self.rank <= len(_PATTERNS), f"rank must be in [1, 6]; got {self.rank}"),
            ((self.chunk_rows or 0) >= 1, f"chunk_rows must be >= 1; got {self.chunk_rows}"),
            (
                self.chunk_by in ("time", "space"),
                f"chunk_by must be 'time' or 'space'; got {self.chunk_by!r}",
            ),
            (
                self.dtype in ("float32", "float64"),
                f"dtype must be 'float32' or 'float64'; got {self.dtype!r}",
            ),
            (self.seed >= 0, f"seed must be >= 0; got {self.seed}"),
            (self.sample_seed >= 0, f"sample_seed must be >= 0; got {self.sample_seed}"),
            (self.noise > 0, f"noise must be positive; got {self.noise}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def stored_chunks(self) -> tuple[int, int, int]:
        """The Zarr chunks of the field: ``(chunk_rows, n_lat, n_lon)`` by time, or
        ``(n_samples, n_lat / 2, n_lon / 2)`` (rounded up) by space."""
        if self.chunk_by == "time":
            return (int(self.chunk_rows or 1), self.n_lat, self.n_lon)
        return (self.n_samples, -(-self.n_lat // 2), -(-self.n_lon // 2))

    def describe(self, seconds: float) -> str:
        """What ``ddr demo-data --kind gridded`` says it wrote, in ``seconds``."""
        size = self.n_samples * self.n_lat * self.n_lon * np.dtype(self.dtype).itemsize / 2**20
        ocean = int(_land(self).size - _land(self).sum())
        return (
            f"t2m {self.n_samples} x {self.n_lat} x {self.n_lon} (time x lat x lon) "
            f"{self.dtype} ({size:.1f} MiB raw; {ocean} ocean points, land NaN) in chunks of "
            f"{self.stored_chunks()} (by {self.chunk_by}), and the true modes "
            f"(rank {self.rank}; population seed {self.seed}, sample seed "
            f"{self.sample_seed}; {seconds:.1f} s)"
        )


def _grid(spec: GriddedSpec) -> tuple[np.ndarray, np.ndarray]:
    """Cell-centre latitudes (north to south, as reanalyses store them) and longitudes."""
    lat = 90.0 - (np.arange(spec.n_lat) + 0.5) * 180.0 / spec.n_lat
    lon = np.arange(spec.n_lon) * 360.0 / spec.n_lon
    return lat, lon


def _land(spec: GriddedSpec) -> np.ndarray:
    """Where the land is (bool, lat x lon): two blobs and the polar caps, their longitude set
    by ``seed``; the same points at every time step."""
    lat, lon = _grid(spec)
    rng = np.random.default_rng([spec.seed, 1])
    shift = rng.uniform(0.0, 2 * np.pi)
    phi, lam = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    blobs = np.cos(2 * (lam + shift)) * np.cos(phi) ** 2 + 0.3 * np.sin(phi)
    return (blobs > 0.75) | (np.abs(phi) > np.deg2rad(75.0))


#: the spatial patterns (of latitude and longitude in radians) the modes are made from,
#: orthonormalised over the ocean points in this order
_PATTERNS = (  # each lopsided, so that its largest loading (the sign's reference) is clear
    lambda phi, lam: np.exp(-((phi / 0.35) ** 2)) * (np.cos(lam) + 0.5),  # equatorial dipole
    lambda phi, lam: np.sin(2 * phi) + 0.4,  # north-south seesaw
    lambda phi, lam: np.cos(phi) ** 2 * (np.sin(2 * lam) + 0.5),  # wave 2
    lambda phi, lam: np.sin(phi) * (np.cos(3 * lam) + 0.5),
    lambda phi, lam: np.cos(phi) * (np.sin(lam + 0.5) + 0.5),
    lambda phi, lam: np.cos(2 * phi) * (np.cos(2 * lam + 1.0) + 0.5),
)


def _model(spec: GriddedSpec) -> dict[str, np.ndarray]:
    """The fixed parameters: ocean points, orthonormal modes on them, variances, phases,
    periods and the mean field (small: O(rank x grid))."""
    lat, lon = _grid(spec)
    phi, lam = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    ocean = np.flatnonzero(~_land(spec).ravel())
    raw = np.stack([p(phi, lam).ravel()[ocean] for p in _PATTERNS[: spec.rank]], axis=1)
    q, r = np.linalg.qr(raw)
    modes = (q * np.sign(np.diag(r))).T  # (rank, n_ocean): orthonormal rows
    modes *= component_signs(modes, axis=1)[:, None]  # ddr's sign convention, as PCA gives
    rng = np.random.default_rng([spec.seed, 2])
    return {
        "ocean": ocean,
        "modes": modes,
        "variances": 400.0 / 2.0 ** np.arange(spec.rank),
        "phases": rng.uniform(0.0, 2 * np.pi, size=spec.rank),
        "periods": 12.0 / (np.arange(spec.rank) + 1.0),
        "mean": (288.0 - 30.0 * np.sin(phi) ** 2).ravel()[ocean],
    }


def gridded_truth(spec: GriddedSpec) -> dict[str, Any]:
    """The population's EOFs of the field ``spec`` describes.

    Returns
    -------
    dict
        ``components`` (rank, n_lat, n_lon), orthonormal over the ocean points, NaN over land,
        signs as ddr's PCA gives them; ``explained_variance`` (rank,), ``l_k + noise^2``;
        ``noise_variance``; ``mean`` (n_lat, n_lon); ``land`` (n_lat, n_lon) bool.
    """
    m = _model(spec)
    size = spec.n_lat * spec.n_lon
    maps = np.full((spec.rank, size), np.nan)
    maps[:, m["ocean"]] = m["modes"]
    mean = np.full(size, np.nan)
    mean[m["ocean"]] = m["mean"]
    shape = (spec.n_lat, spec.n_lon)
    return {
        "components": maps.reshape(spec.rank, *shape),
        "explained_variance": m["variances"] + spec.noise**2,
        "noise_variance": spec.noise**2,
        "mean": mean.reshape(shape),
        "land": _land(spec),
    }


def _block_rng(spec: GriddedSpec, index: int) -> np.random.Generator:
    return np.random.default_rng([spec.seed, spec.sample_seed, index])


def _amplitudes(spec: GriddedSpec, m: dict[str, np.ndarray], index: int, lo: int, hi: int) -> Any:
    """The modes' amplitudes at time steps ``lo:hi`` (block ``index``), and its stream."""
    rng = _block_rng(spec, index)
    t = np.arange(lo, hi, dtype=np.float64)[:, None]
    cycle = np.cos(2 * np.pi * t / m["periods"] + m["phases"])
    z = rng.standard_normal((hi - lo, spec.rank))
    return np.sqrt(m["variances"]) * (cycle + np.sqrt(0.5) * z), rng


def _field_block(spec: GriddedSpec, m: dict[str, np.ndarray], block_info: Any = None) -> Any:
    info = block_info[None]
    index = info["chunk-location"][0]
    lo, hi = info["array-location"][0]
    amp, rng = _amplitudes(spec, m, index, lo, hi)
    ocean = m["mean"] + amp @ m["modes"]
    ocean += spec.noise * rng.standard_normal(ocean.shape)
    out = np.full((hi - lo, spec.n_lat * spec.n_lon), np.nan, dtype=spec.dtype)
    out[:, m["ocean"]] = ocean
    return out.reshape(hi - lo, spec.n_lat, spec.n_lon)


def _amplitude_block(spec: GriddedSpec, m: dict[str, np.ndarray], block_info: Any = None) -> Any:
    info = block_info[None]
    lo, hi = info["array-location"][0]
    return _amplitudes(spec, m, info["chunk-location"][0], lo, hi)[0]


def gridded_dataset(spec: GriddedSpec) -> xr.Dataset:
    """The field and its truth as a lazy xarray Dataset (generated a block of time steps at
    a time), with CF attributes; chunked as it is stored."""
    import pandas as pd

    m = _model(spec)
    lat, lon = _grid(spec)
    rows = da.core.normalize_chunks((spec.chunk_rows,), (spec.n_samples,))[0]
    token = da.core.tokenize(asdict(spec))
    field = da.map_blocks(
        _field_block, spec, m, chunks=(rows, (spec.n_lat,), (spec.n_lon,)), dtype=spec.dtype,
        name=f"ddr-demo-gridded-{token}", meta=np.empty((0, 0, 0), spec.dtype),
    )  # fmt: skip
    amplitudes = da.map_blocks(
        _amplitude_block, spec, m, chunks=(rows, (spec.rank,)), dtype=np.float64,
        name=f"ddr-demo-gridded-amplitudes-{token}", meta=np.empty((0, 0)),
    )  # fmt: skip
    if spec.chunk_by == "space":  # each stored chunk: every time step of a quarter of the grid
        field = field.rechunk(spec.stored_chunks())
    truth = gridded_truth(spec)
    coords = {
        "time": ("time", pd.date_range("1980-01-01", periods=spec.n_samples, freq="MS")),
        "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude"}),
        "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude"}),
        "mode": ("mode", np.arange(spec.rank)),
    }
    t2m = {"long_name": "2 m air temperature (synthetic)", "units": "K"}
    return xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), field, t2m),
            "true_components": (
                ("mode", "lat", "lon"), truth["components"],
                {"long_name": "true spatial modes (EOFs), orthonormal over the ocean points"},
            ),
            "true_explained_variance": (
                ("mode",), truth["explained_variance"],
                {"long_name": "variance along each mode (signal + noise)", "units": "K2"},
            ),
            "true_amplitudes": (
                ("time", "mode"), amplitudes,
                {"long_name": "amplitude of each mode (seasonal cycle + noise)", "units": "K"},
            ),
            "true_mean": (("lat", "lon"), truth["mean"], {"units": "K"}),
            "land": (("lat", "lon"), truth["land"].astype(np.int8), {"long_name": "land mask"}),
            "area_weight": (
                ("lat",), np.sqrt(np.cos(np.deg2rad(lat))),
                {"long_name": "sqrt(cos(latitude)): the area weight of an EOF analysis"},
            ),
        },
        coords=coords,
        attrs={
            "title": "ddr synthetic gridded field: known spatial modes with seasonal cycles, "
            "noise, NaN over land",
            "ddr:demo": {"kind": "gridded", **asdict(spec)},
            "true_noise_variance": truth["noise_variance"],
        },
    )  # fmt: skip


def write_gridded_data(
    path: str | os.PathLike,
    spec: GriddedSpec,
    *,
    if_exists: IfExists = "error",
    storage_options: Mapping[str, Any] | None = None,
) -> bool:
    """Generate ``spec``'s field and write it to a Zarr group at ``path`` (a local path or a
    URL), the field chunked as :meth:`GriddedSpec.stored_chunks` says, the truth beside it.

    Returns False when a complete group of the same spec was kept
    (``if_exists="skip-if-complete"``).
    """
    ds = gridded_dataset(spec)
    pending = write_zarr(
        ds,
        path,
        if_exists=if_exists,
        encoding={
            "t2m": {"chunks": spec.stored_chunks()},
            "true_amplitudes": {"chunks": (int(spec.chunk_rows or 1), spec.rank)},
        },
        fingerprint=f"gridded-{da.core.tokenize(asdict(spec))}",
        storage_options=storage_options,
    )
    return not pending.skipped
