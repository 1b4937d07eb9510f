"""Fault catalogue: Dask clusters (issue item 15 and the recoveries that already held):
the client closed mid-extract, a worker killed mid-shard, a factory that makes no model."""

from __future__ import annotations

import logging

import pytest
from fault_helpers import BATCH, TEXTS, raises_exactly

import attnkit as ak
from attnkit.storage import extraction
from attnkit.storage import store as st
from attnkit.errors import ClusterError, ModelLoadError
from attnkit.testing import tiny_model
from tolerances import assert_close, F32

distributed = pytest.importorskip("distributed")

MORE = [f"{t} {'the cat ' * (i % 4)}".strip() for i, t in enumerate(TEXTS * 2)]  # 16 items, 8 batches


def _close(sset, ref) -> None:
    assert len(sset) == len(ref)
    for x, y in zip(sset, ref):
        assert x.tokens == y.tokens
        # batches computed on a worker thread may sum in another float32 order: a few ulp
        # of values in [0, 1]; a wrong or shifted batch is off by far more
        assert_close(x.maps, y.maps, F32)


@pytest.fixture(scope="module")
def threads():
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                       dashboard_address=None, silence_logs=logging.CRITICAL)
    yield cluster
    cluster.close()


def test_closing_the_client_mid_extract_is_a_cluster_error_and_resumes(threads, tmp_path, monkeypatch):
    client = distributed.Client(threads, set_as_default=False)
    done = extraction._Job.done

    def close_after_first(self, b):
        done(self, b)
        client.close()

    monkeypatch.setattr(extraction._Job, "done", close_after_first)
    path = tmp_path / "s"
    err = raises_exactly(ClusterError, ak.extract, tiny_model(), MORE, batch_size=BATCH, store=path,
                         client=client, progress=False)
    assert "closed" in str(err) and "resume" in str(err)
    monkeypatch.undo()
    loc = st.Location.of(path)
    assert st.lock_token(loc) is None  # the lock was released
    kept = st.committed_batches(loc)
    assert len(kept) >= 1
    again = ak.extract(tiny_model(), MORE, batch_size=BATCH, store=path, progress=False)
    # the worker may still finish (and commit, under the old token) the batch it was on
    assert again.run_info["reused_batches"] >= len(kept)
    assert sum(again.run_info.values()) == 8
    _close(again, ak.extract(tiny_model(), MORE, batch_size=BATCH, progress=False))


def test_a_factory_that_makes_no_model_on_the_cluster(threads):
    with distributed.Client(threads, set_as_default=False) as client:
        raises_exactly(ModelLoadError, ak.extract, "os:getcwd", TEXTS, client=client, progress=False)
        assert len(ak.extract("attnkit.testing:tiny_model", TEXTS[:3], client=client, progress=False)) == 3


@pytest.mark.slow
def test_a_killed_worker_is_retried_elsewhere(tmp_path):
    from test_engine import _dying_model

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=logging.CRITICAL)
    try:
        with distributed.Client(cluster, set_as_default=False) as client:
            flag = tmp_path / "killed"
            got = ak.extract(_dying_model(flag), MORE, batch_size=BATCH, store=tmp_path / "s",
                             client=client, progress=False)
            assert flag.exists(), "a worker should have been killed during its second batch"
            _close(got, ak.extract(tiny_model(), MORE, batch_size=BATCH, progress=False))
            _close(ak.open_store(tmp_path / "s"), got)
    finally:
        cluster.close()
