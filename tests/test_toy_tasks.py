"""Known answers from the trained toy models shipped with attnkit (attnkit/toy_models).

- reversal-t5 writes random word sequences backwards; its best cross-attention head, found by
  the alignment error rate, is anti-diagonal: target word j reads source word n - 1 - j on at
  least 90 % of the words of held-out sequences.
- colour-vit names the colour of one square on a white image; the class token's attention
  rollout peaks on the square's patch for at least 90 % of held-out images.
"""

import numpy as np
import pytest

import attnkit as ak
from attnkit.analysis import alignment_error_rate, word_alignment
from attnkit.toys.tasks import (
    colour_images,
    colour_model,
    reversal_accuracy,
    reversal_gold,
    reversal_model,
    reversal_pairs,
)

pytestmark = pytest.mark.numerics

HELD_OUT = 9_999  # seeds the training never drew (it draws seed * 1_000_003 + step + 1)


def rollout_peaks(model, images, cells):
    """Share of images whose class-token rollout is highest, over the patches, on the
    square's patch."""
    hits = 0
    for image, cell in zip(images, cells):
        att = model.attend(image)
        grid = ak.vision.patch_grid(att)
        row = ak.rollout(att)[0]
        patches = np.flatnonzero(grid[:, 0] >= 0)
        hits += grid[patches[int(np.argmax(row[patches]))]].tolist() == list(cell)
    return hits / len(images)


@pytest.fixture(scope="module")
def reversal():
    return reversal_model()


def test_reversal_model_reverses(reversal):
    pairs = reversal_pairs(20, seed=HELD_OUT)
    assert reversal_accuracy(reversal, pairs) >= 0.9


def test_best_cross_attention_head_is_anti_diagonal(reversal):
    pairs = reversal_pairs(40, seed=HELD_OUT)
    atts = [reversal.attend(s, t) for s, t in pairs]
    gold = reversal_gold(pairs)
    result = alignment_error_rate(atts, gold, progress=False)
    layer, head = result.meta["best"]
    assert result.loc[(layer, head), "accuracy"] >= 0.9
    assert result.loc[(layer, head), "aer"] <= 0.1
    # the same head read directly: target word j <- source word n - 1 - j
    links = word_alignment(atts[0], layer=layer, head=head)
    n = len(pairs[0][0].split())
    assert len(links & {(n - 1 - j, j) for j in range(n)}) >= n - 1
    # the anti-diagonal shows in the map itself: each predicting row's largest source word
    cross = atts[0].cross.to_words()
    best = cross.maps[layer, head][:n, :n].argmax(-1)
    assert (best == np.arange(n)[::-1]).mean() >= 0.75
    # reading the rows as inputs (not as predictors) misses the alignment
    shifted = alignment_error_rate(atts, gold, rows="input", heads=[(layer, head)], progress=False)
    assert shifted.loc[(layer, head), "accuracy"] < 0.5


def test_reversal_generated_output_is_aligned_too(reversal):
    source, target = reversal_pairs(1, seed=HELD_OUT + 1)[0]
    s2s = reversal.attend(source, generate=True, max_new_tokens=12)
    assert s2s.decoder.words == target.split()
    result = alignment_error_rate([s2s], reversal_gold([(source, target)]), progress=False)
    assert result["accuracy"].max() >= 0.9


def test_colour_model_rollout_peaks_on_the_square():
    model = colour_model()
    images, labels, cells = colour_images(60, seed=HELD_OUT)
    assert rollout_peaks(model, images, cells) >= 0.9
    att = model.attend(images[0])
    assert att.meta["grid"] == [4, 4] and att.tokens[0] == "[CLS]"
    roll = ak.rollout(att)[0]
    grid = ak.vision.patch_grid(att)
    assert grid[1 + int(np.argmax(roll[1:]))].tolist() == cells[0].tolist()


def test_colour_model_names_colours():
    import torch

    model = colour_model()
    images, labels, _ = colour_images(40, seed=HELD_OUT)
    batch = model.pad([model.encode(im) for im in images])
    with torch.inference_mode():
        pred = model.hf(**batch).logits.argmax(-1).numpy()
    assert (pred == labels).mean() >= 0.9


def test_graph_through_the_decoder_reaches_the_copied_source_word(reversal):
    """Traced from the decoder output that predicts target word j, down the decoder, across
    the cross-attention and down the encoder, the graph reaches source word n - 1 - j (the
    word the model copies) and, almost always, no other source word; rollout through the
    decoder into the encoder puts its largest share there too."""
    pairs = reversal_pairs(20, seed=HELD_OUT)
    reached = only = peaks = total = 0
    for source, target in pairs:
        s2s = reversal.attend(source, target)
        n = len(source.split())  # one token per word; decoder row j predicts target word j
        relevance = ak.seq2seq_rollout(s2s)
        for j in range(n):
            graph = ak.attention_graph(s2s, threshold=0.25, sources=[j])
            words = {pos for side, level, pos in graph if side == "encoder" and level == 0
                     and s2s.encoder.roles[pos] == "word"}
            reached += (n - 1 - j) in words
            only += words == {n - 1 - j}
            peaks += int(np.argmax(relevance[j, :n])) == n - 1 - j
            total += 1
    assert reached / total >= 0.95
    assert only / total >= 0.9
    assert peaks / total >= 0.95
