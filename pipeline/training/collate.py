"""Steps -> tokens: the PRM's input layout and the per-step label positions (the part of training that is ours).

Layout (Qwen2.5-Math-PRM's, with a plain header instead of a chat turn)::

    header(problem) + step_0 + suffix + SEP + step_1 + suffix + SEP + ... + step_{n-1} + suffix + SEP

``SEP`` is one reserved token (``<extra_0>`` by default, added to the tokenizer as a special token when it has
none); the 2-class head is read at every ``SEP``. Each piece is tokenized on its own and the ids concatenated,
so a step's text can never merge with the separator or with its neighbours: the label positions are exactly the
``SEP`` positions, in training and in scoring alike (:func:`encode`). Labels sit only there; everywhere else the
target is ignored (``-100`` in ``labels``, weight 0 in ``label_weights``).

Truncation keeps labels aligned: the header is never cut (a row whose header alone does not fit is refused),
and steps are dropped from the end until the sequence fits; a step is kept only with its separator.

Targets per step are floats in [0, 1] (1 = the step is good) or None (no label: no loss there, the separator is
still written so the row reads as it will be scored). Hard targets are 0.0 / 1.0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

IGNORE_INDEX = -100
DEFAULT_SEPARATOR = "<extra_0>"
DEFAULT_HEADER = "Problem: {problem}\nSolution:\n"


class CollateError(ValueError):
    pass


@dataclass(frozen=True)
class PrmFormat:
    """How a (problem, steps) pair is written for the PRM; recorded in the PRM's config and card."""

    header: str = DEFAULT_HEADER  # with {problem}
    step_suffix: str = "\n"  # text after each step, before the separator token
    separator: str = DEFAULT_SEPARATOR  # one token; the head is read here
    max_length: int = 2048
    add_bos: bool = True  # the tokenizer's own special tokens around the header (e.g. BOS), if it adds any

    def __post_init__(self):
        if self.header.count("{problem}") != 1:
            raise CollateError(f"the PRM header template must contain {{problem}} exactly once: {self.header!r}")
        if not self.separator:
            raise CollateError("the step separator token must not be empty")
        if self.max_length < 8:
            raise CollateError(f"max_length must be at least 8, got {self.max_length}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> PrmFormat:
        return cls(**{k: d[k] for k in ("header", "step_suffix", "separator", "max_length", "add_bos") if k in d})

    def text(self, problem: str, steps: Sequence[str]) -> str:
        """The whole input as text (for people and for tokenizing it in one go with a special separator)."""
        return self.header.replace("{problem}", problem) + "".join(s + self.step_suffix + self.separator
                                                                    for s in steps)


def ensure_separator(tokenizer, separator: str) -> tuple[int, bool]:
    """The separator's token id, adding it to ``tokenizer`` as a special token if it is not one token already.
    Returns (id, added). A separator that is several tokens and cannot be added is an error."""
    vocab = tokenizer.get_vocab()
    if separator in vocab:
        return int(vocab[separator]), False
    ids = tokenizer.encode(separator, add_special_tokens=False)
    if len(ids) == 1 and tokenizer.decode(ids) == separator:
        return int(ids[0]), False
    tokenizer.add_special_tokens({"additional_special_tokens": [separator]})
    tid = tokenizer.convert_tokens_to_ids(separator)
    if tid is None or tid == tokenizer.unk_token_id:
        raise CollateError(f"the tokenizer cannot hold the separator {separator!r} as one token")
    return int(tid), True


def separator_id(tokenizer, separator: str) -> int:
    """The id of a separator that must already be one token (scoring: the PRM's saved tokenizer has it)."""
    vocab = tokenizer.get_vocab()
    if separator not in vocab:
        # a byte-level BPE keeps '\n' as 'Ċ': one token by encoding, as ensure_separator found it at training
        ids = tokenizer.encode(separator, add_special_tokens=False)
        if len(ids) == 1 and tokenizer.decode(ids) == separator:
            return int(ids[0])
        raise CollateError(f"the PRM's tokenizer has no token {separator!r} (the separator its config names); "
                           "was the folder written by `mcprm train`?")
    return int(vocab[separator])


@dataclass
class Encoded:
    input_ids: list[int]
    positions: list[int]  # index of each kept step's separator token
    kept: int  # steps kept (the rest were cut by max_length)
    start: int = 0  # where the solution begins (after the header): what an implicit PRM sums from


class PieceCache:
    """Token ids of text pieces, memoized (steps like ``The answer is ...`` repeat across rows)."""

    def __init__(self, tokenizer, size: int = 200_000):
        self.tok = tokenizer
        self.cache: dict[str, list[int]] = {}
        self.size = size

    def __call__(self, text: str) -> list[int]:
        got = self.cache.get(text)
        if got is None:
            got = self.tok.encode(text, add_special_tokens=False) if text else []
            if len(self.cache) < self.size:
                self.cache[text] = got
        return got


def _header_ids(tokenizer, fmt: PrmFormat, problem: str, pieces: PieceCache) -> list[int]:
    text = fmt.header.replace("{problem}", problem)
    if fmt.add_bos:
        ids = tokenizer(text, add_special_tokens=True)["input_ids"]
        # keep only special tokens the tokenizer puts in front (BOS); an EOS it appends would end the text
        plain = pieces(text)
        if len(ids) > len(plain) and ids[len(ids) - len(plain):] == plain:
            return list(ids[: len(ids) - len(plain)]) + plain
        return plain
    return pieces(text)


def encode(tokenizer, fmt: PrmFormat, sep_id: int, problem: str, steps: Sequence[str],
           pieces: PieceCache | None = None) -> Encoded:
    """Token ids of one solution and the positions of its separators (one per kept step)."""
    pieces = pieces or PieceCache(tokenizer)
    ids = list(_header_ids(tokenizer, fmt, problem, pieces))
    start = len(ids)
    if len(ids) + 1 >= fmt.max_length:
        raise CollateError(f"the problem alone is {len(ids)} tokens, more than max_length {fmt.max_length} "
                           "leaves room for (raise --max-length)")
    positions: list[int] = []
    for s in steps:
        piece = pieces(s + fmt.step_suffix)
        if len(ids) + len(piece) + 1 > fmt.max_length:
            break
        ids.extend(piece)
        ids.append(sep_id)
        positions.append(len(ids) - 1)
    return Encoded(ids, positions, len(positions), start)


@dataclass
class Example:
    """One training row: token ids, the separator positions and each labeled step's target and weight."""

    input_ids: list[int]
    positions: list[int]
    targets: list[float | None]  # one per position
    weights: list[float]  # one per position (0 where the target is None)
    group: str = ""  # problem hash (the split is by problem)
    start: int = 0  # Encoded.start


def make_example(tokenizer, fmt: PrmFormat, sep_id: int, problem: str, steps: Sequence[str],
                 targets: Sequence[float | None], weight: float = 1.0, pieces: PieceCache | None = None,
                 group: str = "") -> Example:
    if len(targets) != len(steps):
        raise CollateError(f"{len(targets)} targets for {len(steps)} steps")
    enc = encode(tokenizer, fmt, sep_id, problem, steps, pieces)
    t = list(targets[: enc.kept])
    for x in t:
        if x is not None and not 0.0 <= x <= 1.0:
            raise CollateError(f"step target {x} outside [0, 1]")
    w = [0.0 if x is None else float(weight) for x in t]
    return Example(enc.input_ids, enc.positions, t, w, group, enc.start)


def targets_until_first_error(targets: Sequence[float | None], hard: Sequence[bool | None]) -> list[float | None]:
    """Targets up to and including the first step whose hard label is False; None after it (PRM800K /
    ProcessBench / Qwen convention: what follows an error is not judged)."""
    out: list[float | None] = []
    cut = False
    for x, h in zip(targets, hard, strict=True):
        out.append(None if cut else x)
        if h is False:
            cut = True
    return out


def collate(examples: Sequence[Example], pad_id: int, pad_multiple: int = 1) -> dict:
    """A right-padded batch: ``input_ids``, ``attention_mask``, ``labels`` (hard 0/1 at separators, -100
    elsewhere: what ``AutoModelForTokenClassification``'s own loss reads), ``soft_labels`` and
    ``label_weights`` (the targets and weights at separators, 0 elsewhere: the loss mcprm trains with). The
    length is the longest row's, rounded up to ``pad_multiple`` (tensor cores run whole tiles)."""
    import torch

    n = max(len(e.input_ids) for e in examples)
    n = -(-n // pad_multiple) * pad_multiple
    b = len(examples)
    ids = torch.full((b, n), pad_id, dtype=torch.long)
    mask = torch.zeros((b, n), dtype=torch.long)
    labels = torch.full((b, n), IGNORE_INDEX, dtype=torch.long)
    soft = torch.zeros((b, n), dtype=torch.float32)
    weights = torch.zeros((b, n), dtype=torch.float32)
    for i, e in enumerate(examples):
        m = len(e.input_ids)
        ids[i, :m] = torch.tensor(e.input_ids, dtype=torch.long)
        mask[i, :m] = 1
        for p, y, w in zip(e.positions, e.targets, e.weights, strict=True):
            if y is None or w <= 0:
                continue
            labels[i, p] = int(y >= 0.5)
            soft[i, p] = float(y)
            weights[i, p] = float(w)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "soft_labels": soft,
            "label_weights": weights, "response_start": torch.tensor([e.start for e in examples], dtype=torch.long)}


def step_loss(logits, soft_labels, label_weights, pos_weight: float = 1.0, neg_weight: float = 1.0,
              denominator: float | None = None):
    """Cross-entropy of the 2-class head against soft targets at the labeled positions only:
    ``-(y log p1 + (1 - y) log p0)``, weighted per position (row weight, confidence) and per class
    (``pos_weight`` on the ``y`` part, ``neg_weight`` on the ``1 - y`` part: class balance). Averaged over the
    total weight (row weight x class weight over the labeled positions), or divided by ``denominator`` when given: in training, one fixed
    number for every micro-batch, so that each labeled step weighs the same whatever batch it falls in (a
    per-batch mean would weigh a step of a sparsely labeled batch more, and make gradient accumulation change
    the update). With hard targets this is the usual token-classification loss on the separators."""
    import torch

    # only the labeled positions (weight > 0) enter: in bf16 autocast a padding position's logits can be inf/nan
    # (Qwen2's large activations), and 0 * inf is nan, which poisoned every later step (seen training the real 1.5B model)
    keep = label_weights > 0
    logp = torch.log_softmax(logits[keep].float(), dim=-1)
    y = soft_labels[keep]
    per = -(pos_weight * y * logp[..., 1] + neg_weight * (1 - y) * logp[..., 0])
    w = label_weights[keep]
    if denominator is None:
        cls_w = pos_weight * y + neg_weight * (1 - y)
        denominator = (w * cls_w).sum().clamp_min(1e-8)
    return (per * w).sum() / denominator
