"""What every cluster config says besides its kind's keyword block.

:class:`ClusterSettings` is the validated config as the backends read it (``scale``,
``adapt``, the ``dask:`` block, the wait, and the kind's block as
:attr:`~ClusterSettings.backend_kwargs`). :class:`ddr.cluster.config.ClusterConfig`, the model
a file is validated with, subclasses it with the registered kinds and one keyword block per
backend; this module knows no backend, so every backend can import it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ddr.config.validation import Duration, Int, PositiveInt, seconds

__all__ = ["Adapt", "ClusterSettings", "Scale"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Scale(_Strict):
    """``cluster.scale(...)``: a number of workers or of batch jobs."""

    n: PositiveInt | None = Field(None, description="Workers.")
    jobs: PositiveInt | None = Field(None, description="Batch jobs (SLURM/PBS).")


class Adapt(_Strict):
    """``cluster.adapt(...)``: adaptive scaling between bounds."""

    minimum: Int | None = None
    maximum: Int | None = None
    minimum_jobs: Int | None = None
    maximum_jobs: Int | None = None


class ClusterSettings(_Strict):
    """A validated cluster config, as a backend reads it (``kind`` is one of the registered
    kinds once validated by :class:`~ddr.cluster.config.ClusterConfig`)."""

    ddr_cluster: Literal[1] = Field(alias="ddr-cluster", description="Schema version (1).")
    kind: str
    description: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    scale: Scale | None = None
    adapt: Adapt | None = None
    wait_for_workers: Int = Field(
        0,
        ge=0,
        description="Wait until this many workers joined before running (batch, Kubernetes "
        "and existing schedulers: at least 1).",
    )
    wait_timeout: Duration = Field(
        "10m",
        description="Give up (exit 1, nothing written) when the workers have not joined by "
        "then: seconds or a dask time such as 30s, 10m, 2h.",
    )
    dask: dict[str, Any] = Field(
        default_factory=dict,
        description="dask.config keys (dotted) set in the client and exported to every worker.",
    )

    @property
    def backend_kwargs(self) -> dict[str, Any]:
        """The keyword block of this config's kind (empty for threads/sync)."""
        return dict(getattr(self, self.kind, None) or {})

    @property
    def wait_seconds(self) -> float:
        return seconds(self.wait_timeout)
