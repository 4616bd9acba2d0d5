"""How a run counts what it reads: the chunk bytes read from each stored input, in every
process, once per task (:mod:`ddr.pipeline._counting`), and the passes they make.

Mixed into the runner (:class:`ddr.pipeline.runner._Runner`), which gives it the plan and
the distributed client (None under dask's local schedulers).
"""

from __future__ import annotations

import logging
from typing import Any

from ddr.pipeline._counting import count_key

__all__ = ["ReadCounting"]

logger = logging.getLogger("ddr.pipeline.runner")


class ReadCounting:
    """The runner's counters of bytes read (uses its ``plan`` and ``client``)."""

    plan: Any
    client: Any
    _tally: bool
    _again: dict[str, int]
    _last_counts: dict[str, int]

    def _install_tally(self) -> bool:
        """Count the bytes read by workers on the scheduler, once per task
        (:class:`ddr.pipeline._counting.ReadTally`); False where it cannot be installed."""
        from ddr.pipeline._counting import install_tally

        if self.client is None:
            return False
        try:
            self.client.run_on_scheduler(install_tally)
        except Exception as exc:  # no ddr on the scheduler, or no pickled code allowed
            logger.debug("reads counted per worker process (no tally on the scheduler): %s", exc)
            return False
        return True

    def _counts(self) -> dict[str, int]:
        """Chunk bytes read so far, by count key: this process's and, with a distributed
        client, the scheduler's tally of the workers' (each task once) or, without a tally,
        every worker's own counters. The bytes tasks read again after lost workers are kept
        in ``self._again``."""
        from ddr.pipeline._counting import local_counts, read_counts, tally_totals

        if self.client is None:
            return read_counts()
        total = local_counts() if self._tally else read_counts()
        try:
            if self._tally:
                counted, self._again = self.client.run_on_scheduler(tally_totals)
                parts = [counted]
            else:
                parts = list(self.client.run(read_counts).values())
        except Exception:  # the scheduler is gone: what it said last
            return dict(self._last_counts)
        for counts in parts:
            for k, v in counts.items():
                total[k] = total.get(k, 0) + v
        self._last_counts = total
        return total

    def _bytes(self, before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
        """Measured chunk bytes read between two counter snapshots, per stored array."""
        out = {}
        for label, names in self.plan.stored_arrays().items():
            inp = self.plan.inputs[names[0]]
            if inp.store_root is None or not inp.stored_bytes:
                continue
            key = count_key(inp.store_root, inp.spec.array or "")
            # a CSR group's reads are those of its arrays (data, indices, indptr)
            inside = key if key.endswith("::") else key + "/"
            delta = sum(
                after[k] - before.get(k, 0) for k in after if k == key or k.startswith(inside)
            )
            if delta:
                out[label] = delta
        return out

    def _passes(self, before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
        """Measured passes between two counter snapshots, per stored array (bytes read over
        its stored bytes)."""
        out = {}
        for label, delta in self._bytes(before, after).items():
            inp = self.plan.inputs[self.plan.stored_arrays()[label][0]]
            out[label] = round(delta / inp.stored_bytes, 3)
        return out
