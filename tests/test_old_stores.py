"""Stores written before the folders became the layers (attnkit at commit 0cd90c9) still open
and read the same maps. tests/data/store_0cd90c9 was written by that commit: a tiny BERT's
attention and queries/keys of three sentences (``text``), a tiny GPT-2's norm-measure maps
(``norm``), and the arrays it read back then (``expected.npz``)."""

import shutil
from pathlib import Path

import numpy as np

import attnkit as ak
from attnkit.storage.store import Location, StoreReader
from tolerances import EXACT, assert_close

OLD = Path(__file__).parent / "data" / "store_0cd90c9"


def test_a_store_of_the_old_layout_opens_and_reads_the_same(tmp_path):
    folder = tmp_path / "old"
    shutil.copytree(OLD, folder)  # reading must not depend on writing into the checkout
    expected = np.load(folder / "expected.npz")
    text = ak.open_store(folder / "text")
    assert len(text) == 3 and text.measure == "weights"
    assert_close(text[0].maps, expected["text0"], EXACT)
    assert_close(text[2].maps, expected["text2"], EXACT)
    assert_close(text[1].queries(1), expected["q"], EXACT)
    norm = ak.open_store(folder / "norm")
    assert norm.measure == "norm"
    assert_close(norm[1].maps, expected["norm1"], EXACT)
    for name in ("text", "norm"):  # every checksum of the old store holds under the new reader
        reader = StoreReader(Location.of(folder / name), require_complete=False)
        assert [reader.verify_batch(b) for b in sorted(reader.committed)] == [[]] * len(reader.committed)
        assert reader.verify_index() == []
