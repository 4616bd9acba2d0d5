"""Feedback on long work: every pass of a multi-pass fit and every EM iteration is a log
record under ``ddr`` (with a :class:`ddr.progress.Progress`), and the command line shows them
as a bar on a terminal, as plain lines elsewhere, and in a log file."""

from __future__ import annotations

import io
import logging
import re
import sys
import types

import dask
import dask.array as da
import numpy as np
import pytest

import ddr
from ddr._log import BarHandler, bar_line, console
from ddr.progress import PROGRESS_ATTR, Passes, Progress
from ddr.tags import get_ddr_tags


def progress_records(caplog) -> list[tuple[str, Progress]]:
    return [
        (r.getMessage(), getattr(r, PROGRESS_ATTR))
        for r in caplog.records
        if hasattr(r, PROGRESS_ATTR)
    ]


@pytest.fixture
def wide(rng):
    Z = rng.normal(size=(1200, 6)) * np.array([9, 7, 5, 4, 3, 2.5])
    X = Z @ np.linalg.qr(rng.normal(size=(80, 6)))[0].T + rng.normal(size=(1200, 80))
    return da.from_array(X, chunks=(200, 80))


def test_randomized_pca_reports_every_pass(wide, caplog):
    caplog.set_level(logging.INFO, logger="ddr")
    with dask.config.set(scheduler="sync"):
        pca = ddr.PCA(n_components=4, svd_solver="randomized", iterated_power=3).fit(wide)
    records = progress_records(caplog)
    assert pca.n_passes_ == 4
    assert records[0][0] == (
        "PCA (randomized solver): 4 passes over the data (1200 x 80), block width 14"
    )
    assert [p.done for _, p in records] == [0, 1, 2, 3, 4]
    assert all(p.total == 4 and p.unit == "pass" for _, p in records)
    assert records[-1][1].finished and not any(p.finished for _, p in records[:-1])
    for i, (message, _) in enumerate(records[1:], start=1):
        assert re.fullmatch(rf"PCA \(randomized solver\): pass {i} of 4 \(\d+\.\d\d s\)", message)
    # the estimator's planned passes are the ones it makes
    assert get_ddr_tags(ddr.PCA, n_components=4, svd_solver="randomized").fit.passes(1200, 80) == 4


def test_randomized_passes_stop_when_the_krylov_space_is_full(rng, caplog):
    caplog.set_level(logging.INFO, logger="ddr")
    X = rng.normal(size=(300, 20))
    pca = ddr.PCA(n_components=3, svd_solver="randomized", iterated_power=5).fit(X)
    est = ddr.PCA(n_components=3, svd_solver="randomized", iterated_power=5)
    assert pca.n_passes_ == get_ddr_tags(est).fit.passes(300, 20) == 2  # 13 + 7 fill R^20
    assert [p.done for _, p in progress_records(caplog)] == [0, 1, 2]


def test_ppca_em_reports_each_iteration_with_its_loglik(rng, caplog):
    caplog.set_level(logging.INFO, logger="ddr")
    X = rng.normal(size=(400, 3)) @ rng.normal(size=(3, 8)) + 0.5 * rng.normal(size=(400, 8))
    X[rng.random(X.shape) < 0.1] = np.nan
    ppca = ddr.PPCA(n_components=3, max_iter=30, tol=1e-8).fit(X)
    records = progress_records(caplog)
    iterations = [(m, p) for m, p in records if p.done > 0 and not p.finished]
    assert len(iterations) == ppca.n_iter_ and records[-1][1].total is None
    curve = ppca.loglik_curve_
    first = iterations[0][0]
    assert first.startswith("PPCA (EM): iteration 1 (") and f"{curve[0]:.10g}" in first
    second = iterations[1][0]
    assert f"log-likelihood {curve[1]:.10g}, change {curve[1] - curve[0]:+.4g}" in second
    assert records[-1][0].startswith(f"PPCA (EM): converged after {ppca.n_iter_} iterations")
    assert records[-1][1].finished


def test_nystrom_kernel_pca_reports_its_two_passes(rng, caplog):
    caplog.set_level(logging.INFO, logger="ddr")
    X = da.from_array(rng.normal(size=(600, 5)), chunks=(150, 5))
    with dask.config.set(scheduler="sync"):
        ddr.KernelPCA(n_components=2, method="nystrom", n_landmarks=50).fit(X)
    messages = [m for m, _ in progress_records(caplog)]
    assert messages[0].startswith("KernelPCA (Nystrom): 2 passes: 50 landmarks")
    assert messages[1].startswith("KernelPCA (Nystrom): pass 1 of 2")
    assert messages[2].startswith("KernelPCA (Nystrom): pass 2 of 2")
    assert get_ddr_tags(ddr.KernelPCA, method="nystrom", n_landmarks=50).fit.passes(600, 5) == 2
    assert get_ddr_tags(ddr.KernelPCA, method="exact").fit.passes(600, 5) == 1


def test_library_code_never_prints(wide, capsys):
    with dask.config.set(scheduler="sync"):
        ddr.PCA(n_components=4, svd_solver="randomized").fit(wide)
        ddr.PPCA(n_components=2, max_iter=5).fit(wide[:, :10])
    out, err = capsys.readouterr()
    assert out == "" and err == ""


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def log_passes(total: int) -> None:
    passes = Passes(logging.getLogger("ddr.test"), "job", total=total)
    passes.start(f"{total} passes")
    for _ in range(total):
        with passes.step():
            pass
    logging.getLogger("ddr.test").warning("careful")


def test_not_a_terminal_gets_one_plain_line_per_record():
    stream = io.StringIO()
    with console(progress=True, stream=stream):
        log_passes(3)
    text = stream.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert lines[0] == "ddr: job: 3 passes"
    assert [line.split(" (")[0] for line in lines[1:4]] == [
        f"ddr: job: pass {i} of 3" for i in (1, 2, 3)
    ]
    assert lines[4] == "ddr: warning: careful" and len(lines) == 5


def test_a_terminal_gets_a_bar_and_the_lines_above_it():
    stream = FakeTerminal()
    with console(progress=True, stream=stream) as handlers:
        assert isinstance(handlers[0], BarHandler)
        log_passes(3)
    text = stream.getvalue()
    assert "\r\x1b[2K" in text  # the bar is redrawn in place
    assert "job [#######-------------] pass 2 of 3" in text
    lines, bar = screen(text)
    # every record is a whole line, printed above the bar
    assert [line.split(" (")[0] for line in lines] == [
        "ddr: job: 3 passes",
        "ddr: job: pass 1 of 3",
        "ddr: job: pass 2 of 3",
        "ddr: job: pass 3 of 3",
        "ddr: warning: careful",
    ]
    assert bar == ""  # the finished job leaves no bar behind


def screen(text: str) -> tuple[list[str], str]:
    """What a terminal shows: the finished lines, and what is on the last line."""
    lines, current = [], ""
    for token in re.split(r"(\r\x1b\[2K|\n)", text):
        if token == "\r\x1b[2K":
            current = ""
        elif token == "\n":
            lines.append(current)
            current = ""
        else:
            current += token
    return lines, current


def test_no_progress_on_a_terminal_gives_lines():
    stream = FakeTerminal()
    with console(progress=False, stream=stream):
        log_passes(2)
    assert "\r" not in stream.getvalue() and "ddr: job: pass 2 of 2" in stream.getvalue()


def test_bar_line_shows_the_share_of_the_current_pass():
    p = Progress("PCA", done=1, total=4)
    assert bar_line(p, 0.5, 3.21, width=100) == (
        "PCA [########------------] pass 2 of 4, 50% of its tasks, 3.2 s"
    )
    assert bar_line(Progress("EM", 2, None, "iteration"), None, 1.0, width=100) == (
        "EM [--------------------] iteration 3, 1.0 s"
    )
    assert len(bar_line(p, 0.5, 3.2, width=30)) == 30


def test_quiet_verbose_and_the_log_file(tmp_path):
    stream = io.StringIO()
    log = logging.getLogger("ddr.test")
    with console(-1, stream=stream, log_file=tmp_path / "run.log"):
        log_passes(2)
        log.debug("details")
        try:
            raise ValueError("boom")
        except ValueError:
            log.error("failed", exc_info=True)
    assert stream.getvalue() == "ddr: warning: careful\nddr: error: failed\n"  # -q
    logged = (tmp_path / "run.log").read_text()
    assert "INFO    ddr.test: job: pass 2 of 2" in logged  # the file has everything
    assert "DEBUG   ddr.test: details" in logged and "ValueError: boom" in logged
    assert "\r" not in logged and "\x1b" not in logged
    stream = io.StringIO()
    with console(1, stream=stream):  # -v: debug records and tracebacks too
        log.debug("details")
        try:
            raise ValueError("boom")
        except ValueError:
            log.error("failed", exc_info=True)
    assert "ddr: details" in stream.getvalue() and "ValueError: boom" in stream.getvalue()
    # the handlers are gone afterwards: the ddr logger is as it was
    assert not logging.getLogger("ddr").handlers


def test_a_cluster_counts_its_tasks_for_the_bar(cluster_client):
    from ddr._log import watch_cluster

    stream = FakeTerminal()
    with console(progress=True, stream=stream) as handlers:
        watch_cluster(cluster_client, handlers, own_workers=False)
        bar = handlers[0]
        before = bar.tasks()
        x = da.ones((1000, 10), chunks=(100, 10)).sum(axis=0)
        cluster_client.compute(x).result()
        added, done = bar.tasks()
    # 10 block tasks and the reduction's: each counted once when it waits and once when done
    assert added - before[0] >= 10 and done - before[1] == added - before[0]


def test_workers_keep_quiet_about_a_failed_task_but_not_the_rest():
    from ddr._log import _not_an_echo

    def record(name, msg, *args):
        return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)

    assert not _not_an_echo(record("distributed.worker", "Compute Failed\nKey: %s", "x"))
    cancelled = "Async instruction for %s ended with CancelledError"
    assert not _not_an_echo(record("distributed.worker.state_machine", cancelled, "<Task>"))
    assert _not_an_echo(record("distributed.worker", "Worker is at 85% memory usage"))
    other = "Async instruction for %s ended with ValueError"
    assert _not_an_echo(record("distributed.worker.state_machine", other, "<Task>"))


# ---------------------------------------------------------------- notebooks (issue 28)
class _Handle:
    def __init__(self, shown: list) -> None:
        self.shown = shown

    def update(self, bundle, raw=False):
        self.shown.append(("update", bundle["text/html"]))


def fake_kernel(monkeypatch, shell_class: str) -> list:
    """IPython as a kernel makes it look: ``get_ipython()`` a shell of ``shell_class`` (by
    name, as in_notebook asks), ``IPython.display.display`` recording what it shows."""
    shown: list = []
    shell = type(shell_class, (), {})()
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: shell
    display = types.ModuleType("IPython.display")

    def show(bundle, raw=False, display_id=None):
        assert raw and display_id is True
        shown.append(("display", bundle["text/html"]))
        return _Handle(shown)

    display.display = show
    ipython.display = display
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    return shown


def test_notebook_detection_asks_the_kernel_shell(monkeypatch):
    from ddr.progress import in_notebook

    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert not in_notebook()  # IPython never imported: a script, a worker
    fake_kernel(monkeypatch, "TerminalInteractiveShell")
    assert not in_notebook()  # terminal IPython: the lines are the progress
    fake_kernel(monkeypatch, "ZMQInteractiveShell")
    assert in_notebook()
    # a subclass (an in-process kernel's shell, Colab's): still a kernel
    kernel_shell = type(sys.modules["IPython"].get_ipython())
    sub = type("InProcessInteractiveShell", (kernel_shell,), {})()
    monkeypatch.setattr(sys.modules["IPython"], "get_ipython", lambda: sub)
    assert in_notebook()


def test_a_notebook_gets_one_bar_per_job_updated_at_each_pass(monkeypatch, wide):
    from ddr.progress import set_notebook_progress

    shown = fake_kernel(monkeypatch, "ZMQInteractiveShell")
    with dask.config.set(scheduler="sync"):
        ddr.PCA(n_components=4, svd_solver="randomized", iterated_power=3).fit(wide)
    kinds = [k for k, _ in shown]
    assert kinds == ["display", "update", "update", "update", "update"]  # one bar
    values = [re.search(r"<progress( value=\"\d+\" max=\"\d+\")?", h).group(0) for _, h in shown]
    assert values == [f'<progress value="{i}" max="4"' for i in range(4)] + [
        '<progress value="1" max="1"'
    ]
    assert "pass 2 of 4" in shown[1][1] and "done" in shown[-1][1]
    assert "PCA (randomized solver): pass 4 of 4" in shown[-1][1]
    # EM: the total is not known, the bar is indeterminate until it converges
    shown.clear()
    ddr.PPCA(n_components=2, init="random", max_iter=3).fit(wide.compute()[:, :6])
    assert shown and "<progress style" in shown[1][1]
    shown.clear()
    set_notebook_progress(False)
    try:
        ddr.PCA(n_components=4, svd_solver="randomized").fit(wide)
    finally:
        set_notebook_progress(True)
    assert shown == []


def test_a_broken_display_never_fails_the_fit(monkeypatch, wide):
    shown = fake_kernel(monkeypatch, "ZMQInteractiveShell")

    def broken(*args, **kwargs):
        raise RuntimeError("no frontend")

    monkeypatch.setattr(sys.modules["IPython.display"], "display", broken)
    ddr.PCA(n_components=4, svd_solver="randomized").fit(wide)
    assert shown == []


KERNEL_RUN = """
from ipykernel.inprocess.manager import InProcessKernelManager
km = InProcessKernelManager()
km.start_kernel()
kc = km.client()
kc.start_channels()
kc.execute(
    "import ddr, dask.array as da\\n"
    "ddr.PCA(3, svd_solver='randomized').fit(da.random.random((400, 50), chunks=100))"
)
for m in kc.iopub_channel.get_msgs():
    if m["msg_type"] in ("display_data", "update_display_data"):
        print(m["msg_type"], m["content"]["data"]["text/html"][:130].split("<progress")[1])
"""


def test_a_real_kernel_shows_the_bar(tmp_path):
    """A real (in-process) ipykernel, in its own process: the cell's output gets the bar
    and its updates as display messages."""
    import subprocess

    pytest.importorskip("ipykernel.inprocess")
    done = subprocess.run(
        [sys.executable, "-c", KERNEL_RUN], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith('display_data  value="0" max="4"'), done.stdout
    assert [ln.split()[0] for ln in lines[1:]] == ["update_display_data"] * 4
    assert lines[-1].startswith('update_display_data  value="1" max="1"')
