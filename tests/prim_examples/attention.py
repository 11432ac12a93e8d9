"""Examples for the fused attention primitives (flash_attention_fwd / flash_attention_bwd)."""

import numpy as np


def _qkv(rng, batch=(2,), tq=3, tk=3, d=2, dv=3):
    q = rng.standard_normal(batch + (tq, d))
    k = rng.standard_normal(batch + (tk, d))
    v = rng.standard_normal(batch + (tk, dv))
    return q, k, v


def _fwd(mask_kind, tk=3):
    def ex(rng):
        q, k, v = _qkv(rng, tk=tk)
        args = [q, k, v]
        fill = float("-inf")
        if mask_kind == "select":
            keep = np.ones((3, tk), bool)
            keep[0, 1:] = False
            args.append(keep)
            fill = -3.0
        elif mask_kind == "add":
            args.append(rng.uniform(-1, 1, (3, tk)))
        return args, {"scale": 0.7, "mask_kind": mask_kind, "fill": fill}

    return ex


def _bwd(mask_kind):
    def ex(rng):
        from nova.ops.attention import flash_attention_fwd_p

        (q, k, v, *mask), params = _fwd(mask_kind)(rng)
        _, lse = flash_attention_fwd_p.impl(q, k, v, *mask, **params)
        do = rng.standard_normal(q.shape[:-1] + v.shape[-1:])
        delta = rng.standard_normal(q.shape[:-1])
        return [q, k, v, lse, do, delta, *mask], params

    return ex


EXAMPLES = {
    "flash_attention_fwd": [_fwd("none", tk=4), _fwd("causal"), _fwd("select"), _fwd("add")],
    "flash_attention_bwd": [_bwd("none"), _bwd("causal"), _bwd("select"), _bwd("add")],
}
