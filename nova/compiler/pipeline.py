"""The pass pipeline as one literal list, with verification between passes.

`NOVA_DUMP_DIR=dir` writes the Program after each pass; `NOVA_LOG_COMPILES=1` logs each compile
with the time per pass.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from nova.compiler.attention import fuse_attention
from nova.compiler.barriers import drop_barriers, drop_names
from nova.compiler.canonicalize import canonicalize, canonicalize_keeping_stop_gradient
from nova.compiler.cse import cse
from nova.compiler.dce import dce
from nova.compiler.legalize_complex import legalize_complex
from nova.compiler.merge_scans import merge_scans
from nova.compiler.remat import rematerialize
from nova.compiler.simplify import simplify
from nova.core.ir import Program, verify_program

log = logging.getLogger("nova.compiler")

# Program -> Program passes, in order. Canonicalize and simplify enable each other, so the pair
# runs twice; cse before the second round merges the duplicates reverse mode produces. Attention
# recognition sees the cleaned-up forward+backward; the canonicalize after it folds the layout
# transposes it inserts into their neighbours, and dce drops the replaced subgraph's leftovers.
PASSES = [
    ("names", drop_names),  # checkpoint_name served its purpose at trace time
    ("complex", legalize_complex),  # complex values as float pairs: no later pass sees one
    ("canonicalize", canonicalize_keeping_stop_gradient),
    ("simplify", simplify),
    ("cse", cse),
    ("merge_scans", merge_scans),  # after cse: equal operands are one value
    ("canonicalize", canonicalize_keeping_stop_gradient),
    ("simplify", simplify),
    ("cse", cse),
    ("attention", fuse_attention),
    ("canonicalize", canonicalize),
    ("dce", dce),
    ("barriers", drop_barriers),  # after the last cse: what a barrier kept apart stays apart
    ("remat", rematerialize),  # last: a cse after it would merge its clones back
]


def _dump(dump_dir: str, index: int, name: str, program: Program, tag: str) -> None:
    os.makedirs(dump_dir, exist_ok=True)
    path = os.path.join(dump_dir, f"{tag}.{index:02d}.{name}.mlir")
    tmp = f"{path}.tmp{os.getpid()}.{threading.get_ident()}"  # per process and thread
    with open(tmp, "w") as f:
        f.write(program.as_text())
    os.replace(tmp, path)


def target_options(target: str | None) -> dict | None:
    """run_passes options for a compile target ("cuda:sm_90", ...; None: the host CPU). CUDA
    targets fuse only the attentions their flash kernels cover (dtype, head dims; the others
    stay matmuls and softmax). Transposes feeding a matmul fold into it on both targets (the
    GEMMs read either layout in place; on CUDA each tile keeps its operand's memory order).
    Rematerialization (remat.py) runs where config `rematerialize` says: "auto" (the default)
    on CUDA targets, True everywhere, False nowhere."""
    from nova.config import config

    mode = config.read("rematerialize")
    on_gpu = target is not None and target.startswith("cuda")
    remat = {"remat": {"enabled": True}} if mode is True or (mode == "auto" and on_gpu) else {}
    if not on_gpu:
        return remat or None
    from nova.compiler.codegen.cuda.attention import supports

    return {"attention": {"supports": supports}, **remat}


def run_passes(program: Program, *, verify: bool | None = None,
               tag: str | None = None, skip: tuple = (), options: dict | None = None) -> Program:
    """Runs PASSES over `program`, except those named in `skip` (e.g. "attention" for a target
    without flash-attention kernels). options: {pass name: keyword arguments of that pass}, e.g.
    {"attention": {"supports": predicate}} for a target whose kernels cover only some attentions.

    verify: check the Program after every pass (None: the `verify_passes` config flag, which the
    test suite sets). The result is always verified once, so bad IR never reaches codegen.
    Raises nova.core.errors.IRError naming the pass after which the Program became invalid.
    """
    if verify is None:
        from nova.config import config

        verify = config.verify_passes
    dump_dir = os.environ.get("NOVA_DUMP_DIR")
    logging_on = os.environ.get("NOVA_LOG_COMPILES") == "1"
    if tag is None and (dump_dir or logging_on):  # the hash prints the whole Program: only
        tag = program.structural_hash()[:12]  # when a dump or the log names it
    if dump_dir:
        _dump(dump_dir, 0, "input", program, tag)
    timings = []
    for i, (name, fn) in enumerate(PASSES, start=1):
        if name in skip:
            continue
        t0 = time.perf_counter()
        program = fn(program, **(options or {}).get(name, {}))
        timings.append((name, time.perf_counter() - t0))
        if verify:
            verify_program(program, pass_name=name)
        if dump_dir:
            _dump(dump_dir, i, name, program, tag)
    if not verify:
        verify_program(program, pass_name=PASSES[-1][0])
    if logging_on:
        log.warning("nova compile %s: %d equations; %s", tag, len(program.eqns),
                    ", ".join(f"{n} {t * 1e3:.2f} ms" for n, t in timings))
    return program
