"""Queries and keys: ``att.queries(layer)`` / ``att.keys(layer)`` on dense, lazy and stored
attention, and ``extract(..., keep="qk")`` with the store's checksums, resume and Dask."""

from __future__ import annotations


import numpy as np
import pytest

import attnkit as ak
from attnkit.errors import InputError, StoreError
from attnkit.core.qkstates import scores
from attnkit.testing import tiny_model
from tolerances import assert_close, F32

TEXTS = ["The cat sat on the mat.", "We read it.", "A dog.", "Many more words are here now."]


@pytest.mark.parametrize("family", ["bert", "llama", "gpt2"])
def test_dense_lazy_and_maps_agree(family):
    model = tiny_model(family)
    att = model.attend(TEXTS[0])
    lazy = model.attend(TEXTS[0], lazy=True)
    for layer in range(att.n_layers):
        # two forwards of the same input: the same kernels, float32 rounding apart
        assert_close(att.queries(layer), lazy.queries(layer), F32)
        assert_close(att.keys(layer), lazy.keys(layer), F32)
        for head in range(att.n_heads):
            # the softmax of the scaled scores is the map (float32 summation order apart)
            assert_close(scores(att.qk, layer, head, causal=att.causal),
                                       att.map(layer, head), F32, scale=1)


def test_grouped_query_shapes_and_errors():
    att = tiny_model("llama").attend(TEXTS[0])
    assert att.queries(0).shape == (2, len(att), 8) and att.keys(0).shape == (1, len(att), 8)
    with pytest.raises(InputError, match=r"layer 5 is outside 0\.\.1"):
        att.queries(5)
    assert np.array_equal(att.queries(-1), att.queries(1))  # negative counts from the end
    with pytest.raises(InputError, match="word level"):
        att.to_words().queries(0)
    with pytest.raises(InputError, match="no queries"):
        ak.Attention.from_maps(np.full((1, 1, 2, 2), 0.5), ["a", "b"]).keys(0)
    with pytest.raises(InputError, match="outside"):
        tiny_model("llama").attend(TEXTS[0], lazy=True).keys(2)


def test_store_keeps_queries_and_keys_and_resumes(tmp_path):
    model = tiny_model("llama")
    path = tmp_path / "s.zarr"
    sset = ak.extract(model, TEXTS, level="token", keep=("maps", "qk"), store=path, batch_size=2,
                      progress=False)
    assert sset.qk_layers == [0, 1]
    for i, text in enumerate(TEXTS):
        ref = model.attend(text)
        for layer in (0, 1):
            # float16 storage: |q| < 8 here, so half an ulp is below 2**-8
            np.testing.assert_allclose(sset[i].queries(layer), ref.queries(layer), atol=4e-3)
            np.testing.assert_allclose(sset.qk_states(i).keys(layer), ref.keys(layer), atol=4e-3)
    again = ak.extract(model, TEXTS, level="token", keep=("maps", "qk"), store=path, batch_size=2,
                       progress=False)
    assert again.run_info == {"computed_batches": 0, "reused_batches": 2}
    reopened = ak.open_store(path)
    np.testing.assert_array_equal(reopened[3].queries(1), sset[3].queries(1))
    # a damaged chunk of the keys: the read refuses, extract recomputes exactly that batch
    chunk = next((path / "qk" / "keys" / "c").iterdir())
    chunk.write_bytes(chunk.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(StoreError, match="damaged"):
        [ak.open_store(path)[i].keys(0) for i in range(len(TEXTS))]
    fixed = ak.extract(model, TEXTS, level="token", keep=("maps", "qk"), store=path, batch_size=2,
                       progress=False)
    assert fixed.run_info["computed_batches"] >= 1
    np.testing.assert_array_equal(fixed[3].queries(1), sset[3].queries(1))


def test_qk_only_some_layers(tmp_path):
    model = tiny_model("gpt2")
    sset = ak.extract(model, TEXTS, level="token", keep="qk", qk_layers=[1], progress=False)
    assert not sset.has_maps and sset.qk_layers == [1]
    st = sset.qk_states(2)
    assert st.layers == [1] and st.queries(1).shape == (2, len(model.encode(TEXTS[2])), 8)
    with pytest.raises(InputError, match="layer 0"):
        st.queries(0)


def test_bad_qk_options_change_nothing(tmp_path):
    model = tiny_model("llama")
    path = tmp_path / "s.zarr"
    ak.extract(model, TEXTS, level="token", store=path, progress=False)
    before = sorted(p.relative_to(path) for p in path.rglob("*"))
    with pytest.raises(InputError, match="level='token'"):
        ak.extract(model, TEXTS, keep="qk", progress=False)
    with pytest.raises(InputError, match=r"qk_layers 7 is outside 0\.\.1"):
        ak.extract(model, TEXTS, level="token", keep="qk", qk_layers=[7], store=path, progress=False)
    with pytest.raises(InputError, match="needs keep"):
        ak.extract(model, TEXTS, level="token", qk_layers=[0], progress=False)
    with pytest.raises(StoreError, match="queries and keys of layers"):
        ak.extract(model, TEXTS, level="token", keep=("maps", "qk"), store=path, progress=False)
    assert sorted(p.relative_to(path) for p in path.rglob("*")) == before
    with pytest.raises(InputError, match="keeps no queries"):
        ak.open_store(path).qk_states(0)


@pytest.mark.slow
def test_cluster_keeps_the_same_queries_and_keys(tmp_path, dask_cluster):
    with dask_cluster(processes=True) as client:
        ref = ak.extract(tiny_model(), TEXTS, level="token", keep=("maps", "qk"), batch_size=2,
                         progress=False)
        on = ak.extract("attnkit.testing:tiny_model", TEXTS, level="token", keep=("maps", "qk"),
                        batch_size=2, store=tmp_path / "s", client=client, progress=False)
        for a, b in zip(ref, on):
            # one torch thread on a worker, several here: float32 order, then float16 rounding
            np.testing.assert_allclose(a.queries(1), b.queries(1), atol=4e-3)
            np.testing.assert_allclose(a.keys(0), b.keys(0), atol=4e-3)
