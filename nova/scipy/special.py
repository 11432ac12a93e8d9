"""nova.scipy.special: special functions built from nova.numpy (their gradients come from it),
as jax.scipy.special / scipy.special.

Algorithms: gammaln by the Lanczos approximation (g = 7, 9 coefficients; Lanczos 1964, the
coefficients of Godfrey's table as in Numerical Recipes 3rd ed. sec. 6.1) with the reflection
formula below 1/2; digamma by the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10 and the
asymptotic series (Abramowitz & Stegun 6.3.18), reflected below 1/2 (A&S 6.3.7); erfc as
1 - erf below 2 and by its continued fraction (A&S 7.1.14) above; erfinv by Giles' polynomial
approximations (M. Giles, "Approximating the erfinv function", GPU Computing Gems, 2010) then
two Newton steps on erf (float64 accuracy); log_ndtr by the asymptotic series (A&S 26.2.12)
below -5. All take float32 or float64 (ints and bools become float32) and broadcast their
arguments.

The second group: the regularized incomplete gamma functions by their series below a + 1 and
Legendre's continued fraction above (Numerical Recipes 3rd ed. sec. 6.2, Lentz's method), the
regularized incomplete beta by its continued fraction (NR sec. 6.4) with the symmetry
I_x(a, b) = 1 - I_{1-x}(b, a) above the mean; the Hurwitz zeta function by Euler-Maclaurin
summation (9 terms, then 12 Bernoulli corrections; as Cephes' zeta.c) and polygamma from it;
E1 by its power series up to 1 and its continued fraction beyond (A&S 5.1.11, 5.1.22); Ei by
its series below 40 and the asymptotic series above; erfcx from erfc's continued fraction;
i0 / i0e from Cephes' Chebyshev expansions (nova.numpy.i0), i1 / i1e by the power series
up to 8 and as i0e's derivative beyond.

The third group (each function's docstring names its sources): expn by its series and
continued fraction (A&S 5.1.12, 5.1.22), dawsn by Rybicki's sampling formula, fresnel and sici
by their series and the continued fractions of erfc / E1 at complex arguments, spence by the Bernoulli series of the dilogarithm, owens_t by Gauss-Legendre quadrature, hyp1f1
and hyp2f1 by their series with the Kummer, Pfaff, Euler and 1 - x transformations, bessel_jn
by Miller's backward recurrence.

Complex values (complex64 / complex128, as jax.scipy.special): wofz, the Faddeeva function, by
Weideman's rational series (SIAM J. Numer. Anal. 31, 1994); sph_harm_y by the normalized
associated Legendre recurrences; gamma, loggamma and erfcx also take complex arguments (the
principal log-gamma by Lanczos and the reflection formula; erfcx(z) = wofz(iz)), and so do
the elementary expit, logit, xlogy, xlog1py, boxcox, boxcox1p and logsumexp. The other
functions take real arguments only and raise TypeError for complex ones, as jax does.

Layout: this module holds the elementary functions (expit, logit, xlogy, xlog1py, entr, rel_entr,
kl_div, boxcox, boxcox1p, softmax, log_softmax, logsumexp) and re-exports the families:
special_error (erf, erfc, erfcx, erfinv, ndtr, ndtri, log_ndtr, owens_t, dawsn, fresnel),
special_gamma (gamma, beta and the incomplete gamma / beta functions), special_zeta (bernoulli,
zeta, polygamma, spence), special_expint (exp1, expi, expn, sici), special_bessel (i0, i0e, i1,
i1e, bessel_jn), special_hyper (hyp1f1, hyp2f1), special_complex (wofz and the complex gamma / loggamma / erfcx),
special_harmonic (sph_harm_y); special_common holds their shared helpers.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.numpy_impl.util import normalize_axes, promote
from nova.scipy.special_bessel import bessel_jn, i0, i0e, i1, i1e
from nova.scipy.special_common import _float, _inexact, _safe
from nova.scipy.special_complex import wofz
from nova.scipy.special_error import (
    dawsn,
    erf,
    erfc,
    erfcx,
    erfinv,
    fresnel,
    log_ndtr,
    ndtr,
    ndtri,
    owens_t,
)
from nova.scipy.special_expint import exp1, expi, expn, sici
from nova.scipy.special_gamma import (
    beta,
    betainc,
    betaln,
    comb,
    digamma,
    factorial,
    gamma,
    gammainc,
    gammaincc,
    gammaln,
    gammasgn,
    loggamma,
    multigammaln,
    poch,
)
from nova.scipy.special_harmonic import sph_harm_y
from nova.scipy.special_hyper import hyp1f1, hyp2f1
from nova.scipy.special_zeta import bernoulli, polygamma, spence, zeta

__all__ = [
    "bernoulli",
    "bessel_jn",
    "beta",
    "betainc",
    "betaln",
    "boxcox",
    "boxcox1p",
    "comb",
    "dawsn",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp1",
    "expi",
    "expit",
    "expn",
    "factorial",
    "fresnel",
    "gamma",
    "gammainc",
    "gammaincc",
    "gammaln",
    "gammasgn",
    "hyp1f1",
    "hyp2f1",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "kl_div",
    "log_ndtr",
    "log_softmax",
    "loggamma",
    "logit",
    "logsumexp",
    "multigammaln",
    "ndtr",
    "ndtri",
    "owens_t",
    "poch",
    "polygamma",
    "rel_entr",
    "sici",
    "softmax",
    "spence",
    "sph_harm_y",
    "wofz",
    "xlog1py",
    "xlogy",
    "zeta",
]


def expit(x):
    """The logistic function 1 / (1 + exp(-x)) (scipy.special.expit), without overflow; at
    complex x (as jax) the same formula, which has poles where exp(-x) = -1."""
    from nova import lax

    (x,) = _inexact(x)
    if jnp.iscomplexobj(x):
        return 1.0 / (1.0 + jnp.exp(-x))
    return lax.logistic(x)


def logit(p):
    """log(p / (1 - p)) (scipy.special.logit): -inf at 0, inf at 1, NaN outside [0, 1]; at
    complex p, log(p) - log(1 - p) with principal logs."""
    (p,) = _inexact(p)
    return jnp.log(p) - jnp.log1p(-p)


def xlogy(x, y):
    """x * log(y), 0 where x == 0 (even for y == 0), as scipy.special.xlogy (principal log at
    complex arguments)."""
    x, y = _inexact(x, y)
    safe = jnp.where(x == 0, jnp.ones_like(y), y)
    return jnp.where(x == 0, jnp.zeros_like(x), x * jnp.log(safe))


def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0 (even for y == -1), as scipy.special.xlog1py (principal
    log at complex arguments)."""
    x, y = _inexact(x, y)
    safe = jnp.where(x == 0, jnp.zeros_like(y), y)
    return jnp.where(x == 0, jnp.zeros_like(x), x * jnp.log1p(safe))


def entr(x):
    """-x log x for x > 0, 0 at 0, -inf for x < 0 (scipy.special.entr)."""
    (x,) = _float(x)
    safe = jnp.where(x > 0, x, jnp.ones_like(x))
    return jnp.where(x > 0, -x * jnp.log(safe),
                     jnp.where(x == 0, jnp.zeros_like(x), jnp.full_like(x, -jnp.inf)))


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along axis (scipy.special.softmax; nova.nn.functional.softmax)."""
    from nova.nn import functional as F

    (x,) = _float(x)
    return F.softmax(x, axis=axis)


def log_softmax(x, axis=-1):
    """x - logsumexp(x) along axis (scipy.special.log_softmax)."""
    from nova.nn import functional as F

    (x,) = _float(x)
    return F.log_softmax(x, axis=axis)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a))) over `axis`, computed stably (scipy.special.logsumexp).

    a: array (int and bool become float32); axis None, int or tuple (negative counts from the
    end); b: weights broadcastable with a (where b == 0 the term is left out even if a is inf);
    keepdims keeps the reduced axes as size 1. Returns the result with a's shape less `axis`, or
    `(log|s|, sign(s))` when return_sign=True (sign 0 for an empty or all -inf sum); without it a
    negative weighted sum gives NaN, as SciPy.

    Stability: exp runs on a shifted by (about) the maximum, so nothing overflows; a row of all
    -inf gives -inf, a +inf entry gives +inf. The shift is floor(max), which is exact enough for
    stability and not differentiable, so the gradient is exactly softmax(a) * b (no cotangent
    reaches the argmax) and stays finite for rows that hold -inf entries besides finite ones.
    Complex a (as jax and SciPy): the principal log of the sum, shifted by the real parts'
    maximum; with return_sign=True the first result is the real log|s| and the sign the
    complex phase s / |s|.
    Raises ValueError for an axis out of range, ShapeError when a and b do not broadcast.
    """
    if b is None:
        (x,) = promote("logsumexp", a, to_inexact=True)
    else:
        x, w = promote("logsumexp", a, b, to_inexact=True)
        # SciPy's rule: a zero weight removes its term, whatever a holds there.
        x = jnp.where(w != 0, x, -jnp.inf)
    axes = normalize_axes(axis, x.ndim)
    cplx = jnp.iscomplexobj(x)
    m = jnp.max(jnp.real(x), axis=axes, keepdims=True, initial=-jnp.inf)
    shift = jnp.floor(m)  # floor is not differentiable: no cotangent flows into the max
    shift = jnp.where(jnp.isfinite(shift), shift, jnp.zeros_like(shift))
    e = jnp.exp(x - shift)
    if b is not None:
        e = w * e
    s = jnp.sum(e, axis=axes, keepdims=True)
    if return_sign:
        mag = jnp.abs(s)
        if cplx:
            sign = jnp.where(mag == 0, jnp.zeros_like(s), s / jnp.where(mag == 0, 1.0, mag))
        else:
            sign = jnp.sign(s)
        s = mag
    out = jnp.log(s) + shift
    if not keepdims:
        out = jnp.squeeze(out, axis=axes) if axes else out
        if return_sign:
            sign = jnp.squeeze(sign, axis=axes) if axes else sign
    return (out, sign) if return_sign else out


def rel_entr(x, y):
    """x log(x / y) elementwise (scipy.special.rel_entr): 0 where x = 0 and y >= 0, inf where
    x < 0 or y <= 0 otherwise."""
    x, y = _float(x, y)
    pos = (x > 0) & (y > 0)
    v = x * jnp.log(_safe(pos, x, 1.0) / _safe(pos, y, 1.0))
    zero = (x == 0) & (y >= 0)
    return jnp.where(pos, v, jnp.where(zero, jnp.zeros_like(x), jnp.full_like(x, jnp.inf)))


def kl_div(x, y):
    """x log(x / y) - x + y elementwise (scipy.special.kl_div): y where x = 0 and y >= 0, inf
    where x < 0 or y <= 0 otherwise."""
    x, y = _float(x, y)
    pos = (x > 0) & (y > 0)
    xs, ys = _safe(pos, x, 1.0), _safe(pos, y, 1.0)
    v = xs * jnp.log(xs / ys) - xs + ys
    zero = (x == 0) & (y >= 0)
    return jnp.where(pos, v, jnp.where(zero, y, jnp.full_like(x, jnp.inf)))


def boxcox(x, lmbda):
    """The Box-Cox transform (scipy.special.boxcox): (x^lmbda - 1) / lmbda, log(x) at
    lmbda = 0; computed as expm1(lmbda log x) / lmbda (no cancellation for small lmbda).
    Complex arguments use the principal log, as jax."""
    x, lm = _inexact(x, lmbda)
    lx = jnp.log(x)
    zero = lm == 0
    return jnp.where(zero, lx, jnp.expm1(lm * lx) / _safe(~zero, lm, 1.0))


def boxcox1p(x, lmbda):
    """boxcox(1 + x, lmbda) accurate for small x (scipy.special.boxcox1p): via log1p(x);
    principal log at complex arguments."""
    x, lm = _inexact(x, lmbda)
    lx = jnp.log1p(x)
    zero = lm == 0
    return jnp.where(zero, lx, jnp.expm1(lm * lx) / _safe(~zero, lm, 1.0))
