"""Rotations of loadings: the orthomax family (varimax, quartimax) and promax.

A p x m matrix of loadings (features by factors or components) is rotated to make it
simpler to read: each column large on few features, each feature large on few columns.
Factor analysis (:class:`ddr.FactorAnalysis`, scikit-learn's ``rotation``) and rotated PCA
(:class:`ddr.RotatedPCA`, xeofs's ``EOFRotator``) both rotate here.

**Orthomax** (Harman 1976; the algorithm of Jennrich 2001 and of R's ``varimax``). With
``B = A R`` the rotated loadings of ``A``, the criterion

    Q(R) = sum_ij B_ij^4 - (gamma / p) sum_j (sum_i B_ij^2)^2

is maximised over orthogonal ``R`` by iterating ``R <- U V^T``, where ``U S V^T`` is the SVD
of the gradient ``G = A^T (B o (B o B - (gamma / p) 1 c^T))`` and ``c`` the column sums of
``B o B``. ``gamma = 1`` is varimax, ``gamma = 0`` quartimax. The sum of the singular values
of ``G`` is the convergence monitor. With Kaiser normalisation each row of ``A`` is first
divided by its norm (the square root of the feature's communality), so that features with
little variance weigh as much as the others; ``R`` is found on the normalised rows and
applied to ``A`` itself.

**Promax** (Hendrickson and White 1964; Richman 1986): from the varimax solution ``A R``,
Kaiser-normalised, a target ``P`` is built by raising each loading to ``power`` with its sign
kept (columns first scaled to a largest magnitude of 1), and the least-squares fit
``L0 = argmin ||A_n L - P||`` is rescaled so that ``diag((L^T L)^{-1}) = 1``. The rotation
``R L`` is oblique; the rotated factors are correlated, with correlation matrix
``phi = L^{-1} L^{-T}``. ``power = 1`` is varimax itself (``L = I``).

Everything here works on small (p x m, m x m) matrices on the client, in float64.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
from scipy import linalg

__all__ = ["ORTHOMAX_GAMMA", "Rotation", "orthomax", "promax"]

#: ``gamma`` of the named members of the orthomax family
ORTHOMAX_GAMMA: dict[str, float] = {"quartimax": 0.0, "varimax": 1.0}


@dataclasses.dataclass(frozen=True)
class Rotation:
    """A rotation of p x m loadings.

    Parameters
    ----------
    loadings : ndarray of shape (p, m)
        The rotated loadings, ``A @ rotation`` for the loadings ``A`` given.
    rotation : ndarray of shape (m, m)
        The rotation matrix (orthogonal for orthomax, oblique for promax).
    phi : ndarray of shape (m, m)
        The correlation matrix of the rotated factors, ``(rotation^T rotation)^{-1}``
        (the identity for an orthogonal rotation).
    n_iter : int
        Iterations of the orthomax algorithm.
    converged : bool
        Whether the stopping rule was met within ``max_iter`` iterations.
    """

    loadings: np.ndarray
    rotation: np.ndarray
    phi: np.ndarray
    n_iter: int
    converged: bool


def _check_loadings(A: np.ndarray, who: str) -> np.ndarray:
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[1] < 1 or A.shape[0] < 1:
        raise ValueError(
            f"{who}: the loadings must be a 2-D array of shape (n_features, n_components) "
            f"with at least one of each; got shape {A.shape}"
        )
    if not np.isfinite(A).all():
        raise ValueError(f"{who}: the loadings contain NaN or infinite values")
    return A


def _row_norms(A: np.ndarray) -> np.ndarray:
    """Square roots of the communalities, 1 where a row is zero (it stays zero)."""
    h = np.sqrt(np.einsum("ij,ij->i", A, A))
    h[h == 0] = 1.0
    return h


def orthomax(
    A: np.ndarray,
    *,
    gamma: float = 1.0,
    normalize: bool = True,
    max_iter: int = 1000,
    tol: float = 1e-8,
    stop: Literal["change", "gain"] = "change",
) -> Rotation:
    """Rotate loadings orthogonally to the maximum of the orthomax criterion.

    Parameters
    ----------
    A : array-like of shape (p, m)
        Loadings: p features (rows) by m factors or components (columns).
    gamma : float, default=1.0
        The member of the family: 1 varimax, 0 quartimax (:data:`ORTHOMAX_GAMMA`).
    normalize : bool, default=True
        Kaiser normalisation: find the rotation of the rows scaled to unit norm (xeofs's
        and R's ``varimax`` default; scikit-learn's factor analysis does not normalise).
    max_iter : int, default=1000
        Largest number of iterations.
    tol : float, default=1e-8
        Tolerance of the stopping rule, relative to the sum ``s`` of the singular values of
        the gradient.
    stop : {"change", "gain"}, default="change"
        The stopping rule. ``"change"``: ``|s_new - s_old| < tol * s_new`` (xeofs's);
        ``"gain"``: ``s_new < s_old * (1 + tol)`` from the second iteration on
        (scikit-learn's ``FactorAnalysis``). Both stop after the update that meets it.

    Returns
    -------
    Rotation
        ``loadings = A @ rotation``, ``phi`` the identity.

    Raises
    ------
    ValueError
        When ``A`` is not a finite 2-D array with at least one row and column.
    """
    A = _check_loadings(A, "orthomax")
    p, m = A.shape
    An = A / _row_norms(A)[:, None] if normalize else A
    R = np.eye(m)
    s_old = 0.0
    converged = False
    n_iter = 0
    weight = gamma / p
    for n_iter in range(1, max_iter + 1):  # noqa: B007 (n_iter is read after the loop)
        B = An @ R
        B2 = B * B
        G = An.T @ (B * (B2 - weight * B2.sum(axis=0)))
        U, s, Vt = linalg.svd(G)
        R = U @ Vt
        s_new = float(s.sum())
        if s_new == 0.0:  # zero loadings: nothing to rotate
            converged = True
        elif stop == "change":
            converged = abs(s_new - s_old) <= tol * s_new
        else:
            converged = s_old != 0.0 and s_new < s_old * (1.0 + tol)
        s_old = s_new
        if converged:
            break
    return Rotation(A @ R, R, np.eye(m), n_iter, converged)


def promax(
    A: np.ndarray,
    *,
    power: float = 4.0,
    max_iter: int = 1000,
    tol: float = 1e-8,
) -> Rotation:
    """Rotate loadings obliquely by promax: varimax, then a fit to a sharpened target.

    Parameters
    ----------
    A : array-like of shape (p, m)
        Loadings: p features (rows) by m factors or components (columns), of full column
        rank.
    power : float, default=4.0
        The power the Kaiser-normalised varimax loadings are raised to (sign kept) to make
        the target; at least 1. ``power=1`` is varimax (returned as it is, ``phi`` the
        identity); 2 to 4 are usual.
    max_iter : int, default=1000
        Largest number of iterations of the varimax rotation.
    tol : float, default=1e-8
        Tolerance of varimax's stopping rule (``stop="change"`` of :func:`orthomax`).

    Returns
    -------
    Rotation
        ``loadings = A @ rotation`` with ``rotation = R_varimax @ L``, and ``phi =
        L^{-1} L^{-T}``, the correlation matrix of the rotated factors (unit diagonal).

    Raises
    ------
    ValueError
        When ``power < 1``, or a column of ``A`` is zero (the fit to the target is singular).
    """
    if not power >= 1:
        raise ValueError(f"promax: power must be at least 1; got {power!r}")
    A = _check_loadings(A, "promax")
    zero = np.flatnonzero(~np.any(A != 0, axis=0))
    if zero.size:
        raise ValueError(
            f"promax: the loadings of column(s) {zero.tolist()} are all zero; an oblique "
            "rotation needs loadings of full column rank"
        )
    vm = orthomax(A, gamma=1.0, normalize=True, max_iter=max_iter, tol=tol, stop="change")
    if power == 1:
        return vm
    V = vm.loadings
    Vn = V / _row_norms(V)[:, None]
    scaled = Vn / np.max(np.abs(Vn), axis=0)
    target = np.sign(scaled) * np.abs(scaled) ** power
    # least squares through the QR of Vn: the normal equations would square its condition
    L0, *_ = linalg.lstsq(Vn, target)
    # scale the columns so that the rotated factors have unit variance (phi's unit diagonal)
    L = L0 * np.sqrt(np.diag(linalg.inv(L0.T @ L0)))
    L_inv = linalg.inv(L)
    return Rotation(V @ L, vm.rotation @ L, L_inv @ L_inv.T, vm.n_iter, vm.converged)
