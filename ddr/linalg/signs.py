"""The one sign convention of every fitted direction in ddr (components, rotations,
scalings, canonical weights): the entry of largest magnitude of each vector is positive,
scikit-learn's ``svd_flip`` rule. Eigen- and singular vectors are defined up to sign; fixing
it makes fits deterministic and comparable one to one with scikit-learn's."""

from __future__ import annotations

import numpy as np

__all__ = ["component_signs"]


def component_signs(vectors: np.ndarray, *, axis: int) -> np.ndarray:
    """Return the signs (+1/-1) that make the largest absolute entry of each vector positive.

    Parameters
    ----------
    vectors : ndarray of shape (m, n)
        The vectors lie along ``axis``: rows for ``axis=1`` (e.g. ``components_``, shape
        (n_components, n_features)), columns for ``axis=0`` (e.g. ``scalings_``).
    axis : {0, 1}

    Returns
    -------
    ndarray of shape (n_vectors,)
        Multiply each vector by its sign (``vectors * s`` for columns, ``vectors * s[:, None]``
        for rows). Ties take the first largest entry; an all-zero vector keeps sign +1.
    """
    V = np.asarray(vectors)
    other = 1 - axis
    if V.shape[axis] == 0:
        return np.ones(V.shape[other])
    idx = np.argmax(np.abs(V), axis=axis)
    lead = V[idx, np.arange(V.shape[1])] if axis == 0 else V[np.arange(V.shape[0]), idx]
    signs = np.sign(lead).astype(np.float64)
    signs[signs == 0] = 1.0
    return signs
