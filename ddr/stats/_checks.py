"""Validation of in-memory blocks, labels and weights, with messages that name what was given."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "check_block",
    "class_index",
    "check_finite",
    "block_start",
    "check_rows",
    "check_labels",
    "check_same_labels_kind",
    "check_weights",
    "label_kind",
    "rows_at",
    "sum_is_finite",
]


def check_block(X: np.ndarray, name: str = "X") -> np.ndarray:
    """Return ``X`` as a 2-D numeric numpy array, or raise naming what it was."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_features); got an array with ndim={X.ndim} "
            f"and shape {X.shape}"
        )
    if X.dtype.kind not in "biuf":
        raise TypeError(f"{name} must have a numeric dtype; got dtype {X.dtype}")
    return X


def check_finite(X: np.ndarray, name: str = "X", hint: str = "") -> None:
    """Raise a ValueError naming NaN or infinity found in ``X`` (used after a cheap test failed)."""
    if X.dtype.kind != "f":
        return
    n_nan = int(np.isnan(X).sum())
    n_inf = int(np.isinf(X).sum())
    if n_nan or n_inf:
        what = " and ".join(
            s for s in (f"{n_nan} NaN" if n_nan else "", f"{n_inf} infinite" if n_inf else "") if s
        )
        raise ValueError(f"{name} contains {what} value(s){hint}")


def label_kind(y: np.ndarray) -> str:
    """``"numeric"`` or ``"string"``: labels of one kind never mix with the other."""
    return "string" if y.dtype.kind in "USO" else "numeric"


def check_labels(y: np.ndarray, n_samples: int, name: str = "y") -> np.ndarray:
    """Return labels as a 1-D array of an integer, float or unicode dtype, or raise.

    Object arrays must hold only strings; NaN labels are refused.
    """
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D (n_samples,); got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {y.shape[0]} labels but X has {n_samples} samples; they must be equal"
        )
    if y.dtype.kind == "T":  # numpy's StringDType: how Zarr v3 string arrays read
        y = y.astype(str)
    elif y.dtype.kind == "O":
        if not all(isinstance(v, str) for v in y):
            raise TypeError(
                f"{name}: object labels must all be strings; got "
                f"{sorted({type(v).__name__ for v in y})}"
            )
        y = y.astype(str)
    elif y.dtype.kind == "S":
        y = y.astype(str)
    elif y.dtype.kind == "b":
        y = y.astype(np.int64)
    elif y.dtype.kind not in "iufU":
        raise TypeError(f"{name} must hold integer, float or string labels; got dtype {y.dtype}")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError(f"{name} contains NaN or infinite labels; every sample needs a class")
    return y


def unique_labels(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(y, return_inverse=True)`` for 1-D labels: sorted classes, each row's index.

    Integer labels of a range no wider than a few times their number are tabulated with a
    bincount instead of sorted (3x faster on a block of 100 000 labels; this runs per block).
    """
    if y.dtype.kind in "iu" and y.size:
        lo, hi = int(y.min()), int(y.max())
        if hi - lo <= 4 * y.size + 1024:
            wide = np.dtype(np.int64 if y.dtype.kind == "i" else np.uint64)  # no wrap-around
            offset = (y.astype(wide) - wide.type(lo)).astype(np.intp)
            present = np.bincount(offset, minlength=hi - lo + 1) > 0
            index = np.cumsum(present, dtype=np.intp) - 1
            classes = (np.flatnonzero(present).astype(wide) + wide.type(lo)).astype(y.dtype)
            return classes, index[offset]
    return np.unique(y, return_inverse=True)


def class_index(y: np.ndarray | None, n_samples: int) -> tuple[np.ndarray | None, np.ndarray, int]:
    """Sorted classes (None without labels), each row's class index, and the class count."""
    if y is None:
        return None, np.zeros(n_samples, dtype=np.int64), 1
    classes, inverse = unique_labels(check_labels(y, n_samples))
    return classes, inverse, classes.shape[0]


def check_same_labels_kind(a: np.ndarray, b: np.ndarray, what: str) -> None:
    if label_kind(a) != label_kind(b):
        raise TypeError(
            f"cannot merge {what} with {label_kind(a)} labels and {what} with {label_kind(b)} "
            "labels; use one label type throughout"
        )


def check_weights(w: np.ndarray | None, n_samples: int) -> np.ndarray | None:
    """Return sample weights as float64, or raise if they are not finite and non-negative."""
    if w is None:
        return None
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 1 or w.shape[0] != n_samples:
        raise ValueError(
            f"sample_weight must have shape ({n_samples},) to match X; got shape {w.shape}"
        )
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("sample_weight must be finite and non-negative")
    return w


def check_rows(
    X: Any, start: int | None = None, what: str = "", hint: str = "", *, nan_ok: bool = False
) -> None:
    """Raise a ValueError if the row block ``X`` (numpy or scipy.sparse) holds NaN (unless
    ``nan_ok``) or infinity, saying how many values and rows, which rows of the whole input
    (``start``: the block's first row, when known) and the first of them; ``what`` is the
    method that needs them finite (for the message), ``hint`` what to do instead.

    A sum over the block tells a finite block at the cost of one read of it; the values are
    counted only when it is not finite.
    """
    values = X.data if hasattr(X, "tocsr") else X
    if not isinstance(values, np.ndarray) or values.dtype.kind not in "fc":
        return
    if not nan_ok and sum_is_finite(values):
        return
    finite = ~np.isinf(values) if nan_ok else np.isfinite(values)
    if finite.all():
        return
    n_nan = 0 if nan_ok else int(np.isnan(values).sum())
    n_inf = int(values.size - finite.sum()) - n_nan
    said = " and ".join(
        s for s in (f"{n_nan} NaN" if n_nan else "", f"{n_inf} infinite" if n_inf else "") if s
    )
    if hasattr(X, "tocsr"):
        csr = X.tocsr()
        row_of = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
        bad = np.isinf(csr.data) if nan_ok else ~np.isfinite(csr.data)
        bad_rows = np.unique(row_of[bad])
    else:
        bad_rows = np.flatnonzero(~finite.reshape(finite.shape[0], -1).all(axis=1))
    n_rows = X.shape[0]
    if start is None:
        where = f"a block of {n_rows} rows (the first at its row {int(bad_rows[0])})"
    else:
        where = (
            f"the {n_rows} rows {rows_at(start, n_rows)} (the first at row "
            f"{start + int(bad_rows[0])})"
        )
    raise ValueError(
        f"Input X contains {'infinity' if nan_ok else 'NaN or infinity'}: {said} value(s) in "
        f"{len(bad_rows)} of {where}; {what + ' needs' if what else 'this needs'} "
        f"{'no infinite values' if nan_ok else 'finite values'}" + (f". {hint}" if hint else "")
    )


def block_start(block_info: dict[Any, Any] | None) -> int | None:
    """The first row of a dask block, from the ``block_info`` dask gives a function of
    ``map_blocks`` that takes it; 0 without one (a whole numpy input), None when dask gave
    no location."""
    if block_info is None:
        return 0
    info = block_info.get(0)
    return None if info is None else int(info["array-location"][0][0])


def sum_is_finite(values: np.ndarray) -> bool:
    """True when the sum of ``values`` is finite, so every value is (NaN and infinity reach
    the sum); False tells nothing (a sum of large finite values may overflow)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(np.add.reduce(values, axis=None)))


def rows_at(start: int, n: int) -> str:
    return f"{start}-{start + n - 1}" if n > 1 else f"{start}"
