"""Folds of the rows of an input, without reading it: contiguous blocks or a hash of the row.

A fold is fixed by the positions of its rows alone, never by their values or labels, so that
every fold's rows can be selected lazily from a dask array (a slice, or a blockwise selection
whose sizes are known on the client) and read in the same pass as every other fold's:

- contiguous blocks (``cv=5`` or scikit-learn's ``KFold(5)`` without shuffling): the same
  folds as ``KFold``, fold ``k`` the ``k``-th block of ``n // K`` or ``n // K + 1`` rows;
- :class:`HashKFold`: row ``i`` goes to the fold a hash of ``(i, seed)`` picks. A shuffled split
  that does not depend on how the rows are chunked (a chunk's rows are hashed by their global
  positions), where scikit-learn's shuffled ``KFold`` draws a permutation of all ``n`` rows.

:class:`Folds` gives each fold's rows, the rows of "all folds but ``k``" and all rows, each
as a :class:`Part` in a form every ddr estimator takes (a dask array, or a DataArray for
xarray input: numpy input is wrapped as dask arrays over views of it, so that building a
fit on a fold's rows never copies or validates them on the client). A grid (an N-D
DataArray with ``sample_dims``) is split along its samples, its mask found once for all
the folds' fits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterator
from numbers import Integral
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize

from ddr.stats._input import (
    align_by_coordinate,
    align_to_rows,
    as_rows,
    is_dask,
    is_sparse,
    is_xarray,
)

__all__ = ["Folds", "HashKFold", "Part", "check_cv"]

_GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
#: rows of a dask block made over in-memory input: about 8 MB of float64
_BLOCK_ELEMENTS = 2**20


def _splitmix64(index: np.ndarray, seed: int) -> np.ndarray:
    """Steele, Lea and Flood's SplitMix64 finaliser of ``index + (seed + 1) * golden``:
    every bit of the row's position and the seed reaches every bit of the hash, so that
    consecutive rows land in unrelated folds. In place on one buffer (a temporary per
    operation made it 3x slower)."""
    z = np.asarray(index, dtype=np.uint64) + np.uint64(((seed + 1) * _GOLDEN) & _MASK)
    t = np.empty_like(z)
    with np.errstate(over="ignore"):  # arithmetic modulo 2**64 is the point
        for shift, factor in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
            np.right_shift(z, np.uint64(shift), out=t)
            z ^= t
            z *= np.uint64(factor)
        np.right_shift(z, np.uint64(31), out=t)
        z ^= t
    return z


class HashKFold:
    """K folds by a hash of each row's position: shuffled, and the same for every chunking.

    Row ``i`` (its position in ``X``, from 0) is in fold ``floor(h * n_splits / 2**32)``,
    ``h`` the top 32 bits of ``splitmix64(i, seed)``. The folds do not depend on how a dask
    array is chunked, so cross-validation scores with these folds are the same (to
    round-off) for every chunking of the same rows. Fold sizes vary around
    ``n / n_splits`` (binomially) instead of differing by at most one row as in ``KFold``.

    It also works as a splitter for scikit-learn (``split``, ``get_n_splits``), so that
    scikit-learn's ``GridSearchCV(cv=HashKFold(...))`` on in-memory data uses the same folds.

    Parameters
    ----------
    n_splits : int, default 5
        Number of folds, at least 2.
    seed : int, default 0
        A non-negative integer: each seed gives another split.

    Examples
    --------
    >>> from ddr.model_selection import HashKFold
    >>> HashKFold(3, seed=2).fold_of(range(8)).tolist()
    [0, 2, 1, 1, 2, 0, 0, 2]
    """

    def __init__(self, n_splits: int = 5, *, seed: int = 0) -> None:
        _check_n_splits(n_splits)
        if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
            raise ValueError(f"HashKFold's seed must be a non-negative int; got {seed!r}")
        self.n_splits: int = int(n_splits)
        self.seed: int = int(seed)

    def __repr__(self) -> str:
        return f"HashKFold(n_splits={self.n_splits}, seed={self.seed})"

    def fold_of(self, index: Any) -> np.ndarray:
        """The fold of each row position.

        Parameters
        ----------
        index : array-like of int, shape (n,)
            Row positions (from 0).

        Returns
        -------
        ndarray of int64, shape (n,)
            Folds, in ``0 .. n_splits - 1``.
        """
        h = _splitmix64(np.asarray(index), self.seed)
        # the top 32 bits times n_splits, over 2**32 (Lemire's reduction): uniform to 2**-32
        # and several times faster than a 64-bit remainder
        h >>= np.uint64(32)
        h *= np.uint64(self.n_splits)
        h >>= np.uint64(32)
        return h.astype(np.int64)

    def get_n_splits(self, X: Any = None, y: Any = None, groups: Any = None) -> int:
        """The number of folds (scikit-learn's splitter API).

        Parameters
        ----------
        X, y, groups : ignored

        Returns
        -------
        int
        """
        return self.n_splits

    def split(
        self, X: Any, y: Any = None, groups: Any = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Training and test row positions of each fold (scikit-learn's splitter API).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Only its number of rows is read.
        y, groups : ignored

        Yields
        ------
        train, test : ndarray of int64
            Sorted row positions.
        """
        folds = self.fold_of(np.arange(_n_rows(X)))
        for k in range(self.n_splits):
            yield np.flatnonzero(folds != k), np.flatnonzero(folds == k)


def _n_rows(X: Any) -> int:
    return int(X.shape[0]) if hasattr(X, "shape") else len(X)


def _check_n_splits(n_splits: Any) -> None:
    if isinstance(n_splits, bool) or not isinstance(n_splits, Integral):
        raise ValueError(
            f"The number of folds must be of Integral type. {n_splits!r} of type "
            f"{type(n_splits).__name__} was passed."
        )
    if n_splits < 2:
        raise ValueError(
            "k-fold cross-validation requires at least one train/test split by setting "
            f"n_splits=2 or more, got n_splits={n_splits}."
        )


def check_cv(cv: Any) -> int | HashKFold:
    """``cv`` as the number of contiguous folds, or a :class:`HashKFold`.

    Parameters
    ----------
    cv : int, sklearn.model_selection.KFold (not shuffled) or HashKFold

    Returns
    -------
    int or HashKFold

    Raises
    ------
    ValueError
        For fewer than 2 folds, or a shuffled ``KFold``.
    TypeError
        For any other splitter: a fold must be fixed by the rows' positions alone.
    """
    if isinstance(cv, HashKFold):
        return cv
    from sklearn.model_selection import KFold

    if type(cv) is KFold:
        if cv.shuffle:
            raise ValueError(
                "cv=KFold(shuffle=True) draws a permutation of all rows, which a lazy input "
                "cannot be split by in one pass; use cv=ddr.model_selection.HashKFold"
                f"({cv.n_splits}, seed=...) for shuffled folds"
            )
        cv = cv.n_splits
    if isinstance(cv, Integral) and not isinstance(cv, bool):
        _check_n_splits(cv)
        return int(cv)
    raise TypeError(
        "cv must be an int (contiguous folds, as scikit-learn's KFold), "
        "sklearn.model_selection.KFold(shuffle=False) or ddr.model_selection.HashKFold; got "
        f"{cv!r}. Folds are fixed by row positions alone, so that every fold is read in one "
        "pass (stratified or grouped splits need the labels first)"
    )


@dataclasses.dataclass(frozen=True)
class Part:
    """Rows of the input as an estimator takes them.

    Attributes
    ----------
    X : dask array or DataArray of shape (n_rows, n_features)
    y : dask array, DataArray or None, shape (n_rows,) or (n_rows, n_targets)
    fit_params : dict
        What ``_fit_plan`` takes besides ``X`` and ``y`` (``sample_weight`` of these rows,
        ``sample_dim``).
    method_params : dict
        What ``predict``/``score_samples`` take besides ``X`` (``sample_dim``).
    """

    X: Any
    y: Any
    fit_params: dict[str, Any]
    method_params: dict[str, Any]


class Folds:
    """The rows of ``X`` (with ``y`` and ``sample_weight``) in ``cv``'s folds.

    Nothing is read: fold sizes come from positions (the hash of every position for
    :class:`HashKFold`, on the client, a chunk at a time).

    Parameters
    ----------
    cv : int or HashKFold
        As :func:`check_cv` returns.
    X : array-like, scipy.sparse matrix, dask array or DataArray of shape (n_samples, n_features)
    y : array-like, dask array or DataArray, optional
        Labels (or the second view of a two-view estimator), row-aligned with ``X``.
    fit_params : dict
        ``sample_weight`` (split with the rows) and ``sample_dim`` (the sample dim of a
        DataArray ``X``) or ``sample_dims`` (a name or a tuple of names: ``X`` is a grid,
        its other dims the features); anything else is passed unchanged.

    Notes
    -----
    A grid (an N-D DataArray read with ``sample_dims``, see the user guide's page on
    gridded data) is split along its samples: several sample dims are stacked into one
    (C order, the order of the rows the estimator reads). Its mask is found once, here (for
    dask data from its first sample, the one read this makes), and handed to the fit of every
    part (``SampleDims(..., mask=...)``), which reads no sample to find it and checks each
    block against it in its pass.
    """

    def __init__(self, cv: int | HashKFold, X: Any, y: Any, fit_params: dict[str, Any]) -> None:
        self.cv = cv
        self.n_splits = cv if isinstance(cv, int) else cv.n_splits
        params = dict(fit_params)
        weight = params.pop("sample_weight", None)
        sample_dim = _sample_dim_of(params, X)
        self._rest = params
        self.kind = "xarray" if is_xarray(X) else "dask" if is_dask(X) else "numpy"
        #: what fits and scores on a part take as ``sample_dim`` (a grid's SampleDims)
        self._dims_param: Any = None
        #: a grid's own sample dims, where they were stacked into one for the folds
        self.sample_dims: tuple[Hashable, ...] | None = None
        if self.kind == "xarray":
            rows = as_rows(X, sample_dim=sample_dim)
            self.sample_dim: Hashable | None = rows.sample_dim
            if rows.layout is not None:  # a grid: folds of its stacked samples
                X, y, weight = self._grid(X, y, weight, rows)
            else:
                X = rows.template
                y = _aligned(y, rows, "y")
                weight = _aligned(weight, rows, "sample_weight")
            # numpy-backed DataArrays are read by dask too (see the module's notes); their
            # rows are reduced by local threads all the same (``local``)
            self.local = not is_dask(X.data)
            if self.local:
                X = X.chunk({self.sample_dim: _block_rows(rows.shape[1])})
            n_features = int(rows.shape[1])
        else:
            self.sample_dim = None
            self.local = self.kind == "numpy"
            if self.local:
                X = X.tocsr() if is_sparse(X) else np.asarray(X)
            elif any(np.isnan(c) for c in X.chunks[0]):
                raise ValueError(
                    "X has unknown chunk sizes; call X.compute_chunk_sizes() first (folds are "
                    "fixed by row positions)"
                )
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D (n_samples, n_features); got shape {X.shape}")
            n_features = int(X.shape[1])
        self.X, self.y, self.weight = X, y, weight
        self.n_samples, self.n_features = int(X.shape[0]), n_features
        for name, v in (("y", y), ("sample_weight", weight)):
            if v is not None and _n_rows(v) != self.n_samples:
                raise ValueError(
                    f"{name} has {_n_rows(v)} rows but X has {self.n_samples}; they must be equal"
                )
        self._index = self._fold_index()
        self.sizes = tuple(self._fold_size(k) for k in range(self.n_splits))
        self._check_sizes()
        self._tests = [self._select(k) for k in range(self.n_splits)]

    def _grid(self, X: Any, y: Any, weight: Any, rows: Any) -> tuple[Any, Any, Any]:
        """A grid (N-D DataArray) with its sample dims first, stacked into one where they are
        several (the folds are of the stacked samples, as the rows the estimator reads), and
        its mask, found once here (the first sample of dask data), handed to every fit of the
        search; ``y`` and ``sample_weight`` along the samples."""
        from ddr.stats._grid import FeatureLayout, SampleDims, free_name

        layout = rows.layout
        if not isinstance(layout, FeatureLayout):
            raise ValueError(
                "ddr.model_selection searches a grid given as a DataArray; X is a Dataset "
                f"(variables {list(X.data_vars)}): search each variable, or give their "
                "stacked rows"
            )
        sdims = tuple(rows.sample_dims)
        X = X.transpose(*sdims, *layout.dims)
        if len(sdims) > 1:
            self.sample_dims = sdims
            y = _stacked_samples(y, rows, "y")
            weight = _stacked_samples(weight, rows, "sample_weight")
            self.sample_dim = free_name("sample", tuple(X.dims))
            X = X.stack({self.sample_dim: sdims}).transpose(self.sample_dim, *layout.dims)
        else:
            y = _aligned(y, rows, "y")
            weight = _aligned(weight, rows, "sample_weight")
        self._dims_param = SampleDims((self.sample_dim,), mask=layout.mask())
        return X, y, weight

    def own_sample_dims(self, estimator: Any) -> Any:
        """``estimator`` (fitted on parts of a grid whose sample dims were stacked into one)
        with the grid's own sample dims, so that it reads the grid as given (``transform(X)``
        without ``sample_dims=``); any other estimator as it is."""
        if self.sample_dims is not None and hasattr(estimator, "sample_dims_"):
            estimator.sample_dims_ = self.sample_dims
        return estimator

    # ------------------------------------------------------------------ positions
    def _fold_index(self) -> Any:
        """Per fold what selects its rows: ``(start, stop)`` for contiguous folds; for hashed
        folds the positions (in-memory and xarray input) or the rows per dask block."""
        n, K = self.n_samples, self.n_splits
        if isinstance(self.cv, int):
            if K > n:
                raise ValueError(
                    f"Cannot have number of splits n_splits={K} greater than the number of "
                    f"samples: n_samples={n}."
                )
            sizes = np.full(K, n // K, dtype=np.int64)
            sizes[: n % K] += 1
            stops = np.cumsum(sizes)
            return [(int(b - s), int(b)) for s, b in zip(sizes, stops, strict=True)]
        if self.kind != "dask":
            folds = self.cv.fold_of(np.arange(n))
            return [np.flatnonzero(folds == k) for k in range(K)]
        counts = np.zeros((len(self.X.chunks[0]), K), dtype=np.int64)
        start = 0
        for b, size in enumerate(self.X.chunks[0]):
            folds = self.cv.fold_of(np.arange(start, start + size))
            counts[b] = np.bincount(folds, minlength=K)
            start += size
        return counts

    def _fold_size(self, k: int) -> int:
        index = self._index
        if isinstance(self.cv, int):
            return index[k][1] - index[k][0]
        return int(index[k].shape[0]) if isinstance(index, list) else int(index[:, k].sum())

    def _check_sizes(self) -> None:
        empty = [k for k, s in enumerate(self.sizes) if s == 0]
        if empty:
            raise ValueError(
                f"{self.cv!r} leaves fold(s) {empty} of n_samples={self.n_samples} rows empty: "
                "too few rows for this many folds; use fewer folds"
            )

    # -------------------------------------------------------------------- the rows
    def _select(self, k: int) -> Part:
        """Fold ``k``'s rows, built once: every fit and score of the search uses these
        arrays, so their tasks (and the reads under them) are shared in one compute."""
        X = self._rows_of(self.X, k, None)
        rows = tuple(X.chunks[0]) if self.kind == "numpy" else None
        return self._part(X, self._rows_of(self.y, k, rows), self._rows_of(self.weight, k, rows))

    def _rows_of(self, v: Any, k: int, rows: tuple[int, ...] | None) -> Any:
        """Fold ``k``'s rows of ``v``: a DataArray or numpy vector beside a DataArray X
        stays so (the estimator aligns it), in-memory rows become dask arrays (chunked as
        ``rows``), a dask array's rows a slice or a blockwise selection."""
        if v is None:
            return None
        index = self._index
        if self.kind != "dask":
            where = slice(*index[k]) if isinstance(self.cv, int) else index[k]
            if is_xarray(v):
                return v.isel({self.sample_dim: where})
            if is_dask(v):
                v = v.compute()
            data = v[where] if is_sparse(v) else np.asarray(v)[where]
            return data if self.kind == "xarray" else _from_memory(data, rows)
        v = self._as_dask(v)
        if isinstance(self.cv, int):
            return v[index[k][0] : index[k][1]]
        return _hashed_rows(v, self.cv, k, index[:, k])

    def _as_dask(self, v: Any) -> da.Array:
        """A per-row vector of a dask X as a dask array chunked as X's rows."""
        rows = self.X.chunks[0]
        if is_dask(v):
            return v if v.chunks[0] == rows else v.rechunk((rows, *v.chunks[1:]))
        v = np.asarray(v)
        return da.from_array(v, chunks=(rows, *tuple((s,) for s in v.shape[1:])))

    def _part(self, X: Any, y: Any, weight: Any) -> Part:
        fit_params = dict(self._rest)
        method_params: dict[str, Any] = {}
        if weight is not None:
            fit_params["sample_weight"] = weight
        if self.sample_dim is not None:
            dims = self.sample_dim if self._dims_param is None else self._dims_param
            fit_params["sample_dim"] = method_params["sample_dim"] = dims
        return Part(X, y, fit_params, method_params)

    def test(self, k: int) -> Part:
        """The rows of fold ``k``.

        Parameters
        ----------
        k : int

        Returns
        -------
        Part
        """
        return self._tests[k]

    def train(self, k: int) -> Part:
        """The rows of every fold but ``k``: the folds' own arrays, concatenated.

        Parameters
        ----------
        k : int

        Returns
        -------
        Part
        """
        return self._joined([j for j in range(self.n_splits) if j != k])

    def all(self) -> Part:
        """All rows (those of every fold).

        Returns
        -------
        Part
        """
        return self._joined(list(range(self.n_splits)))

    def _joined(self, folds: list[int]) -> Part:
        parts = [self._tests[j] for j in folds]
        if self.kind == "xarray":
            import xarray as xr

            def cat(vs: list[Any]) -> Any:
                if vs[0] is None:
                    return None
                if is_xarray(vs[0]):
                    return xr.concat(vs, dim=self.sample_dim)
                return np.concatenate(vs)

        else:

            def cat(vs: list[Any]) -> Any:
                return None if vs[0] is None else da.concatenate(vs)

        return self._part(
            cat([p.X for p in parts]),
            cat([p.y for p in parts]),
            cat([p.fit_params.get("sample_weight") for p in parts]),
        )


def _sample_dim_of(params: dict[str, Any], X: Any) -> Any:
    """``sample_dim`` of the fit parameters, or their ``sample_dims`` (a name or a tuple of
    names: X is read as a grid) as a ``SampleDims``; both popped from ``params``."""
    from ddr.stats._grid import SampleDims

    sample_dim = params.pop("sample_dim", None)
    given = params.pop("sample_dims", None)
    if given is None:
        return sample_dim
    if sample_dim is not None:
        raise TypeError(
            f"give sample_dims or sample_dim, not both (sample_dims={given!r}, "
            f"sample_dim={sample_dim!r}); sample_dims takes one name or a tuple of names"
        )
    if not is_xarray(X):
        raise ValueError(
            f"sample_dims={given!r} names the sample dims of a DataArray X; X is a "
            f"{type(X).__name__}, whose rows are its samples"
        )
    return SampleDims.of(given, tuple(X.dims))


def _stacked_samples(v: Any, rows: Any, name: str) -> Any:
    """A per-sample vector of a grid over several sample dims, in the order of its stacked
    samples: a DataArray on those dims (any order, aligned by coordinate) stacked as the
    rows are, anything else taken as already in that order."""
    if v is None or not is_xarray(v):
        return v
    out = align_to_rows(v, rows, name)
    return np.asarray(out.compute() if is_dask(out) else out)


def _aligned(v: Any, rows: Any, name: str) -> Any:
    """A DataArray ``v`` in the order of X's sample coordinate (as the estimators align it)."""
    return align_by_coordinate(v, rows, name) if is_xarray(v) else v


def _block_rows(n_features: int) -> int:
    return max(1, _BLOCK_ELEMENTS // max(int(n_features), 1))


def _from_memory(data: Any, row_chunks: tuple[int, ...] | None) -> da.Array:
    """In-memory rows as a dask array (a view for a slice; scipy.sparse as CSR blocks)."""
    width = data.shape[1] if data.ndim > 1 else 1
    rows: Any = row_chunks or min(_block_rows(width), max(int(data.shape[0]), 1))
    chunks = (rows, *data.shape[1:])
    if is_sparse(data):
        return da.from_array(data, chunks=chunks, asarray=False, meta=data[:0, :0])
    return da.from_array(data, chunks=chunks)


def _hashed_rows(v: da.Array, cv: HashKFold, k: int, sizes: np.ndarray) -> da.Array:
    """The rows of ``v`` in fold ``k`` of ``cv`` (``sizes``: the rows per block, known from
    the positions)."""
    return select_rows(v, sizes, "ddr-fold", _in_fold, cv.n_splits, cv.seed, k)


def _in_fold(start: int, n: int, n_splits: int, seed: int, k: int) -> np.ndarray:
    """Whether each of the rows ``start .. start + n - 1`` is in fold ``k``."""
    return HashKFold(n_splits, seed=seed).fold_of(np.arange(start, start + n)) == k


def select_rows(
    v: da.Array, sizes: Any, name: str, keep: Any, *args: Any
) -> da.Array:  # fmt: skip
    """The rows of ``v`` that ``keep(start, n_rows, *args)`` marks, by their global positions:
    each block keeps its own (a blockwise selection; ``sizes`` are the rows each block keeps,
    known without reading), and blocks left empty are dropped (statistics are of rows, and a
    0-row block has none).

    Parameters
    ----------
    v : dask.array.Array of shape (n_samples, ...)
    sizes : sequence of int, one per row block
    name : str
        The prefix of the graph's keys.
    keep : callable ``(start, n_rows, *args) -> ndarray of bool, shape (n_rows,)``
        Module-level (shipped to workers).
    *args
        Its arguments.
    """
    out = da.map_blocks(
        _keep_rows,
        v,
        keep,
        *args,
        chunks=(tuple(int(s) for s in sizes), *v.chunks[1:]),
        dtype=v.dtype,
        meta=v._meta,
        name=f"{name}-{tokenize(v, keep, *args)}",
    )
    kept = [b for b, s in enumerate(sizes) if s > 0]
    return out if len(kept) == len(sizes) else out.blocks[kept]


def _keep_rows(
    block: Any, keep: Any, *args: Any, block_info: dict[Any, Any] | None = None
) -> Any:  # fmt: skip
    start = block_info[0]["array-location"][0][0] if block_info else 0
    return block[np.flatnonzero(keep(start, block.shape[0], *args))]
