"""Probabilistic latent semantic analysis (Hofmann 1999) of word counts (or any non-negative
weights, such as tf-idf) larger than memory.

The start is NNDSVD-style topics from a randomized SVD of the weights (``nndsvda_topics``,
a few passes) or random ones. The fit is :func:`ddr.em.fit_em` with the E-step statistic
:class:`ddr.stats.PLSASums`:
Hofmann's EM, one pass per iteration. Each block takes its documents' mixtures ``P(z | d)``
from the previous pass, sums the expected topic-word counts and gives the mixtures' next
values, which stay beside the block (``ddr.stats.compute_with_rows``: n_documents x K
floats, on the workers for dask input); the M-step on the client normalises the sums into
the new topics ``P(w | z)``. See ``ddr.stats.plsa_sums`` for the formulas.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ddr.base import FEATURE, fit_context, map_rows
from ddr.em import EMState, fit_em
from ddr.families import Blockwise, ComponentTransformer, FitThenTransform
from ddr.linalg.randomized import randomized_scatter_eigh
from ddr.stats._input import Rows
from ddr.stats.plsa_sums import PLSASums, check_weights, fold_in
from ddr.tags import DDRTags, get_ddr_tags, rank_limit, unknown_passes

__all__ = ["PLSA"]

logger = logging.getLogger(__name__)

#: power iterations of the SVD behind ``init="nndsvda"`` (``+ 1`` passes): the initial topics
#: need the leading singular vectors' supports, not their digits (2 and 5 iterations gave the
#: same EM to the same optimum on the demo corpora)
_SVD_POWER_ITER = 2
#: oversampling of that SVD's test matrix (as TruncatedSVD's default)
_SVD_OVERSAMPLES = 10
#: each initial topic's probabilities are floored at this fraction of the uniform ``1 / V``:
#: EM never revives a word at probability 0 (iterations to the optimum on the demo corpora
#: within 15 % for floors from 0.1 to 1)
_INIT_FLOOR = 0.5


def nndsvda_topics(eigenvectors: np.ndarray, k: int) -> np.ndarray:
    """Initial topics from the right singular vectors of the weights (NNDSVD-style).

    Boutsidis and Gallopoulos' NNDSVD, as scikit-learn's ``NMF(init="nndsvda")`` for the
    ``H`` factor: the first topic is ``|v_1|``, each further one the positive or the
    negative part of ``v_j``, whichever is larger. NNDSVD weighs the parts by the norms of
    the left vectors' parts too, which would cost a pass more; the right vectors alone led
    EM to the same optimum on the demo corpora. Each topic is normalised, floored at
    ``_INIT_FLOOR / V`` (where scikit-learn fills zeros with the mean of X, which would make
    the start depend on the scale of the weights) and normalised again.

    Parameters
    ----------
    eigenvectors : ndarray of shape (n_features, >= k)
        The leading eigenvectors of ``X^T X`` (right singular vectors of X), by decreasing
        eigenvalue; their signs do not matter.
    k : int
        Topics.

    Returns
    -------
    ndarray of shape (k, n_features)
        ``P(word | topic)``, rows summing to 1, every entry positive.
    """
    v = np.asarray(eigenvectors[:, :k], dtype=np.float64).T
    pos, neg = np.maximum(v, 0.0), np.maximum(-v, 0.0)
    larger = np.linalg.norm(pos, axis=1) >= np.linalg.norm(neg, axis=1)
    parts = np.where(larger[:, None], pos, neg)
    parts[0] = np.abs(v[0])
    total = parts.sum(axis=1, keepdims=True)
    topics = np.divide(parts, total, out=np.zeros_like(parts), where=total > 0)
    topics = np.maximum(topics, _INIT_FLOOR / v.shape[1])
    return topics / topics.sum(axis=1, keepdims=True)


def _transform_block(X: Any, topics: np.ndarray) -> np.ndarray:
    """``P(z | d)`` of a block of documents (dense or CSR) by folding in, shape (n, K)."""
    return fold_in(check_weights(X, "PLSA (input X)"), topics)[0]


def _loglik_block(X: Any, topics: np.ndarray) -> np.ndarray:
    """``log P(document | its folded-in mixture)`` per document, shape (n,)."""
    return fold_in(check_weights(X, "PLSA (input X)"), topics)[2]


class _EMProblem:
    """pLSA for :func:`ddr.em.fit_em`: the parameters are the topics (K x V), which the
    engine puts into a dask graph once, not into every block's task
    (:func:`ddr.stats.engine.shipped`)."""

    def statistic(self, topics: np.ndarray) -> Any:
        return PLSASums.spec(topics=topics)

    def m_step(self, sums: PLSASums, topics: np.ndarray) -> np.ndarray:
        if sums.n_tokens <= 0:
            raise ValueError(
                "PLSA: X holds no counts (every document is empty); there is nothing to fit"
            )
        mass = sums.topic_word.sum(axis=1, keepdims=True)
        # a topic no token was assigned to keeps its words (it cannot be estimated)
        return np.where(mass > 0, sums.topic_word / np.where(mass > 0, mass, 1.0), topics)


class PLSA(FitThenTransform, ComponentTransformer, BaseEstimator):
    """Probabilistic latent semantic analysis: topics of word counts, by EM, out of core.

    The model: ``P(w | d) = sum_z P(z | d) P(w | z)`` for the count (or any non-negative
    weight, such as tf-idf) of word ``w`` in document ``d`` (Hofmann 1999; seed 004): EM
    maximises ``sum n(d, w) log P(w | d)``, the model of scikit-learn's
    ``NMF(beta_loss="kullback-leibler")`` and ``LatentDirichletAllocation`` without its
    priors. Each EM iteration is one pass over the documents, of cost O(stored values x
    K); the mixtures ``P(z | d)`` of the training
    documents are kept between passes (n_samples x K floats: on the workers for dask input)
    and dropped after the fit (see ``ddr.stats.plsa_sums``).

    Parameters
    ----------
    n_components : int, default=10
        Topics ``K``, at most ``min(n_samples, n_features)``.
    tol : float, default=1e-6
        Stop when the log-likelihood rises by less than ``tol`` times its magnitude.
    max_iter : int, default=100
        EM iterations (passes) per initialisation.
    init : {"nndsvda", "random"}, default="nndsvda"
        The initial topics (the mixtures start uniform). ``"nndsvda"``: from the leading
        right singular vectors of X (``ddr.decomposition.plsa.nndsvda_topics``; a
        randomized SVD of ``_SVD_POWER_ITER + 1 = 3`` passes, fewer for narrow X), as
        scikit-learn's NMF starts by default; on the demo corpora EM then reached the best
        optimum of ten random starts, in 3 to 10 times fewer iterations than random starts
        took, some of which stopped at a poorer optimum. ``"random"``: each topic a draw
        from a flat Dirichlet over the words (no pass).
    n_init : int, default=1
        Initialisations: the first is ``init``, any further ones random; the fit with the
        highest log-likelihood is kept.
    random_state : int, RandomState or None, default=None
        Seeds the SVD's test matrix and the random initial topics.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        ``P(word | topic)``, rows summing to 1 (0 for words no document holds).
    loglike_ : ndarray of shape (n_iter,)
        Log-likelihood ``sum_d sum_w n(d, w) log P(w | d)`` at the mixtures and topics each
        iteration of the kept fit started from: never decreasing.
    n_iter_ : int
        Iterations (passes) of the kept fit.
    n_passes_ : int
        Passes over X in the fit: the SVD's for ``init="nndsvda"`` and every
        initialisation's iterations.
    converged_ : bool
    n_components_ : int
    n_features_in_ : int

    Notes
    -----
    Weights must be non-negative (a ValueError otherwise, raised in the pass that reads
    them); whole numbers are not needed. Empty documents contribute nothing and get uniform
    mixtures. Input may
    be numpy, dask or xarray rows, an in-memory scipy.sparse matrix or a dask array of CSR
    blocks (:func:`ddr.io.open_csr`), never densified. ``transform`` gives ``P(topic |
    document)`` by folding in, blockwise and lazy for dask input; words that no topic emits
    (absent from the training counts) are left out of it.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"nndsvda", "random"})],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_components: int = 10,
        *,
        tol: float = 1e-6,
        max_iter: int = 100,
        init: str = "nndsvda",
        n_init: int = 1,
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.tol = tol
        self.max_iter = max_iter
        self.init = init
        self.n_init = n_init
        self.random_state = random_state

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.passes = unknown_passes  # EM, n_init runs until each converges
        tags.fit.statistics = self._widest_pass
        assert tags.transformer is not None
        tags.transformer.component_prefix = "topic "
        tags.transformer.n_components_limit = rank_limit
        tags.loglik_attribute = "loglike_"
        tags.xarray_dims = {"components_": ("component", FEATURE)}
        tags.xarray_units = {"components_": 0}  # P(word | topic)
        tags.checks.params = {"n_components": 2, "random_state": 0}
        return tags

    def _widest_pass(self, n_features: int) -> list[tuple[Any, int]]:
        k = max(1, min(int(self.n_components), n_features))
        topics = np.broadcast_to(0.0, (k, n_features))  # shape only
        return [(PLSASums.spec(topics=topics), n_features)]

    @fit_context
    def fit(self, X: Any, y: Any = None, *, sample_dim: Hashable | None = None) -> PLSA:
        """Fit the topics: ``n_init`` EM runs of at most ``max_iter`` passes each.

        Parameters
        ----------
        X : array-like, scipy.sparse matrix, dask array (dense or of CSR blocks) or
            DataArray, shape (n_samples, n_features)
            Word counts or other non-negative weights.
        y : ignored
        sample_dim : hashable, optional
            The sample dim of a DataArray X.

        Returns
        -------
        self
        """
        rows = self._rows(X, reset=True, sample_dim=sample_dim)
        n, d = rows.shape
        k = self.n_components
        limit = d if np.isnan(n) else min(int(n), d)
        if k > limit:
            what = f"n_features={d}" if np.isnan(n) else f"min(n_samples={n}, n_features={d})"
            raise ValueError(
                f"PLSA: n_components={k} must be at most {what}={limit}: more topics than "
                "documents or words cannot be identified"
            )
        rng = check_random_state(self.random_state)
        best: EMState | None = None
        passes = 0
        for i in range(self.n_init):
            if i == 0 and self.init == "nndsvda":
                svd = randomized_scatter_eigh(
                    rows,
                    min(d, k + _SVD_OVERSAMPLES),
                    n_power_iter=_SVD_POWER_ITER,
                    random_state=rng,
                    label="PLSA (initial topics, randomized SVD)",
                    centre=False,
                )
                start = nndsvda_topics(svd.eigenvectors, k)
                passes += svd.passes
            else:
                start = rng.dirichlet(np.ones(d), size=k)
            state = fit_em(
                rows.data,
                _EMProblem(),
                EMState(start),
                tol=self.tol,
                max_iter=self.max_iter,
                logger=logger,
                what=f"PLSA (EM, init {i + 1}/{self.n_init})",
                owner="PLSA",
                warm_start=False,
                stacklevel=3,
            )
            passes += state.n_iter
            if best is None or state.loglik[-1] > best.loglik[-1]:
                best = state
        assert best is not None  # its mixtures (best.rows) are dropped here
        self.components_ = best.params
        self.loglike_ = np.asarray(best.loglik)
        self.n_iter_ = best.n_iter
        self.converged_ = best.converged
        self.n_passes_ = passes
        self.n_components_ = k
        return self

    #: words per topic in :attr:`top_words_`.
    n_top_words: ClassVar[int] = 10

    @property
    def top_words_(self) -> dict[str, dict[str, float]]:
        """The ``n_top_words`` most probable words of each topic with ``P(word | topic)``.

        By topic (``"topic 1"``, ...), most probable first: the top-words table a pipeline
        writes as JSON. Words are named by the training data's feature coordinate (a CSR
        group's vocabulary), or ``feature_names_in_``, or by column number.
        """
        check_is_fitted(self, "components_")
        names = getattr(self, "feature_coords_", None)
        if names is None:
            names = getattr(self, "feature_names_in_", None)
        if names is None:
            names = np.arange(self.n_features_in_)
        names = np.asarray(names)
        table = {}
        names_of = get_ddr_tags(self).transformer.name  # type: ignore[union-attr]
        for i, row in enumerate(self.components_):
            top = np.argsort(-row, kind="stable")[: self.n_top_words]
            table[names_of(i)] = {str(names[j]): float(row[j]) for j in top}
        return table

    def _projection(self, rows: Rows) -> Blockwise:
        """Each row folded in at the fitted topics: its ``P(topic | document)`` (rows sum to
        1; uniform for empty documents; words no topic emits are left out)."""
        return Blockwise(
            _transform_block, (self.components_,), np.float64, "plsa-transform", check="input",
            units=0,
        )  # fmt: skip

    def score_samples(self, X: Any, *, sample_dim: Hashable | None = None) -> Any:
        """Log-likelihood ``sum_w n(d, w) log P(w | d)`` of each document at its mixture.

        The mixture is the document's folded-in ``P(topic | document)``.

        Parameters
        ----------
        X : array-like, scipy.sparse matrix, dask array or DataArray, shape (n_samples, n_features)
            Counts or other non-negative weights (documents x words).
        sample_dim : hashable, optional
            The sample dim of a DataArray X (default: its first dim).

        Returns
        -------
        loglik : same kind as X, shape (n_samples,)
            One log-likelihood per document.
        """
        rows = self._rows(X, reset=False, sample_dim=sample_dim)
        return map_rows(
            rows,
            _loglik_block,
            n_out=None,
            dtype=np.float64,
            name="plsa-score-samples",
            args=(self.components_,),
            method="PLSA.score_samples",
        )

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        return tags
