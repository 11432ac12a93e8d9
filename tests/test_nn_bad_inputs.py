"""Bad inputs to nova.nn raise precise errors instead of a silent wrong result or an unrelated
traceback (each case below did one of those before it was fixed)."""

import numpy as np
import pytest

import nova
from nova import nn

RNG = np.random.default_rng(3)
CFG = nn.GPT2Config(vocab_size=40, block_size=8, n_layer=1, n_head=2, n_embd=16)


@pytest.fixture(scope="module")
def gpt():
    return nn.GPT2.init(CFG, nova.random.key(0))


def test_narrow_integer_labels_index_every_class():
    # arange(C, dtype=labels.dtype) wrapped around for uint8/int8 labels and C > 256: label 1
    # also matched class 257, so one_hot had two ones and cross_entropy picked two logits.
    logits = RNG.standard_normal((3, 300)).astype(np.float32)
    labels = np.array([1, 44, 255], np.uint8)
    z = logits.astype(np.float64)
    m = z.max(-1)
    ref = np.mean(m + np.log(np.exp(z - m[:, None]).sum(-1)) - z[np.arange(3), labels])
    for dt in (np.uint8, np.int32, np.int64, np.uint32):
        np.testing.assert_allclose(float(nn.cross_entropy(logits, labels.astype(dt))),
                                   float(ref), rtol=1e-5)
    oh = np.asarray(nn.one_hot(labels, 300))
    np.testing.assert_array_equal(oh, np.eye(300, dtype=np.float32)[labels])
    np.testing.assert_array_equal(np.asarray(nn.one_hot(np.array([3], np.int8), 300)).sum(), 1.0)


def test_cross_entropy_rejects_out_of_range_labels_when_concrete():
    z = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"labels holds 2 value\(s\) outside \[0, 4\) other than "
                                         r"ignore_index -100: \[-1, 4\]"):
        nn.cross_entropy(z, np.array([-1, 4, 0], np.int32))
    assert float(nn.cross_entropy(z, np.array([-100, 3, 0], np.int32))) == pytest.approx(
        np.log(4.0))
    # Under jit the labels are not known; the documented value: logsumexp, counted.
    out = nova.jit(lambda a, b: nn.cross_entropy(a, b, reduction="none"))(
        z, np.array([7, 3, -100], np.int32))
    np.testing.assert_allclose(np.asarray(out), [np.log(4.0), np.log(4.0), 0.0], rtol=1e-6)
    with pytest.raises(TypeError, match="ignore_index must be an int, got float 1.5"):
        nn.cross_entropy(z, np.zeros(3, np.int32), ignore_index=1.5)
    with pytest.raises(TypeError, match="num_classes must be an int, got float 2.5"):
        nn.one_hot(np.zeros(3, np.int32), 2.5)


def test_gpt2_rejects_empty_and_out_of_vocabulary_ids(gpt):
    with pytest.raises(ValueError, match=r"idx of shape \(2, 0\) is empty"):
        gpt(np.zeros((2, 0), np.int32))  # was "zero-size array to reduction operation max"
    with pytest.raises(ValueError, match=r"idx holds 2 value\(s\) outside \[0, 40\): \[-1, 40\]"):
        gpt(np.array([[0, 40, -1]], np.int32))  # was silently clamped
    idx = np.array([[1, 2, 3]], np.int32)
    with pytest.raises(ValueError, match=r"labels holds 1 value\(s\) outside \[0, 40\)"):
        gpt.loss(idx, np.array([[1, 99, 2]], np.int32))
    assert np.isfinite(float(gpt.loss(idx, np.array([[1, -100, 2]], np.int32))))


def test_layer_constructors_check_their_arguments():
    k = nova.random.key(0)
    with pytest.raises(TypeError, match=r"GPT2.init: key must be a nova.random key .* got "
                                        r"NoneType"):
        nn.GPT2.init(CFG, None)  # was "dtype object is not supported by Nova"
    with pytest.raises(TypeError, match="key must be a nova.random key"):
        nn.Linear.init(0, 4, 3)
    with pytest.raises(TypeError, match=r"shape\[0\] must be an int, got float 2.5"):
        nn.Linear.init(k, 2.5, 3)  # was silently truncated to 2
    with pytest.raises(ValueError, match="n_head must be >= 1 and divide n_embd 16, got n_head 0"):
        nn.CausalSelfAttention.init(k, 16, 0)  # was ZeroDivisionError
    with pytest.raises(ValueError, match="n_head must be >= 0, got -2"):
        nn.CausalSelfAttention.init(k, 16, -2)  # was accepted
    with pytest.raises(ValueError, match="eps must be >= 0, got -1"):
        nn.LayerNorm.init(4, eps=-1.0)
    # layer_norm takes array-likes for weight/bias (a list raised AttributeError)
    y = nn.layer_norm(np.array([[1.0, 3.0]], np.float32), [2.0, 2.0], [1.0, 1.0])
    np.testing.assert_allclose(np.asarray(y), [[-1.0, 3.0]], rtol=1e-4)


def test_attention_argument_errors():
    q = np.ones((1, 4, 8), np.float32)
    with pytest.raises(ValueError, match=r"mask of shape \(3, 3\) does not broadcast to the "
                                         r"scores' \(\.\.\., Tq, Tk\) = \(\.\.\., 4, 4\)"):
        nn.scaled_dot_product_attention(q, q, q, mask=np.ones((3, 3), bool))
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\), got -0.5"):
        nn.scaled_dot_product_attention(q, q, q, dropout_p=-0.5)  # was treated as 0
    e = np.ones((4, 0), np.float32)
    with pytest.raises(ValueError, match="head dimension D .* is 0"):
        nn.scaled_dot_product_attention(e, e, np.ones((4, 2), np.float32))  # ZeroDivisionError
    with pytest.raises(TypeError, match="q, k and v must have one dtype, got float32, float64, "
                                        "float32"):
        nn.scaled_dot_product_attention(q, q.astype(np.float64), q)  # was silently promoted
