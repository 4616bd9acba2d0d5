"""Quadratic discriminant analysis from one pass of full class moments."""

from __future__ import annotations

from numbers import Real
from typing import Any, ClassVar

import numpy as np
from scipy import linalg
from sklearn.utils._param_validation import Interval, StrOptions

from ddr.base import FEATURE, SAMPLE_WEIGHT_CHECKS
from ddr.discriminant_analysis._base import SHARED_CONSTRAINTS, DiscriminantBase, flip_columns
from ddr.generative.classifier import check_priors, class_log_prior, tile_rows
from ddr.tags import DDRTags

__all__ = ["QuadraticDiscriminantAnalysis", "qda_jll"]


#: a class whose mean lies further than this from the training mean, in its own whitened
#: units (class standard deviations), is centred on its own mean: through the training mean,
#: ``(x - shift) W_k - (mu_k - shift) W_k`` would cancel this many times the digits of
#: ``(x - mu_k) W_k`` for the rows near that class (1e3: at most 3 of 16)
_FAR = 1e3


def qda_jll(
    X: np.ndarray,
    shift: np.ndarray,
    W: np.ndarray,
    offset: np.ndarray,
    near: np.ndarray,
    const: np.ndarray,
    far: np.ndarray,
    far_means: np.ndarray,
    far_W: np.ndarray,
) -> np.ndarray:
    """Joint log-likelihood of a block: ``const_k - 0.5 ||(x - mu_k) W_k||^2`` per class.

    ``W_k = R_k diag(S_k)^(-1/2)`` whitens class ``k``. The classes in ``near`` share one
    GEMM: each row is centred once on ``shift`` (the training mean) and multiplied by their
    ``W_k`` side by side (``W``, n_features x n_features * len(near)), less ``offset``
    (their ``(mu_k - shift) W_k`` side by side). The classes in ``far`` (a mean far from
    ``shift`` in their own units, see ``_FAR``) are centred on their own mean,
    ``far_means``, and multiplied by their ``far_W``, one GEMM each.

    The block is taken in tiles of rows (:func:`~ddr.generative.classifier.tile_rows`)
    so that the float64 cast, the centred tile and the products stay in cache.
    """
    n, d = X.shape
    k_near = near.shape[0]
    out = np.empty((n, const.shape[0]))
    step = tile_rows(d * (k_near + 1))
    m = min(step, n)
    c, Z = np.empty((m, d)), np.empty((m, d * k_near))
    cf, zf = (np.empty((m, d)), np.empty((m, d))) if far.size else (c, c)
    for start in range(0, n, step):
        rows = X[start : start + step]
        r = rows.shape[0]
        at = slice(start, start + r)
        if k_near:
            np.copyto(c[:r], rows)  # the cast to float64, into the buffer
            c[:r] -= shift
            np.matmul(c[:r], W, out=Z[:r])
            Z[:r] -= offset
            z = Z[:r].reshape(r, k_near, d)
            out[at, near] = np.einsum("ikj,ikj->ik", z, z)
        for i, k in enumerate(far):
            np.copyto(cf[:r], rows)
            cf[:r] -= far_means[i]
            np.matmul(cf[:r], far_W[i], out=zf[:r])
            out[at, k] = np.einsum("ij,ij->i", zf[:r], zf[:r])
    out *= -0.5
    out += const
    return out


class QuadraticDiscriminantAnalysis(DiscriminantBase):
    """QDA: one full-covariance Gaussian per class, fitted in one pass.

    The fit is one pass of :class:`ddr.stats.ClassMoments` (full covariances, Chan merge);
    each class covariance is then factored on the client (Cholesky, d x d), which is what
    the predictions need. ``scalings_`` and ``rotations_``, the eigenvalues of the (ddof=0)
    class covariance and its eigenvectors (scikit-learn's SVD of the centred class data),
    are computed from the same covariances when first read.

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
        Eigenvalues of each (regularised) class covariance, descending. Computed when first
        read: the fit and the predictions use each covariance's Cholesky factor.
    rotations_ : list of ndarray of shape (n_features, n_features)
        Their eigenvectors (columns; largest entry positive), computed with them.
    covariance_ : list of ndarray of shape (n_features, n_features)
        With ``store_covariance=True``.
    class_moments_ : ddr.stats.ClassMoments

    Notes
    -----
    Passes: ``fit`` reads the data once; ``predict`` once: one GEMM a block against every
    class's whitening side by side (n_features x n_features * n_classes), tile by tile.
    Unlike scikit-learn's SVD solver, a class with no more samples than features is accepted
    when ``reg_param > 0`` makes its covariance non-singular.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "solver": [StrOptions({"svd", "eigen"})],
        "reg_param": [Interval(Real, 0, 1, closed="both")],
        **SHARED_CONSTRAINTS,
    }

    _eigen: tuple[list[np.ndarray], list[np.ndarray]] | None = None

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
        tags.xarray_units = {"means_": 1, "priors_": 0, "class_count_": 0}
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
        means, whiteners, log_dets, covs = [], [], [], []
        for k, c in enumerate(cm.classes):
            m = cm.moments[k]
            if counts[k] <= 0:  # declared, never seen: placeholder, log prior -inf
                means.append(np.zeros(d))
                whiteners.append(np.eye(d))
                log_dets.append(0.0)
                covs.append(np.eye(d))
                continue
            if m.count <= 1:
                raise ValueError(f"y has only 1 sample in class {c}, covariance is ill defined.")
            means.append(m.mean)
            cov = self._regularised_covariance(k)
            whitener, log_det = self._whitening(k, cov)
            whiteners.append(whitener)
            log_dets.append(log_det)
            if self.store_covariance:
                covs.append(cov)
        self.means_ = np.asarray(means)
        self._whiteners = whiteners
        self._log_dets = np.asarray(log_dets)
        self.__dict__.pop("_eigen", None)  # of the fit before, if read
        if self.store_covariance:
            self.covariance_ = covs
        elif hasattr(self, "covariance_"):
            del self.covariance_

    def _regularised_covariance(self, k: int) -> np.ndarray:
        """Class ``k``'s covariance as the model has it: ``(1 - reg_param) C + reg_param I``
        ("svd"), or shrunk ("eigen")."""
        if self.solver != "svd":
            return self._class_covariance(k, self.shrinkage)
        m = self.class_moments_.moments[k]
        cov = m.scatter * ((1.0 - self.reg_param) / m.count)
        cov.flat[:: cov.shape[0] + 1] += self.reg_param
        return cov

    def _whitening(self, k: int, cov: np.ndarray) -> tuple[np.ndarray, float]:
        """``W`` with ``W W^T = cov^-1`` and ``log det cov``, from the Cholesky factor.

        A Cholesky factor and its inverse cost a seventh of an eigendecomposition (0.1 s
        against 0.65 s at d = 2 000, five of which were a quarter of QDA's fit on wide data).
        The rank test on the scalings, ``all(eigenvalues > tol)``, is the Cholesky of
        ``cov - tol I`` succeeding; where it fails (or ``cov`` itself does, at ``tol=0``)
        the eigendecomposition decides, and raises with the rank, as scikit-learn's SVD does.
        """
        d = cov.shape[0]
        shifted = np.array(cov, order="F")
        shifted.flat[:: d + 1] -= self.tol
        _, not_above = linalg.lapack.dpotrf(shifted, lower=1, overwrite_a=1)
        L, info = linalg.lapack.dpotrf(cov.T, lower=1, clean=1)  # symmetric: cov.T is cov
        if not_above or info:
            scalings, rotations = self._eigendecomposition(k)
            return rotations * scalings ** (-0.5), float(np.sum(np.log(scalings)))
        inverse, info = linalg.lapack.dtrtri(L, lower=1)
        if info:  # pragma: no cover - a factor with a positive diagonal is invertible
            raise np.linalg.LinAlgError(f"class {k}: the Cholesky factor is singular")
        return inverse.T, 2.0 * float(np.sum(np.log(np.diagonal(L))))

    def _eigendecomposition(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Class ``k``'s scalings (descending) and rotations, as scikit-learn's SVD gives
        them; raises when fewer than n_features scalings exceed ``tol``."""
        m = self.class_moments_.moments[k]
        if self.class_count_[k] <= 0:  # declared, never seen
            d = self.class_moments_.n_features
            return np.ones(d), np.eye(d)
        if self.solver == "svd":
            cov = m.scatter / m.count
        else:
            cov = self._class_covariance(k, self.shrinkage)
        # divide and conquer: 0.74 s against LAPACK's default 0.99 s at d = 2000
        evals, evecs = linalg.eigh(cov, driver="evd")
        order = np.argsort(evals)[::-1]
        evals, evecs = np.maximum(evals[order], 0.0), flip_columns(evecs[:, order])
        if self.solver == "svd":
            evals = (1.0 - self.reg_param) * evals + self.reg_param
        d = evals.shape[0]
        rank = int(np.sum(evals > self.tol))
        if rank < d:
            c = self.class_moments_.classes[k]
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
        return evals, evecs

    def _eigen_of_classes(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Every class's scalings and rotations, computed once, when first asked for."""
        if "_whiteners" not in vars(self):  # what an unfitted estimator says of a fitted_
            raise AttributeError(f"{type(self).__name__} is not fitted: fit it first")
        if self._eigen is None:
            pairs = [self._eigendecomposition(k) for k in range(len(self.class_count_))]
            self._eigen = [s for s, _ in pairs], [r for _, r in pairs]
        return self._eigen

    @property
    def scalings_(self) -> list[np.ndarray]:
        """Eigenvalues of each (regularised) class covariance, descending.

        Computed when first read: the fit and the predictions use Cholesky factors.
        """
        return self._eigen_of_classes()[0]

    @property
    def rotations_(self) -> list[np.ndarray]:
        """Eigenvectors of each class covariance (columns; largest entry positive).

        Computed when first read, with :attr:`scalings_`.
        """
        return self._eigen_of_classes()[1]

    def _get_state(self) -> dict[str, Any]:
        # the eigendecompositions follow from the class moments: not saved
        params = self.get_params()
        return {k: v for k, v in vars(self).items() if k not in params and k != "_eigen"}

    def _set_state(self, state: dict[str, Any]) -> None:
        # a model saved before the Cholesky solve kept rotations_ and scalings_ instead
        old = {"rotations_", "scalings_"} & state.keys()
        for key, value in state.items():
            if key not in old:
                setattr(self, key, value)
        if old and "class_moments_" in state:
            self._update()

    def _jll(self) -> tuple[Any, tuple]:
        W = np.stack(self._whiteners)
        const = class_log_prior(self.priors_) - 0.5 * self._log_dets
        counts = self.class_count_
        shift = counts @ self.means_ / counts.sum()  # the training mean
        offset = np.einsum("kj,kji->ki", self.means_ - shift, W)
        is_far = np.abs(offset).max(axis=1) > _FAR
        near, far = np.flatnonzero(~is_far), np.flatnonzero(is_far)
        W_near = (
            np.ascontiguousarray(np.concatenate(list(W[near]), axis=1))
            if near.size
            else (np.empty((W.shape[1], 0)))
        )
        params = (shift, W_near, offset[near].ravel(), near, const, far, self.means_[far], W[far])
        return qda_jll, params
