"""Fault catalogue: attnkit never touches what it did not write (issue 27, item 1).

The data-loss cases: ``attnkit store repair`` on an ordinary folder deleted every ``*.tmp``
and ``*.partial`` file under it before finding it was no store (then said "repaired what
could be rebuilt"); ``extract(..., store=FOLDER)`` on a user's folder did the same before
refusing it; ``store repair`` on a path that does not exist created it. Every case here
runs repair, extract and resume against a folder of a user's files and checks that every
byte (and every modification time) is still there.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from fault_helpers import BATCH, TEXTS, raises_exactly

import attnkit as ak
from attnkit.apps.cli import main
from attnkit.errors import StoreError
from attnkit.storage import store as st

OPTIONS = dict(batch_size=BATCH, keep=("maps", "stats"), progress=False)

#: A user's files, named as attnkit's leftovers are and as attnkit's own files are.
USER_FILES = {
    "notes.tmp": b"my notes",
    "draft.partial": b"half a draft",
    "zarr.1.2.tmp": b"named like atomic_write's leftovers",
    f"data.{uuid.uuid4().hex}.partial": b"named like Zarr's leftovers",
    "sub/deep/x.partial": b"nested",
    f"sub/deep/y.{uuid.uuid4().hex}.partial": b"nested, Zarr-like",
    "writer.lock": b"not attnkit's lock",
    "commits/000000.json": b'{"mine": true}',
    "zarr.json": b'{"zarr_format": 3, "node_type": "group", "attributes": {}}',
    "paper.txt": "Überschrift\n".encode(),
}


def _user_folder(root: Path) -> dict[str, tuple[bytes, int]]:
    for rel, data in USER_FILES.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
    return _snapshot(root)


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_repair_refuses_an_ordinary_folder_and_touches_nothing(tmp_path, capsys):
    before = _user_folder(tmp_path / "mine")
    assert main(["store", "repair", str(tmp_path / "mine")]) == 2
    out = capsys.readouterr()
    assert "not an attnkit store" in out.err and "Nothing in it was changed" in out.err
    assert "repaired" not in out.out
    assert _snapshot(tmp_path / "mine") == before
    err = raises_exactly(StoreError, st.repair, st.Location.of(tmp_path / "mine"))
    assert "not an attnkit store" in str(err)
    assert _snapshot(tmp_path / "mine") == before


def test_repair_of_a_missing_path_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "no" / "such"
    assert main(["store", "repair", str(missing)]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()
    raises_exactly(StoreError, st.repair, st.Location.of(missing), match="no such folder")
    assert not (tmp_path / "no").exists()


def test_extract_into_a_users_folder_is_refused_before_anything_changes(tiny_bert, tmp_path):
    before = _user_folder(tmp_path / "mine")
    raises_exactly(StoreError, ak.extract, tiny_bert, TEXTS, store=tmp_path / "mine", **OPTIONS,
                   match="not an attnkit store")
    assert _snapshot(tmp_path / "mine") == before  # no writer.lock taken, no leftovers removed


def test_resume_and_repair_of_a_store_keep_a_users_files_in_it(tiny_bert, tmp_path):
    """A real store that a user put files into (and a killed writer left its own leftovers
    in): resuming and repairing remove exactly the writer's leftovers and nothing else."""
    store = tmp_path / "s"
    ak.extract(tiny_bert, TEXTS, store=store, **OPTIONS)
    mine = {f"mine/{k}": v for k, v in USER_FILES.items()}  # a folder of theirs in the store
    mine.update({"notes.tmp": b"beside the store's files", "maps/README.partial": b"in an array"})
    for rel, data in mine.items():
        (store / rel).parent.mkdir(parents=True, exist_ok=True)
        (store / rel).write_bytes(data)
    chunk = next(p for p in (store / "maps" / "c").rglob("*") if p.is_file())
    leftovers = [chunk.with_name(f"{chunk.name}.{uuid.uuid4().hex}.partial"),
                 store / f"attnkit-metadata.json.{os.getpid()}.123.tmp",
                 store / "commits" / f"000001.json.{os.getpid()}.7.tmp"]
    for f in leftovers:
        f.write_bytes(b"a killed writer's")
    ours = {str(f.relative_to(store)) for f in leftovers}
    before = {k: v for k, v in _snapshot(store).items() if k in mine}
    assert len(before) == len(mine)

    run = ak.extract(tiny_bert, TEXTS, store=store, **OPTIONS).run_info
    assert run == {"computed_batches": 0, "reused_batches": len(TEXTS) // BATCH}
    after = _snapshot(store)
    assert {k: after[k] for k in mine} == before
    assert not ours & set(after)  # the writer's own leftovers are gone

    for f in leftovers:
        f.write_bytes(b"a killed writer's")
    done = st.repair(st.Location.of(store))
    assert not done.to_recompute
    after = _snapshot(store)
    assert {k: after[k] for k in mine} == before and not ours & set(after)
    assert len(ak.open_store(store)) == len(TEXTS)


@pytest.mark.parametrize("name", ["notes.tmp", "x.partial", "zarr.json.1.tmp", "c.0.partial"])
def test_names_a_writer_never_makes_are_not_leftovers(name):
    assert not st._LEFTOVER.match(name)


def test_names_a_writer_makes_are_leftovers():
    assert st._LEFTOVER.match(f"0.{uuid.uuid4().hex}.partial")
    assert st._LEFTOVER.match("writer.lock.12.140234.tmp")


def test_a_store_whose_root_document_is_damaged_is_still_proven_by_its_backup(tiny_bert, tmp_path):
    store = tmp_path / "s"
    ak.extract(tiny_bert, TEXTS, store=store, **OPTIONS)
    (store / "zarr.json").write_bytes(b"{ broken")
    assert st.is_store(st.Location.of(store))
    assert not st.is_store(st.Location.of(tmp_path))
    done = st.repair(st.Location.of(store))
    assert done.restored == ["zarr.json"] and not done.to_recompute
