"""Store format 2: checksummed chunks, verified reads, commit markers, the writer lock,
fsspec URLs, summaries-only stores, and format-1 stores (read-only, migration).

Every fault is made by hand on a real store, and every test checks both the error and that
no wrong value reaches a result.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import fsspec
import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import attnkit as ak
from attnkit.storage import store as st
from attnkit.storage.store_v1 import extract_v1
from attnkit.apps.cli import main
from attnkit.errors import InputError, StoreError
from attnkit.testing import CORPUS
from faults.fault_helpers import same_sets as _same

TEXTS = [*CORPUS, "The cat reads.", "We read the review."]  # 8 items




@pytest.fixture
def made(tiny_bert, tmp_path):
    """A finished store of 8 items in 4 batches (batch_size 2), with embeddings."""
    path = tmp_path / "s"
    sset = ak.extract(tiny_bert, TEXTS, batch_size=2, store=path, embeddings=True, progress=False)
    return path, sset


def _chunk_of_batch(path: Path, sset: ak.AttentionSet, b: int, name: str = "maps") -> Path:
    lay = sset._layout
    lo, _ = lay.map_range(b) if name == "maps" else lay.emb_range(b)
    c = sset.info["chunks"][name]
    return path / name / "c" / str(lo // c)


def _damage_and_recover(tiny_bert, made, damage) -> None:
    path, sset = made
    b = 2
    hit = [int(i) for i in sset.batch_items(b)]
    chunk = _chunk_of_batch(path, sset, b)
    damage(chunk)
    opened = ak.open_store(path)
    with pytest.raises(StoreError) as err:
        opened[hit[0]]
    assert f"maps/c/{chunk.name}" in str(err.value)
    for i in hit:
        assert str(i) in str(err.value)
    assert sorted(err.value.items) == sorted(hit)
    # other batches still read, and give the same values as before
    others = [i for i in range(len(TEXTS)) if i not in hit]
    for i in others:
        np.testing.assert_array_equal(opened[i].maps, sset[i].maps)
    # the next extract with the same inputs recomputes exactly that batch
    again = ak.extract(tiny_bert, TEXTS, batch_size=2, store=path, embeddings=True, progress=False)
    assert again.run_info == {"computed_batches": 1, "reused_batches": 3}
    fresh = ak.extract(tiny_bert, TEXTS, batch_size=2, embeddings=True, progress=False)
    _same(again, fresh)


def test_corrupt_chunk_is_caught_and_recomputed(tiny_bert, made):
    def corrupt(chunk: Path) -> None:
        with open(chunk, "r+b") as fh:  # the test: 64 bytes overwritten mid-file
            fh.seek(min(100, chunk.stat().st_size // 2))
            fh.write(b"\x00\x3c" * 32)

    _damage_and_recover(tiny_bert, made, corrupt)


def test_truncated_chunk_is_caught_and_recomputed(tiny_bert, made):
    _damage_and_recover(tiny_bert, made, lambda c: os.truncate(c, c.stat().st_size // 3))


def test_missing_chunk_is_caught_and_recomputed(tiny_bert, made):
    _damage_and_recover(tiny_bert, made, lambda c: c.unlink())


def test_verify_lists_damaged_batches(made, capsys):
    path, sset = made
    _chunk_of_batch(path, sset, 1, "embeddings").unlink()
    assert main(["store", "verify", str(path)]) == 1
    out = capsys.readouterr()
    assert "batch 1" in out.out and "embeddings" in out.out
    assert main(["store", "info", str(path)]) == 0
    assert "tiny-bert" in capsys.readouterr().out


def test_damaged_item_table_refuses_to_open_and_is_rewritten(tiny_bert, made):
    path, sset = made
    chunk = path / "items" / "n" / "c" / "0"
    chunk.write_bytes(chunk.read_bytes()[:-3] + b"xyz")
    with pytest.raises(StoreError, match="item table"):
        ak.open_store(path)
    again = ak.extract(tiny_bert, TEXTS, batch_size=2, store=path, embeddings=True, progress=False)
    assert again.run_info == {"computed_batches": 0, "reused_batches": 4}
    _same(again, sset)


def test_damaged_index_chunk_names_items_and_is_rewritten(tiny_bert, made):
    path, sset = made
    chunk = path / "positions" / "tokens" / "c" / "0"  # every item's tokens live in this chunk
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="positions/tokens/c/0") as err:
        ak.open_store(path)[0]
    assert sorted(err.value.items) == list(range(len(TEXTS)))
    again = ak.extract(tiny_bert, TEXTS, batch_size=2, store=path, embeddings=True, progress=False)
    assert again.run_info == {"computed_batches": 0, "reused_batches": 4}
    _same(again, sset)


def test_token_level_keeps_input_ids(tiny_gpt2, tmp_path):
    sset = ak.extract(tiny_gpt2, TEXTS[:3], level="token", store=tmp_path / "s", progress=False)
    again = ak.open_store(tmp_path / "s")
    for text, att in zip(TEXTS, again):
        ref = tiny_gpt2.attend(text)
        np.testing.assert_array_equal(att.input_ids, ref.input_ids)
        assert att.causal
    assert sset[0].input_ids is not None


def test_store_of_another_model_or_other_inputs(tiny_bert, made):
    from attnkit.testing import tiny_model

    path, _ = made
    other = tiny_model("bert", seed=1)  # same name "tiny-bert", other weights
    with pytest.raises(StoreError, match="another model") as err:
        ak.extract(other, TEXTS, batch_size=2, store=path, embeddings=True, progress=False)
    assert "weights" in str(err.value)
    with pytest.raises(StoreError, match="the inputs themselves"):
        ak.extract(tiny_bert, TEXTS[::-1], batch_size=2, store=path, embeddings=True, progress=False)
    with pytest.raises(StoreError, match="batch_size 2 vs 3"):
        ak.extract(tiny_bert, TEXTS, batch_size=3, store=path, embeddings=True, progress=False)
    # nothing was written by the refused runs
    assert ak.extract(tiny_bert, TEXTS, batch_size=2, store=path, embeddings=True,
                      progress=False).run_info["computed_batches"] == 0


def test_second_writer_gets_a_clear_error(tiny_bert, tmp_path):
    path = tmp_path / "s"
    ak.extract(tiny_bert, TEXTS[:2], store=path, progress=False)
    loc = st.Location.of(path)
    held = st.WriterLock(loc).acquire()  # a live writer (this very process)
    try:
        with pytest.raises(StoreError, match=r"being written by another process \(pid"):
            ak.extract(tiny_bert, TEXTS[:2], store=path, progress=False)
        with pytest.raises(StoreError, match="being written"):
            st.WriterLock(loc).acquire()
    finally:
        held.release()
    assert not (path / "writer.lock").exists()


def test_a_writer_whose_lock_was_taken_over_commits_nothing(tiny_bert, tmp_path):
    path = tmp_path / "s"
    loc = st.Location.of(path)
    ak.extract(tiny_bert, TEXTS, batch_size=2, store=path, progress=False)
    st.uncommit(loc, [3])
    first = st.WriterLock(loc).acquire()
    writer = st.BatchWriter(loc, first.token)
    # the lock is declared abandoned and taken over by a second writer
    (path / "writer.lock").unlink()
    second = st.WriterLock(loc).acquire()
    try:
        from attnkit.storage.batches import BatchSpec, run_batch

        encs = [tiny_bert.encode(TEXTS[i]) for i in writer.reader.layout.batches[3]]
        with pytest.raises(StoreError, match="now held by another process"):
            writer.write(3, run_batch(tiny_bert, encs, BatchSpec(level="word")))
        assert not writer.committed(3)
    finally:
        second.release()
        first.release()


def test_lock_of_a_dead_process_is_taken_over(tiny_bert, tmp_path):
    path = tmp_path / "s"
    ak.extract(tiny_bert, TEXTS[:2], store=path, progress=False)
    (path / "writer.lock").write_text(json.dumps(
        {"token": "x", "host": st._host(), "pid": 2**22 + 12345, "since": 0, "heartbeat": 0}))
    assert ak.extract(tiny_bert, TEXTS[:2], store=path, progress=False).run_info["reused_batches"] == 1


class _FullMemory(MemoryFileSystem):
    """An in-memory filesystem with a quota: a write past it fails with ENOSPC."""

    protocol = "fullmem"
    quota = 10**12

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, str) and path.startswith("fullmem://"):
            path = "memory://" + path[len("fullmem://"):]
        return super()._strip_protocol(path)

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        used = sum(len(f.getbuffer()) for k, f in self.store.items() if k.startswith("/attnkit-full/b"))
        if used + len(value) > type(self).quota:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().pipe_file(path, value, mode=mode, **kwargs)


def _forget(prefix: str) -> None:
    fs = MemoryFileSystem()
    for key in [k for k in fs.store if k.startswith(prefix)]:
        del fs.store[key]
    fs.pseudo_dirs[:] = [d for d in fs.pseudo_dirs if not d.startswith(prefix)]


def test_full_disk_keeps_committed_batches_and_resumes(tiny_bert):
    fsspec.register_implementation("fullmem", _FullMemory, clobber=True)
    ak.extract(tiny_bert, TEXTS, batch_size=2, store="fullmem://attnkit-full/a", progress=False)
    size = sum(len(f.getbuffer()) for k, f in _FullMemory.store.items() if k.startswith("/attnkit-full/a"))
    url = "fullmem://attnkit-full/b"
    _FullMemory.quota = size - 200  # room for all but the last batch
    try:
        with pytest.raises(StoreError, match="disk holding .* is full") as err:
            ak.extract(tiny_bert, TEXTS, batch_size=2, store=url, progress=False)
        assert "Free space" in str(err.value)
        loc = st.Location.of(url)
        done = st.committed_batches(loc)
        assert 0 < len(done) < 4
        with pytest.raises(StoreError, match="incomplete"):
            ak.open_store(url)
        _FullMemory.quota = 10**12  # space freed
        again = ak.extract(tiny_bert, TEXTS, batch_size=2, store=url, progress=False)
        assert again.run_info == {"computed_batches": 4 - len(done), "reused_batches": len(done)}
        _same(again, ak.extract(tiny_bert, TEXTS, batch_size=2, progress=False))
    finally:
        _FullMemory.quota = 10**12
        _forget("/attnkit-full")


def test_memory_url_roundtrip_and_corruption(tiny_bert):
    url = "memory://attnkit-test/mem"
    try:
        sset = ak.extract(tiny_bert, TEXTS, batch_size=4, store=url, progress=False)
        assert sset.path == url
        _same(ak.open_store(url), ak.extract(tiny_bert, TEXTS, batch_size=4, progress=False))
        fs = MemoryFileSystem()
        key = min(k for k in fs.store if "/mem/maps/c/" in k)
        buf = bytearray(fs.store[key].getvalue())
        buf[10:20] = b"0123456789"
        fs.pipe_file(key, bytes(buf))
        opened = ak.open_store(url)
        with pytest.raises(StoreError, match="checksum"):
            list(opened)
    finally:
        _forget("/attnkit-test")


def test_summaries_only_store(tiny_bert, tmp_path):
    from attnkit.core.headstats import item_stats
    from attnkit.storage.summaries import top_edges

    sset = ak.extract(tiny_bert, TEXTS, batch_size=3, store=tmp_path / "s", keep=("stats", "edges"),
                      progress=False)
    assert not (tmp_path / "s" / "maps").exists()
    with pytest.raises(StoreError, match="summaries only"):
        sset[0]
    full = ak.extract(tiny_bert, TEXTS, batch_size=3, progress=False)
    stats = ak.open_store(tmp_path / "s").summary("stats")
    edges = sset.summary("edges")
    for i, att in enumerate(full):
        np.testing.assert_array_equal(stats[i], item_stats(att))
        np.testing.assert_array_equal(edges[i], top_edges(att))
    # against a full stable sort of every map (ties in position order)
    for i, att in enumerate(full):
        L, H, n, _ = att.maps.shape
        flat = att.maps.reshape(L, H, n * n)
        ref = np.argsort(-flat, axis=-1, kind="stable")[..., :16]
        np.testing.assert_array_equal(edges[i][..., 0] * n + edges[i][..., 1], ref)
    tied = ak.Attention.from_maps(np.full((1, 1, 3, 3), 1 / 3), ["[CLS]", "a", "[SEP]"])
    np.testing.assert_array_equal(top_edges(tied, k=4)[0, 0, :, :2], [[0, 0], [0, 1], [0, 2], [1, 0]])
    # hand check of one edge list: the strongest edge of head (0, 0) of item 0
    m = full[0].maps[0, 0]
    q, k = np.unravel_index(np.argmax(m), m.shape)
    assert tuple(edges[0, 0, 0, 0, :2]) == (q, k) and edges[0, 0, 0, 0, 2] == m[q, k]
    with pytest.raises(InputError, match="keep"):
        ak.extract(tiny_bert, TEXTS, keep="pictures", progress=False)
    # head_stats reads the stored statistics: the same numbers as from the maps
    import pandas as pd

    from_maps = ak.head_stats(ak.extract(tiny_bert, TEXTS, batch_size=3, store=tmp_path / "m",
                                         progress=False), progress=False)
    from_stats = ak.head_stats(sset, progress=False)
    pd.testing.assert_frame_equal(from_maps.table, from_stats.table, check_exact=True)
    assert from_maps.meta == from_stats.meta


# ------------------------------------------------------------------ format 1
def test_format1_opens_read_only_and_migrates(tiny_bert, tmp_path, capsys):
    ref = ak.extract(tiny_bert, TEXTS, batch_size=3, embeddings=True, progress=False)
    old = tmp_path / "old"
    extract_v1(tiny_bert, TEXTS, old, batch_size=3, embeddings=True)
    assert sorted(p.name for p in (old / "batches").iterdir())[:3] == [
        "000000.emb.npy", "000000.json", "000000.npy"]
    v1 = ak.open_store(old)
    _same(v1, ref)
    with pytest.raises(StoreError, match="format 1"):
        ak.extract(tiny_bert, TEXTS, batch_size=3, embeddings=True, store=old, progress=False)

    assert main(["store", "migrate", str(old)]) == 0
    assert "migrated" in capsys.readouterr().err
    assert (tmp_path / "old.v1" / "manifest.json").exists()  # the original is kept
    new = ak.open_store(old)
    assert new.info["format"] == 2 and new.info["migrated_from"] == 1
    _same(new, ref)
    # a notebook that extracts the same inputs into the migrated store reuses every batch
    again = ak.extract(tiny_bert, TEXTS, batch_size=3, embeddings=True, store=old, progress=False)
    assert again.run_info == {"computed_batches": 0, "reused_batches": 3}
    assert main(["store", "migrate", str(old)]) == 2  # already format 2
    assert "already" in capsys.readouterr().err


def test_format1_damaged_batch_file_names_its_items(tiny_bert, tmp_path):
    old = tmp_path / "old"
    extract_v1(tiny_bert, TEXTS, old, batch_size=3)
    f = old / "batches" / "000001.npy"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])  # the truncated batch file
    sset = ak.open_store(old)
    hit = [int(i) for i in sset.batch_items(1)]
    with pytest.raises(StoreError, match="000001.npy") as err:
        sset[hit[0]]
    assert all(str(i) in str(err.value) for i in hit)
    from attnkit.storage.store_v1 import migrate

    with pytest.raises(StoreError, match="000001.npy"):  # a damaged store is not migrated
        migrate(old, tmp_path / "new")


def test_not_a_store(tmp_path):
    with pytest.raises(StoreError, match="not an attnkit store"):
        ak.open_store(tmp_path)
    (tmp_path / "x.txt").write_text("hi")
    from attnkit.testing import tiny_model

    with pytest.raises(StoreError, match="other files"):
        ak.extract(tiny_model("bert"), TEXTS[:1], store=tmp_path, progress=False)
