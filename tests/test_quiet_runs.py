"""Quiet where it should be (issue 28): Python warnings shown as ``ddr: warning:`` lines by the
command line (raised in the client or in a worker process), and worker processes that exit
by themselves when a cluster closes (no nanny ``still alive ..., killing``)."""

from __future__ import annotations

import gc
import io
import subprocess
import sys
import time
import warnings

import numpy as np
import xarray as xr
from distributed import LocalCluster

from ddr._log import console, route_warnings, watch_cluster
from ddr.cluster.backend import make_client
from ddr.cluster.shutdown import QuickExit, exit_quickly


def test_route_warnings_shows_one_plain_line_through_the_console(tmp_path):
    stream = io.StringIO()
    with console(stream=stream, log_file=tmp_path / "run.log"), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("the fit did not converge", RuntimeWarning, stacklevel=1)
    assert stream.getvalue() == "ddr: warning: the fit did not converge (RuntimeWarning)\n"
    assert "the fit did not converge (RuntimeWarning)" in (tmp_path / "run.log").read_text()


def test_route_warnings_restores_python_and_leaves_explicit_files_alone():
    saved = warnings.showwarning
    err = io.StringIO()
    with route_warnings():
        assert warnings.showwarning is not saved
        to_file = io.StringIO()
        warnings.showwarning("raw", UserWarning, "x.py", 3, file=to_file)
        assert to_file.getvalue().startswith("x.py:3: UserWarning: raw")  # as Python shows it
        real_err, sys.stderr = sys.stderr, err
        try:
            warnings.showwarning("said", UserWarning, "x.py", 3)  # no console: on stderr
        finally:
            sys.stderr = real_err
    assert warnings.showwarning is saved
    assert err.getvalue() == "ddr: warning: said (UserWarning)\n"


def _warn_in_task(text: str) -> int:
    import os
    import warnings

    warnings.warn(text, UserWarning, stacklevel=1)
    return os.getpid()


def test_a_worker_process_warning_reaches_the_console_once():
    stream = io.StringIO()
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as lc,
        make_client(lc, set_as_default=False) as client,
        console(stream=stream) as handlers,
    ):
        watch_cluster(client, handlers, own_workers=True)
        workers = list(client.scheduler_info()["workers"])
        futures = [  # on both workers: the same text is shown once
            client.submit(_warn_in_task, "a worker's warning", pure=False, workers=[w])
            for w in workers * 2
        ]
        pids = set(client.gather(futures))
        deadline = time.monotonic() + 10
        while "a worker's warning" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # any duplicate arrives within this
    assert len(pids) == 2
    assert stream.getvalue().count("ddr: warning: a worker's warning (UserWarning)\n") == 1
    assert "warnings.warn(" not in stream.getvalue()


def test_the_command_shows_a_convergence_warning_as_a_ddr_line(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 6)) @ rng.normal(size=(6, 6))
    x[rng.random(x.shape) < 0.2] = np.nan
    xr.Dataset({"X": (("sample", "feature"), x)}).chunk({"sample": 50}).to_zarr(tmp_path / "d.zarr")
    (tmp_path / "p.yaml").write_text(
        "ddr: 1\nname: ppca\ninputs:\n  X: {path: d.zarr, array: X}\n"
        "steps:\n  ppca: {op: PPCA.fit, inputs: {X: X},\n"
        "         with: {n_components: 2, max_iter: 2, tol: 0.0}}\n"
        "outputs:\n  - {kind: metrics, from: [ppca.noise_variance_], path: out/m.json}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "ddr.cli", "run", "p.yaml", "--cluster", "threads"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "ConvergenceWarning" in line]
    assert len(said) == 1 and said[0].startswith("ddr: warning: "), result.stderr
    assert "warnings.warn" not in result.stderr and ".py:" not in said[0]


def _freeze_count_after_teardown(dask_worker, closing: bool) -> int:
    """Call the plug-in's teardown on a stand-in for ``dask_worker`` (its nanny, its status
    ``closing`` or not) and say how many objects it froze; unfreeze so that the worker goes
    on."""
    import gc
    import types

    from distributed.core import Status

    from ddr.cluster.shutdown import QuickExit

    plugin = dask_worker.plugins["ddr-quick-exit"]
    assert isinstance(plugin, QuickExit)
    status = Status.closing if closing else Status.running
    before = gc.get_freeze_count()  # a process may start with some (Python 3.12 does)
    plugin.teardown(types.SimpleNamespace(status=status, nanny=dask_worker.nanny))
    frozen = gc.get_freeze_count() - before
    gc.unfreeze()
    return frozen


def test_quick_exit_freezes_only_a_closing_worker_in_its_own_process():
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as lc,
        make_client(lc, set_as_default=False) as client,
    ):
        exit_quickly(client)
        assert list(client.run(_freeze_count_after_teardown, closing=False).values()) == [0]
        (frozen,) = client.run(_freeze_count_after_teardown, closing=True).values()
        assert frozen > 0
    # in the client's process (workers as threads there) nothing is ever frozen
    gc.unfreeze()
    plugin = QuickExit()
    worker = type("W", (), {})()
    from distributed.core import Status

    worker.status, worker.nanny = Status.closing, object()
    plugin.teardown(worker)
    assert gc.get_freeze_count() == 0


def test_exit_quickly_tolerates_a_scheduler_that_refuses():
    class Refusing:
        def register_plugin(self, *args, **kwargs):
            raise RuntimeError("no pickled code allowed")

    exit_quickly(Refusing())  # distributed's defaults stay: no error
