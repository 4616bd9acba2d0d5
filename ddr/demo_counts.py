"""A corpus of word counts drawn from a known topic model, written as sparse CSR in Zarr.

The model (probabilistic latent semantic analysis / LDA's generative story): ``K`` topics,
each a distribution over the ``V`` words of the vocabulary, ``beta_k ~ Dirichlet(eta)``
(small ``eta``: each topic puts its mass on a few words of its own); each document ``i``
has a topic mixture ``theta_i ~ Dirichlet(alpha)`` and a length ``L_i = 1 + Poisson(mean
- 1)``; each of its ``L_i`` tokens draws a topic from ``theta_i`` and a word from that topic.
The counts ``X[i, j]`` (how often word ``j`` occurs in document ``i``) are stored as a CSR
group ``X`` in AnnData's layout, the vocabulary as AnnData's ``var`` index, and the truth
beside them: ``true_topics`` (K x V, ``P(word | topic)``, rows sum to 1), ``true_mixtures``
(n x K, ``P(topic | document)``) and ``doc_length`` (n).

As for :mod:`ddr.demo`, ``seed`` draws the population (the topics) and ``sample_seed`` the
documents; each chunk of documents has its own random streams, so the corpus is
reproducible and generated a chunk at a time (in parallel under the active dask scheduler),
never whole in memory: the CSR values are appended to Zarr as the chunks arrive.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
import scipy.sparse
import xarray as xr
import zarr

from ddr.io.csr import CsrWriter, write_feature_names
from ddr.io.outputs import IfExists, write_zarr

__all__ = ["CountsSpec", "counts_truth", "write_counts_data"]

logger = logging.getLogger("ddr.demo_counts")

#: chunks of documents generated at once (each holds its tokens and their CSR in memory)
_PARALLEL_CHUNKS = 4


@dataclass(frozen=True)
class CountsSpec:
    """Parameters of a synthetic corpus (see the module docstring for the model).

    Parameters
    ----------
    n_samples : int
        Documents (rows).
    n_features : int
        Words in the vocabulary (columns).
    n_topics : int
        Topics ``K``.
    doc_length : float
        Mean tokens per document (at least 1).
    topic_concentration : float
        ``eta``, the Dirichlet parameter of each topic's word distribution.
    mixture_concentration : float
        ``alpha``, the Dirichlet parameter of each document's topic mixture.
    chunk_rows : int, optional
        Documents per generated chunk (default: the documents in 8 chunks, each of at most
        about 4 Mi tokens).
    dtype : {"float32", "float64", "int32", "int64"}
        Stored dtype of the counts.
    seed, sample_seed : int
        Seeds of the topics and of the documents.
    """

    n_samples: int = 20_000
    n_features: int = 5_000
    n_topics: int = 10
    doc_length: float = 100.0
    topic_concentration: float = 0.05
    mixture_concentration: float = 0.2
    chunk_rows: int | None = None
    dtype: str = "float32"
    seed: int = 0
    sample_seed: int = 0

    def __post_init__(self) -> None:
        if self.chunk_rows is None:
            by_count = -(-max(self.n_samples, 1) // 8)
            by_tokens = max(1, int(2**22 // max(self.doc_length, 1.0)))
            object.__setattr__(self, "chunk_rows", max(1, min(by_count, by_tokens)))
        checks = [
            (self.n_samples >= 1, f"n_samples must be >= 1; got {self.n_samples}"),
            (self.n_features >= 2, f"n_features must be >= 2; got {self.n_features}"),
            (
                1 <= self.n_topics <= self.n_features,
                f"n_topics must be in [1, n_features={self.n_features}]; got {self.n_topics}",
            ),
            (self.doc_length >= 1, f"doc_length must be >= 1; got {self.doc_length}"),
            (
                self.topic_concentration > 0 and self.mixture_concentration > 0,
                "topic_concentration and mixture_concentration must be positive",
            ),
            (self.chunk_rows >= 1, f"chunk_rows must be >= 1; got {self.chunk_rows}"),
            (
                self.dtype in ("float32", "float64", "int32", "int64"),
                f"dtype must be float32, float64, int32 or int64; got {self.dtype!r}",
            ),
            (self.seed >= 0 and self.sample_seed >= 0, "seeds must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def describe(self, seconds: float) -> str:
        """What ``ddr demo-data --kind counts`` says it wrote, in ``seconds``.

        Parameters
        ----------
        seconds : float
            How long writing took.

        Returns
        -------
        str
            The corpus's size and layout, what else is stored, the seeds.
        """
        return (
            f"X {self.n_samples} documents x {self.n_features} words, sparse counts "
            f"({self.dtype}, CSR group in AnnData's layout), {self.n_topics} topics, about "
            f"{self.doc_length:g} tokens a document; the vocabulary (var/_index) and the truth "
            f"(true_topics, true_mixtures, doc_length) (topic seed {self.seed}, sample seed "
            f"{self.sample_seed}; {seconds:.1f} s)"
        )


def counts_truth(spec: CountsSpec) -> np.ndarray:
    """The topics, ``P(word | topic)``: shape (n_topics, n_features), rows summing to 1."""
    rng = np.random.default_rng([spec.seed, 2**31 - 3])
    topics = rng.dirichlet(np.full(spec.n_features, spec.topic_concentration), spec.n_topics)
    # Dirichlet draws with a small concentration can underflow to exact zeros: keep every
    # word possible (and the rows normalised)
    topics = np.maximum(topics, 1e-12)
    return topics / topics.sum(axis=1, keepdims=True)


def _doc_rng(spec: CountsSpec, index: int, stream: int) -> np.random.Generator:
    """The random stream of chunk ``index`` (0: mixtures and lengths, 1: tokens)."""
    return np.random.default_rng([spec.seed, spec.sample_seed, index, stream])


def _mixtures_and_lengths(spec: CountsSpec, index: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = _doc_rng(spec, index, 0)
    theta = rng.dirichlet(np.full(spec.n_topics, spec.mixture_concentration), n)
    length = 1 + rng.poisson(spec.doc_length - 1, n)
    return theta, length


def _mixture_block(spec: CountsSpec, block_info: Any = None) -> np.ndarray:
    info = block_info[None]
    lo, hi = info["array-location"][0]
    return _mixtures_and_lengths(spec, info["chunk-location"][0], hi - lo)[0]


def _length_block(spec: CountsSpec, block_info: Any = None) -> np.ndarray:
    info = block_info[None]
    lo, hi = info["array-location"][0]
    return _mixtures_and_lengths(spec, info["chunk-location"][0], hi - lo)[1]


def counts_block(spec: CountsSpec, cdf: np.ndarray, index: int, n: int) -> scipy.sparse.csr_matrix:
    """The counts of chunk ``index`` (``n`` documents) as a CSR matrix with sorted columns.

    ``cdf`` is the cumulated topics plus the topic's index (``k + cumsum(beta_k)``, one
    increasing array of length K x V), so one ``searchsorted`` draws every token's word by
    inverse transform sampling.
    """
    theta, length = _mixtures_and_lengths(spec, index, n)
    rng = _doc_rng(spec, index, 1)
    K, V = spec.n_topics, spec.n_features
    per_topic = rng.multinomial(length, theta)  # (n, K) tokens of each topic
    runs = per_topic.ravel()
    doc = np.repeat(np.repeat(np.arange(n, dtype=np.int64), K), runs)
    topic = np.repeat(np.tile(np.arange(K, dtype=np.int64), n), runs)
    u = rng.random(doc.shape[0])
    word = np.searchsorted(cdf, topic + u, side="right") - topic * V
    np.clip(word, 0, V - 1, out=word)
    keys, counts = np.unique(doc * V + word, return_counts=True)
    rows = keys // V
    indptr = np.searchsorted(rows, np.arange(n + 1))
    return scipy.sparse.csr_matrix(
        (counts.astype(spec.dtype), (keys % V).astype(np.int32), indptr), shape=(n, V)
    )


def write_counts_data(
    path: str | os.PathLike,
    spec: CountsSpec,
    *,
    if_exists: IfExists = "error",
    storage_options: Mapping[str, Any] | None = None,
) -> bool:
    """Generate ``spec``'s corpus and write it to a Zarr group at ``path`` (a path or URL).

    The truth arrays are written first, then the CSR group ``X`` chunk by chunk and the
    vocabulary (``var/_index``); the group is marked complete last (:mod:`ddr.io.outputs`),
    so an interrupted run leaves a store that says it is incomplete. Returns False when a
    complete group of the same spec was kept (``if_exists="skip-if-complete"``).
    """
    topics = counts_truth(spec)
    rows = da.core.normalize_chunks((spec.chunk_rows,), (spec.n_samples,))[0]
    token = da.core.tokenize(asdict(spec))
    mixtures = da.map_blocks(
        _mixture_block, spec, chunks=(rows, (spec.n_topics,)), dtype=np.float64,
        name=f"ddr-counts-theta-{token}", meta=np.empty((0, 0)),
    )  # fmt: skip
    lengths = da.map_blocks(
        _length_block, spec, chunks=(rows,), dtype=np.int64,
        name=f"ddr-counts-length-{token}", meta=np.empty((0,), np.int64),
    )  # fmt: skip
    ds = xr.Dataset(
        {
            "true_topics": (("topic", "feature"), topics),
            "true_mixtures": (("sample", "topic"), mixtures),
            "doc_length": (("sample",), lengths),
        },
        attrs={
            "title": "ddr synthetic corpus: word counts drawn from a topic model",
            "ddr:demo": {"kind": "counts", **asdict(spec)},
        },
    )
    pending = write_zarr(
        ds, path, if_exists=if_exists, compute=False, fingerprint=f"counts-{token}",
        storage_options=storage_options,
    )  # fmt: skip
    if pending.skipped:
        return False
    dask.compute(pending.delayed)
    cdf = (np.cumsum(topics, axis=1) + np.arange(spec.n_topics)[:, None]).ravel()
    loc = pending.path
    with loc.errors("write"):
        root = zarr.open_group(loc.store(read_only=False), mode="r+")
        writer = CsrWriter(root, "X", spec.n_features, spec.dtype)
        starts = np.concatenate([[0], np.cumsum(rows)[:-1]])
        for first in range(0, len(rows), _PARALLEL_CHUNKS):
            todo = range(first, min(first + _PARALLEL_CHUNKS, len(rows)))
            blocks = dask.compute(
                *[dask.delayed(counts_block)(spec, cdf, i, rows[i]) for i in todo]
            )
            for block in blocks:
                writer.append(block)
            logger.debug(
                "counts: documents %d..%d written",
                starts[todo[0]],
                starts[todo[-1]] + rows[todo[-1]],
            )
        writer.close()
        write_feature_names(
            root, [f"w{j:0{len(str(spec.n_features - 1))}d}" for j in range(spec.n_features)]
        )
    pending.finalize()
    return True
