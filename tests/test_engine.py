"""Extraction on a Dask cluster (2 worker processes, one thread each): the same maps as in
process (to float16 rounding), and every cluster fault with a clear attnkit error and no wrong value."""

from __future__ import annotations

import os
import signal
import sys

import cloudpickle
import numpy as np
import pytest

import attnkit as ak
from attnkit.storage import engine
from attnkit.storage import store as st
from attnkit.errors import ClusterError, ModelNotFoundError
from attnkit.testing import CORPUS, tiny_model
from tolerances import assert_close, F16

pytestmark = pytest.mark.slow

distributed = pytest.importorskip("distributed")

TEXTS = [f"{t} {'the cat ' * (i % 4)}".strip() for i, t in enumerate(CORPUS * 3)]  # 18 items: 9 batches of 2

FACTORY = "attnkit.testing:tiny_model"


@pytest.fixture(scope="module")
def client(dask_cluster):
    """One cluster of two worker processes for the module's tests."""
    with dask_cluster(processes=True) as c:
        yield c


def _same_maps(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.tokens == y.tokens
        # Workers run one torch thread each, this process several: the same batches through
        # the same kernels may sum in another float32 order, and a value one float32 ulp off
        # may round to the neighbouring float16 of the store (2**-11 apart below 1); a wrong
        # batch or item order is off by far more than 1e-3.
        np.testing.assert_allclose(x.maps, y.maps, rtol=0, atol=1e-3)
        if x.input_ids is not None or y.input_ids is not None:
            np.testing.assert_array_equal(x.input_ids, y.input_ids)


def test_cluster_extraction_equals_in_process(client, tmp_path):
    ref = ak.extract(tiny_model(), TEXTS, batch_size=2, level="token", progress=False)
    on_disk = ak.extract(FACTORY, TEXTS, batch_size=2, level="token", store=tmp_path / "s",
                         client=client, progress=False)
    assert on_disk.run_info == {"computed_batches": 9, "reused_batches": 0}
    _same_maps(ref, on_disk)
    _same_maps(ref, ak.open_store(tmp_path / "s"))
    # in memory, from a Model object shipped to the workers, with a progress bar
    _same_maps(ref, ak.extract(tiny_model(), TEXTS, batch_size=2, level="token", client=client,
                               progress=True))
    # the store is reused from the cluster, and the other way round
    again = ak.extract(tiny_model(), TEXTS, batch_size=2, level="token", store=tmp_path / "s",
                       progress=False)
    assert again.run_info == {"computed_batches": 0, "reused_batches": 9}


def test_a_measure_on_the_cluster_equals_in_process(client, tmp_path):
    ref = ak.extract(tiny_model(), TEXTS[:6], batch_size=2, measure="alti", progress=False)
    got = ak.extract(FACTORY, TEXTS[:6], batch_size=2, measure="alti", store=tmp_path / "m",
                     client=client, progress=False)
    assert got.measure == "alti" and got.n_heads == 1
    _same_maps(ref, got)


def test_scheduler_address_and_word_level_with_embeddings(client, tmp_path):
    ref = ak.extract(tiny_model("roberta"), TEXTS, batch_size=4, embeddings=True, progress=False)
    got = ak.extract(tiny_model("roberta"), TEXTS, batch_size=4, embeddings=True,
                     store=tmp_path / "w", client=client.scheduler.address, progress=False)
    _same_maps(ref, got)
    for x, y in zip(ref, got):  # computed on a worker, stored in float16: as _same_maps
        assert_close(x.embeddings, y.embeddings, F16)


class _Dying:
    """Model.run that kills its worker process: once (the first time any worker runs its
    ``at``-th batch), or every time."""

    def __init__(self, run, flag: str, at: int = 2, always: bool = False):
        self.run, self.flag, self.at, self.always, self.calls = run, flag, at, always, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.at:
            try:
                fd = os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                os.close(fd)
                first = True
            except FileExistsError:
                first = False
            if first or self.always:
                os.kill(os.getpid(), signal.SIGKILL)
        return self.run(*args, **kwargs)


def _dying_model(flag, **kw):
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    model = tiny_model()
    model.run = _Dying(model.run, str(flag), **kw)
    return model


def test_killed_worker_mid_shard_is_retried_elsewhere(client, tmp_path):
    flag = tmp_path / "killed"
    got = ak.extract(_dying_model(flag), TEXTS, batch_size=2, store=tmp_path / "s", client=client,
                     progress=False)
    assert flag.exists(), "a worker should have been killed during its second batch"
    _same_maps(ak.extract(tiny_model(), TEXTS, batch_size=2, progress=False), got)
    client.wait_for_workers(2, timeout=120)


def test_workers_that_keep_dying_give_a_cluster_error(client, tmp_path):
    cluster_scheduler = client.cluster.scheduler
    cluster_scheduler.allowed_failures = 0
    try:
        with pytest.raises(ClusterError, match="kept dying") as err:
            ak.extract(_dying_model(tmp_path / "k", at=1, always=True), TEXTS, batch_size=2,
                       store=tmp_path / "s", client=client, progress=False)
        assert "memory" in str(err.value) and "resume" in str(err.value)
    finally:
        cluster_scheduler.allowed_failures = 3
    loc = st.Location.of(tmp_path / "s")
    assert st.lock_token(loc) is None  # the lock was released
    assert not st.committed_batches(loc)  # nothing half-written was committed
    client.wait_for_workers(2, timeout=120)
    # the store is resumed and completed by a healthy run
    got = ak.extract(tiny_model(), TEXTS, batch_size=2, store=tmp_path / "s", progress=False)
    _same_maps(ak.extract(tiny_model(), TEXTS, batch_size=2, progress=False), got)


def test_model_name_workers_cannot_load(client):
    with pytest.raises(ModelNotFoundError, match="workers could not load the model 'no-such-model"):
        ak.extract("no-such-model-for-attnkit", TEXTS, client=client, progress=False)
    with pytest.raises(ModelNotFoundError, match="cannot be imported"):
        ak.extract("attnkit.testing:no_such_factory", TEXTS, client=client, progress=False)
    names = client.run_on_scheduler(engine._scheduler_plugins)
    assert not [n for n in names if n.startswith("attnkit-model-")
                and n != f"attnkit-model-{__import__('hashlib').sha256(FACTORY.encode()).hexdigest()[:16]}"]
    # the cluster still works
    assert len(ak.extract(FACTORY, TEXTS[:3], client=client, progress=False)) == 3


def test_unreachable_scheduler(monkeypatch):
    monkeypatch.setattr(engine, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(ClusterError, match="Could not reach the Dask scheduler at 'tcp://127.0.0.1:1'"):
        ak.extract(tiny_model(), TEXTS, client="tcp://127.0.0.1:1", progress=False)
    cluster = distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0")
    c = distributed.Client(cluster, set_as_default=False)
    cluster.close()
    try:
        with pytest.raises(ClusterError, match="scheduler"):
            ak.extract(tiny_model(), TEXTS, client=c, progress=False)
    finally:
        c.close()


def _block_sums(block):
    """Per block: item ids and the float64 sum of every head's map (a partial to add up)."""
    return {"n": np.float64(len(block.items)),
            "sum": sum(a.maps.astype(np.float64).sum((2, 3)) for a in block.attentions),
            "ids": np.asarray(block.items, dtype=np.int64).sum()}


def test_map_blocks_gives_the_same_partials_on_the_cluster(client, tmp_path):
    sset = ak.extract(tiny_model(), TEXTS, batch_size=4, store=tmp_path / "s", progress=False)
    here = engine.map_blocks(sset, _block_sums)
    there = engine.map_blocks(sset, _block_sums, client=client)
    assert len(here) == sset.n_batches == 5
    for a, b in zip(here, there):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    total = engine.sum_partials(there)
    assert total["n"] == len(TEXTS) and total["ids"] == sum(range(len(TEXTS)))
    # every row sums to 1, so a head's map sums to n: the total is the number of positions
    np.testing.assert_allclose(total["sum"], sum(len(a) for a in sset), rtol=1e-3)
    # a plain list goes in blocks of 32 items, sent to the workers
    atts = list(sset)
    listed = engine.map_blocks(atts, _block_sums, client=client)
    np.testing.assert_array_equal(engine.sum_partials(listed)["sum"],
                                  engine.sum_partials(engine.map_blocks(atts, _block_sums))["sum"])


def test_a_model_name_works_in_process_too():
    got = ak.extract(FACTORY, TEXTS[:4], level="token", progress=False)
    _same_maps(ak.extract(tiny_model(), TEXTS[:4], level="token", progress=False), got)
    with pytest.raises(ModelNotFoundError, match="cannot be imported"):
        ak.extract("attnkit.testing:no_such_factory", TEXTS[:1], progress=False)


def _equal_tables(a, b) -> None:
    import pandas as pd

    pd.testing.assert_frame_equal(getattr(a, "table", a), getattr(b, "table", b), check_exact=True)


def test_corpus_analyses_on_the_cluster_equal_in_process(client, tmp_path):
    tb = ak.read_conllu(ak.data.sample_treebank())
    model = tiny_model()
    sset = ak.extract(model, tb, batch_size=4, embeddings=True, store=tmp_path / "s", progress=False)
    dev, test = ak.read_conllu(ak.data.sample_treebank())[:6], ak.read_conllu(ak.data.sample_treebank())[6:]
    dev_set = ak.extract(model, dev, batch_size=2, store=tmp_path / "dev", progress=False)
    test_list = list(ak.extract(model, test, batch_size=2, progress=False))  # sent to workers

    _equal_tables(ak.head_stats(sset, progress=False), ak.head_stats(sset, client=client, progress=False))
    _equal_tables(ak.head_distances(sset, progress=False),
                  ak.head_distances(sset, client=client, progress=False))
    here = ak.relation_heads(test_list, test, select_on=(dev_set, dev), min_count=1)
    there = ak.relation_heads(test_list, test, select_on=(dev_set, dev), min_count=1, client=client)
    _equal_tables(here, there)
    from attnkit.analysis.syntax import word_hits

    h1, h2 = word_hits(sset, tb), word_hits(sset, tb, client=client)
    np.testing.assert_array_equal(h1.hits, h2.hits)
    assert h1.deprels == h2.deprels and h1.n_skipped == h2.n_skipped

    from attnkit.analysis.probe import probe_data

    f1, f2 = probe_data(sset, tb), probe_data(sset, tb, client=client)
    assert len(f1) == len(f2) == len(tb)
    for a, b in zip(f1.items, f2.items):
        for name in ("A", "R", "V", "gold", "scored", "kidx"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))

    s1 = ak.flow_summary(sset, threshold=0.2, progress=False)
    s2 = ak.flow_summary(sset, threshold=0.2, progress=False, client=client)
    _equal_tables(s1.heads, s2.heads)
    _equal_tables(s1.tokens, s2.tokens)
    _equal_tables(s1.per_input, s2.per_input)
    other = ak.extract(tiny_model(seed=1), tb, batch_size=4, store=tmp_path / "o", progress=False)
    c1 = ak.compare_sets(sset, other, threshold=0.2, progress=False)
    c2 = ak.compare_sets(sset, other, threshold=0.2, progress=False, client=client)
    _equal_tables(c1.heads, c2.heads)
    _equal_tables(c1.categories, c2.categories)


def test_head_scores_on_the_cluster_equal_in_process(client, tmp_path):
    model = tiny_model("gpt2")
    inputs = ak.induction_inputs(model, 6, 8, seed=0)
    sset = ak.extract(model, inputs, batch_size=2, level="token", store=tmp_path / "d", progress=False)
    here = ak.head_scores(sset, progress=False)
    _equal_tables(here, ak.head_scores(sset, client=client, progress=False))
    assert here.meta == ak.head_scores(sset, client=client, progress=False).meta
    # every row of each input's second half has one earlier occurrence, so it counts
    assert here.meta["n_rows"]["induction"] == 6 * 8 and here.meta["n_items"] == 6
    atts = [model.attend(ids) for ids in inputs]  # a list: sent to the workers in blocks
    _equal_tables(ak.head_scores(atts, progress=False), ak.head_scores(atts, client=client, progress=False))


def test_a_corrupt_chunk_read_on_a_worker_is_a_store_error_naming_its_items(client, tmp_path):
    from attnkit.errors import StoreError

    path = tmp_path / "s"
    sset = ak.extract(tiny_model(), TEXTS, batch_size=2, level="token", store=path, progress=False)
    b = 3
    lo, _ = sset._layout.map_range(b)
    chunk = path / "maps" / "c" / str(lo // sset.info["chunks"]["maps"])
    with open(chunk, "r+b") as fh:
        fh.seek(min(100, chunk.stat().st_size // 2))
        fh.write(b"\x00\x3c" * 32)
    hit = sorted(int(i) for i in sset.batch_items(b))
    for analysis in (ak.head_stats, ak.head_distances, ak.head_scores):
        with pytest.raises(StoreError) as err:
            analysis(ak.open_store(path), client=client, progress=False)
        assert sorted(err.value.items) == hit, analysis.__name__
    # the next extract recomputes that batch, and the cluster then gives the in-process numbers
    again = ak.extract(tiny_model(), TEXTS, batch_size=2, level="token", store=path, progress=False)
    assert again.run_info["computed_batches"] == 1
    _equal_tables(ak.head_stats(again, progress=False), ak.head_stats(again, client=client, progress=False))
