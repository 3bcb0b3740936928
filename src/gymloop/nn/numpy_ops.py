"""The numpy operations of the entity-transformer policy, in float32 like torch's.

GELU uses an erf accurate to 1e-10 on small arrays and to 6e-7 in float32 on large ones (torch's
float32 GELU is no closer to the exact one); LayerNorm's eps is 1e-5. :mod:`gymloop.nn.numpy_policy` (the
batched forward pass) and :mod:`gymloop.nn.single` (one decision) are written with them.

Example:
    >>> import numpy as np
    >>> from gymloop.nn.numpy_ops import erf
    >>> float(erf(np.array([0.5]))[0])  # doctest: +ELLIPSIS
    0.5204998778...
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["erf", "erf32", "fold", "gelu", "gelu2", "lin", "ln", "norm", "softmax_last"]

_F32 = np.float32
_LN_EPS = 1e-5

# erfc(z) = t * exp(-z^2 + P(t)), t = 1 / (1 + z / 2), fitted for z in [0, 6] (Chebyshev
# interpolation of log(erfc(z) / t) + z^2, converted to a power series in t). The maximum absolute
# error of erf over the real line is 1e-10; for |x| >= 6, erf(x) = sign(x) to double precision.
_ERFC_P = (
    -1.2655340125278434, 1.0004454578505158, 0.3714602017177271, 0.0944107171459283,
    -0.06363377996750358, -0.49345147429160774, 1.461372534267395, -3.9586413393291604,
    6.623879799461026, -6.456716573612718, 3.6955965048470425, -1.167909169491564,
    0.15872113402604288,
)
_ERF_SMALL = 512  # below this many elements, math.erf element by element is faster than the fit


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise, in float64 (absolute error below 1e-10).

    Small arrays use :func:`math.erf`; large ones a rational-exponential fit evaluated with a
    handful of vectorized operations.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.size <= _ERF_SMALL:
        f = math.erf
        return np.array([f(v) for v in x.ravel().tolist()], dtype=np.float64).reshape(x.shape)
    z = np.minimum(np.abs(x), 6.0)
    t = 1.0 / (1.0 + 0.5 * z)
    p = np.full_like(t, _ERFC_P[-1])
    for c in _ERFC_P[-2::-1]:
        p *= t
        p += c
    p -= z * z
    np.exp(p, out=p)
    p *= t
    return np.copysign(1.0 - p, x)


# erf(z) = 1 - t * P(t) * exp(-z^2), t = 1 / (1 + 0.3275911 z), for z >= 0 (Abramowitz and Stegun
# 7.1.26; absolute error 1.5e-7, 5.3e-7 evaluated in float32): for float32 activations, where the
# float64 fit above costs three times as much for digits float32 does not keep.
_ERF32_P = tuple(_F32(c) for c in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))


def erf32(x: np.ndarray) -> np.ndarray:
    """The error function of a float32 array, in float32 (absolute error below 6e-7; a new array)."""
    z = np.abs(x, dtype=_F32)
    t = _F32(0.3275911) * z
    t += _F32(1.0)
    np.reciprocal(t, out=t)
    p = np.full_like(t, _ERF32_P[0])
    for c in _ERF32_P[1:]:
        p *= t
        p += c
    p *= t
    z *= z
    np.negative(z, out=z)
    np.exp(z, out=z)
    p *= z
    np.subtract(_F32(1.0), p, out=p)
    return np.copysign(p, x, out=p)


def gelu2(x: np.ndarray) -> np.ndarray:
    """``2 * gelu(x)`` = ``x * (1 + erf(x / sqrt(2)))`` of a float32 array (a new array; within
    4e-7 |x| of the exact value, as close as torch's float32 GELU is to it)."""
    if x.size <= _ERF_SMALL:
        e = np.array(list(map(math.erf, (x * _F32(0.7071067811865476)).ravel().tolist())), dtype=_F32).reshape(x.shape)
    else:
        e = erf32(x * _F32(0.7071067811865476))
    e += _F32(1.0)
    e *= x
    return e


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf-based) GELU of a float32 array, as ``torch.nn.GELU()``."""
    e = gelu2(x)
    e *= _F32(0.5)
    return e


_MEAN: dict[int, np.ndarray] = {}


def norm(x: np.ndarray) -> np.ndarray:
    """LayerNorm without its affine part, over the last axis (biased variance, eps 1e-5), float32."""
    d = x.shape[-1]
    j = _MEAN.get(d)
    if j is None:
        j = _MEAN[d] = np.full((d, 1), 1.0 / d, dtype=_F32)
    x2 = x.reshape(-1, d)
    xc = x2 - x2 @ j
    var = (xc * xc) @ j
    var += _F32(_LN_EPS)
    xc /= np.sqrt(var)
    return xc.reshape(x.shape)


def lin(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """``x @ w (+ b)`` over the last axis as ONE 2-D product (numpy's stacked matmul is far slower)."""
    y = x.reshape(-1, x.shape[-1]) @ w
    if b is not None:
        y += b
    return y.reshape(x.shape[:-1] + w.shape[1:])


def ln(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LayerNorm over the last axis with weight ``w`` and bias ``b``."""
    y = norm(x)
    y *= w
    y += b
    return y


def fold(w: np.ndarray, b: np.ndarray, ln_w: np.ndarray, ln_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``LN(x) @ w + b`` as ``norm(x) @ w' + b'``: the LayerNorm's affine part folded into ``w``, ``b``."""
    w64 = w.astype(np.float64)
    wf = ln_w.astype(np.float64)[:, None] * w64
    bf = ln_b.astype(np.float64) @ w64 + b.astype(np.float64)
    return np.ascontiguousarray(wf, dtype=_F32), bf.astype(_F32)


_max_reduce = np.maximum.reduce
_sum_reduce = np.add.reduce


def softmax_last(a: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, in place (``a`` must be a temporary)."""
    a -= _max_reduce(a, axis=-1, keepdims=True)
    np.exp(a, out=a)
    a /= _sum_reduce(a, axis=-1, keepdims=True)
    return a
