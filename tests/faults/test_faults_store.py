"""Fault catalogue: stores (issue items 1, 10, 13, 14 and the recoveries that already held).

Every case damages a real store by hand, checks the exact error class, then checks that
nothing was lost: after ``attnkit store repair`` or the next ``extract`` the store reads back
equal to a clean run of the same inputs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from fault_helpers import BATCH, TEXTS, raises_exactly, remount, same_sets, tmpfs

import attnkit as ak
from attnkit.storage import store as st
from attnkit.apps.cli import main
from attnkit.errors import StoreError
from attnkit.storage.store_v1 import extract_v1
from attnkit.testing import tiny_model
from tolerances import assert_close, F32

OPTIONS = dict(batch_size=BATCH, keep=("maps", "stats"), embeddings=True, progress=False)


@pytest.fixture(scope="module")
def clean(tiny_bert):
    """The same inputs extracted in memory: what every repaired store must read back as."""
    sset = ak.extract(tiny_bert, TEXTS, **OPTIONS)
    return sset, ak.head_stats(sset, progress=False).table


@pytest.fixture
def made(tiny_bert, tmp_path):
    path = tmp_path / "s"
    ak.extract(tiny_bert, TEXTS, store=path, **OPTIONS)
    return path


def _equal_to_clean(path: Path, clean) -> None:
    sset, stats = clean
    opened = ak.open_store(path)
    same_sets(opened, sset)
    # the summaries were computed by the same code on the same maps: exactly equal
    pd.testing.assert_frame_equal(ak.head_stats(opened, progress=False).table, stats, check_exact=True)


def _resume(tiny_bert, path: Path) -> dict:
    return ak.extract(tiny_bert, TEXTS, store=path, **OPTIONS).run_info


# ------------------------------------------------------------------ damaged chunks
def _chunk_files(path: Path, name: str, b: int) -> list[Path]:
    """The chunk files that hold batch ``b`` of array ``name``."""
    sset = ak.open_store(path)
    lay = sset._layout
    if name == "summaries/stats":  # one row chunk per batch, at its full nested path
        return sorted((path / name / "c" / str(b)).rglob("*"))[-1:]
    lo, hi = lay.map_range(b) if name == "maps" else lay.emb_range(b)
    c = sset.info["chunks"][name]
    return [path / name / "c" / str(k) for k in range(lo // c, -(-hi // c))]


def _delete(f: Path) -> None:
    f.unlink()


def _flip(f: Path) -> None:
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))


def _truncate(f: Path) -> None:
    f.write_bytes(f.read_bytes()[: max(1, f.stat().st_size // 2)])


DAMAGES = {"delete": _delete, "flip": _flip, "truncate": _truncate}


@pytest.mark.parametrize("b", [0, 1, 3])
@pytest.mark.parametrize("damage", list(DAMAGES))
@pytest.mark.parametrize("name", ["maps", "embeddings", "summaries/stats"])
def test_a_damaged_chunk_is_found_verified_and_recomputed(tiny_bert, clean, made, name, damage, b, capsys):
    files = _chunk_files(made, name, b)
    assert files and all(f.is_file() for f in files)
    DAMAGES[damage](files[0])
    items = [int(i) for i in ak.open_store(made).batch_items(b)] if name != "summaries/stats" else None
    opened = ak.open_store(made)
    if name == "summaries/stats":  # item 1: a missing summary chunk no longer goes unnoticed
        err = raises_exactly(StoreError, ak.head_stats, opened, progress=False)
    elif name == "maps":
        err = raises_exactly(StoreError, lambda: opened[items[0]].maps)
    else:
        err = raises_exactly(StoreError, lambda: opened[items[0]].embeddings)
    assert name in str(err)
    assert main(["store", "verify", str(made)]) == 1
    assert f"batch {b}: damaged {name}" in capsys.readouterr().out
    assert _resume(tiny_bert, made) == {"computed_batches": 1, "reused_batches": 3}
    _equal_to_clean(made, clean)


@pytest.mark.parametrize("name", ["maps", "summaries/stats"])
def test_repair_forgets_damaged_batches_and_lists_them(tiny_bert, clean, made, name, capsys):
    _delete(_chunk_files(made, name, 2)[0])
    assert main(["store", "repair", str(made)]) == 1
    out = capsys.readouterr().out
    assert "batch 2: damaged" in out and "uncommitted" in out
    raises_exactly(StoreError, ak.open_store, made)  # incomplete now, not wrong
    assert _resume(tiny_bert, made) == {"computed_batches": 1, "reused_batches": 3}
    assert main(["store", "repair", str(made)]) == 0
    _equal_to_clean(made, clean)


# ------------------------------------------------------------------ damaged metadata
DOCS = ["zarr.json", "maps/zarr.json", "embeddings/zarr.json", "summaries/zarr.json",
        "summaries/stats/zarr.json", "items/n/zarr.json", "items/meta/zarr.json",
        "positions/tokens/zarr.json", "words/words/zarr.json"]
INTERMEDIATE = {"summaries/zarr.json"}


def _damage_doc(path: Path, doc: str, how: str) -> None:
    f = path / doc
    if how == "delete":
        f.unlink()
    else:
        text = f.read_text()
        f.write_text(text[: len(text) // 2])


@pytest.mark.parametrize("how", ["truncate", "delete"])
@pytest.mark.parametrize("doc", DOCS)
def test_damaged_metadata_is_a_store_error_and_repair_restores_it(clean, made, doc, how, capsys):
    _damage_doc(made, doc, how)
    if doc in INTERMEDIATE:  # Zarr 3 reads arrays without their parent group's document
        _equal_to_clean(made, clean)
    else:
        err = raises_exactly(StoreError, lambda: ak.head_stats(ak.open_store(made), progress=False))
        assert "repair" in str(err) or "damaged" in str(err)
    assert main(["store", "verify", str(made)]) in (1, 2)  # reported either way
    assert main(["store", "repair", str(made)]) == 0
    assert f"metadata {doc}: restored" in capsys.readouterr().out
    _equal_to_clean(made, clean)


@pytest.mark.parametrize("doc", DOCS)
def test_resuming_repairs_damaged_metadata(tiny_bert, clean, made, doc):
    """Items 10 and 13: a truncated zarr.json strands no committed batch."""
    _damage_doc(made, doc, "truncate")
    assert _resume(tiny_bert, made) == {"computed_batches": 0, "reused_batches": 4}
    _equal_to_clean(made, clean)


def test_metadata_and_its_copy_both_lost(made, capsys):
    _damage_doc(made, "zarr.json", "truncate")
    (made / st.META_BACKUP).write_text("{")
    raises_exactly(StoreError, ak.open_store, made)
    assert main(["store", "repair", str(made)]) == 1
    assert "no copy" in capsys.readouterr().out


def test_a_store_from_before_the_metadata_copy_gets_one(clean, made):
    (made / st.META_BACKUP).unlink()
    assert main(["store", "repair", str(made)]) == 0
    assert (made / st.META_BACKUP).exists()
    _damage_doc(made, "maps/zarr.json", "truncate")
    assert main(["store", "repair", str(made)]) == 0
    _equal_to_clean(made, clean)


# ------------------------------------------------------------------ the index
def test_a_damaged_item_table_is_rewritten(tiny_bert, clean, made):
    _flip(made / "items" / "n" / "c" / "0")
    raises_exactly(StoreError, ak.open_store, made)
    assert _resume(tiny_bert, made) == {"computed_batches": 0, "reused_batches": 4}
    _equal_to_clean(made, clean)


def test_a_damaged_index_chunk_is_rewritten(tiny_bert, clean, made):
    _flip(made / "positions" / "tokens" / "c" / "0")
    err = raises_exactly(StoreError, lambda: ak.open_store(made)[0])
    assert sorted(err.items) == list(range(len(TEXTS)))
    assert _resume(tiny_bert, made) == {"computed_batches": 0, "reused_batches": 4}
    _equal_to_clean(made, clean)


# ------------------------------------------------------------------ writers
def test_two_writers(tiny_bert, clean, tmp_path):
    path = tmp_path / "s"
    ak.extract(tiny_bert, TEXTS[:2], store=tmp_path / "other", progress=False)
    path.mkdir()
    lock = st.WriterLock(st.Location.of(path)).acquire()
    try:
        err = raises_exactly(StoreError, ak.extract, tiny_bert, TEXTS, store=path, **OPTIONS)
        assert "another process" in str(err)
    finally:
        lock.release()
    assert _resume(tiny_bert, path) == {"computed_batches": 4, "reused_batches": 0}
    _equal_to_clean(path, clean)


def test_a_dead_writers_lock_is_taken_over(tiny_bert, clean, made):
    (made / "writer.lock").write_text(json.dumps(
        {"token": "x", "host": st._host(), "pid": 2**22 + 12345, "since": 0, "heartbeat": 0}))
    assert _resume(tiny_bert, made) == {"computed_batches": 0, "reused_batches": 4}
    _equal_to_clean(made, clean)


_CHILD = """
import sys, attnkit as ak
from attnkit.testing import tiny_model
texts = open(sys.argv[2]).read().splitlines()
ak.extract(tiny_model("bert"), texts, batch_size=2, keep=("maps", "stats"), embeddings=True,
           store=sys.argv[1], progress=False)
"""


@pytest.mark.slow
def test_kill_9_mid_extract_and_resume(tiny_bert, tmp_path):
    texts = [f"{t} {'the cat ' * (i % 5)}".strip() for i, t in enumerate(TEXTS * 4)]  # 16 batches
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    store = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=str(Path(ak.__file__).parents[1]))
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(store), str(tmp_path / "texts.txt")], env=env)
    deadline = time.time() + 120
    while time.time() < deadline and not (store.exists() and len(list((store / "commits").glob("*.json"))) >= 3):
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    done = len(list((store / "commits").glob("*.json")))
    assert 3 <= done < 16, "the child should have been killed mid-way"
    raises_exactly(StoreError, ak.open_store, store)
    opts = {**OPTIONS}
    resumed = ak.extract(tiny_bert, texts, store=store, **opts)
    assert resumed.run_info == {"computed_batches": 16 - done, "reused_batches": done}
    whole = ak.extract(tiny_bert, texts, **opts)
    for a, b in zip(resumed, whole):
        assert a.tokens == b.tokens
        # the reused batches were computed in the killed child (its own thread pool, maybe
        # another float32 summation order): a few ulp; a wrong or shifted batch is far off
        assert_close(a.maps, b.maps, F32)
    assert not list(store.rglob("*.tmp")) and not list(store.rglob("*.partial"))


# ------------------------------------------------------------------ file systems
def _kb(path: Path) -> int:
    return int(subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True).stdout.split()[0])


def test_disk_full_on_a_small_tmpfs(tiny_bert, clean, tmp_path):
    with tmpfs(tmp_path / "big", "64m") as big:
        ak.extract(tiny_bert, TEXTS, store=big / "s", **OPTIONS)
        need = _kb(big / "s")
    with tmpfs(tmp_path / "small", f"{need - 40}k") as small:
        path = small / "s"
        err = raises_exactly(StoreError, ak.extract, tiny_bert, TEXTS, store=path, **OPTIONS)
        assert "full" in str(err)
        done = st.committed_batches(st.Location.of(path))
        assert len(done) < 4
        remount(small, "size=64m")  # space freed
        assert _resume(tiny_bert, path) == {"computed_batches": 4 - len(done), "reused_batches": len(done)}
        _equal_to_clean(path, clean)


def test_a_read_only_file_system(tiny_bert, clean, tmp_path, capsys):
    """Item 14: a complete store is read (and extract reuses it) where nothing can be written."""
    with tmpfs(tmp_path / "ro", "64m") as ro:
        ak.extract(tiny_bert, TEXTS, store=ro / "s", **OPTIONS)
        ak.extract(tiny_bert, TEXTS, store=ro / "part", **{**OPTIONS, "batch_size": 4})
        st.uncommit(st.Location.of(ro / "part"), [1])
        remount(ro, "ro")
        _equal_to_clean(ro / "s", clean)
        again = ak.extract(tiny_bert, TEXTS, store=ro / "s", **OPTIONS)
        assert again.run_info == {"computed_batches": 0, "reused_batches": 4}
        assert main(["store", "verify", str(ro / "s")]) == 0
        err = raises_exactly(StoreError, ak.extract, tiny_bert, TEXTS, store=ro / "part", **{**OPTIONS, "batch_size": 4})
        assert "read-only" in str(err)
        raises_exactly(StoreError, ak.extract, tiny_bert, TEXTS, store=ro / "new", **OPTIONS)
        raises_exactly(StoreError, st.repair, st.Location.of(ro / "s"))


# ------------------------------------------------------------------ other stores
def test_format_1_migration(tiny_bert, clean, tmp_path):
    old = tmp_path / "old"
    extract_v1(tiny_bert, TEXTS, old, batch_size=BATCH, embeddings=True)
    same_sets(ak.open_store(old), clean[0])
    raises_exactly(StoreError, ak.extract, tiny_bert, TEXTS, store=old, **OPTIONS)
    assert main(["store", "migrate", str(old)]) == 0
    same_sets(ak.open_store(old), clean[0])
    again = ak.extract(tiny_bert, TEXTS, store=old, batch_size=BATCH, embeddings=True, progress=False)
    assert again.run_info == {"computed_batches": 0, "reused_batches": 4}


def test_a_store_of_another_model_or_other_inputs(tiny_bert, clean, made):
    raises_exactly(StoreError, ak.extract, tiny_model("roberta"), TEXTS, store=made, **OPTIONS)
    raises_exactly(StoreError, ak.extract, tiny_bert, TEXTS[::-1], store=made, **OPTIONS)
    raises_exactly(StoreError, ak.extract, tiny_bert, TEXTS, store=made, **{**OPTIONS, "batch_size": 4})
    _equal_to_clean(made, clean)  # a refused run changes nothing


def test_not_a_store(tiny_bert, tmp_path):
    raises_exactly(StoreError, ak.open_store, tmp_path)
    (tmp_path / "x.txt").write_text("hi")
    raises_exactly(StoreError, ak.extract, tiny_bert, TEXTS[:2], store=tmp_path, progress=False)
    raises_exactly(StoreError, ak.extract, tiny_bert, TEXTS[:2], store=tmp_path / "x.txt", progress=False)
    assert (tmp_path / "x.txt").read_text() == "hi"
