"""Numerical kernels for sums of independent Laplaces, plus a Normal (paper 000 §4).

The characteristic function prod_i (1 + b_i^2 t^2)^-1 in log space, a Chernoff bound on
the tails, Clenshaw-Curtis nodes for its inversion, and Algorithm 2 (the discrete
probability calculation) by FFT and by direct convolution, each with an optional Normal
term g G (the error of Gaussian answers). Used by
:class:`~dpbayes.answers.error_distribution.LaplaceSum`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import optimize, special

from dpbayes.answers.limits import check_time

__all__ = [
    "CC_NODES",
    "CC_WEIGHTS",
    "CC_WEIGHTS_LO",
    "MAX_GRID",
    "chernoff_tail",
    "discretised_normal_dft",
    "discretised_normal_pmf",
    "gil_pelaez_nodes",
    "log_char_fn",
    "pc_direct_pmf",
    "pc_fft_pmf",
]


def _clenshaw_curtis(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes cos(j pi / n) and weights of the (n+1)-point Clenshaw-Curtis rule on [-1, 1]."""
    j = np.arange(n + 1)
    x = np.cos(j * np.pi / n)
    w = np.ones(n + 1)
    for k in range(1, n // 2 + 1):
        bk = 1.0 if 2 * k == n else 2.0
        w -= bk * np.cos(2 * k * j * np.pi / n) / (4 * k * k - 1)
    c = np.where((j == 0) | (j == n), 1.0, 2.0)
    return x, c * w / n


# A 17-point rule with an embedded 9-point rule on every other node: the difference of
# the two is the quadrature error estimate, at no extra evaluations of phi.
CC_NODES, CC_WEIGHTS = _clenshaw_curtis(16)
CC_WEIGHTS_LO = np.zeros(17)
CC_WEIGHTS_LO[::2] = _clenshaw_curtis(8)[1]
MAX_GRID = 2**22


def log_char_fn(t: np.ndarray, scales: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """log prod_i (1 + b_i^2 t^2)^-count_i, vectorised over t.

    ``scales`` must be sorted ascending. Scales with b t_max <= 0.3 enter through the series
    log1p(x) = sum_m (-1)^(m+1) x^m / m, x = b^2 t^2 <= 0.09 (12 terms: error < 1e-14 per
    scale), so their cost is O(12) per t instead of O(count); the rest exactly.
    """
    t = np.asarray(t, dtype=float)
    tmax = float(np.max(t, initial=0.0))
    if t.size < 32:  # a few points: the exact sum is cheaper than the power sums
        split = 0
    elif tmax > 0:
        split = int(np.searchsorted(scales, 0.3 / tmax, side="right"))
    else:
        split = scales.size
    x = (t * t).ravel()
    out = np.zeros(x.size)
    if split > 0:
        b2 = scales[:split] ** 2
        c = counts[:split]
        coef, power = [], c.copy()
        for m in range(1, 13):
            power = power * b2
            coef.append(((-1) ** (m + 1)) * float(power.sum()) / m)
        acc = np.zeros(x.size)
        for a_m in reversed(coef):
            acc = (acc + a_m) * x
        out -= acc
    big, cnt = scales[split:], counts[split:]
    if big.size:
        chunk = max(1, 2_000_000 // big.size)
        tt = np.sqrt(x)
        for s in range(0, x.size, chunk):
            check_time()
            bt = np.multiply.outer(tt[s : s + chunk], big)
            out[s : s + chunk] -= np.log1p(bt * bt) @ cnt
    return out.reshape(t.shape)


def chernoff_tail(scales: np.ndarray, counts: np.ndarray, a: float, gauss: float = 0.0) -> float:
    """Bound on P(|E| > a) = 2 inf_s e^{-s a} prod (1 - b_i^2 s^2)^-count_i e^{g^2 s^2 / 2},
    0 < s < 1/b_max (E = sum b_i L_i + g G; with no Laplace term, 2 e^{-a^2 / 2 g^2})."""
    if a <= 0:
        return 1.0
    if scales.size == 0:
        return float(min(1.0, 2.0 * math.exp(-0.5 * (a / gauss) ** 2)))
    bmax = float(scales.max())

    def g(u: float) -> float:  # u = s * bmax in (0, 1)
        s = u / bmax
        return -s * a - float(np.log1p(-((scales * s) ** 2)) @ counts) + 0.5 * (gauss * s) ** 2

    res = optimize.minimize_scalar(g, bounds=(1e-12, 1 - 1e-12), method="bounded")
    return float(min(1.0, 2.0 * math.exp(min(0.0, res.fun))))


def discretised_normal_pmf(g: float, h: float, m: int) -> np.ndarray:
    """P(h round(g G / h) = j h) for j = -m..m, G ~ N(0, 1): Phi((j + 1/2) h / g) -
    Phi((j - 1/2) h / g), from the upper tail (no cancellation in the tails)."""
    j = np.arange(0, m + 1, dtype=float)
    upper = special.ndtr(-(j + 0.5) * h / g)  # P(G > (j + 1/2) h / g)
    side = np.concatenate([[special.ndtr(-0.5 * h / g)], upper[:-1]]) - upper
    side[0] = 1.0 - 2.0 * upper[0]
    return np.concatenate([side[:0:-1], side])


def discretised_normal_dft(g: float, h: float, omega: np.ndarray) -> np.ndarray:
    """The DFT sum_j P(h round(g G / h) = j h) e^{-i w j} at ``omega`` in [0, pi] (real: the
    mass function is symmetric), G ~ N(0, 1).

    For g >= h by Poisson summation: the cell masses are h times the density of g G + U,
    U uniform on [-h/2, h/2], at j h, so the DFT is sum_m e^{-(g x_m / h)^2 / 2}
    sin(x_m / 2) / (x_m / 2) with x_m = w + 2 pi m; |x_m| >= 5 pi for |m| >= 3, so those
    terms are below e^{-123} and m = -2..2 are kept. For g < h directly: the masses of
    |j| <= J with (J + 1/2) h / g >= 9.5, the rest (< 2e-21) left out.
    """
    if g >= h:
        out = np.zeros(omega.shape)
        for m in range(-2, 3):
            x = omega + 2.0 * math.pi * m
            out += np.exp(-0.5 * (g * x / h) ** 2) * np.sinc(x / (2.0 * math.pi))
        return out
    big_j = max(1, math.ceil(9.5 * g / h))
    pmf = discretised_normal_pmf(g, h, big_j)[big_j:]  # j = 0..J
    out = np.full(omega.shape, pmf[0])
    for j in range(1, big_j + 1):
        out += 2.0 * pmf[j] * np.cos(j * omega)
    return out


def pc_fft_pmf(
    u: np.ndarray,
    c: np.ndarray,
    k: int,
    std: float,
    h: float,
    accuracy: float,
    gauss: float = 0.0,
) -> tuple[np.ndarray, float]:
    """Algorithm 2 by FFT: the mass vector of sum_i h round(b_i L_i / h) + h round(g G / h);
    (pmf, lost mass).

    ``u``, ``c``: the distinct scales (ascending) and their multiplicities; ``k`` scales in
    all; ``gauss``: the sd g of the Normal term (0: none); ``std`` of the sum. Cell j
    covers [(j - 1/2) h, (j + 1/2) h]. The DFT of one discretised Laplace is
    p0 + 2 sinh(h/2b) (r cos w - r^2) / (1 - 2 r cos w + r^2) with r = e^{-h/b},
    p0 = 1 - e^{-h/2b}, that of the discretised Normal :func:`discretised_normal_dft`;
    the product is inverted once. The grid spans +-a with a Chernoff bound on
    P(|E| > a) below accuracy / 20; that bound is the mass wrapped around the cyclic grid
    (the "lost" mass of eqs. 31-32).
    """
    half = (k + (1 if gauss > 0 else 0)) * h / 2.0
    a = 8.0 * std
    while chernoff_tail(u, c, a, gauss) > accuracy * 0.05 and a < 1e4 * std:
        a *= 1.5
    lost = chernoff_tail(u, c, a, gauss)
    n = int(2 ** math.ceil(math.log2(2 * (a + half) / h + 1)))
    if n > MAX_GRID:
        raise ValueError(
            f"grid_step {h:.3g} needs {n} grid points (max {MAX_GRID}); use a larger grid_step"
        )
    omega = 2.0 * math.pi * np.arange(n // 2 + 1) / n
    # 1 - cos w = 2 sin^2(w / 2), without the cancellation of 1 - cos w near w = 0
    sin2 = np.sin(omega / 2.0) ** 2
    logpsi = np.zeros(omega.size)
    for i, (b, cnt) in enumerate(zip(u, c, strict=True)):
        if i % 16 == 0:
            check_time()
        x = h / (2.0 * b)
        r = math.exp(-2.0 * x)
        q = -math.expm1(-2.0 * x)  # 1 - r, exact to rounding for the fine steps h << b
        p0 = -math.expm1(-x)
        s = math.sinh(x) if x < 300 else 0.0
        # r cos w - r^2 = r (q - 2 sin^2) and 1 - 2 r cos w + r^2 = q^2 + 4 r sin^2: the
        # textbook form lost ~1e-16 / q^2 relatively near w = 0 (1e-7 at h / b = 1e-5),
        # which spread over the whole grid as mass ~3e-14 per point (1e-8 in a far tail)
        psi = p0 + 2.0 * s * r * (q - 2.0 * sin2) / (q * q + 4.0 * r * sin2)
        logpsi += cnt * np.log(np.maximum(psi, 1e-300))
    dft = np.exp(logpsi)
    if gauss > 0:
        dft *= discretised_normal_dft(gauss, h, omega)
    pmf = np.fft.irfft(dft, n)
    pmf = np.fft.fftshift(np.maximum(pmf, 0.0))
    return pmf / pmf.sum(), lost


def pc_direct_pmf(
    scales: np.ndarray, h: float, accuracy: float, gauss: float = 0.0
) -> tuple[np.ndarray, float]:
    """Algorithm 2 literally: truncated vectors convolved shortest first (eqs. 28-32); the
    Normal term g G (if ``gauss`` > 0) is one more vector, truncated alike."""
    k = scales.size + (1 if gauss > 0 else 0)
    vecs, lost = [], 0.0
    if gauss > 0:
        # keep |j| <= m where the lost mass 2 P(G > (m + 1/2) h / g) <= accuracy / (20 k)
        z = -float(special.ndtri(accuracy / (40 * k)))
        m = max(0, math.ceil(z * gauss / h - 0.5))
        v = discretised_normal_pmf(gauss, h, m)
        lost += max(0.0, 1.0 - float(v.sum()))
        vecs.append(v)
    for b in np.sort(scales):
        check_time()
        # Cell j covers [(j - 1/2) h, (j + 1/2) h]; keep |j| <= m where the lost mass
        # e^{-(m + 1/2) h / b} <= accuracy / (20 k).
        m = max(0, math.ceil(b / h * math.log(20 * k / accuracy) - 0.5))
        j = np.arange(-m, m + 2) - 0.5
        tail = 0.5 * np.exp(-np.abs(j) * h / b)
        cdf = np.where(j < 0, tail, 1 - tail)
        v = np.diff(cdf)
        lost += 1.0 - float(v.sum())
        vecs.append(v)
    vecs.sort(key=len)
    pmf = vecs[0]
    for v in vecs[1:]:
        check_time()
        pmf = np.convolve(pmf, v)
    return pmf, lost


def gil_pelaez_nodes(
    log_phi: Callable[[np.ndarray], np.ndarray],
    bmax: float,
    g: float,
    n_scales: int,
    accuracy: float,
    zmax: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Quadrature nodes for the Gil-Pelaez integrals of a Laplace sum (+ Normal) up to
    |z| <= zmax: (t, w, w_lo, tail bound, T), the characteristic function's log
    ``log_phi`` normalised so that max(bmax, g) = 1 (g the Normal part's sd)."""
    # Tail: the neglected part of (2/pi) int phi(t) |sin(tz)| / t dt over t >= T is
    # <= phi(T) min(1 + 1/(bmax T)^2, 2/(g T)^2) / pi. First bound: for t >= T,
    # phi(t) <= phi(T) (T/t)^2 (1 + 1/(bmax T)^2) (the largest Laplace factor falls
    # like t^-2, the other factors only fall); second (Normal part): phi(t) <=
    # phi_Lap(T) e^{-g^2 t^2 / 2} and int_T^inf e^{-g^2 t^2/2} / t dt <=
    # int_T^inf t e^{-g^2 t^2/2} / T^2 dt = e^{-g^2 T^2/2} / (g T)^2.
    target = math.log(accuracy * 0.05 * math.pi)

    # T is the first point where log phi <= target: phi decreases in t, so both steps
    # are vectorised (one call of log_phi each). Doubling from 1 / max(bmax, g) = 1 (the
    # normalisation): log phi(t) <= -min(log(1 + t^2), t^2 / 2) and target >=
    # log(1.5e-7 * accuracy), so t = 2^40 meets it for any accuracy >= 1e-300 and the 64
    # powers 2^0 .. 2^63 contain the first that does. Then the first of 2048 evenly
    # spaced points of (hi / 2, hi] (of (0, hi] if hi is the start) that meets it: within
    # 1e-3 hi of the crossing. Any T > 0 is valid; the tail bound is computed at it.
    # The criterion is on the tail bound itself, phi(T) x factor(T) (both decrease in T):
    # with many scales phi falls below the target at T well under 1 / bmax, where the
    # factor 1 + 1 / (bmax T)^2 is large, and a criterion on phi alone left a tail bound
    # above the accuracy (then ``auto`` fell back to PC, at far greater cost).
    def log_factor(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        out = np.log1p(1.0 / (bmax * t) ** 2)
        if g > 0:
            out = np.minimum(out, np.log(2.0 / (g * t) ** 2))
        return out

    def log_bound(t: np.ndarray) -> np.ndarray:
        return log_phi(t) + log_factor(t)

    start = 1.0 / max(bmax, g)
    powers = start * 2.0 ** np.arange(64)
    below = log_bound(powers) <= target
    hi = float(powers[int(below.argmax())] if below.any() else powers[-1])
    lo = hi / 2.0 if hi > start else 0.0
    grid = lo + (hi - lo) * np.arange(1, 2049) / 2048.0
    below = log_bound(grid) <= target
    big_t = float(grid[int(below.argmax())]) if below.any() else hi
    tail = math.exp(log_bound(np.array([big_t]))[0]) / math.pi
    # Panels: half periods of sin(t zmax), refined geometrically where phi bends.
    n_osc = math.ceil(big_t * zmax / math.pi) + 1
    if (n_osc + 16) * CC_NODES.size * n_scales > 3e7:
        raise ValueError(
            "the characteristic function decays too slowly for exact inversion at this "
            "accuracy; use method='pc'"
        )
    edges = np.unique(
        np.concatenate([np.linspace(0.0, big_t, n_osc + 1), np.geomspace(big_t / 1e3, big_t, 16)])
    )
    a, bnd = edges[:-1], edges[1:]
    half, mid_p = (bnd - a) / 2.0, (bnd + a) / 2.0
    t = (mid_p[:, None] + half[:, None] * CC_NODES[None, :]).ravel()
    w = (half[:, None] * CC_WEIGHTS[None, :]).ravel()
    w_lo = (half[:, None] * CC_WEIGHTS_LO[None, :]).ravel()
    # t = 0 is a node: sin(t z) / t -> z there; use a tiny positive t instead.
    t = np.maximum(t, big_t * 1e-12)
    return t, w, w_lo, tail, big_t
