"""Generate text from a checkpoint written by train.py.

    python examples/gpt2/sample.py --ckpt out/gpt2-tiny/ckpt.safetensors --prompt "ROMEO." \
        --num-samples 3 --max-new-tokens 200 --temperature 0.8 --top-k 200

The forward pass is compiled once at the model's block size (see generate.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import nova.nn as nn
import nova.random as nr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate  # noqa: E402
import tokenizer as tok  # noqa: E402


def load_model(path):
    """(model, tokenizer, vocab or None, real vocab size) from a train.py checkpoint.

    Raises SystemExit naming the path when it is missing, truncated or corrupt, or was not
    written by train.py.
    """
    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"no checkpoint at {path}; train one with examples/gpt2/train.py")
    try:
        saved = nn.checkpoint_metadata(path)["config"]  # the header only, before the tensors
        if not isinstance(saved, dict) or not isinstance(saved.get("model"), dict):
            raise SystemExit(f"{path} has no train.py configuration in its metadata")
        model_cfg = nn.GPT2Config(**saved["model"])
        like = nn.GPT2.init(model_cfg, nr.key(0))
        model, _, step, _ = nn.load_checkpoint(path, like)
    except (nn.CheckpointError, KeyError, TypeError, ValueError) as e:
        raise SystemExit(f"cannot load {path}: {e}") from None
    tokenizer = tok.get_tokenizer(saved["tokenizer"])
    vocab = tok.SubsetVocab(saved["vocab_ids"]) if saved.get("vocab_ids") else None
    print(f"loaded {path}: GPT-2 with {model.num_parameters():,} parameters, step {step}, "
          f"tokenizer {tokenizer.name}", file=sys.stderr)
    return model, tokenizer, vocab, saved.get("vocab_size")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt", default="out/gpt2-tiny/ckpt.safetensors")
    ap.add_argument("--prompt", default="\n", help="the text to continue (\\n, \\t and \\\\ are "
                    "read as newline, tab and backslash)")
    ap.add_argument("--num-samples", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=200)
    ap.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    ap.add_argument("--top-k", type=int, default=200, help="0 = no top-k filter")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.num_samples < 1 or args.max_new_tokens < 1:
        raise SystemExit("--num-samples and --max-new-tokens must be >= 1")
    if not 0 <= args.temperature < float("inf"):
        raise SystemExit(f"--temperature must be >= 0 (0 = greedy) and finite, got "
                         f"{args.temperature}")
    if args.seed < 0:
        raise SystemExit(f"--seed must be >= 0, got {args.seed}")
    if args.top_k < 0:
        raise SystemExit(f"--top-k must be >= 0 (0 = no top-k filter), got {args.top_k}")
    model, tokenizer, vocab, vocab_size = load_model(args.ckpt)
    prompt = generate.unescape_prompt(args.prompt)  # so --prompt "\n" is a newline
    try:
        generate.check_prompt(tokenizer, vocab, prompt)
    except (KeyError, ValueError) as e:
        raise SystemExit(f"the prompt cannot be encoded for this model: {e.args[0]}") from None
    texts = generate.generate_text(
        model, tokenizer, vocab, prompt, args.num_samples, args.max_new_tokens,
        np.random.default_rng(args.seed), args.temperature, args.top_k or None,
        vocab_size=vocab_size)
    for i, text in enumerate(texts):
        print(f"--- sample {i + 1} ---\n{text}")
    return texts


if __name__ == "__main__":
    main()
