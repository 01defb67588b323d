"""The appendix toy's closed forms on its bivariate Gaussian, without torch: the correlation, the true
MI and CNCE's ceiling (the largest value its bound takes for any critic).  The toy stage
(:mod:`ring.toy_cnce`) trains and evaluates the critics; the report (:mod:`ring.reports.tables`)
compares their estimates with these ceilings on a login node.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

# ---- the ceiling: the largest value CNCE can take on the Gaussian, whatever the critic -----------


def correlation(cov) -> float:
    """rho of a bivariate Gaussian with covariance ``cov``."""
    cov = np.asarray(cov, dtype=np.float64)
    return float(cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1]))


def true_mi(cov) -> float:
    """I(X; Y) in nats of a bivariate Gaussian with covariance ``cov`` (ring.toy_cnce.true_mi, without torch)."""
    cov = np.asarray(cov, dtype=np.float64)
    rho2 = cov[0, 1] * cov[1, 0] / (cov[0, 0] * cov[1, 1])
    return float(-0.5 * np.log1p(-rho2))


# The standard normal's functions as scipy.stats.norm computes them (its _norm_cdf, _norm_sf, _norm_pdf, _norm_ppf,
# _norm_isf: the same ufuncs and formulas, so every value is unchanged), called directly: the ceiling's quadrature
# of an optimisation calls them ~10^6 times, and norm's argument checking cost 40 of a table's 47 CPU-seconds.
_SQRT_2PI = math.sqrt(2 * math.pi)


def _cdf(z):
    from scipy.special import ndtr

    return ndtr(z)


def _sf(z):
    from scipy.special import ndtr

    return ndtr(-np.asarray(z))


def _pdf(z):
    return np.exp(-(np.asarray(z) ** 2) / 2.0) / _SQRT_2PI


def _ppf(q):
    from scipy.special import ndtri

    return ndtri(q)


def _isf(q):
    return -_ppf(q)


def _mass(lo, hi, mean=0.0, sd=1.0):
    """P(lo < Y < hi) for Y ~ N(mean, sd^2), accurate in either tail (differences of sf or of cdf)."""
    lo, hi = (np.asarray(lo) - mean) / sd, (np.asarray(hi) - mean) / sd
    return np.where(lo > 0, _sf(lo) - _sf(hi), _cdf(hi) - _cdf(lo))


def _window(centre: float, share: float) -> float:
    """Half-width d of the interval centre +- d that holds ``share`` of N(0, 1)."""
    from scipy.optimize import brentq

    if share >= 1:
        return math.inf
    return brentq(lambda d: float(_mass(centre - d, centre + d)) - share, 0.0, abs(centre) + 40.0, xtol=1e-13)


# Quadrature of the finite-k bound: Gauss-Legendre nodes (in a normal's CDF variable) over the window,
# and a trapezoid over s = log u for log S = int_0^inf (e^-u - e^-uS) du / u (a smooth integrand that
# decays like e^s and like e^-e^s: the trapezoid converges geometrically; checked against Monte Carlo).
_LEGENDRE = np.polynomial.legendre.leggauss(96)
_LOG_U = np.linspace(-25.0, 6.0, 400)


def _nodes(lo: float, hi: float, mean: float, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Points in (lo, hi) and their N(mean, sd^2) probabilities, equally weighted by that normal's CDF."""
    t, w = _LEGENDRE
    a, b = (lo - mean) / sd, (hi - mean) / sd
    if a > 0:  # the upper tail: work with survival functions, whose values keep their digits there
        sa, sb = _sf(a), _sf(b)
        return mean + sd * _isf((sa + sb) / 2 - (sa - sb) / 2 * t), (sa - sb) / 2 * w
    ca, cb = _cdf(a), _cdf(b)
    return mean + sd * _ppf((ca + cb) / 2 + (cb - ca) / 2 * t), (cb - ca) / 2 * w


def flat_critic_bound(d: float, x: float, rho: float, share: float, k: int | None = None) -> float:
    """The CNCE bound at X = x (standardised Gaussian with correlation rho) of the critic
    f(y) = max(log r(y), c), r = p(y|x)/p(y), whose level c makes {log r > c} the interval x/rho +- d.

    ``share`` = 1 - w_l/100 is the p-mass of the window the negatives come from; d must not exceed
    the half-width of the window (c at or above the window's threshold).  k = None: the limit k -> inf.
    The bound is invariant to f + const(x), so f is shifted to (log r - c)_+ >= 0 here.
    """
    s2 = 1 - rho * rho
    s, beta, m = math.sqrt(s2), rho * rho / (2 * s2), x / rho
    # log r(y) = log r(m) - beta (y - m)^2: a bump centred at m = x / rho, so {log r > c} = m +- d.
    mu = rho * x - m  # y - m given x is N(mu, s2)
    lo, hi = (-d - mu) / s, (d - mu) / s
    inside = float(_mass(lo, hi))  # P(y in m +- d | x)
    e_u = _pdf(lo) - _pdf(hi)
    e_u2 = inside + lo * _pdf(lo) - hi * _pdf(hi)
    e_z2 = mu * mu * inside + 2 * mu * s * e_u + s2 * e_u2  # E[(y - m)^2; |y - m| < d | x]
    positive = beta * (d * d * inside - e_z2)  # E[f(y) | x], f = beta (d^2 - (y - m)^2)_+
    marginal = float(_mass(m - d, m + d))  # p-mass above the level, <= share
    tied = (share - marginal) / share  # the negatives' chance to sit on the flat part (f = 0)
    if k is None:  # E_q[e^f] = (P(m +- d | x) e^-c + share - marginal) / share, as e^f = r e^-c above c
        c = -0.5 * math.log(s2) - mu * mu / (2 * s2) + m * m / 2 - beta * d * d  # log r(m) - beta d^2
        return positive - math.log(inside * math.exp(-c) / share + tied)
    # Finite k: log k + E f(y) - E log(e^f(y) + sum_j e^f(v_j)), the last by the Laplace identity,
    # with E[e^-u e^f(v)] = M(u) and the k - 1 negatives i.i.d.
    u = np.exp(_LOG_U)
    v, wv = _nodes(m - d, m + d, 0.0, 1.0)
    neg = tied * np.exp(-u) + (wv / share * np.exp(-np.outer(u, np.exp(beta * (d * d - (v - m) ** 2))))).sum(1)
    y, wy = _nodes(m - d, m + d, rho * x, s)
    pos = (1 - inside) * np.exp(-u) + (wy * np.exp(-np.outer(u, np.exp(beta * (d * d - (y - m) ** 2))))).sum(1)
    integrand = np.exp(-u) - pos * neg ** (k - 1)
    log_sum = float(np.sum((integrand[1:] + integrand[:-1]) / 2) * (_LOG_U[1] - _LOG_U[0]))
    return math.log(k) + positive - log_sum


def ceiling_at(
    x: float, rho: float, share: float, k: int | None = None, level_at_k: bool = False
) -> tuple[float, float]:
    """(sup over critics of the CNCE bound at X = x, the optimal half-width d): the level optimised.

    At finite k the level is the k -> inf optimum unless ``level_at_k``: re-optimising it at k = 3
    or 101 moves d by < 1e-4 and the bound by less than the quadrature's error (tested), at 30x the cost.
    """
    from scipy.optimize import minimize_scalar

    top = _window(x / rho, share)
    if not math.isfinite(top):  # NCE (no window): f = log r; its tails beyond x/rho +- (|x/rho| + 40) hold nothing
        top = abs(x / rho) + 40.0

    def best(limit):
        found = minimize_scalar(
            lambda d: -flat_critic_bound(d, x, rho, share, limit),
            bounds=(0.0, top),
            method="bounded",
            options={"xatol": 1e-10},
        )
        # d = 0 is the constant critic (bound 0); the bounded search may stop short of an endpoint.
        return max((-found.fun, found.x), (flat_critic_bound(top, x, rho, share, limit), top), (0.0, 0.0))

    if k is None or level_at_k:
        return best(k)
    d = best(None)[1]
    return max((flat_critic_bound(d, x, rho, share, k), d), (0.0, 0.0))


@cache  # seconds per value; a table asks for each (rho, percentile, k) once per process
def cnce_ceiling(rho: float, percentile: float, k: int | None = None) -> float:
    """The largest value the CNCE bound can take, for any critic, on the bivariate Gaussian with
    correlation ``rho`` when the k - 1 negatives are drawn from the closest (100 - ``percentile``)%
    of the marginal by critic value (k = None: the limit k -> inf; percentile 0: NCE, whose ceiling
    at k -> inf is the true MI -1/2 log(1 - rho^2)).

    Derivation (per x: the bound is E_x of a per-x quantity, and the window is per x).  Write
    r(y) = p(y|x)/p(y), a = 1 - percentile/100, t the critic's threshold (the window S holds the a
    of the marginal with f >= t) and q = p restricted to S, renormalised.
    1. Off S, raise f to t: the window is unchanged (ties at t are shared; the negatives' values are
       not), no negative moves, and a positive off S scores higher, since each bound term increases
       in f(y).  So f = t off S and f >= t on S.
    2. S is the top-a set of r: swapping an equal p-mass of S with one outside it of higher r, carrying
       f's values along, leaves the negatives' law unchanged and moves positive mass to higher f.
    3. k -> inf: the bound is E_{p(y|x)} f - log E_q e^f.  On S, the Gibbs variational principle with
       the constraint f >= t (KKT: p r = p e^f / Z where f > t) gives f = log r + const wherever f > t.
       So f = max(log r, c) for a level c >= the window's threshold of log r: flat below c, the log
       density ratio above it; optimising c gives the ceiling,
           sup_c  E_{p(y|x)} max(log r, c) - log[(P(log r > c | x) + e^c (a - P(log r > c))) / a].
       (c at the threshold: f = log r on all of S; c -> max log r: a constant critic, bound 0.)
    4. Finite k: steps 1-2 hold as stated; that the shape above the level is still log r + const is
       checked numerically, not proven (tests/core/test_gaussian.py: on discrete distributions, no critic
       found by optimisation beats the best flat critic).  The bound, log k + E f(y) - E log(e^f(y) +
       sum_j e^f(v_j)), is computed by quadrature (the Laplace identity for E log); see ceiling_at
       for the level.  Accuracy: ~1e-9 nats absolute at finite k, ~1e-12 as k -> inf.
    On the Gaussian, log r(y) = const - rho^2 (y - x/rho)^2 / (2 (1 - rho^2)), so {log r > c} is the
    interval x/rho +- d: the level is the half-width d, optimised per x, then integrated over
    x ~ N(0, 1) (both variables standardised; r and the percentile are scale-free).
    """
    from scipy.integrate import quad

    share = 1 - percentile / 100
    if not 0 < share <= 1:
        raise ValueError(f"CNCE percentile {percentile} is outside [0, 100).")
    if share == 1 and k is not None:  # NCE's optimum log r is flat nowhere: its e^f outrun the quadrature
        raise ValueError("The ceiling at finite k is for CNCE (percentile > 0); NCE's at k -> inf is the true MI.")
    # ceiling_at(-x) = ceiling_at(x) (y -> -y), so integrate over x >= 0 with density 2 phi(x).
    value, _ = quad(
        lambda x: 2 * _pdf(x) * ceiling_at(x, rho, share, k)[0], 0.0, 9.0, limit=200, epsabs=1e-13, epsrel=1e-6
    )
    return value
