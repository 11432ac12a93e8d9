"""CI smoke run of the GPT-2 training-step benchmark (issue 5): Nova and jax.jit on the tiny
config for a few steps, one process each. The benchmark's figures are never asserted as timings;
this checks that it keeps working and that both frameworks compute the same first loss."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_gpt2_step_benchmark_smoke(tmp_path):
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "gpt2_step.py"), "--smoke",
         "--frameworks", "nova,jax", "--json", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())["tiny"]
    assert results["errors"] == {}
    table = results["results"]
    assert set(table) == {"nova", "nova (warm cache)", "jax"}
    for row in table.values():
        assert row["tokens_per_s"] > 0 and row["peak_rss_mb"] > 0
    # Same weights, same batch, same model: the step-0 losses agree to 4 decimals.
    assert abs(table["nova"]["loss0"] - table["jax"]["loss0"]) < 5e-5
    assert abs(table["nova (warm cache)"]["loss0"] - table["nova"]["loss0"]) < 1e-6
    assert "| Nova vs | tokens/s ratio" in proc.stdout
