"""nova.optim's schedules and nova.optim.losses against optax: schedule values at every step
past the end (boundaries included) for traced int32 counts under nova.jit and for Python ints;
loss values and gradients (against jax.grad of the optax loss) under nova.jit and eagerly;
masks, -inf logits, hard labels, the CTC forward variables, and bad input."""

import warnings

import jax
import jax.numpy as xnp
import numpy as np
import optax
import optax.losses as OL
import pytest

import nova
import nova.numpy as jnp
import nova.optim.losses as L
import nova.optim.schedule as S
from nova.scipy.special import logsumexp

# --- schedules ---------------------------------------------------------------------------------

SGDR = [
    {"init_value": 0.0, "peak_value": 0.1, "warmup_steps": 3, "decay_steps": 10},
    {"init_value": 0.01, "peak_value": 0.05, "warmup_steps": 2, "decay_steps": 15,
     "end_value": 1e-3},
]
BOUNDS = {5: 0.5, 20: 0.1, 21: 3.0}

# case -> (function name in both libraries, its arguments, the steps where the regime changes)
SCHEDULES = {
    "exponential_decay": ("exponential_decay", {
        "init_value": 0.5, "transition_steps": 7, "decay_rate": 0.8, "transition_begin": 3,
    }, [3, 4, 10]),
    "exponential_decay_staircase_floor": ("exponential_decay", {
        "init_value": 0.5, "transition_steps": 7, "decay_rate": 0.8, "transition_begin": 3,
        "staircase": True, "end_value": 0.2,
    }, [3, 9, 10, 17, 24, 31]),
    "exponential_growth_capped": ("exponential_decay", {
        "init_value": 0.5, "transition_steps": 4, "decay_rate": 1.5, "end_value": 2.0,
    }, [0, 13, 14]),
    "piecewise_constant": ("piecewise_constant_schedule", {
        "init_value": 0.3, "boundaries_and_scales": BOUNDS,
    }, [4, 5, 19, 20, 21]),
    "piecewise_linear": ("piecewise_interpolate_schedule", {
        "interpolate_type": "linear", "init_value": 0.3, "boundaries_and_scales": BOUNDS,
    }, [5, 20, 21]),
    "piecewise_cosine": ("piecewise_interpolate_schedule", {
        "interpolate_type": "cosine", "init_value": 0.3, "boundaries_and_scales": BOUNDS,
    }, [5, 20, 21]),
    "cosine_onecycle": ("cosine_onecycle_schedule", {
        "transition_steps": 50, "peak_value": 0.1,
    }, [15, 50]),
    "linear_onecycle": ("linear_onecycle_schedule", {
        "transition_steps": 50, "peak_value": 0.1, "pct_start": 0.2, "pct_final": 0.7,
    }, [10, 35, 50]),
    "warmup_exponential_decay": ("warmup_exponential_decay_schedule", {
        "init_value": 0.0, "peak_value": 0.1, "warmup_steps": 5, "transition_steps": 7,
        "decay_rate": 0.5, "transition_begin": 2, "staircase": True, "end_value": 0.01,
    }, [5, 7, 14, 21]),
    "warmup_constant": ("warmup_constant_schedule", {
        "init_value": 0.01, "peak_value": 0.1, "warmup_steps": 9,
    }, [9]),
    "sgdr": ("sgdr_schedule", {"cosine_kwargs": SGDR}, [3, 10, 12, 25]),
}
STEPS = np.r_[0:64, 1000].astype(np.int32)


def _pair(name):
    fn, kwargs, edges = SCHEDULES[name]
    return getattr(S, fn)(**kwargs), getattr(optax, fn)(**kwargs), edges


def _assert_close(actual, expected, rtol, what="", atol=None):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol if atol is None else atol,
                               err_msg=what)


@pytest.fixture(scope="module")
def schedule_reference():
    """optax's value of every schedule at every step of STEPS (one XLA compile)."""
    refs = {name: _pair(name)[1] for name in SCHEDULES}
    return jax.jit(lambda s: {name: jax.vmap(ref)(s) for name, ref in refs.items()})(STEPS)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedule_matches_optax(name, schedule_reference):
    ours, _, edges = _pair(name)
    expected = np.asarray(schedule_reference[name])
    # A traced int32 count (as an optimizer's state holds) at every step to past the end; the
    # relative error counts even for the tiny end values of the one-cycle schedules.
    traced = nova.jit(ours)
    got = [traced(jnp.asarray(step, dtype=jnp.int32)) for step in STEPS]
    assert all(g.dtype == jnp.float32 and g.shape == () for g in got)
    _assert_close(np.array(got), expected, 1e-6, name, atol=1e-12)
    # Python ints on either side of each boundary, eagerly.
    for i in sorted({max(e + d, 0) for e in edges for d in (-1, 0, 1)} | {len(STEPS) - 1}):
        step = int(STEPS[i])
        _assert_close(ours(step), expected[i], 1e-6, f"{name} at Python int {step}", atol=1e-12)


def test_schedule_values_at_known_steps():
    pc = S.piecewise_constant_schedule(1.0, {10: 0.1, 20: 0.5})
    assert [float(pc(s)) for s in (9, 10, 19, 20)] == pytest.approx([1.0, 0.1, 0.1, 0.05])
    lin = S.piecewise_interpolate_schedule("linear", 1.0, {4: 0.1, 8: 0.01})
    assert [float(lin(s)) for s in (0, 2, 4, 6, 8, 10)] == pytest.approx(
        [1.0, 0.55, 0.1, 0.0505, 0.001, 0.001])
    assert float(S.piecewise_interpolate_schedule("cosine", 2.0)(-1)) == 0.0  # as optax
    # Degenerate settings are the constant init value, as optax.
    assert S.exponential_decay(0.3, 0, 0.5)(7) == 0.3
    assert S.exponential_decay(0.3, 5, 0.0)(7) == 0.3


def test_schedule_bad_arguments():
    with pytest.raises(ValueError, match="piecewise_constant_schedule.*scale at step 3"):
        S.piecewise_constant_schedule(1.0, {3: -0.5})
    with pytest.raises(ValueError, match="interpolate_type must be 'linear' or 'cosine'"):
        S.piecewise_interpolate_schedule("quadratic", 1.0, {3: 0.5})
    with pytest.raises(TypeError, match="boundaries_and_scales must be a dict"):
        S.piecewise_constant_schedule(1.0, [(3, 0.5)])
    with pytest.raises(ValueError, match="cosine_onecycle_schedule: transition_steps must be"):
        S.cosine_onecycle_schedule(0, 0.1)
    with pytest.raises(ValueError, match="linear_onecycle_schedule: pct_final"):
        S.linear_onecycle_schedule(100, 0.1, pct_start=0.5, pct_final=0.4)
    with pytest.raises(TypeError, match="exponential_decay: staircase must be a bool"):
        S.exponential_decay(1.0, 10, 0.5, staircase="yes")
    with pytest.raises(ValueError, match="exponential_decay: transition_begin"):
        S.exponential_decay(1.0, 10, 0.5, transition_begin=-1)
    with pytest.raises(ValueError, match="sgdr_schedule: cosine_kwargs is empty"):
        S.sgdr_schedule([])
    with pytest.raises(TypeError, match="sgdr_schedule: cycle 0"):
        S.sgdr_schedule([{"init_value": 0.0, "peak_value": 1.0, "warmup_steps": 1}])


# --- losses: values and gradients against optax ------------------------------------------------

_rng = np.random.default_rng(0)
X = _rng.standard_normal((4, 6)).astype(np.float32)
Y = _rng.standard_normal((4, 6)).astype(np.float32)
Z = _rng.standard_normal((4, 6)).astype(np.float32)
LABELS = np.array([2, 0, 5, 3], np.int32)
COLUMN_LABELS = np.array([1, 3, 0, 2, 3, 1], np.int32)
P01 = _rng.uniform(size=(4, 6)).astype(np.float32)
HARD = (P01 > 0.5).astype(np.float32)
PROBS = np.asarray(jax.nn.softmax(Y))
SIGNS = np.where(Z > 0, 1.0, -1.0).astype(np.float32)
MASK = _rng.uniform(size=(4, 6)) > 0.3
MASK[:, 0] = True
PAIRS = np.array([0, 1, 0, 1], np.int32)
ZERO_T = PROBS.copy()
ZERO_T[0, :2] = 0.0
ZERO_T[0] /= ZERO_T[0].sum()


# name -> loss(mod, x): every loss at x (the differentiated input) with fixed other arguments;
# mod is nova.optim.losses or optax.losses, so one spelling builds both sides.
LOSSES = {
    "squared_error": lambda mod, x: mod.squared_error(x, Y),
    "l2_loss": lambda mod, x: mod.l2_loss(x),
    "huber_loss": lambda mod, x: mod.huber_loss(x, Y, delta=0.7),
    "log_cosh": lambda mod, x: mod.log_cosh(x, Y),
    "hinge_loss": lambda mod, x: mod.hinge_loss(x, SIGNS),
    "perceptron_loss": lambda mod, x: mod.perceptron_loss(x, SIGNS),
    "multiclass_hinge_loss": lambda mod, x: mod.multiclass_hinge_loss(x, LABELS),
    "multiclass_perceptron_loss": lambda mod, x: mod.multiclass_perceptron_loss(x, LABELS),
    "sigmoid_binary_cross_entropy": lambda mod, x: mod.sigmoid_binary_cross_entropy(3 * x, P01),
    "sigmoid_focal_loss": lambda mod, x: mod.sigmoid_focal_loss(3 * x, P01, alpha=0.3),
    "sigmoid_focal_loss_hard": lambda mod, x: mod.sigmoid_focal_loss(3 * x, HARD, gamma=1.5),
    "softmax_cross_entropy": lambda mod, x: mod.softmax_cross_entropy(x, PROBS),
    "softmax_cross_entropy_where": lambda mod, x: mod.softmax_cross_entropy(x, PROBS, where=MASK),
    "softmax_cross_entropy_axis0": lambda mod, x: mod.softmax_cross_entropy(x, PROBS, axis=0),
    "integer_labels": lambda mod, x: mod.softmax_cross_entropy_with_integer_labels(x, LABELS),
    "integer_labels_where": lambda mod, x: mod.softmax_cross_entropy_with_integer_labels(
        x, LABELS, where=MASK),
    "integer_labels_axis0": lambda mod, x: mod.softmax_cross_entropy_with_integer_labels(
        x, COLUMN_LABELS, axis=0),
    "integer_labels_axis_tuple": lambda mod, x: mod.softmax_cross_entropy_with_integer_labels(
        x.reshape(4, 2, 3), LABELS, axis=(2, 1)),
    "safe_softmax_cross_entropy": lambda mod, x: mod.safe_softmax_cross_entropy(x, ZERO_T),
    "poly_loss_cross_entropy": lambda mod, x: mod.poly_loss_cross_entropy(x, PROBS, epsilon=1.5),
    "poly_loss_where": lambda mod, x: mod.poly_loss_cross_entropy(x, PROBS, where=MASK),
    "kl_divergence": lambda mod, x: mod.kl_divergence(x, ZERO_T),
    "kl_divergence_where": lambda mod, x: mod.kl_divergence(x, ZERO_T, where=MASK),
    "kl_divergence_with_log_targets": lambda mod, x: mod.kl_divergence_with_log_targets(
        x, np.log(PROBS)),
    "generalized_kl_divergence": lambda mod, x: mod.generalized_kl_divergence(x, P01, axis=None),
    "cosine_similarity": lambda mod, x: mod.cosine_similarity(x, Y),
    "cosine_similarity_where": lambda mod, x: mod.cosine_similarity(x, Y, epsilon=0.1, where=MASK),
    "cosine_distance": lambda mod, x: mod.cosine_distance(x, Y, axis=0),
    "smooth_labels": lambda mod, x: mod.smooth_labels(x, 0.1),
    "smooth_labels_where": lambda mod, x: mod.smooth_labels(x, 0.1, where=MASK),
    "smooth_labels_axes": lambda mod, x: mod.smooth_labels(x.reshape(4, 2, 3), 0.2, axis=(0, 2)),
    "sparsemax_loss": lambda mod, x: mod.sparsemax_loss(x, HARD),
    "multiclass_sparsemax_loss": lambda mod, x: mod.multiclass_sparsemax_loss(x, LABELS),
    "triplet_margin_loss": lambda mod, x: mod.triplet_margin_loss(x, Y, Z),
    # Odd degrees take the differences as they are (optax's definition): keep them positive.
    "triplet_margin_loss_p3": lambda mod, x: mod.triplet_margin_loss(
        x, X - 1 - np.abs(Y), X - 1 - np.abs(Z), norm_degree=3, margin=0.5),
    "ntxent": lambda mod, x: mod.ntxent(x, PAIRS),
    "ntxent_warm": lambda mod, x: mod.ntxent(x, PAIRS, temperature=0.5),
    "ranking_softmax_loss": lambda mod, x: mod.ranking_softmax_loss(x, np.floor(3 * P01)),
    "ranking_softmax_loss_where": lambda mod, x: mod.ranking_softmax_loss(
        x, np.floor(3 * P01), where=MASK, weights=Y),
    "ranking_softmax_loss_none": lambda mod, x: mod.ranking_softmax_loss(
        x, np.floor(3 * P01), where=MASK, reduce_fn=None),
}

def _values_and_gradients(mod, grad, x):
    return ({k: f(mod, x) for k, f in LOSSES.items()},
            {k: grad(lambda x, f=LOSSES[k]: f(mod, x).sum())(x) for k in LOSSES})


@pytest.fixture(scope="module")
def reference():
    """optax's values and jax.grad's gradients of every loss at X (one XLA compile)."""
    return jax.jit(lambda x: _values_and_gradients(OL, jax.grad, x))(X)


@pytest.fixture(scope="module")
def jitted():
    """Ours: every loss and every gradient traced into one nova.jit Program."""
    return nova.jit(lambda x: _values_and_gradients(L, nova.grad, x))(X)


@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_value_matches_optax_under_jit(name, reference, jitted):
    _assert_close(jitted[0][name], reference[0][name], 1e-5, name)


@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_gradient_matches_jax_grad(name, reference, jitted):
    _assert_close(jitted[1][name], reference[1][name], 1e-5, name)


# --- CTC ---------------------------------------------------------------------------------------

B, T, K, N = 3, 9, 5, 4
CTC_LOGITS = _rng.standard_normal((B, T, K)).astype(np.float32)
FRAME_PADS = np.zeros((B, T), np.float32)
FRAME_PADS[1, 7:] = 1.0
FRAME_PADS[2, 5:] = 1.0
CTC_LABELS = np.array([[3, 3, 1, 4], [2, 1, 2, 0], [4, 0, 0, 0]], np.int32)  # a repeat in row 0
LABEL_PADS = np.zeros((B, N), np.float32)
LABEL_PADS[1, 3:] = 1.0
LABEL_PADS[2, 1:] = 1.0
# The same sequences with the blank as the last class.
CTC_LABELS_LAST_BLANK = np.where(LABEL_PADS > 0, 0, CTC_LABELS - 1).astype(np.int32)


def _ctc_both_blanks(mod, grad, lg):
    """(loss, forward probabilities, gradient of the summed loss) for blank 0 and blank K - 1."""
    out = []
    for labels, blank in ((CTC_LABELS, 0), (CTC_LABELS_LAST_BLANK, K - 1)):
        def f(lg, labels=labels, blank=blank):
            loss, phi, emit = mod.ctc_loss_with_forward_probs(lg, FRAME_PADS, labels, LABEL_PADS,
                                                              blank_id=blank)
            return loss.sum(), (loss, phi, emit)
        (_, aux), g = grad(f, has_aux=True)(lg)
        out.append((*aux, g))
    return out


def test_ctc_matches_optax():
    got = nova.jit(lambda lg: _ctc_both_blanks(L, nova.value_and_grad, lg))(CTC_LOGITS)
    want = jax.jit(lambda lg: _ctc_both_blanks(OL, jax.value_and_grad, lg))(CTC_LOGITS)
    for (loss, phi, emit, grad), (w_loss, w_phi, w_emit, w_grad) in zip(got, want, strict=True):
        assert float(np.min(w_loss)) > 0 and float(np.max(w_loss)) < 1e3  # feasible sequences
        _assert_close(loss, w_loss, 1e-5, "per_seq_loss")
        for a, e, what in ((phi, w_phi, "logalpha_phi"), (emit, w_emit, "logalpha_emit")):
            a, e = np.asarray(a), np.asarray(e)
            assert a.shape == e.shape, what
            reachable = e > -1e3  # impossible states hold about log_epsilon in both
            np.testing.assert_array_equal(a > -1e3, reachable, err_msg=what)
            np.testing.assert_allclose(a[reachable], e[reachable], rtol=1e-5, atol=1e-5,
                                       err_msg=what)
        _assert_close(grad, w_grad, 1e-5, "ctc gradient")
        assert not np.any(np.asarray(grad)[2, 5:])  # padded frames get no gradient


def test_ctc_single_frame_and_empty_label():
    # One frame and label lengths 1 and 0: p = softmax(label) and softmax(blank) exactly.
    logits = np.array([[[0.5, 1.0, -1.0]], [[2.0, 0.0, 0.0]]], np.float32)
    loss = nova.jit(L.ctc_loss)(logits, np.zeros((2, 1), np.float32),
                                np.array([[1], [2]], np.int32), np.array([[0.0], [1.0]],
                                                                          np.float32))
    log_p = np.asarray(jax.nn.log_softmax(logits[:, 0]))
    _assert_close(loss, [-log_p[0, 1], -log_p[1, 0]], 1e-6)


# --- edge cases --------------------------------------------------------------------------------


EXTREME = np.tile(np.array([-100.0, -20.0, -1e-3, 0.0, 1e-3, 20.0, 100.0], np.float32), (2, 1))
EXTREME_LABELS = np.array([[0.0], [1.0]], np.float32) * np.ones_like(EXTREME)
MASKED_LOGITS = np.where(MASK, X, -np.inf).astype(np.float32)
MASKED_TARGETS = np.where(MASK, PROBS, 0.0).astype(np.float32)
MASKED_TARGETS /= MASKED_TARGETS.sum(-1, keepdims=True)
ROWS = np.array([True, False, True, True])

# group -> (x, [(loss, labels, keyword arguments)]): value and gradient of sum(loss(x, labels)).
EDGE_CASES = {
    "hard labels, large logits": (EXTREME, [
        ("sigmoid_binary_cross_entropy", EXTREME_LABELS, {}),
        ("sigmoid_focal_loss", EXTREME_LABELS, {}),
        ("sigmoid_focal_loss", EXTREME_LABELS, {"alpha": 0.25, "gamma": 0.5})]),
    "-inf logits": (MASKED_LOGITS, [
        ("softmax_cross_entropy_with_integer_labels", LABELS * 0, {}),  # class 0 is kept
        ("safe_softmax_cross_entropy", MASKED_TARGETS, {}),
        ("softmax_cross_entropy", MASKED_TARGETS, {"where": MASK})]),
    "masked rows": (X, [  # a mask of the batch shape (ROWS) covers whole rows
        (fn, labels, {"where": where})
        for fn, labels in (("softmax_cross_entropy_with_integer_labels", LABELS),
                           ("softmax_cross_entropy", PROBS))
        for where in (MASK & ROWS[:, None], ROWS)]),
}


def _edge_values_and_grads(mod, value_and_grad, xs):
    return {group: [value_and_grad(lambda x, fn=fn, y=y, kw=kw: getattr(mod, fn)(x, y, **kw)
                                   .sum())(xs[group]) for fn, y, kw in cases]
            for group, (_, cases) in EDGE_CASES.items()}


@pytest.fixture(scope="module")
def edge_results():
    """{group: [((value, gradient) ours, (value, gradient) optax's)]}, one compile each."""
    xs = {group: x for group, (x, _) in EDGE_CASES.items()}
    got = nova.jit(lambda xs: _edge_values_and_grads(L, nova.value_and_grad, xs))(xs)
    want = jax.jit(lambda xs: _edge_values_and_grads(OL, jax.value_and_grad, xs))(xs)
    return {group: list(zip(got[group], want[group], strict=True)) for group in EDGE_CASES}


@pytest.mark.parametrize("group", list(EDGE_CASES))
def test_edge_cases_finite_and_match_optax(group, edge_results):
    for (fn, _, kw), ((value, grad), (w_value, w_grad)) in zip(
            EDGE_CASES[group][1], edge_results[group], strict=True):
        what = f"{group}: {fn} {sorted(kw)}"
        assert np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad))), what
        _assert_close(value, w_value, 1e-5, what)
        _assert_close(grad, w_grad, 1e-5, what)
    if group == "masked rows":
        for (_, grad), _ in edge_results[group]:
            assert not np.any(np.asarray(grad)[1])  # the masked row: no gradient, no NaN


def test_masked_rows_are_zero_and_unmasked_neg_inf_is_nan():
    per_row, unmasked = nova.jit(lambda x, y: (
        L.softmax_cross_entropy_with_integer_labels(x, LABELS, where=ROWS),
        L.softmax_cross_entropy(y, MASKED_TARGETS)))(X, MASKED_LOGITS)
    assert float(per_row[1]) == 0.0 and np.all(np.asarray(per_row)[[0, 2, 3]] > 0)
    # Without the mask the -inf logits of zero-probability classes give NaN (0 * -inf), as optax.
    assert np.all(np.isnan(np.asarray(unmasked)[~MASK.all(axis=1)]))


def test_kl_divergence_zero_targets_eagerly():
    log_p = np.asarray(jax.nn.log_softmax(X))
    value, (g_log_p, g_t) = nova.value_and_grad(
        lambda a, b: jnp.sum(L.kl_divergence(a, b)), argnums=(0, 1))(log_p, ZERO_T)
    ref, ref_log_p = jax.value_and_grad(lambda a: xnp.sum(OL.kl_divergence(a, ZERO_T)))(log_p)
    _assert_close(value, ref, 1e-6)
    _assert_close(g_log_p, ref_log_p, 1e-6)
    g_t = np.asarray(g_t)
    assert np.all(np.isfinite(g_t))  # jax.grad gives NaN at the zero targets
    nonzero = ZERO_T > 0
    _assert_close(g_t[nonzero], np.log(ZERO_T[nonzero]) + 1 - log_p[nonzero], 1e-5)


def test_ranking_sum_fenchel_young_and_deprecated_kl():
    rel = np.floor(3 * P01)
    none = np.zeros_like(MASK)

    def ours(x):
        with pytest.warns(DeprecationWarning, match="generalized_kl_divergence"):
            convex = L.convex_kl_divergence(x, P01)
        return (L.ranking_softmax_loss(x, rel, where=MASK, reduce_fn=jnp.sum),
                L.ranking_softmax_loss(x, rel, where=none),
                L.make_fenchel_young_loss(logsumexp)(x, PROBS), convex)

    got = nova.jit(ours)(X)
    _assert_close(got[0], OL.ranking_softmax_loss(X, rel, where=MASK, reduce_fn=xnp.sum), 1e-5)
    assert float(got[1]) == 0.0  # every list masked: the mean is 0, as optax
    _assert_close(got[2], OL.softmax_cross_entropy(X, PROBS), 1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        _assert_close(got[3], OL.convex_kl_divergence(X, P01), 1e-5)


def test_bad_input_raises():
    ints = np.ones((4, 6), np.int32)
    with pytest.raises(TypeError, match="softmax_cross_entropy: logits must be a floating"):
        L.softmax_cross_entropy(ints, PROBS)
    with pytest.raises(TypeError, match="with_integer_labels: labels must be an integer"):
        L.softmax_cross_entropy_with_integer_labels(X, LABELS.astype(np.float32))
    with pytest.raises(ValueError, match=r"labels of shape \(3,\) do not match scores"):
        L.multiclass_hinge_loss(X, LABELS[:3])
    with pytest.raises(ValueError, match=r"labels holds 1 value\(s\) outside \[0, 6\)"):
        L.softmax_cross_entropy_with_integer_labels(X, np.array([0, 6, 1, 2], np.int32))
    with pytest.raises(TypeError, match="axis must be an int or a tuple"):
        L.softmax_cross_entropy_with_integer_labels(X, LABELS, axis=None)
    with pytest.raises(ValueError, match=r"squared_error: predictions has shape \(4, 6\)"):
        L.squared_error(X, Y[:2])
    with pytest.raises(ValueError, match="perceptron_loss"):
        L.perceptron_loss(X, SIGNS.T)
    with pytest.raises(ValueError, match="ntxent: expected embeddings"):
        L.ntxent(X, PAIRS[:3])
    with pytest.raises(ValueError, match=r"ctc_loss_with_forward_probs: expected logits"):
        L.ctc_loss(CTC_LOGITS[0], FRAME_PADS, CTC_LABELS, LABEL_PADS)
    with pytest.raises(ValueError, match="blank_id 5 is not a class"):
        L.ctc_loss(CTC_LOGITS, FRAME_PADS, CTC_LABELS, LABEL_PADS, blank_id=5)
    with pytest.raises(ValueError, match="labels holds"):
        L.ctc_loss(CTC_LOGITS, FRAME_PADS, CTC_LABELS + 2, LABEL_PADS)
