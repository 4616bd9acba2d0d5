"""Quadratic discriminant analysis from one pass of full class moments."""

from __future__ import annotations

from numbers import Real
from typing import Any, ClassVar

import numpy as np
from scipy import linalg
from sklearn.utils._param_validation import Interval, StrOptions

from ddr.base import FEATURE, SAMPLE_WEIGHT_CHECKS
from ddr.discriminant_analysis._base import SHARED_CONSTRAINTS, DiscriminantBase, flip_columns
from ddr.generative.classifier import check_priors, class_log_prior
from ddr.tags import DDRTags

__all__ = ["QuadraticDiscriminantAnalysis", "qda_jll"]


def qda_jll(X: np.ndarray, means: np.ndarray, W: np.ndarray, const: np.ndarray) -> np.ndarray:
    """Joint log-likelihood of a block: ``const_k - 0.5 ||(x - mu_k) W_k||^2`` per class.

    ``W_k = R_k diag(S_k)^(-1/2)`` whitens class ``k``; one (n_block x d x d) GEMM per class.
    """
    n, d = X.shape
    out = np.empty((n, const.shape[0]))
    # rows a few thousand at a time: centring per class then stays in cache (centring before
    # the product keeps offset data exact; a whole-block temporary per class cost 4x more)
    step = max(1, 2**18 // max(d, 1))
    buf = np.empty((min(step, n), d))
    for start in range(0, n, step):
        xs = X[start : start + step]
        c = buf[: xs.shape[0]]
        for k in range(const.shape[0]):
            np.copyto(c, xs)
            c -= means[k]
            Z = c @ W[k]
            out[start : start + xs.shape[0], k] = const[k] - 0.5 * np.einsum("ij,ij->i", Z, Z)
    return out


class QuadraticDiscriminantAnalysis(DiscriminantBase):
    """QDA: one full-covariance Gaussian per class, fitted in one pass.

    The fit is one pass of :class:`ddr.stats.ClassMoments` (full covariances, Chan merge);
    each class covariance is then eigendecomposed on the client (d x d). This equals
    scikit-learn's SVD of the centred class data: ``scalings_`` are the eigenvalues of the
    (ddof=0) class covariance, ``rotations_`` its eigenvectors.

    Parameters
    ----------
    solver : {"svd", "eigen"}, default="svd"
        "svd": scikit-learn's default, ``reg_param`` regularises the scalings as
        ``(1 - reg_param) * S + reg_param``. "eigen": the (optionally shrunk) covariance.
    shrinkage : None, "auto" or float in [0, 1], default=None
        Only with ``solver="eigen"``: shrink each class covariance towards a scaled identity;
        "auto" uses Ledoit-Wolf (computed from fourth cross-moments in the same pass).
    priors : array-like of shape (n_classes,), optional
        Given priors (used as given, like scikit-learn). Default: class frequencies.
    reg_param : float in [0, 1], default=0.0
        Only with ``solver="svd"``.
    store_covariance : bool, default=False
        Also store the class covariances in ``covariance_``.
    tol : float, default=1e-4
        A scaling below ``tol`` makes a class covariance singular; the fit then raises a
        ``numpy.linalg.LinAlgError`` (a ``ValueError``) suggesting ``reg_param``/``shrinkage``.

    Attributes
    ----------
    classes_, class_count_, priors_ : ndarray of shape (n_classes,)
    means_ : ndarray of shape (n_classes, n_features)
    scalings_ : list of ndarray of shape (n_features,)
        Eigenvalues of each (regularised) class covariance, descending.
    rotations_ : list of ndarray of shape (n_features, n_features)
        Their eigenvectors (columns; largest entry positive).
    covariance_ : list of ndarray of shape (n_features, n_features)
        With ``store_covariance=True``.
    class_moments_ : ddr.stats.ClassMoments

    Notes
    -----
    Passes: ``fit`` reads the data once; ``predict`` once, one GEMM per class and block.
    Unlike scikit-learn's SVD solver, a class with no more samples than features is accepted
    when ``reg_param > 0`` makes its covariance non-singular.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "solver": [StrOptions({"svd", "eigen"})],
        "reg_param": [Interval(Real, 0, 1, closed="both")],
        **SHARED_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        solver: str = "svd",
        shrinkage: Any = None,
        priors: Any = None,
        reg_param: float = 0.0,
        store_covariance: bool = False,
        tol: float = 1.0e-4,
    ) -> None:
        self.solver = solver
        self.shrinkage = shrinkage
        self.priors = priors
        self.reg_param = reg_param
        self.store_covariance = store_covariance
        self.tol = tol

    def __ddr_tags__(self) -> DDRTags:
        tags = super().__ddr_tags__()
        tags.fit.solve_params = frozenset(
            {"solver", "reg_param", "priors", "store_covariance", "tol"}
        )
        tags.xarray_dims = {
            "means_": ("class", FEATURE),
            "priors_": ("class",),
            "class_count_": ("class",),
        }
        if not self.reg_param:
            why = (
                "the checks' rows give a class collinear rows: a singular class "
                "covariance, which QDA refuses at reg_param=0 (tests/test_sample_weight.py "
                "checks the weights on classes of full rank)"
            )
            tags.checks.expected_failed_checks = dict.fromkeys(SAMPLE_WEIGHT_CHECKS, why)
        return tags

    def _priors(self) -> np.ndarray:
        return self.priors_

    def _update(self) -> None:
        cm = self.class_moments_
        counts = cm.counts
        d = cm.n_features
        self.class_count_ = counts.copy()
        if self.priors is None:
            self.priors_ = counts / counts.sum()
        else:
            self.priors_ = check_priors(self.priors, len(counts), renormalise="none")
        means, scalings, rotations, covs = [], [], [], []
        for k, c in enumerate(cm.classes):
            m = cm.moments[k]
            if counts[k] <= 0:  # declared, never seen: placeholder, log prior -inf
                means.append(np.zeros(d))
                scalings.append(np.ones(d))
                rotations.append(np.eye(d))
                covs.append(np.eye(d))
                continue
            if m.count <= 1:
                raise ValueError(f"y has only 1 sample in class {c}, covariance is ill defined.")
            means.append(m.mean)
            if self.solver == "svd":
                cov = m.scatter / m.count
            else:
                cov = self._class_covariance(k, self.shrinkage)
            evals, evecs = linalg.eigh(cov)
            order = np.argsort(evals)[::-1]
            evals, evecs = np.maximum(evals[order], 0.0), flip_columns(evecs[:, order])
            if self.solver == "svd":
                evals = (1.0 - self.reg_param) * evals + self.reg_param
            rank = int(np.sum(evals > self.tol))
            if rank < d:
                hint = (
                    "increase reg_param (e.g. reg_param=0.01) to regularise it"
                    if self.solver == "svd"
                    else "increase shrinkage (e.g. shrinkage='auto') to regularise it"
                )
                raise np.linalg.LinAlgError(
                    f"The covariance matrix of class {c} is not full rank: {rank} of its "
                    f"{d} scalings exceed tol={self.tol:g} (class {c} has {m.count:g} samples); "
                    f"{hint}, or remove constant / collinear features."
                )
            scalings.append(evals)
            rotations.append(evecs)
            covs.append((evecs * evals) @ evecs.T)
        self.means_ = np.asarray(means)
        self.scalings_ = scalings
        self.rotations_ = rotations
        if self.store_covariance:
            self.covariance_ = covs
        elif hasattr(self, "covariance_"):
            del self.covariance_

    def _jll(self) -> tuple[Any, tuple]:
        W = np.stack(
            [R * s ** (-0.5) for R, s in zip(self.rotations_, self.scalings_, strict=True)]
        )
        u = np.array([np.sum(np.log(s)) for s in self.scalings_])
        const = class_log_prior(self.priors_) - 0.5 * u
        return qda_jll, (self.means_, W, const)
