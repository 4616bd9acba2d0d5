"""Building what outputs write: datasets for Zarr outputs, statistics as read-outs, and the
raw chunk writes that let all outputs of a run share one read of each input.

:func:`raw_writes` pairs each lazy variable of a dataset that ``ddr.io.write_zarr`` has
created (metadata only, ``compute=False``) with the Zarr array it goes to, so the runner can
store every output of the stream phase with ONE ``da.store``: the graphs ``write_zarr``
returns are built separately (each would read the input again).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ddr.config.errors import RunError, describe_error
from ddr.io.claims import Claim, OutputClaims
from ddr.io.locations import redact
from ddr.io.outputs import fenced
from ddr.pipeline.plan import FINGERPRINT_ATTR, OutputPlan
from ddr.pipeline.schema import PlotOutput, ZarrOutput, split_ref
from ddr.pipeline.summary import _rel

__all__ = [
    "OutputWriter",
    "as_dataarray",
    "data_of",
    "prepare_file",
    "raw_writes",
    "regular_chunks",
    "statistic_dataset",
    "statistic_readouts",
    "variable_strings",
]

logger = logging.getLogger("ddr.pipeline.runner")


def variable_strings(ds: Any) -> Any:
    """Lazy fixed-width strings (string class labels) as numpy's variable-length StringDType:
    xarray writes those lazily to Zarr v3 strings, where object arrays would be computed
    first to find their type (an extra pass over the input)."""
    import dask.array as da

    out = {}
    for name, var in ds.variables.items():
        if isinstance(var.data, da.Array) and var.dtype.kind == "U":
            out[name] = var.copy(data=var.data.astype(np.dtypes.StringDType()))
    return ds.assign(out) if out else ds


def regular_chunks(ds: Any) -> Any:
    """Dask variables rechunked so every chunk but the last has the size of the first (what
    ``ddr.io.write_zarr`` also does), so each dask chunk is exactly one Zarr chunk."""
    import dask.array as da

    out = {}
    for name, var in ds.variables.items():
        data = var.data
        if isinstance(data, da.Array) and not any(np.isnan(c) for cs in data.chunks for c in cs):
            target = tuple(max(c) if c else 1 for c in data.chunks)
            regular = all(
                all(x == t for x in c[:-1]) and (not c or c[-1] <= t)
                for c, t in zip(data.chunks, target, strict=True)
            )
            if not regular:
                out[name] = var.copy(data=data.rechunk(target))
    return ds.assign(out) if out else ds


def raw_writes(store: Any, ds: Any) -> list[tuple[Any, Any]] | None:
    """``(dask source, zarr target)`` for every lazy variable of ``ds`` that can be stored
    as it is into the arrays ``write_zarr`` created in ``store`` (the pending output's: it
    checks the run's claim at every write; same dtype, one dask chunk per Zarr chunk, no CF
    encoding); None if any cannot (then xarray's graph writes them)."""
    import dask.array as da
    import zarr

    pairs = []
    for name, var in ds.variables.items():
        data = var.data
        if not isinstance(data, da.Array):
            continue
        enc = var.encoding
        if any(k in enc for k in ("scale_factor", "add_offset", "units", "calendar")):
            return None
        if data.dtype.kind not in "biufUOT":
            return None
        if any(np.isnan(c) for cs in data.chunks for c in cs):
            return None
        try:
            # every chunk is written, also one equal to the fill value, or the output could
            # never be complete; zarr 3.1's open_array ignores `config` for an existing array
            # (3.4 takes it), with_config works in both
            target = zarr.open_array(store=store, path=str(name), mode="r+").with_config(
                {"write_empty_chunks": True}
            )
        except Exception:
            return None
        if data.dtype.kind in "UOT":
            if target.dtype.kind not in "OUT" and "str" not in str(target.dtype).lower():
                return None
            data = data.astype(object)
        elif np.dtype(target.dtype) != data.dtype:
            return None
        if tuple(target.chunks) != tuple(c[0] for c in data.chunks) or target.shape != data.shape:
            return None
        pairs.append((data, target))
    return pairs


def as_dataarray(value: Any, name: str) -> Any:
    import xarray as xr

    if isinstance(value, xr.DataArray):
        return value.rename(name)
    if isinstance(value, (int, float, np.generic)) or np.ndim(value) == 0:
        return xr.DataArray(np.asarray(value), name=name)
    arr = value if hasattr(value, "chunks") else np.asarray(value)
    dims = (
        ("sample", "feature")[: arr.ndim]
        if arr.ndim <= 2
        else tuple(f"{name}_dim_{i}" for i in range(arr.ndim))
    )
    if not hasattr(value, "chunks"):
        dims = tuple(f"{name}_dim_{i}" for i in range(arr.ndim))
    return xr.DataArray(arr, dims=dims, name=name)


def rename_dims(arr: Any, dims: list[str]) -> Any:
    return arr.rename(dict(zip(arr.dims, dims, strict=True)))


def sample_dim_of(ds: Any) -> str | None:
    for var in ds.data_vars.values():
        if var.ndim >= 1 and hasattr(var.data, "chunks") and var.data.chunks is not None:
            return str(var.dims[0])
    return None


def statistic_readouts(stat: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for readout in type(stat).readouts:
        try:
            attr = getattr(stat, readout)
            out[readout] = attr() if callable(attr) else attr
        except Exception:  # a read-out that does not apply (e.g. covariance of a diagonal)
            continue
    if not out:
        out = {k: v for k, v in stat.to_dict().items() if k != "type"}
    return out


def statistic_dataset(stat: Any, feature_dim: str) -> dict[str, Any]:
    import xarray as xr

    fd = feature_dim
    dims_of = {
        "mean": (fd,),
        "variance": (fd,),
        "std": (fd,),
        "covariance": (fd, f"{fd}_2"),
        "correlation": (fd, f"{fd}_2"),
        "classes": ("class",),
        "counts": ("class",),
        "priors": ("class",),
        "means": ("class", fd),
        "variances": ("class", fd),
        "covariances": ("class", fd, f"{fd}_2"),
        "pooled_covariance": (fd, f"{fd}_2"),
        "within_scatter": (fd, f"{fd}_2"),
        "between_scatter": (fd, f"{fd}_2"),
        "class_counts": ("class",),
    }
    out = {}
    for name, value in statistic_readouts(stat).items():
        arr = np.asarray(value)
        dims = dims_of.get(name)
        if dims is None or len(dims) != arr.ndim:
            dims = tuple(f"{name}_dim_{i}" for i in range(arr.ndim))
        if arr.dtype.kind == "U":
            arr = arr.astype(object)
        out[name] = xr.DataArray(arr, dims=dims, name=name)
    if "variance" in out and "covariance" in out and out["covariance"].ndim != 2:
        del out["covariance"]
    return out


def prepare_file(out: OutputPlan) -> None:
    """Refuse to replace a file the plan did not decide to overwrite (it appeared since)."""
    if out.action != "overwrite" and out.location.exists():
        raise FileExistsError(
            f"{out.location.shown!r} appeared while the pipeline ran; not replacing it"
        )


def data_of(value: Any) -> Any:
    return value.data if hasattr(value, "dims") and hasattr(value, "data") else value


class OutputWriter:
    """How :class:`ddr.pipeline.runner._Runner` writes outputs (uses its state): models,
    metrics and plots as soon as their sources exist, every output that needs data in one
    streamed compute, all with provenance and fingerprints."""

    plan: Any
    argv: list[str] | None
    summary: Any
    clock: Any
    output_results: dict[int, Any]
    _versions: dict[str, str] | None

    value: Callable[..., Any]  # provided by the concrete class

    _compute: Callable[..., Any]  # provided by the concrete class

    _pass: Callable[..., Any]  # provided by the concrete class

    _reads: list[str]  # the inputs the current phase reads

    _counts: Callable[..., Any]  # provided by the concrete class

    _passes: Callable[..., Any]  # provided by the concrete class

    claims: OutputClaims  # this run's claims on the outputs it writes

    def _versions_dict(self) -> dict[str, str]:
        if self._versions is None:
            import dask
            import sklearn
            import xarray
            import zarr

            import ddr

            self._versions = {
                "ddr": ddr.__version__,
                "python": sys.version.split()[0],
                "numpy": np.__version__,
                "dask": dask.__version__,
                "xarray": xarray.__version__,
                "zarr": zarr.__version__,
                "scikit-learn": sklearn.__version__,
            }
        return self._versions

    def _provenance(self, out: OutputPlan) -> dict[str, Any]:
        from ddr.pipeline.lineage import lineage

        made_from = lineage(self.plan.steps, self.plan.inputs, list(out.refs.values()))
        return {
            "pipeline": {
                "name": self.plan.pipeline.name,
                "file": os.path.abspath(self.plan.file),
                "resolved": self.plan.resolved,
            },
            "output": {"index": out.index, "kind": out.kind, "from": dict(out.refs)},
            **made_from,
            "versions": self._versions_dict(),
            "run": {
                "started": self.summary.started,
                "command": redact(" ".join(self.argv or sys.argv)),
            },
        }

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Add the time of the block, less its passes over data, to the clock's writes."""
        passes = self.clock.parts.get("passes", 0.0)
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.clock.add("writes", elapsed - (self.clock.parts.get("passes", 0.0) - passes))

    def _small_output(self, out: OutputPlan, index: int) -> None:
        with self._writing():
            self._write_small(out, index)

    def _write_small(self, out: OutputPlan, index: int) -> None:
        res = self.output_results[out.index]
        res.phase = index
        start = time.perf_counter()
        try:
            if out.kind == "model":
                self._write_model(out)
            elif out.kind == "metrics":
                self._write_metrics(out)
            elif out.kind == "plot":
                from ddr.pipeline.plot_inputs import model_data

                self._write_plot(out, model_data(out, self.value))
            else:
                pending, _ = self._zarr_pending(out)
                self._compute([pending.delayed])
                pending.finalize()
        except RunError:
            raise
        except Exception as exc:
            raise RunError(describe_error(exc), f"output {_rel(out.path)}") from exc
        res.action = "written"
        res.seconds = round(time.perf_counter() - start, 3)
        logger.info("wrote %s %s (%.2f s)", out.kind, _rel(out.path), res.seconds)

    def _claim(self, out: OutputPlan) -> Claim | None:
        return self.claims.get(out.location)

    def _if_exists(self, out: OutputPlan) -> str:
        return "overwrite" if out.action == "overwrite" else "error"

    def _write_model(self, out: OutputPlan) -> None:
        from ddr.io.models import save_model
        from ddr.io.outputs import PROVENANCE_ATTR, history_line

        model = self.value(out.refs[next(iter(out.refs))])
        attrs = {
            FINGERPRINT_ATTR: out.fingerprint,
            PROVENANCE_ATTR: self._provenance(out),
            "history": history_line(self.argv),
        }
        save_model(
            model,
            out.location,
            if_exists=self._if_exists(out),
            attrs=attrs,
            claim=self._claim(out),
        )

    def _write_metrics(self, out: OutputPlan) -> None:
        from ddr.pipeline.reports import write_json

        data: dict[str, Any] = {}
        for key, ref in out.refs.items():
            value = self.value(ref)
            if hasattr(value, "to_dict") and hasattr(value, "merge"):  # a statistic
                value = statistic_readouts(value)
            data[key] = value
        data["ddr:provenance"] = self._provenance(out)
        with fenced(self._claim(out)):
            prepare_file(out)
            write_json(out.location, data, out.fingerprint)

    def _write_plot(self, out: OutputPlan, data: dict[str, Any]) -> None:
        """Draw and write a plot from its data (:mod:`ddr.pipeline.plot_inputs`)."""
        from ddr.pipeline.reports import plot

        spec: PlotOutput = out.spec  # type: ignore[assignment]
        provenance = self._provenance(out)
        with fenced(self._claim(out)):
            prepare_file(out)
            plot(spec.plot, out.location, out.fingerprint, spec.title, provenance, **data)

    def _zarr_pending(self, out: OutputPlan) -> tuple[Any, Any]:
        """Write the metadata of a Zarr output (``ddr.io.write_zarr(compute=False)``); return
        the pending output and the dataset whose lazy variables are still to be written."""
        import xarray as xr

        from ddr.io import write_zarr

        spec: ZarrOutput = out.spec  # type: ignore[assignment]
        variables: dict[str, Any] = {}
        coords: dict[str, Any] = {}
        for key, ref in out.refs.items():
            value = self.value(ref)
            if key.startswith("coord:"):
                coords[key.removeprefix("coord:")] = value
                continue
            if hasattr(value, "to_dict") and hasattr(value, "merge"):  # a whole statistic
                for name, arr in statistic_dataset(value, self._feature_dim(ref)).items():
                    variables[name if len(out.refs) == 1 else f"{key}_{name}"] = arr
                continue
            variables[key] = as_dataarray(value, key)
        if isinstance(spec.dims, list):
            key = next(iter(variables))
            variables[key] = rename_dims(variables[key], spec.dims)
        elif isinstance(spec.dims, dict):
            for var, dims in spec.dims.items():
                variables[var] = rename_dims(variables[var], dims)
        ds = xr.Dataset(variables)
        for cname, value in coords.items():
            arr = as_dataarray(value, cname)
            sdim = sample_dim_of(ds)
            if sdim is None:
                raise RunError(
                    f"coordinate {cname!r} needs an array along samples in `from`",
                    f"output {_rel(out.path)}",
                )
            ds = ds.assign_coords({cname: (sdim, arr.data)})
        ds = regular_chunks(variable_strings(ds))
        attrs = dict(spec.attrs)
        attrs.setdefault("title", f"{self.plan.pipeline.name}: {', '.join(out.refs.values())}")
        pending = write_zarr(
            ds,
            out.location,
            if_exists=self._if_exists(out),
            inputs=[i.location for i in self.plan.inputs.values()],
            attrs=attrs,
            fingerprint=out.fingerprint,
            provenance=self._provenance(out),
            compute=False,
            claim=self._claim(out),
        )
        return pending, ds

    def _feature_dim(self, ref: str) -> str:
        step = self.plan.steps.get(split_ref(ref)[0])
        if step is not None and "X" in step.refs:
            X = self.value(step.refs["X"])
            dims = getattr(X, "dims", None)
            if dims and len(dims) == 2:
                return str(dims[1])
        return "feature"

    def _stream(self, indices: list[int], index: int) -> None:
        with self._writing():
            self._write_streamed(indices, index)

    def _write_streamed(self, indices: list[int], index: int) -> None:
        """Write every output that needs data in ONE compute.

        Each Zarr output's metadata is written by :func:`ddr.io.write_zarr` (``compute=False``);
        its lazy variables are then stored chunk by chunk into the arrays it created, all
        outputs together with one ``da.store`` and the plot data in the same ``compute``, so
        an input read by several outputs is read once (separate ``write_zarr`` graphs would
        each read it). Variables that cannot be stored raw (a CF encoding changes values)
        fall back to the pending output's own graph.
        """
        import dask.array as da

        from ddr.pipeline.plot_inputs import finish_data, streamed_data

        before = self._counts()
        start = time.perf_counter()
        sources: list[Any] = []
        targets: list[Any] = []
        items: list[Any] = []
        slots: list[tuple[OutputPlan, str, Any]] = []
        for i in indices:
            out = self.plan.outputs[i]
            try:
                if out.kind == "zarr":
                    pending, ds = self._zarr_pending(out)
                    raw = raw_writes(pending.store, ds)
                    if raw is None:
                        items.append(pending.delayed)
                    else:
                        sources.extend(src for src, _ in raw)
                        targets.extend(tgt for _, tgt in raw)
                    slots.append((out, "zarr", pending))
                elif out.kind == "plot":
                    lazy, known = streamed_data(self.plan, out, self.value)
                    slots.append((out, "plot", (list(lazy), known)))
                    items.extend(lazy.values())
                else:  # pragma: no cover - the planner streams only zarr outputs and plots
                    raise RunError(f"cannot stream a {out.kind} output", f"output {out.path}")
            except RunError:
                raise
            except Exception as exc:
                raise RunError(describe_error(exc), f"output {_rel(out.path)}") from exc
        stores: list[Any] = []
        if sources:
            stored = da.store(sources, targets, lock=False, compute=False)
            stores = list(stored) if isinstance(stored, tuple) else [stored]
        what = f"writing {len(indices)} output{'s' if len(indices) != 1 else ''}"
        try:
            values = self._pass(what, [*stores, *items], self._reads)[len(stores) :]
        except Exception as exc:
            names = ", ".join(_rel(self.plan.outputs[i].path) for i in indices)
            raise RunError(describe_error(exc), f"writing {names}") from exc
        pos = 0
        for out, kind, payload in slots:
            try:
                if kind == "zarr":
                    if payload.delayed is not None and any(d is payload.delayed for d in items):
                        pos += 1
                    payload.finalize()
                else:
                    names, known = payload
                    computed = dict(zip(names, values[pos : pos + len(names)], strict=True))
                    pos += len(names)
                    self._write_plot(out, finish_data(computed, known))
            except Exception as exc:
                raise RunError(describe_error(exc), f"output {_rel(out.path)}") from exc
        seconds = round(time.perf_counter() - start, 3)
        passes = self._passes(before, self._counts())
        for i in indices:
            res = self.output_results[i]
            res.action, res.phase, res.seconds = "written", index, seconds
            out = self.plan.outputs[i]
            logger.info("wrote %s %s", out.kind, _rel(out.path))
        if indices:
            self.output_results[indices[0]].passes = passes
