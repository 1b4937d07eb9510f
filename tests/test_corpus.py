"""extract(): batching, padding, word pooling, the float16 store, resume after interruption."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import attnkit
from attnkit import AttentionSet, extract
from attnkit.errors import InputError, StoreError, TruncationWarning

TEXTS = [
    "The cat sat on the mat.",
    "A student reads the new book in the library.",
    "She has written three letters to her brother, unbelievably.",
    "We did n't see the movie.",
    "Mary gave John a red apple yesterday!",
    "Teachers and students discussed the results of the experiment?",
    "The cat reads.",
]


def test_batched_equals_one_by_one(tiny_bert):
    sset = extract(tiny_bert, TEXTS, batch_size=3, level="token", progress=False)
    assert len(sset) == len(TEXTS)
    for text, att in zip(TEXTS, sset):
        ref = tiny_bert.attend(text)
        assert att.tokens == ref.tokens
        # float16 storage; padding stripped exactly
        np.testing.assert_allclose(att.maps, ref.maps, atol=2e-3)


def test_word_level_matches_to_words(tiny_roberta):
    sset = extract(tiny_roberta, TEXTS, batch_size=4, level="word", progress=False)
    for text, att in zip(TEXTS, sset):
        ref = tiny_roberta.attend(text).to_words()
        assert att.level == "word" and att.tokens == ref.tokens
        np.testing.assert_allclose(att.maps, ref.maps, atol=2e-3)


def test_store_roundtrip_and_metadata(tiny_bert, tmp_path):
    tb = attnkit.read_conllu(attnkit.data.sample_treebank())
    sset = extract(tiny_bert, tb, batch_size=5, store=tmp_path / "s", embeddings=True, progress=False)
    again = AttentionSet.open(tmp_path / "s")
    assert len(again) == len(tb)
    assert again.items()["sent_id"].tolist() == [s.id for s in tb]
    for a, b, s in zip(sset, again, tb):
        assert a.words == s.words
        np.testing.assert_array_equal(a.maps, b.maps)
        assert b.embeddings.shape == (len(b), tiny_bert.hf.config.hidden_size)
        np.testing.assert_array_equal(a.embeddings, b.embeddings)
    # word-level embedding = mean of the pieces' input embeddings
    ref = tiny_bert.attend(tb[1].words, embeddings=True).to_words()
    np.testing.assert_allclose(again[1].embeddings, ref.embeddings, atol=2e-3)


def test_truncation_flagged_and_counted(tiny_bert):
    long = " ".join(["the cat sat on the mat ."] * 30)
    with pytest.warns(TruncationWarning, match="2 of 4 inputs"):
        sset = extract(tiny_bert, [long, "The cat.", long, "A book."], progress=False)
    assert sset.truncated.tolist() == [True, False, True, False]
    assert len(sset[0]) <= tiny_bert.max_length


def test_bad_inputs(tiny_bert, tmp_path):
    with pytest.raises(InputError):
        extract(tiny_bert, [], progress=False)
    with pytest.raises(InputError):
        extract(tiny_bert, TEXTS, level="sentence", progress=False)
    extract(tiny_bert, TEXTS[:3], store=tmp_path / "s", progress=False)
    with pytest.raises(StoreError, match="other inputs"):
        extract(tiny_bert, TEXTS[3:], store=tmp_path / "s", progress=False)


_CHILD = textwrap.dedent(
    """
    import sys, time
    from attnkit import extract
    from attnkit.testing import tiny_model
    model = tiny_model("bert")
    run = model.run
    def slow_run(*a, **k):
        time.sleep(0.3)
        return run(*a, **k)
    model.run = slow_run
    texts = [l.rstrip("\\n") for l in open(sys.argv[2])]
    print("ready", flush=True)
    extract(model, texts, batch_size=2, store=sys.argv[1], progress=False)
    """
)


@pytest.mark.slow
def test_interrupted_run_resumes(tmp_path, tiny_bert):
    texts = [f"{t} {'the cat ' * (i % 5)}" for i, t in enumerate(TEXTS * 4)]  # 28 items, 14 batches
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    store = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=str(Path(attnkit.__file__).parents[1]))
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(store), str(tmp_path / "texts.txt")],
                             env=env, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        if len(list((store / "commits").glob("*.json"))) >= 3 if store.exists() else False:
            break
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    finished = len(list((store / "commits").glob("*.json")))
    assert 3 <= finished < 14, "the child should have been killed mid-way"
    with pytest.raises(StoreError, match="incomplete"):
        AttentionSet.open(store)

    resumed = extract(tiny_bert, texts, batch_size=2, store=store, progress=False)
    assert resumed.run_info == {"computed_batches": 14 - finished, "reused_batches": finished}
    whole = extract(tiny_bert, texts, batch_size=2, store=tmp_path / "whole", progress=False)
    assert len(resumed) == len(whole) == len(texts)
    for a, b in zip(resumed, whole):
        assert a.tokens == b.tokens
        # The reused batches were computed in the killed child process (its own thread pool,
        # so possibly another float32 summation order, and a value one ulp off may round to
        # the neighbouring float16 of the store, 2**-11 apart below 1); a wrong or shifted
        # batch is off by far more than 1e-3.
        np.testing.assert_allclose(a.maps, b.maps, rtol=0, atol=1e-3)
    assert not list(store.rglob("*.tmp"))
    assert not (store / "writer.lock").exists()
