"""Figures (PNG) and small files (JSON) that pipelines write, atomically and fingerprinted,
and the lazy data that plots of large arrays need (sampled rows, confusion counts).

The figures themselves are drawn by :mod:`ddr.pipeline.plots`. Every file is written whole
or not at all (:meth:`ddr.io.locations.Location.write_bytes`: locally to a temporary name
renamed into place, on an object store in one PUT), so a crash never leaves a half-written
file; paths may be URLs, and secrets are redacted from what is written. The output
fingerprint is stored inside (a PNG text chunk, a JSON key) and is what
``skip-if-complete`` compares; PNGs also carry the provenance (what changed is said when a
rerun rewrites them).
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import numpy as np

from ddr.io.locations import Location, redact, resolve

__all__ = [
    "confusion_blocks",
    "merge_confusion",
    "natural_key",
    "plot",
    "read_fingerprint",
    "sample_rows",
    "write_json",
]

FINGERPRINT_KEY = "ddr:fingerprint"
PROVENANCE_KEY = "ddr:provenance"


# ------------------------------------------------------------------------- files
PathLike = str | os.PathLike | Location


def read_fingerprint(path: PathLike) -> str | None:
    """The fingerprint stored in a JSON or PNG file written by ddr, else None."""
    p = resolve(path)
    suffix = os.path.splitext(p.path)[1].lower()
    if suffix not in (".json", ".png"):
        return None
    try:
        raw = p.read_bytes()
    except (PermissionError, TimeoutError, ConnectionError):
        raise
    except Exception:  # unreadable: not a (complete) ddr file
        return None
    try:
        if suffix == ".json":
            data = json.loads(raw.decode("utf-8"))
            value = data.get(FINGERPRINT_KEY) if isinstance(data, dict) else None
        else:
            from PIL import Image

            with Image.open(io.BytesIO(raw)) as im:
                value = im.text.get(FINGERPRINT_KEY)
    except Exception:  # not JSON / PNG: not a (complete) ddr file
        return None
    return value if isinstance(value, str) else None


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "values") and hasattr(value, "dims"):  # DataArray
        return _jsonable(np.asarray(value.values))
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, float) and not np.isfinite(value):
        return repr(value)
    return value


def write_json(path: PathLike, data: dict[str, Any], fingerprint: str | None) -> None:
    """Write ``data`` (numpy values converted, secrets redacted) as JSON, whole or not at
    all, with the fingerprint."""
    body = redact(_jsonable(data))
    if fingerprint is not None:
        body[FINGERPRINT_KEY] = fingerprint
    text = json.dumps(body, indent=2, sort_keys=False) + "\n"
    resolve(path).write_bytes(text.encode("utf-8"))


def _save(
    fig: Any,
    path: PathLike,
    fingerprint: str | None,
    provenance: dict[str, Any] | None = None,
) -> None:
    import matplotlib.pyplot as plt

    import ddr

    meta = {"Software": f"ddr {ddr.__version__}"}
    if fingerprint is not None:
        meta[FINGERPRINT_KEY] = fingerprint
    if provenance is not None:
        meta[PROVENANCE_KEY] = json.dumps(redact(_jsonable(provenance)), default=str)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=110, metadata=meta, bbox_inches="tight")
    finally:
        plt.close(fig)
    resolve(path).write_bytes(buf.getvalue())


# ------------------------------------------------------------- lazy plot data
def sample_rows(arr: Any, max_points: int) -> Any:
    """Evenly spaced rows of a (lazy) array: at most ``max_points``, in order."""
    n = arr.shape[0]
    if n <= max_points:
        return arr
    idx = np.linspace(0, n - 1, max_points).round().astype(np.int64)
    return arr[idx]


def confusion_blocks(pred: Any, truth: Any) -> Any:
    """A lazy object array with one ``{(true, predicted): count}`` dict per row block.

    An array (not a Delayed) so that it is optimized together with the other arrays of the
    same compute, and shares their reads of the input.
    """
    import dask.array as da

    pred = pred if isinstance(pred, da.Array) else da.asarray(pred)
    truth = truth if isinstance(truth, da.Array) else da.asarray(truth)
    truth = truth.rechunk(pred.chunks)
    return da.map_blocks(
        _pair_counts_block,
        pred,
        truth,
        dtype=object,
        chunks=((1,) * pred.numblocks[0],),
        meta=np.empty((0,), dtype=object),
    )


def _pair_counts_block(pred: np.ndarray, truth: np.ndarray) -> np.ndarray:
    out = np.empty(1, dtype=object)
    out[0] = _pair_counts(pred, truth)
    return out


def merge_confusion(parts: Any) -> tuple[list[str], np.ndarray]:
    """Labels and counts[true, predicted] from the per-block dicts."""
    return _merge_counts(list(np.asarray(parts, dtype=object).ravel()))


def _as_str(a: Any) -> np.ndarray:
    # through object: numpy's StringDType (Zarr v3 strings) does not cast to "U" directly
    return np.asarray(a).astype(object).astype(str)


def _pair_counts(pred: np.ndarray, truth: np.ndarray) -> dict[tuple[Any, Any], int]:
    pairs, counts = np.unique(
        np.stack([_as_str(truth), _as_str(pred)], axis=1),
        axis=0,
        return_counts=True,
    )
    return {(a, b): int(c) for (a, b), c in zip(pairs.tolist(), counts.tolist(), strict=True)}


def _merge_counts(parts: list[dict[tuple[Any, Any], int]]) -> tuple[list[str], np.ndarray]:
    total: dict[tuple[Any, Any], int] = {}
    for part in parts:
        for k, v in part.items():
            total[k] = total.get(k, 0) + v
    labels = sorted({a for a, _ in total} | {b for _, b in total}, key=natural_key)
    pos = {lab: i for i, lab in enumerate(labels)}
    mat = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for (a, b), v in total.items():
        mat[pos[a], pos[b]] = v
    return labels, mat


def natural_key(label: str) -> tuple[int, Any]:
    """Sort key of class labels: numbers in numeric order, then strings."""
    try:
        return (0, float(label))
    except ValueError:
        return (1, label)


# ------------------------------------------------------------------------ plots
def plot(
    kind: str,
    path: PathLike,
    fingerprint: str | None,
    title: str | None,
    provenance: dict[str, Any] | None = None,
    **data: Any,
) -> None:
    """Draw plot ``kind`` (:mod:`ddr.pipeline.plots`) from computed ``data``; write it to
    ``path`` with the fingerprint and provenance in PNG text chunks."""
    from ddr.pipeline import plots

    if kind == "scree":
        fig = plots.draw_scree(data["model"], title)
    elif kind == "loglik":
        fig = plots.draw_loglik(data["model"], title)
    elif kind == "kde":
        fig = plots.draw_kde(data["model"], data.get("histogram"), title)
    elif kind == "scatter":
        fig = plots.draw_scatter(
            data["x"],
            data["y"],
            data.get("labels"),
            data["n_total"],
            data.get("xlabel", "column 1"),
            data.get("ylabel", "column 2"),
            title,
        )
    elif kind == "confusion":
        labels, counts = data["confusion"]
        fig = plots.draw_confusion(labels, counts, data.get("rows", "rows"), title)
    else:  # pragma: no cover - the schema allows only the kinds above
        raise ValueError(f"unknown plot {kind!r}")
    _save(fig, path, fingerprint, provenance)
