"""nova.nn checkpoints: round trip, GPT-2 names in the file, atomic writes, mismatch and corruption
errors."""

import os

import numpy as np
import pytest
import safetensors.numpy as st

import nova
from nova import nn

CFG = nn.GPT2Config(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=8)


@pytest.fixture(scope="module")
def model():
    return nn.GPT2.init(CFG, nova.random.key(0))


def _opt_state(model, scale=1.0):
    # An optimizer-like state: a count and two model-shaped trees (as Adam's mu and nu).
    mu = nova.tree_util.tree_map(lambda p: np.asarray(p) * scale, model)
    nu = nova.tree_util.tree_map(lambda p: np.asarray(p) ** 2 * scale, model)
    return {"count": np.array(7, np.int32), "mu": mu, "nu": nu}


def _params_equal(a, b):
    pa, pb = a.named_parameters(), b.named_parameters()
    assert list(pa) == list(pb)
    for k in pa:
        np.testing.assert_array_equal(np.asarray(pa[k]), np.asarray(pb[k]), err_msg=k)


def test_round_trip(tmp_path, model):
    path = tmp_path / "ckpt.safetensors"
    opt = _opt_state(model, 0.5)
    nn.save_checkpoint(path, model, opt, step=123, config=CFG)
    other = nn.GPT2.init(CFG, nova.random.key(1))
    assert not np.array_equal(np.asarray(other.wte.weight), np.asarray(model.wte.weight))
    loaded, opt2, step, config = nn.load_checkpoint(path, other, _opt_state(other))
    assert isinstance(loaded, nn.GPT2) and loaded.config == CFG
    _params_equal(loaded, model)
    assert step == 123
    assert nn.GPT2Config(**config) == CFG
    leaves, td = nova.tree_util.tree_flatten(opt)
    leaves2, td2 = nova.tree_util.tree_flatten(opt2)
    assert td == td2
    for x, y in zip(leaves, leaves2, strict=True):
        assert np.asarray(y).dtype == np.asarray(x).dtype
        np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    # Without opt_state_like the optimizer state is skipped.
    _, none_opt, _, _ = nn.load_checkpoint(path, other)
    assert none_opt is None


def test_file_holds_gpt2_names_and_metadata(tmp_path, model):
    path = tmp_path / "ckpt.safetensors"
    nn.save_checkpoint(path, model, _opt_state(model), step=5, config=CFG)
    stored = st.load_file(path)
    names = set(model.named_parameters())
    assert {"wte.weight", "wpe.weight", "h.0.attn.c_attn.weight", "h.0.mlp.c_proj.bias",
            "ln_f.weight"} <= names
    n_opt = len(nova.tree_util.tree_leaves(_opt_state(model)))
    assert set(stored) == names | {f"opt.{i}" for i in range(n_opt)}
    assert stored["h.0.attn.c_attn.weight"].shape == (8, 24)  # Conv1D layout (in, out)
    from safetensors import safe_open

    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    assert meta["step"] == "5" and meta["format"] == "nova.checkpoint"
    assert meta["model"] == "GPT2" and meta["opt_leaves"] == str(n_opt)
    info = nn.checkpoint_metadata(path)
    assert info == {"step": 5, "config": CFG.to_dict(), "model": "GPT2", "opt_leaves": n_opt}


class _FailingFile:
    """Writes the first half of what it is given, then fails like a full disk."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def write(self, data):
        self.f.write(data[: len(data) // 2])
        self.f.flush()
        raise OSError(28, "No space left on device")


def test_interrupted_save_keeps_previous_checkpoint(tmp_path, model, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    nn.save_checkpoint(path, model, step=1, config=CFG)
    before = path.read_bytes()
    changed = model.map_parameters(lambda n, p: p + 1.0)
    real_fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: _FailingFile(real_fdopen(fd, *a, **k)))
    with pytest.raises(OSError, match="No space left"):
        nn.save_checkpoint(path, changed, step=2, config=CFG)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]  # the partial temporary file is gone
    loaded, _, step, _ = nn.load_checkpoint(path, model)
    assert step == 1
    _params_equal(loaded, model)

    # An interruption at the rename (after the temporary file is complete) also leaves it intact.
    def interrupted_replace(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt):
        nn.save_checkpoint(path, changed, step=3)
    monkeypatch.undo()
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.safetensors"]
    # A successful save replaces it.
    nn.save_checkpoint(path, changed, step=4)
    loaded, _, step, config = nn.load_checkpoint(path, model)
    assert step == 4 and config is None
    _params_equal(loaded, changed)


def test_mismatched_models_raise_naming_parameter_and_shapes(tmp_path, model):
    path = tmp_path / "ckpt.safetensors"
    nn.save_checkpoint(path, model, _opt_state(model), step=1)
    wider = nn.GPT2.init(nn.GPT2Config(16, 8, 1, 2, 16), nova.random.key(0))
    with pytest.raises(ValueError, match=r"'wte.weight' has shape \(16, 8\) in the checkpoint but "
                                         r"\(16, 16\)"):
        nn.load_checkpoint(path, wider)
    deeper = nn.GPT2.init(nn.GPT2Config(16, 8, 2, 2, 8), nova.random.key(0))
    with pytest.raises(KeyError, match=r"missing parameters \['h.1.ln_1.weight'"):
        nn.load_checkpoint(path, deeper)
    nn.save_checkpoint(path, deeper)
    with pytest.raises(KeyError, match=r"unexpected parameters \['h.1.attn.c_attn.bias'"):
        nn.load_checkpoint(path, model)
    # Optimizer state: missing, wrong leaf count, wrong leaf shape.
    with pytest.raises(KeyError, match="no optimizer state"):
        nn.load_checkpoint(path, deeper, {"count": np.array(0, np.int32)})
    nn.save_checkpoint(path, model, {"count": np.array(3, np.int32), "m": np.zeros((2, 3))})
    with pytest.raises(ValueError, match="2 leaves in the checkpoint but 1"):
        nn.load_checkpoint(path, model, {"count": np.array(0, np.int32)})
    with pytest.raises(ValueError, match=r"'opt.1' has shape \(2, 3\) in the checkpoint but "
                                         r"\(3, 2\)"):
        nn.load_checkpoint(path, model, {"count": np.array(0, np.int32), "m": np.zeros((3, 2))})
    with pytest.raises(ValueError, match="'opt.0' has dtype int32 in the checkpoint but float32"):
        nn.load_checkpoint(path, model, {"count": np.float32(0), "m": np.zeros((2, 3))})


def test_truncated_and_corrupt_files_raise_naming_the_path(tmp_path, model):
    path = tmp_path / "ckpt.safetensors"
    nn.save_checkpoint(path, model, step=1)
    data = path.read_bytes()
    for i, bad in enumerate([data[: len(data) // 2], data[:5], b"", b"\xff" * 64]):
        p = tmp_path / f"bad{i}.safetensors"
        p.write_bytes(bad)
        with pytest.raises(nn.CheckpointError, match=f"bad{i}.safetensors.*truncated or corrupt"):
            nn.load_checkpoint(p, model)
        if i > 0:  # (the first keeps a whole header: only the tensors are cut)
            with pytest.raises(nn.CheckpointError, match=f"bad{i}.safetensors"):
                nn.checkpoint_metadata(p)
    assert issubclass(nn.CheckpointError, ValueError)
    foreign = tmp_path / "foreign.safetensors"
    st.save_file({"x": np.zeros(3, np.float32)}, foreign)
    with pytest.raises(nn.CheckpointError, match="not a Nova checkpoint"):
        nn.load_checkpoint(foreign, model)
    with pytest.raises(nn.CheckpointError, match="not a Nova checkpoint"):
        nn.checkpoint_metadata(foreign)
    with pytest.raises(FileNotFoundError):
        nn.load_checkpoint(tmp_path / "absent.safetensors", model)


def test_save_argument_errors(tmp_path, model):
    with pytest.raises(TypeError, match="not JSON-serializable"):
        nn.save_checkpoint(tmp_path / "c.safetensors", model, config={"f": object()})
    with pytest.raises(TypeError, match="must be a nova.nn.Module"):
        nn.save_checkpoint(tmp_path / "c.safetensors", {"w": np.zeros(2)})
    assert not os.listdir(tmp_path)


def test_bfloat16_and_scalar_leaves_round_trip(tmp_path, model):
    half = model.map_parameters(lambda n, p: p.astype(nova.numpy.bfloat16))
    path = tmp_path / "bf16.safetensors"
    opt = (np.float32(0.5), [np.arange(3, dtype=np.int32)], None)
    nn.save_checkpoint(path, half, opt, step=2**40)
    loaded, opt2, step, _ = nn.load_checkpoint(path, half, opt)
    assert step == 2**40
    assert np.asarray(loaded.wte.weight).dtype == np.asarray(half.wte.weight).dtype
    _params_equal(loaded, half)
    assert nova.tree_util.tree_structure(opt2) == nova.tree_util.tree_structure(opt)
    assert float(opt2[0]) == 0.5 and opt2[2] is None
    np.testing.assert_array_equal(np.asarray(opt2[1][0]), np.arange(3))
    with pytest.raises(ValueError, match="'wte.weight' has dtype bfloat16 in the checkpoint but "
                                         "float32"):
        nn.load_checkpoint(path, model)


def test_a_hyperparameter_mismatch_raises_naming_the_field(tmp_path, model):
    # n_head is a static field, no tensor: a 2-head checkpoint loaded into a 4-head model of the
    # same shapes used to load silently and compute another function.
    path = tmp_path / "ckpt.safetensors"
    nn.save_checkpoint(path, model, step=1, config=CFG)
    other = nn.GPT2.init(nn.GPT2Config(vocab_size=16, block_size=8, n_layer=1, n_head=4,
                                       n_embd=8), nova.random.key(0))
    with pytest.raises(ValueError, match="static field 'config' is .*'n_head': 2.* in the "
                                         "checkpoint but .*'n_head': 4.* in the GPT2"):
        nn.load_checkpoint(path, other)
    ln = nn.LayerNorm.init(8)
    nn.save_checkpoint(path, ln)
    with pytest.raises(ValueError, match="static field 'eps' is 1e-05 in the checkpoint but 0.001"):
        nn.load_checkpoint(path, nn.LayerNorm.init(8, eps=1e-3))
    assert nn.load_checkpoint(path, ln)[0].eps == 1e-5


def _with_metadata(path, **changes):
    """Rewrites the safetensors header metadata of `path` (tensors unchanged)."""
    import json

    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header["__metadata__"].update(changes)
    new = json.dumps(header).encode()
    new += b" " * (-len(new) % 8)
    path.write_bytes(len(new).to_bytes(8, "little") + new + data[8 + n:])


@pytest.mark.parametrize("changes, message", [
    ({"version": "2"}, "has format version '2'; this Nova reads version '1'"),
    ({"step": "abc"}, "malformed metadata"),
    ({"config": "{bad"}, "malformed metadata"),
])
def test_foreign_versions_and_malformed_metadata_raise_checkpoint_error(tmp_path, model,
                                                                        changes, message):
    # A version-2 file was read as version 1; a bad step or config raised a bare int()/JSON error.
    path = tmp_path / "ckpt.safetensors"
    nn.save_checkpoint(path, model, step=1, config=CFG)
    _with_metadata(path, **changes)
    with pytest.raises(nn.CheckpointError, match=f"ckpt.safetensors.*{message}"):
        nn.load_checkpoint(path, model)
    with pytest.raises(nn.CheckpointError, match=f"ckpt.safetensors.*{message}"):
        nn.checkpoint_metadata(path)


def test_save_checks_step_and_directory(tmp_path, model):
    with pytest.raises(TypeError, match="step must be an int, got float 2.7"):
        nn.save_checkpoint(tmp_path / "c.safetensors", model, step=2.7)  # was truncated to 2
    with pytest.raises(TypeError, match="step must be an int, got str"):
        nn.save_checkpoint(tmp_path / "c.safetensors", model, step="3")
    with pytest.raises(ValueError, match="step must be >= 0"):
        nn.save_checkpoint(tmp_path / "c.safetensors", model, step=-1)
    with pytest.raises(FileNotFoundError, match="the directory .*no/such' of"):
        nn.save_checkpoint(tmp_path / "no" / "such" / "c.safetensors", model)
    assert not os.listdir(tmp_path)
    nn.save_checkpoint(tmp_path / "c.safetensors", model, step=np.int64(3))
    assert nn.checkpoint_metadata(tmp_path / "c.safetensors")["step"] == 3


def test_names_that_collide_are_refused(tmp_path):
    """Two leaves with one dotted name ("a.b" beside a nested "a" -> "b", 1 beside "1") would
    overwrite each other in a checkpoint: named_parameters raises, naming it (found by review:
    the checkpoint silently held one of them)."""
    import nova.numpy as jnp

    class D(nn.Module):
        d: dict

    m = D({"a.b": jnp.ones(1), "a": {"b": jnp.zeros(1)}})
    with pytest.raises(ValueError, match="both named 'd.a.b'"):
        m.named_parameters()
    with pytest.raises(ValueError, match="both named 'd.1'"):
        nn.save_checkpoint(str(tmp_path / "c.safetensors"), D({1: jnp.ones(1), "1": jnp.ones(1)}))


def test_a_field_named_opt_beside_the_optimizer_state(tmp_path):
    """Parameters named opt.0, opt.1 (a field `opt`) and the optimizer leaves keep apart: the
    optimizer's prefix gets underscores until no parameter name starts with it."""
    import nova.numpy as jnp
    from nova import optim

    class Net(nn.Module):
        opt: list

    m = Net([jnp.ones(2), jnp.zeros(3)])
    tx = optim.adam(1e-2)
    state = tx.init(m)
    state = nova.tree_util.tree_map(lambda x: x + 7, state)
    path = str(tmp_path / "c.safetensors")
    nn.save_checkpoint(path, m, state)
    m2, s2, _, _ = nn.load_checkpoint(path, m, tx.init(m))
    assert np.asarray(m2.opt[0]).tolist() == [1.0, 1.0]
    assert np.asarray(m2.opt[1]).tolist() == [0.0] * 3
    for a, b in zip(nova.tree_util.tree_leaves(s2), nova.tree_util.tree_leaves(state),
                    strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert nn.load_checkpoint(path, m)[0].opt[0].shape == (2,)  # without the optimizer state


def test_static_functions_and_python_number_fields_load_in_another_process(tmp_path):
    """A static field holding a function is stored by its qualified name (its repr holds a
    memory address, different in every process); a float data field loads back as a float."""
    import subprocess
    import sys

    src = (
        "import sys, numpy as np, nova, nova.numpy as jnp\n"
        "from nova import nn\n"
        "class Act(nn.Module):\n"
        "    w: nova.Array\n"
        "    s: float = 2.0\n"
        "    act: object = nn.static_field(default=nn.relu)\n"
        "m = Act(jnp.ones(3), 3.5)\n"
        "if sys.argv[1] == 'save':\n"
        "    nn.save_checkpoint(sys.argv[2], m)\n"
        "else:\n"
        "    got = nn.load_checkpoint(sys.argv[2], Act(jnp.zeros(3)))[0]\n"
        "    assert type(got.s) is float and got.s == 3.5, got.s\n"
        "    assert np.asarray(got.w).tolist() == [1.0] * 3\n"
        "    again = Act(jnp.zeros(3)).load_state_dict(m.state_dict())\n"
        "    assert type(again.s) is float and again.s == 3.5\n"
        "    print('loaded')\n"
    )
    path = str(tmp_path / "act.safetensors")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    for mode in ("save", "load"):
        res = subprocess.run([sys.executable, "-c", src, mode, path], capture_output=True,
                             text=True, env=env)
        assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "loaded"


def test_saving_keeps_the_file_mode_and_a_symbolic_link(tmp_path, model):
    """A new checkpoint gets the mode `open` would give (not mkstemp's 0o600); saving over an
    existing file keeps its mode; a symbolic link stays a link to the replaced file."""
    path = tmp_path / "ckpt.safetensors"
    mask = os.umask(0o022)
    try:
        nn.save_checkpoint(str(path), model)
    finally:
        os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o644
    os.chmod(path, 0o640)
    link = tmp_path / "latest.safetensors"
    link.symlink_to(path.name)
    nn.save_checkpoint(str(link), model, step=5)
    assert link.is_symlink() and path.stat().st_mode & 0o777 == 0o640
    assert nn.checkpoint_metadata(str(path))["step"] == 5


def test_an_optimizer_leaf_that_cannot_be_stored_is_named(tmp_path, model):
    with pytest.raises(TypeError, match=r"optimizer state leaf 1 \(opt_state\['a'\]\[1\]\) is a "
                                        r"str of dtype <U5"):
        nn.save_checkpoint(str(tmp_path / "c.safetensors"), model, {"a": [np.ones(2), "hello"]})
    assert not (tmp_path / "c.safetensors").exists()


def test_static_fields_stored_by_the_older_repr_form_still_load(tmp_path):
    """Files written before static values were stored element by element (a tuple holding a
    NumPy scalar was its repr) load against the same model (found by review)."""
    import json

    import nova.numpy as jnp

    class Acts(nn.Module):
        w: nova.Array
        acts: tuple = nn.static_field(default=(1, np.float32(2.0)))

    m = Acts(jnp.ones(2))
    path = tmp_path / "old.safetensors"
    nn.save_checkpoint(str(path), m)
    tensors = st.load_file(str(path))
    meta = nn.checkpoint_metadata(str(path))
    header = json.loads(path.read_bytes()[8:8 + int.from_bytes(path.read_bytes()[:8],
                                                                "little")])["__metadata__"]
    header["static"] = json.dumps({"acts": repr((1, np.float32(2.0)))})
    st.save_file(tensors, str(path), metadata=header)
    got = nn.load_checkpoint(str(path), m)[0]
    assert np.asarray(got.w).tolist() == [1.0, 1.0] and meta["step"] == 0


def test_python_number_fields_refuse_values_they_cannot_hold(tmp_path):
    """An int field does not silently take 2.75 (it became 2); an int too large for any
    tensor dtype is named when saving (it was safetensors' error)."""
    import nova.numpy as jnp

    class N(nn.Module):
        w: nova.Array
        n: int = 3

    m = N(jnp.ones(2), 3)
    with pytest.raises(ValueError, match="parameter 'n' holds 2.75, which the model's int"):
        m.load_state_dict({"w": np.ones(2, np.float32), "n": np.float64(2.75)})
    assert m.load_state_dict({"w": np.ones(2, np.float32), "n": np.int64(7)}).n == 7
    with pytest.raises(TypeError, match="parameter 'n' has dtype object \\(1180591620717411303424"):
        nn.save_checkpoint(str(tmp_path / "big.safetensors"), N(jnp.ones(2), 2**70))


def test_a_nan_float_field_round_trips(tmp_path):
    import math

    import nova.numpy as jnp

    class N(nn.Module):
        w: nova.Array
        f: float = 1.0

    m = N(jnp.ones(2), float("nan"))
    nn.save_checkpoint(str(tmp_path / "n.safetensors"), m)
    assert math.isnan(nn.load_checkpoint(str(tmp_path / "n.safetensors"), m)[0].f)
    assert math.isnan(m.load_state_dict(m.state_dict()).f)
