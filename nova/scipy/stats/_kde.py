"""gaussian_kde: kernel density estimation with Gaussian kernels (scipy.stats.gaussian_kde,
jax.scipy.stats.gaussian_kde)."""

from __future__ import annotations

import math
import numbers

import nova.numpy as jnp
from nova.scipy import linalg, special
from nova.scipy.stats import _common as c


def _log_mixture(points, centers, log_weights, chol):
    """log sum_i w_i N(points_j; centers_i, L L^T) for points (d, m), centers (d, n) and the
    lower Cholesky factor L: both sides whitened by L, the squared distances summed one
    dimension at a time (differences, not |p|^2 + |c|^2 - 2 p.c, which cancels for points near
    the centers), then a logsumexp over the centers. Returns (m,)."""
    wp = linalg.solve_triangular(chol, points, lower=True)
    wc = linalg.solve_triangular(chol, centers, lower=True)
    d2 = jnp.zeros((points.shape[1], centers.shape[1]), dtype=points.dtype)
    for k in range(points.shape[0]):
        diff = wp[k][:, None] - wc[k][None, :]
        d2 = d2 + diff * diff
    log_norm = -0.5 * points.shape[0] * c.LOG_2PI - jnp.sum(jnp.log(jnp.diagonal(chol)))
    return special.logsumexp(-0.5 * d2 + log_weights[None, :], axis=1) + log_norm


def _is_scalar(v) -> bool:
    if isinstance(v, bool):
        return False
    return isinstance(v, numbers.Real) or (getattr(v, "ndim", None) == 0 and not callable(v))


class gaussian_kde:
    """A Gaussian kernel density estimate of the distribution of `dataset`
    (scipy.stats.gaussian_kde).

    dataset: (d, n) array of n points in d dimensions, or (n,) for d = 1 (ints become float32,
    float64 stays). bw_method: 'scott' (the default, factor neff^(-1/(d+4)); D. W. Scott,
    "Multivariate Density Estimation", 1992), 'silverman' ((neff (d+2) / 4)^(-1/(d+4));
    B. W. Silverman, "Density Estimation for Statistics and Data Analysis", 1986), a scalar
    factor, or a callable taking the gaussian_kde and returning the factor. weights: optional
    (n,) weights (normalised to sum 1; neff = 1 / sum w^2 is the effective sample size).

    The kernel covariance is the weighted sample covariance of the data times factor^2.
    Attributes: dataset, weights, d, n, neff, factor, covariance, inv_cov, cho_cov (its lower
    Cholesky factor), log_det (of 2 pi covariance, as SciPy's). A plain Python object (not a
    pytree): build it inside a jitted function to trace through it. Raises ValueError for a
    dataset of fewer than 2 values, weights that are not (n,), or a bad bw_method. A singular
    covariance (d > n, or collinear data) gives NaN densities (SciPy raises).
    """

    def __init__(self, dataset, bw_method=None, weights=None):
        (data,) = c.promote("gaussian_kde", dataset)
        data = jnp.atleast_2d(data)
        if data.size <= 1:
            raise ValueError(f"gaussian_kde: `dataset` needs more than one element, got shape "
                             f"{data.shape}")
        self.dataset = data
        self.d, self.n = data.shape
        if weights is None:
            w = jnp.full((self.n,), 1.0 / self.n, dtype=data.dtype)
        else:
            w = jnp.asarray(weights, dtype=data.dtype)
            if w.ndim != 1 or w.shape[0] != self.n:
                raise ValueError(f"gaussian_kde: `weights` must have shape ({self.n},) for a "
                                 f"dataset of shape {data.shape}, got {w.shape}")
            w = w / jnp.sum(w)
        self.weights = w
        self.neff = 1.0 / jnp.sum(w * w)
        self.set_bandwidth(bw_method)

    def scotts_factor(self):
        """Scott's rule: neff^(-1/(d+4))."""
        return self.neff ** (-1.0 / (self.d + 4))

    def silverman_factor(self):
        """Silverman's rule: (neff (d+2) / 4)^(-1/(d+4))."""
        return (self.neff * (self.d + 2) / 4.0) ** (-1.0 / (self.d + 4))

    def covariance_factor(self):
        """The bandwidth factor the kernel covariance is scaled by (squared)."""
        return self._factor_rule()

    def set_bandwidth(self, bw_method=None):
        """Sets the bandwidth rule ('scott' or None, 'silverman', a scalar, or a callable of
        the gaussian_kde) and recomputes the kernel covariance. Raises ValueError otherwise."""
        if bw_method is None or isinstance(bw_method, str) and bw_method == "scott":
            self._factor_rule = self.scotts_factor
        elif isinstance(bw_method, str) and bw_method == "silverman":
            self._factor_rule = self.silverman_factor
        elif _is_scalar(bw_method):
            value = jnp.asarray(bw_method, dtype=self.dataset.dtype)
            self._factor_rule = lambda: value
        elif callable(bw_method):
            self._factor_rule = lambda: bw_method(self)
        else:
            raise ValueError(f"gaussian_kde: bw_method must be 'scott', 'silverman', a scalar "
                             f"or a callable, got {bw_method!r}")
        self.factor = jnp.asarray(self.covariance_factor(), dtype=self.dataset.dtype)
        data_cov = jnp.atleast_2d(jnp.cov(self.dataset, rowvar=True, bias=False,
                                          aweights=self.weights))
        self.covariance = data_cov * self.factor ** 2
        self.cho_cov = jnp.linalg.cholesky(self.covariance)

    @property
    def inv_cov(self):
        """The inverse of the kernel covariance (d, d), from its Cholesky factor."""
        return linalg.cho_solve((self.cho_cov, True), jnp.eye(self.d, dtype=self.cho_cov.dtype))

    @property
    def log_det(self):
        """log det(2 pi covariance), SciPy's normalising term of the kernel (0-d)."""
        return self.d * c.LOG_2PI + 2.0 * jnp.sum(jnp.log(jnp.diagonal(self.cho_cov)))

    def _points(self, name, points):
        (pts,) = c.promote(f"gaussian_kde.{name}", points)
        pts = jnp.atleast_2d(pts.astype(jnp.result_type(pts, self.dataset)))
        if pts.shape[0] != self.d:
            if pts.shape == (1, self.d):  # one point given as a row
                return pts.reshape(self.d, 1)
            raise ValueError(f"gaussian_kde.{name}: points must have shape ({self.d}, m) for "
                             f"a {self.d}-dimensional estimate, got {pts.shape}")
        return pts

    def logpdf(self, x):
        """log of the density at x ((d, m), or (m,) for d = 1): (m,), by a logsumexp over the
        kernels (finite far from the data, where the density underflows)."""
        pts = self._points("logpdf", x)
        return _log_mixture(pts, self.dataset.astype(pts.dtype),
                            jnp.log(self.weights).astype(pts.dtype),
                            self.cho_cov.astype(pts.dtype))

    def evaluate(self, points):
        """The density at points ((d, m), or (m,) for d = 1): (m,)."""
        return jnp.exp(self.logpdf(points))

    __call__ = evaluate
    pdf = evaluate

    def integrate_gaussian(self, mean, cov):
        """The integral of the estimate times the Gaussian N(mean, cov) (mean (d,), cov (d, d)):
        sum_i w_i N(mean; x_i, covariance + cov), a 0-d array. Raises ValueError for other
        shapes."""
        (mean,) = c.promote("gaussian_kde.integrate_gaussian", mean)
        (cov,) = c.promote("gaussian_kde.integrate_gaussian", cov)
        mean, cov = jnp.atleast_1d(mean), jnp.atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"gaussian_kde.integrate_gaussian: mean must have shape "
                             f"({self.d},), got {mean.shape}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"gaussian_kde.integrate_gaussian: cov must have shape "
                             f"({self.d}, {self.d}), got {cov.shape}")
        chol = jnp.linalg.cholesky(self.covariance + cov)
        log_v = _log_mixture(mean[:, None].astype(self.dataset.dtype), self.dataset,
                             jnp.log(self.weights), chol)
        return jnp.exp(log_v[0])

    def integrate_box_1d(self, low, high):
        """The mass of a 1-d estimate between low and high: sum_i w_i (ndtr((high - x_i) / s)
        - ndtr((low - x_i) / s)), s the kernel's standard deviation. Raises ValueError for
        d > 1."""
        if self.d != 1:
            raise ValueError(f"gaussian_kde.integrate_box_1d: the estimate must be "
                             f"1-dimensional, it is {self.d}-dimensional")
        low, high = c.promote("gaussian_kde.integrate_box_1d", low, high)
        s = jnp.sqrt(self.covariance[0, 0])
        x = self.dataset[0]
        mass = special.ndtr((high - x) / s) - special.ndtr((low - x) / s)
        return jnp.sum(self.weights * mass)

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        """The mass inside a box: integrate_box_1d for a 1-d estimate. Raises
        NotImplementedError for d > 1 (that needs the multivariate normal CDF)."""
        if self.d == 1:
            return self.integrate_box_1d(jnp.ravel(jnp.asarray(low_bounds))[0],
                                         jnp.ravel(jnp.asarray(high_bounds))[0])
        raise NotImplementedError("gaussian_kde.integrate_box: boxes in more than one dimension "
                                  "are not supported (they need the multivariate normal CDF)")

    def integrate_kde(self, other):
        """The integral of the product of this estimate and `other` (a gaussian_kde of the same
        dimension): sum_ij w_i v_j N(x_i; y_j, covariance + other.covariance), a 0-d array.
        Raises ValueError when the dimensions differ."""
        if other.d != self.d:
            raise ValueError(f"gaussian_kde.integrate_kde: the estimates have dimensions "
                             f"{self.d} and {other.d}")
        chol = jnp.linalg.cholesky(self.covariance + other.covariance)
        log_v = _log_mixture(other.dataset, self.dataset, jnp.log(self.weights), chol)
        return jnp.sum(other.weights * jnp.exp(log_v))

    def resample(self, key, shape=()):
        """Samples of the estimate, as jax.scipy.stats.gaussian_kde.resample: a data point drawn
        by weight plus N(0, covariance) noise. key: a nova.random key; shape: the sample shape.
        Returns (d, *shape)."""
        from nova import random

        shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        pick_key, noise_key = random.split(key)
        idx = random.choice(pick_key, self.n, shape=shape, p=self.weights)
        z = random.normal(noise_key, (self.d, math.prod(shape)), dtype=self.dataset.dtype)
        noise = (self.cho_cov @ z).reshape((self.d,) + shape)
        return jnp.take(self.dataset, idx, axis=1) + noise
