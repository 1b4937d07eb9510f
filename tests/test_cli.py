"""`attnkit analyze` end to end on a small sample (bundled model)."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import attnkit

pytestmark = pytest.mark.slow

ROOT = Path(attnkit.__file__).resolve().parents[1]


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "attnkit.apps.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=900)


@pytest.mark.realmodel
@pytest.mark.realdata
def test_analyze_on_ewt_sample(minilm, ewt_dir, tmp_path):
    out = tmp_path / "out"
    r = run_cli("analyze", "--treebank", str(ewt_dir), "--split", "dev", "--limit", "40",
                "--importance-items", "8", "--min-count", "10", "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    stats = pd.read_csv(out / "head_stats.csv", index_col=[0, 1])
    assert len(stats) == 72
    assert {"cls", "sep", "punct", "entropy", "behaviour"} <= set(stats.columns)
    # Clark et al.: much attention goes to [CLS]/[SEP] in the deeper layers
    assert stats["cls"].groupby("layer").mean().iloc[1:].min() > 0.2
    rel = pd.read_csv(out / "relation_heads.csv", index_col=0)
    assert rel.index[0] == "all" and "det" in rel.index
    assert "heads chosen on en_ewt-ud-dev.conllu, reported on en_ewt-ud-test.conllu" in r.stderr
    for fig in ("relation_heads", "heads_entropy", "fig2_special_attention", "fig3_importance", "fig6_head_clusters"):
        assert (out / f"{fig}.png").stat().st_size > 5000


def test_analyze_bad_treebank_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tcat\n")
    r = run_cli("analyze", "--treebank", str(bad), "--out", str(tmp_path / "o"))
    assert r.returncode == 2
    assert "bad.conllu:1:" in r.stderr and "10 tab-separated" in r.stderr
    sample = str(attnkit.data.sample_treebank())
    r = run_cli("analyze", "--treebank", sample, "--model", str(tmp_path / "nope"), "--out", str(tmp_path / "o2"))
    assert r.returncode == 2 and "No model folder" in r.stderr
    assert not (tmp_path / "o").exists() and not (tmp_path / "o2").exists()  # a bad input writes nothing
