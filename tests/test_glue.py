"""read_glue on tiny hand-written tsv files in the four GLUE layouts."""

from __future__ import annotations

import os

import numpy as np
import pytest

from attnkit.data import data_dir
from attnkit.data.pairs import GlueDataset, read_glue
from attnkit.errors import DataFormatError, DataNotFoundError, InputError

BOM = "\ufeff"


def write(folder, task, split, text):
    d = folder / task
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{split}.tsv"
    p.write_text(text, encoding="utf-8")
    return p


def test_mrpc_bom_bare_quotes_and_labels(tmp_path):
    p = write(tmp_path, "MRPC", "dev", BOM + (
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        '1\t11\t12\tHe said " yes .\t" Yes , he said .\n'
        "0\t21\t22\tA cat sat .\tA dog ran .\n"
        "1\t31\t32\tIt rained .\tRain fell .\n"
    ))
    ds = read_glue(p)
    assert ds.task == "MRPC" and ds.split == "dev" and len(ds) == 3
    # QUOTE_NONE: the bare quote stays part of the text and does not swallow the next row
    assert ds[0] == ('He said " yes .', '" Yes , he said .')
    assert ds.labels.tolist() == [1, 0, 1]
    assert ds.label_names == ("not_equivalent", "equivalent")
    assert ds.ids == ["11-12", "21-22", "31-32"]
    assert ds.lines.tolist() == [2, 3, 4]
    assert ds.is_pair
    assert ds.majority_rate() == pytest.approx(2 / 3)
    assert ds.class_counts().to_dict() == {"not_equivalent": 1, "equivalent": 2}
    frame = ds.to_frame()
    assert list(frame.columns) == ["id", "text_a", "text_b", "label", "label_name", "line"]
    assert frame.label_name.tolist() == ["equivalent", "not_equivalent", "equivalent"]


def test_rte_string_labels_and_folder_plus_split(tmp_path):
    write(tmp_path, "RTE", "train", (
        "index\tsentence1\tsentence2\tlabel\n"
        "0\tA man sleeps.\tSomeone sleeps.\tentailment\n"
        "1\tA man sleeps.\tA woman runs.\tnot_entailment\n"
    ))
    ds = read_glue(tmp_path / "RTE", "train")
    assert ds.labels.tolist() == [0, 1]
    assert ds.label_names == ("entailment", "not_entailment")
    assert ds[1] == ("A man sleeps.", "A woman runs.")


def test_sst2_single_sentences_strip_trailing_space(tmp_path):
    p = write(tmp_path, "SST-2", "dev", "sentence\tlabel\nit 's charming . \t1\nbleak \t0\n")
    ds = read_glue(p)
    assert not ds.is_pair
    assert list(ds) == ["it 's charming .", "bleak"]
    assert ds.label_names == ("negative", "positive")
    assert ds.labels.tolist() == [1, 0]


def test_qnli_layout(tmp_path):
    p = write(tmp_path, "QNLI", "dev", (
        "index\tquestion\tsentence\tlabel\n"
        "7\tWho sat?\tThe cat sat.\tentailment\n"
    ))
    ds = read_glue(p)
    assert ds[0] == ("Who sat?", "The cat sat.") and ds.labels.tolist() == [0] and ds.ids == ["7"]


def test_wrong_field_count_names_file_and_line(tmp_path):
    p = write(tmp_path, "MRPC", "train", BOM + (
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        "1\t1\t2\tA .\tB .\n"
        "0\t3\t4\tonly one sentence\n"
    ))
    with pytest.raises(DataFormatError, match=r"train\.tsv:3: expected 5 tab-separated fields"):
        read_glue(p)


def test_unknown_label_and_empty_text(tmp_path):
    p = write(tmp_path, "RTE", "dev", "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tmaybe\n")
    with pytest.raises(DataFormatError, match=r"dev\.tsv:2: label 'maybe'"):
        read_glue(p)
    p = write(tmp_path, "SST-2", "dev", "sentence\tlabel\ngood\t1\n  \t0\n")
    with pytest.raises(DataFormatError, match=r"dev\.tsv:3: the 'sentence' field is empty"):
        read_glue(p)
    p = write(tmp_path, "SST-2", "train", "sentence\tlabel\ngood\t2\n")
    with pytest.raises(DataFormatError, match="label '2'"):
        read_glue(p)


def test_unknown_header(tmp_path):
    p = write(tmp_path, "CoLA", "dev", "gj04\t1\t\tOur friends won't buy this.\n")
    with pytest.raises(DataFormatError, match=r"dev\.tsv:1: header"):
        read_glue(p)


def test_unknown_task_numeric_labels_and_unlabelled_file(tmp_path):
    p = write(tmp_path, "Mine", "dev", "sentence\tlabel\na\t0\nb\t2\n")
    ds = read_glue(p)
    assert ds.label_names == ("0", "1", "2") and ds.labels.tolist() == [0, 2]
    p = write(tmp_path, "SST-2", "test", "index\tsentence\n0\tfine\n")
    ds = read_glue(p)
    assert ds.labels is None and list(ds) == ["fine"]
    with pytest.raises(InputError, match="no labels|has none"):
        ds.majority_rate()


def test_path_errors(tmp_path):
    write(tmp_path, "RTE", "dev", "index\tsentence1\tsentence2\tlabel\n")
    with pytest.raises(InputError, match=r"split.*\['dev'\]"):
        read_glue(tmp_path / "RTE")
    with pytest.raises(DataNotFoundError, match="No split 'train'"):
        read_glue(tmp_path / "RTE", "train")
    with pytest.raises(DataNotFoundError):
        read_glue(tmp_path / "nothing.tsv")
    with pytest.raises(InputError, match="is a file"):
        read_glue(tmp_path / "RTE" / "dev.tsv", "dev")


def test_limit_take_sample_split_off(tmp_path):
    rows = "".join(f"s{i}\t{int(i % 4 == 0)}\n" for i in range(40))
    p = write(tmp_path, "SST-2", "train", "sentence\tlabel\n" + rows)
    assert len(read_glue(p, limit=5)) == 5
    ds = read_glue(p)
    sub = ds[[3, 1]]
    assert isinstance(sub, GlueDataset) and list(sub) == ["s3", "s1"] and sub.labels.tolist() == [0, 0]
    assert isinstance(ds[2:4], GlueDataset) and len(ds[2:4]) == 2
    s = ds.sample(10, seed=1)
    assert len(s) == 10 and len(set(s.ids)) == 10 and list(ds.sample(10, seed=1)) == list(s)
    rest, held = ds.split_off(fraction=0.2, seed=0)
    assert len(rest) + len(held) == 40 and not set(rest.ids) & set(held.ids)
    # stratified: 10 positives, 30 negatives -> 2 and 6 held out
    assert held.class_counts().tolist() == [6, 2]


def test_dataset_validates_labels():
    with pytest.raises(InputError, match="one integer label per input"):
        GlueDataset(["a", "b"], np.array([0]), ("x", "y"))
    with pytest.raises(InputError, match="labels must be integers in 0..1"):
        GlueDataset(["a"], np.array([3]), ("x", "y"))


def test_inputs_feed_model_encode(tmp_path):
    from attnkit.testing import tiny_model

    p = write(tmp_path, "MRPC", "dev", BOM + (
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tThe cat sat .\tThe cat sat on the mat .\n"
    ))
    enc = tiny_model("bert").encode(read_glue(p)[0])
    assert set(enc.segments) == {-1, 0, 1} and enc.words[:3] == ["The", "cat", "sat"]


needs_data = pytest.mark.skipif(data_dir() is None and os.environ.get("CI") != "true",
                                reason="needs ../shared/data")


@needs_data
@pytest.mark.realdata
def test_real_glue_files():
    sizes = {("MRPC", "train"): 3668, ("MRPC", "dev"): 408, ("RTE", "train"): 2490,
             ("RTE", "dev"): 277, ("SST-2", "dev"): 872, ("QNLI", "dev"): 5463}
    for (task, split), n in sizes.items():
        ds = read_glue(task, split)
        assert len(ds) == n, (task, split)
        assert ds.labels is not None and set(ds.labels.tolist()) == {0, 1}
    mrpc = read_glue("mrpc", "dev")
    assert mrpc.class_counts().tolist() == [129, 279]
