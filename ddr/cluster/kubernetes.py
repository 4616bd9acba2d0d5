"""``kind: kubernetes``: the dask-kubernetes operator's ``KubeCluster``.

The config's ``dask:`` block is added to the pods' environment (``env``) as ``DASK_*``
variables, so the scheduler and worker pods run with it; variables the block sets itself
win. No pod is inspected while waiting: ddr reports how many workers joined.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from ddr.cluster.backend import ClusterError, call_text, params_of
from ddr.cluster.deployed import Deployed
from ddr.cluster.kinds import register_backend
from ddr.cluster.worker_env import worker_environment

__all__ = ["Kubernetes"]

# keyword names of dask-kubernetes' operator KubeCluster, to validate configs without it
_KEYWORDS = {
    "name", "namespace", "image", "n_workers", "resources", "env", "worker_command",
    "port_forward_cluster_ip", "create_mode", "shutdown_on_close", "idle_timeout",
    "resource_timeout", "scheduler_service_type", "custom_cluster_spec",
    "scheduler_forward_port", "jupyter", "quiet",
}  # fmt: skip


@register_backend
class Kubernetes(Deployed):
    """``dask_kubernetes.operator.KubeCluster(**block)``."""

    kind = "kubernetes"
    target = "dask_kubernetes.operator.KubeCluster"
    example: ClassVar[dict[str, Any]] = {
        "name": "ddr",
        "image": "ghcr.io/dask/dask:latest",
        "n_workers": 2,
    }
    needs_block = True
    waits = True

    @classmethod
    def keywords(cls) -> set[str]:
        try:
            from dask_kubernetes.operator import KubeCluster
        except ImportError:
            return set(_KEYWORDS)
        return params_of(KubeCluster.__init__) - {"loop", "asynchronous"}

    def cluster_kwargs(self) -> dict[str, Any]:
        """The block with the ``dask:`` block's variables added to ``env``."""
        kwargs = dict(self.kwargs)
        extra = worker_environment(self.config.dask)
        env = kwargs.get("env") or {}
        if isinstance(env, list):  # [{name: ..., value: ...}, ...]
            have = {e.get("name") for e in env if isinstance(e, dict)}
            kwargs["env"] = env + [
                {"name": k, "value": v} for k, v in extra.items() if k not in have
            ]
        else:
            kwargs["env"] = {**extra, **env}
        return kwargs

    def make_cluster(self) -> Any:
        try:
            from dask_kubernetes.operator import KubeCluster
        except ImportError:
            raise ClusterError(
                "kind kubernetes needs dask-kubernetes: pip install 'ddr-stats[k8s]'"
            ) from None
        return KubeCluster(**self.cluster_kwargs())

    def dry_run(self) -> str:
        kwargs = self.cluster_kwargs()
        try:
            from dask_kubernetes.operator import make_cluster_spec
        except ImportError:
            return (
                "# dask-kubernetes is not installed (pip install 'ddr-stats[k8s]'); it would be "
                f"called as\n{call_text(self.target, kwargs)}"
            )
        spec_kwargs = {k: v for k, v in kwargs.items() if k in params_of(make_cluster_spec)}
        return json.dumps(make_cluster_spec(**spec_kwargs), indent=2)
