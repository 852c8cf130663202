"""Steps -> tokens: separator positions, truncation, label tensors and the step loss (real bundled tokenizer)."""

from __future__ import annotations

import pytest

from pipeline.bundled import MODEL_DIR
from pipeline.training.collate import (
    IGNORE_INDEX,
    CollateError,
    PrmFormat,
    collate,
    encode,
    ensure_separator,
    make_example,
    separator_id,
    step_loss,
    targets_until_first_error,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PROBLEM = "Compute (23 + 17) * 3 - 48 / 6."
STEPS = ["23 + 17 = 40", "40 * 3 = 120", "48 / 6 = 8", "120 - 8 = 112", "The answer is \\boxed{112}."]


@pytest.fixture()
def tok():
    t = transformers.AutoTokenizer.from_pretrained(MODEL_DIR)
    return t


def test_separator_is_added_once_as_one_token(tok):
    n = len(tok)
    sid, added = ensure_separator(tok, "<extra_0>")
    assert added and len(tok) == n + 1 and sid == n
    assert tok.encode("a<extra_0>b", add_special_tokens=False).count(sid) == 1
    sid2, added2 = ensure_separator(tok, "<extra_0>")
    assert (sid2, added2) == (sid, False) and len(tok) == n + 1
    assert separator_id(tok, "<extra_0>") == sid
    with pytest.raises(CollateError, match="no token"):
        separator_id(tok, "<extra_9>")


def test_positions_are_the_separators_and_pieces_decode_to_the_steps(tok):
    sid, _ = ensure_separator(tok, "<extra_0>")
    fmt = PrmFormat()
    enc = encode(tok, fmt, sid, PROBLEM, STEPS)
    assert enc.kept == len(STEPS) and len(enc.positions) == len(STEPS)
    assert [i for i, t in enumerate(enc.input_ids) if t == sid] == enc.positions
    # the text before the first separator is the header and step 0; between two separators, a step and its suffix
    head = tok.decode(enc.input_ids[: enc.positions[0]])
    assert head == "Problem: " + PROBLEM + "\nSolution:\n" + STEPS[0] + "\n"
    for k in range(1, len(STEPS)):
        assert tok.decode(enc.input_ids[enc.positions[k - 1] + 1: enc.positions[k]]) == STEPS[k] + "\n"
    # the same ids as tokenizing the whole text in one go (the separator is a special token)
    assert tok.encode(fmt.text(PROBLEM, STEPS), add_special_tokens=False) == enc.input_ids


def test_truncation_drops_whole_steps_and_keeps_labels_aligned(tok):
    sid, _ = ensure_separator(tok, "<extra_0>")
    full = encode(tok, PrmFormat(), sid, PROBLEM, STEPS)
    short = PrmFormat(max_length=full.positions[2] + 1)  # room for exactly three steps
    enc = encode(tok, short, sid, PROBLEM, STEPS)
    assert enc.kept == 3 and enc.positions == full.positions[:3] and len(enc.input_ids) <= short.max_length
    ex = make_example(tok, short, sid, PROBLEM, STEPS, [1.0, 1.0, 0.0, None, None])
    assert ex.targets == [1.0, 1.0, 0.0] and len(ex.weights) == 3
    with pytest.raises(CollateError, match="problem alone"):
        encode(tok, PrmFormat(max_length=10), sid, PROBLEM, STEPS)
    with pytest.raises(CollateError, match="targets for"):
        make_example(tok, PrmFormat(), sid, PROBLEM, STEPS, [1.0])
    with pytest.raises(CollateError, match="outside"):
        make_example(tok, PrmFormat(), sid, PROBLEM, STEPS, [1.5, 1, 1, 1, 1])
    with pytest.raises(CollateError, match="exactly once"):
        PrmFormat(header="no placeholder")


def test_collate_puts_labels_only_at_labeled_separators(tok):
    sid, _ = ensure_separator(tok, "<extra_0>")
    fmt = PrmFormat()
    a = make_example(tok, fmt, sid, PROBLEM, STEPS, [1.0, 0.75, 0.0, None, None], weight=0.5)
    b = make_example(tok, fmt, sid, "Compute 1 + 2.", ["1 + 2 = 3", "The answer is \\boxed{3}."], [1.0, 1.0])
    batch = collate([a, b], tok.pad_token_id)
    assert batch["input_ids"].shape == (2, len(a.input_ids))
    assert batch["attention_mask"][1].sum().item() == len(b.input_ids)
    lab = batch["labels"]
    assert {(0, p) for p in a.positions[:3]} | {(1, p) for p in b.positions} == {
        tuple(x) for x in (lab != IGNORE_INDEX).nonzero().tolist()}
    assert lab[0, a.positions].tolist()[:3] == [1, 1, 0]
    assert batch["soft_labels"][0, a.positions[1]].item() == 0.75
    assert batch["label_weights"][0].sum().item() == pytest.approx(1.5)  # three labeled steps of weight 0.5
    assert batch["label_weights"][0, a.positions[3]].item() == 0.0


def test_step_loss_is_token_cross_entropy_on_the_separators_only():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 7, 2, generator=g, requires_grad=True)
    labels = torch.full((2, 7), IGNORE_INDEX)
    labels[0, 2], labels[0, 5], labels[1, 3] = 1, 0, 1
    soft = (labels == 1).float()
    w = (labels != IGNORE_INDEX).float()
    ours = step_loss(logits, soft, w)
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, 2), labels.reshape(-1), ignore_index=IGNORE_INDEX)
    assert ours.item() == pytest.approx(ref.item(), rel=1e-6)
    ours.backward()
    grad_rows = {tuple(x) for x in (logits.grad.abs().sum(-1) > 0).nonzero().tolist()}
    assert grad_rows == {(0, 2), (0, 5), (1, 3)}  # nothing flows from unlabeled positions


def test_step_loss_ignores_non_finite_logits_at_unlabeled_positions():
    # bf16 autocast on the real 1.5B model gave inf/nan logits at padding positions; 0 * inf is nan, and a nan
    # loss there turned the weights nan after one step (GPU run of issue 28). Unlabeled positions must not count.
    g = torch.Generator().manual_seed(1)
    base = torch.randn(2, 6, 2, generator=g)
    soft = torch.zeros(2, 6)
    w = torch.zeros(2, 6)
    soft[0, 1], w[0, 1], w[0, 4], w[1, 2] = 1.0, 1.0, 0.5, 2.0
    clean = step_loss(base, soft, w, pos_weight=0.6, neg_weight=5.0)
    bad = base.clone()
    bad[0, 5] = torch.tensor([float("inf"), float("-inf")])
    bad[1, 4] = torch.tensor([float("nan"), 1.0])
    bad.requires_grad_(True)
    loss = step_loss(bad, soft, w, pos_weight=0.6, neg_weight=5.0)
    assert loss.item() == pytest.approx(clean.item(), rel=1e-6)
    loss.backward()
    assert torch.isfinite(bad.grad).all()


def test_step_loss_soft_targets_and_class_weights():
    logits = torch.tensor([[[0.0, 0.0], [0.0, 0.0]]])
    soft = torch.tensor([[0.25, 1.0]])
    w = torch.tensor([[1.0, 1.0]])
    # at p = 0.5 every target costs ln 2
    assert step_loss(logits, soft, w).item() == pytest.approx(0.6931472, rel=1e-6)
    # a soft target's optimum is the target itself: the gradient vanishes at logit difference logit(0.25)
    import math

    d = math.log(0.25 / 0.75)
    x = torch.tensor([[[0.0, d]]], requires_grad=True)
    step_loss(x, torch.tensor([[0.25]]), torch.tensor([[1.0]])).backward()
    assert x.grad.abs().max().item() < 1e-6
    # class weights: a negative-only batch's loss is unchanged by the weights (normalised by total weight)
    neg = step_loss(logits, torch.tensor([[0.0, 0.0]]), w, pos_weight=3.0, neg_weight=0.5)
    assert neg.item() == pytest.approx(0.6931472, rel=1e-6)


def test_targets_until_first_error():
    assert targets_until_first_error([1.0, 0.0, 1.0, 0.0], [True, False, True, False]) == [1.0, 0.0, None, None]
    assert targets_until_first_error([0.9, None, 0.2], [True, None, False]) == [0.9, None, 0.2]
    assert targets_until_first_error([1.0, 1.0], [True, True]) == [1.0, 1.0]
