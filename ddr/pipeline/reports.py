"""Figures (PNG) and small files (JSON) that pipelines write, atomically and fingerprinted.

Plots: ``scree`` (explained variance per component and its cumulative sum), ``scatter``
(two score columns, evenly sampled rows, coloured by class), ``kde`` (density curves of a
fitted density model), ``confusion`` (true x predicted counts), ``loglik`` (the EM
log-likelihood per iteration of PPCA). matplotlib is imported only here, only when a plot
is drawn, with the non-interactive Agg backend.

Every file is written to a temporary name beside its target and renamed into place, so a
crash never leaves a half-written file; the output fingerprint is stored inside (a PNG text
chunk, a JSON key) and is what ``skip-if-complete`` compares.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "confusion_blocks",
    "merge_confusion",
    "plot",
    "read_fingerprint",
    "sample_rows",
    "write_json",
]

FINGERPRINT_KEY = "ddr:fingerprint"


# ------------------------------------------------------------------------- files
def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def read_fingerprint(path: str | os.PathLike) -> str | None:
    """The fingerprint stored in a JSON or PNG file written by ddr, else None."""
    p = Path(path)
    try:
        if p.suffix.lower() == ".json":
            with p.open(encoding="utf-8") as fh:
                data = json.load(fh)
            value = data.get(FINGERPRINT_KEY) if isinstance(data, dict) else None
        elif p.suffix.lower() == ".png":
            from PIL import Image

            with Image.open(p) as im:
                value = im.text.get(FINGERPRINT_KEY)
        else:
            value = None
    except Exception:  # unreadable: not a (complete) ddr file
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


def write_json(path: str | os.PathLike, data: dict[str, Any], fingerprint: str | None) -> None:
    """Write ``data`` (numpy values converted) as JSON, atomically, with the fingerprint."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    body = _jsonable(data)
    if fingerprint is not None:
        body[FINGERPRINT_KEY] = fingerprint
    tmp = _tmp(p)
    tmp.write_text(json.dumps(body, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, p)


def _save(fig: Any, path: str | os.PathLike, fingerprint: str | None) -> None:
    import matplotlib.pyplot as plt

    import ddr

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    meta = {"Software": f"ddr {ddr.__version__}"}
    if fingerprint is not None:
        meta[FINGERPRINT_KEY] = fingerprint
    tmp = _tmp(p)
    fig.savefig(tmp, format="png", dpi=110, metadata=meta, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, p)


def _figure(title: str | None, default: str) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.set_title(title or default)
    return fig, ax


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
    labels = sorted({a for a, _ in total} | {b for _, b in total}, key=_natural)
    pos = {lab: i for i, lab in enumerate(labels)}
    mat = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for (a, b), v in total.items():
        mat[pos[a], pos[b]] = v
    return labels, mat


def _natural(label: str) -> tuple[int, Any]:
    try:
        return (0, float(label))
    except ValueError:
        return (1, label)


# ------------------------------------------------------------------------ plots
def _explained(model: Any) -> tuple[np.ndarray, str]:
    for attr, label in (
        ("explained_variance_ratio_", "explained variance ratio"),
        ("eigenvalues_", "eigenvalue (share of the computed ones)"),
        ("explained_variance_", "explained variance (share of the computed ones)"),
    ):
        value = getattr(model, attr, None)
        if value is not None:
            v = np.asarray(value, dtype=np.float64).ravel()
            if attr != "explained_variance_ratio_":
                v = v / v.sum() if v.sum() > 0 else v
            return v, label
    raise ValueError(
        f"a scree plot needs a model with explained_variance_ratio_ or eigenvalues_; "
        f"{type(model).__name__} has neither"
    )


def plot_scree(model: Any, path: str, fingerprint: str | None, title: str | None) -> None:
    ratio, label = _explained(model)
    fig, ax = _figure(title, f"Scree plot: {type(model).__name__}")
    k = np.arange(1, ratio.size + 1)
    ax.bar(k, ratio, color="#4C72B0", label=label)
    ax.set_xlabel("component")
    ax.set_ylabel(label)
    ax2 = ax.twinx()
    ax2.plot(k, np.cumsum(ratio), color="#DD8452", marker="o", label="cumulative")
    ax2.set_ylabel("cumulative")
    ax2.set_ylim(0, max(1.0, float(np.cumsum(ratio)[-1]) * 1.05))
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="center right")
    if ratio.size <= 30:
        ax.set_xticks(k)
    _save(fig, path, fingerprint)


def plot_scatter(
    scores: np.ndarray,
    labels: np.ndarray | None,
    n_total: int,
    components: tuple[int, int],
    path: str,
    fingerprint: str | None,
    title: str | None,
) -> None:
    scores = np.asarray(scores)
    i, j = components
    fig, ax = _figure(title, "Scores")
    if labels is None:
        ax.scatter(scores[:, i], scores[:, j], s=4, alpha=0.5, color="#4C72B0", linewidths=0)
    else:
        labels = np.asarray(labels)
        for lab in sorted(np.unique(labels).tolist(), key=lambda v: _natural(str(v))):
            sel = labels == lab
            ax.scatter(scores[sel, i], scores[sel, j], s=4, alpha=0.6, label=str(lab), linewidths=0)
        ax.legend(title="class", markerscale=3, fontsize="small")
    ax.set_xlabel(f"component {i + 1}")
    ax.set_ylabel(f"component {j + 1}")
    shown = scores.shape[0]
    if shown < n_total:
        ax.annotate(
            f"{shown} of {n_total} rows (evenly sampled)",
            (0.01, 0.01),
            xycoords="axes fraction",
            fontsize="small",
            color="0.4",
        )
    _save(fig, path, fingerprint)


def plot_confusion(
    labels: list[str], counts: np.ndarray, path: str, fingerprint: str | None, title: str | None
) -> None:
    fig, ax = _figure(title, "Confusion matrix")
    im = ax.imshow(counts, cmap="Blues")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    top = counts.max() if counts.size else 0
    if len(labels) <= 20:
        for a in range(len(labels)):
            for b in range(len(labels)):
                ax.text(
                    b,
                    a,
                    str(counts[a, b]),
                    ha="center",
                    va="center",
                    fontsize="small",
                    color="white" if counts[a, b] > top / 2 else "black",
                )
    total = counts.sum()
    acc = np.trace(counts) / total if total else float("nan")
    ax.annotate(
        f"accuracy {acc:.3f} on {total} rows",
        (0.0, -0.18),
        xycoords="axes fraction",
        fontsize="small",
    )
    fig.colorbar(im, ax=ax)
    _save(fig, path, fingerprint)


def plot_loglik(model: Any, path: str, fingerprint: str | None, title: str | None) -> None:
    curve = None
    for attr in ("loglik_curve_", "log_likelihood_curve_", "loglik_", "lower_bound_curve_"):
        if getattr(model, attr, None) is not None:
            curve = np.asarray(getattr(model, attr), dtype=np.float64).ravel()
            break
    if curve is None:
        raise ValueError(
            f"a loglik plot needs a model with a log-likelihood curve (loglik_curve_); "
            f"{type(model).__name__} has none"
        )
    fig, ax = _figure(title, f"EM log-likelihood: {type(model).__name__}")
    ax.plot(np.arange(1, curve.size + 1), curve, marker="o")
    ax.set_xlabel("iteration")
    ax.set_ylabel("log-likelihood")
    _save(fig, path, fingerprint)


def plot_kde(
    model: Any,
    path: str,
    fingerprint: str | None,
    title: str | None,
    n_curves: int = 4,
    n_grid: int = 256,
) -> None:
    """Density curves of a fitted density model (``score_samples``): the density itself for
    1-D data, else slices through the training mean along the first features."""
    d = int(getattr(model, "n_features_in_", 1))
    center, scale = _center_scale(model, d)
    fig, ax = _figure(title, f"Density: {type(model).__name__}")
    for j in range(min(d, n_curves)):
        t = np.linspace(center[j] - 4 * scale[j], center[j] + 4 * scale[j], n_grid)
        grid = np.tile(center, (n_grid, 1))
        grid[:, j] = t
        dens = np.exp(np.asarray(model.score_samples(grid), dtype=np.float64))
        label = "density" if d == 1 else f"feature {j} (others at the mean)"
        ax.plot(t, dens, label=label)
    ax.set_xlabel("x" if d == 1 else "value along the feature")
    ax.set_ylabel("density")
    if d > 1:
        ax.legend(fontsize="small")
    _save(fig, path, fingerprint)


def _center_scale(model: Any, d: int) -> tuple[np.ndarray, np.ndarray]:
    moments = getattr(model, "moments_", None)
    if moments is not None and hasattr(moments, "mean"):
        mean = np.asarray(moments.mean, dtype=np.float64)
        var = np.asarray(moments.variance(0), dtype=np.float64)
        return mean, np.sqrt(np.where(var > 0, var, 1.0))
    for attr in ("mean_", "location_", "_center_"):
        if getattr(model, attr, None) is not None:
            mean = np.asarray(getattr(model, attr), dtype=np.float64).ravel()
            return mean, np.ones(d)
    return np.zeros(d), np.ones(d)


def plot(kind: str, path: str, fingerprint: str | None, title: str | None, **data: Any) -> None:
    """Draw plot ``kind`` from already computed ``data`` and write it to ``path``."""
    if kind == "scree":
        plot_scree(data["model"], path, fingerprint, title)
    elif kind == "loglik":
        plot_loglik(data["model"], path, fingerprint, title)
    elif kind == "kde":
        plot_kde(data["model"], path, fingerprint, title)
    elif kind == "scatter":
        plot_scatter(
            data["scores"],
            data.get("labels"),
            data["n_total"],
            data["components"],
            path,
            fingerprint,
            title,
        )
    elif kind == "confusion":
        labels, counts = data["confusion"]
        plot_confusion(labels, counts, path, fingerprint, title)
    else:  # pragma: no cover - the schema allows only the kinds above
        raise ValueError(f"unknown plot {kind!r}")
