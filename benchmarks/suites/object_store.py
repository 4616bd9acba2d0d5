"""One pass over X on an S3 endpoint: moto's server on loopback (credentials checked), the
dataset copied there. ddr's reader (`ddr.io.from_zarr`, ddr's decoder on the fetched bytes)
against `dask.array.from_zarr` on the same zarr array, through zarr's `FsspecStore` (s3fs:
what ddr uses for URLs, one GET per chunk), the same with s3fs's defaults (a HEAD before
each GET: what `dask.array.from_zarr("s3://...")` gets) and, to compare stores, zarr's
`ObjectStore` (obstore). Ratios: each
ddr row against dask's pass on the same store, re-timed right before each of its 3 runs
(median); the S3 dask rows against the local read floor (first row).
MB per pass are counted in every process (a counting zarr `WrapperStore`), HTTP requests
per pass (HEAD and GET of chunk objects) in the server's request log; the floor rows show
dask's, the ddr rows ddr's. The server shares the machine's 2 cores with
the cluster, so these are loopback numbers: what the readers cost, not what a network gives."""

from __future__ import annotations

import importlib.util
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dask.array as da
import zarr

from benchmarks.harness import Context
from ddr.io import from_zarr
from ddr.io.locations import resolve
from ddr.pipeline._counting import CountingWrapper, read_counts


def run(ctx: Context) -> None:
    from ddr.testing import start_s3_server, stop_s3_server

    log = Path(tempfile.mkdtemp(prefix="ddr-bench-moto-")) / "moto.log"
    server = start_s3_server(log)
    env = {**server.env, "AWS_ALLOW_HTTP": "true"}  # obstore reads the endpoint from env too
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        server.share_with(ctx.client(), AWS_ALLOW_HTTP="true")
        for name in ctx.datasets:
            url = f"s3://{server.bucket}/{name}.zarr"
            start = time.perf_counter()
            loc = resolve(url)
            loc.fs.put(str(ctx.path(name)), loc.fs_path, recursive=True)
            print(f"[object_store] copied {name} to {url} in {time.perf_counter() - start:.0f} s")
            stored = loc.joinpath("X").du(exclude=("zarr.json",))
            chunks = f"/{server.bucket}/{name}.zarr/X/c/"
            for label, store in _stores(loc, server.bucket, name).items():
                _rows(
                    ctx,
                    name,
                    label,
                    store,
                    f"{label} {url}",
                    stored,
                    lambda chunks=chunks: _requests(log, chunks),
                )
    finally:
        stop_s3_server(server)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _stores(loc: Any, bucket: str, name: str) -> dict[str, Any]:
    # ddr's options (one GET per chunk), and s3fs's defaults (a HEAD before each GET), which
    # dask.array.from_zarr("s3://...") gets
    stores = {
        "FsspecStore": loc.store(),
        "FsspecStore, s3fs defaults": resolve(loc.url, {"max_concurrency": 10}).store(),
    }
    if importlib.util.find_spec("obstore") is not None:
        from obstore.store import S3Store
        from zarr.storage import ObjectStore

        # endpoint, credentials and AWS_ALLOW_HTTP from the environment: an S3Store given
        # allow_http as a parameter cannot be pickled to the workers (obstore 0.12)
        stores["ObjectStore"] = ObjectStore(S3Store(bucket, prefix=f"{name}.zarr"), read_only=True)
    return stores


def _rows(
    ctx: Context,
    name: str,
    label: str,
    store: Any,
    key: str,
    stored: int,
    requests: Callable[[], dict[str, int]],
) -> None:
    z = zarr.open_array(store=CountingWrapper(store, key), path="X", mode="r")

    def one_pass(reader: Any) -> dict[str, float]:
        before, sent = _bytes(ctx, key), requests()
        reader(z).sum().compute()
        time.sleep(0.5)  # the server's log line comes after the response
        n_bytes, after = _bytes(ctx, key) - before, requests()
        return {
            "passes": n_bytes / stored,
            "MB": n_bytes / 1e6,
            **{f"{m} requests": after[m] - sent[m] for m in after},
        }

    def floor() -> float:
        import dask

        with dask.config.set(scheduler=ctx.client()):
            start = time.perf_counter()
            da.from_zarr(z).sum().compute()
            return time.perf_counter() - start

    ctx.measure(f"S3 dask sum, {label}", name, lambda: one_pass(da.from_zarr), scheduler="cluster")
    ctx.measure(
        f"S3 ddr reader sum, {label}",
        name,
        lambda: one_pass(from_zarr),
        scheduler="cluster",
        paired_floor=True,
        floor=floor,
    )


def _bytes(ctx: Context, key: str) -> int:
    """Chunk bytes read through the counting store, in all processes."""
    n_bytes = sum(v for k, v in read_counts().items() if k.startswith(key))
    for counts in ctx.client().run(read_counts).values():
        n_bytes += sum(v for k, v in counts.items() if k.startswith(key))
    return n_bytes


def _requests(log: Path, prefix: str) -> dict[str, int]:
    """HEAD and GET requests for objects under ``prefix`` that the server has answered."""
    counts = {"HEAD": 0, "GET": 0}
    with log.open(errors="replace") as fh:
        for line in fh:
            for method in counts:
                if f"{method} {prefix}" in line:  # (werkzeug colours some lines)
                    counts[method] += 1
    return counts
