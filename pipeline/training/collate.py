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

Pooling (``PrmFormat.pooling``): how a step's score is read from the per-token head.

* ``sep``: the head at the step's ``SEP`` only (Qwen2.5-Math-PRM's reading);
* ``min``: the least ``P(good)`` over every token of the step (its text, suffix and ``SEP``): a step is as good as
  its worst token. A causal LM's hidden state at a token has seen that token and what the model expected there,
  so a wrong number or a wrong choice of operation shows at the token where it is written; ``sep`` must instead
  carry that across the whole step into one position, which a small model does not learn from a few thousand
  step labels (BENCHMARKS.md, issue 28: the pooling study). The model and its output are the same
  (``AutoModelForTokenClassification``); only which positions are read differs, recorded in the PRM's config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

IGNORE_INDEX = -100
DEFAULT_SEPARATOR = "<extra_0>"
DEFAULT_HEADER = "Problem: {problem}\nSolution:\n"
POOLINGS = ("min", "sep")
DEFAULT_POOLING = "sep"  # "min" measured no better (BENCHMARKS.md, issue 28: the PRM recipe study)


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
    pooling: str = "sep"  # sep | min (module doc); "sep" for PRMs written before the field existed

    def __post_init__(self):
        if self.header.count("{problem}") != 1:
            raise CollateError(f"the PRM header template must contain {{problem}} exactly once: {self.header!r}")
        if not self.separator:
            raise CollateError("the step separator token must not be empty")
        if self.max_length < 8:
            raise CollateError(f"max_length must be at least 8, got {self.max_length}")
        if self.pooling not in POOLINGS:
            raise CollateError(f"pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> PrmFormat:
        return cls(**{k: d[k] for k in ("header", "step_suffix", "separator", "max_length", "add_bos", "pooling")
                     if k in d})

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
        raise CollateError(f"the PRM's tokenizer has no token {separator!r} (the separator its config names); "
                           "was the folder written by `mcprm train`?")
    return int(vocab[separator])


@dataclass
class Encoded:
    input_ids: list[int]
    positions: list[int]  # index of each kept step's separator token
    kept: int  # steps kept (the rest were cut by max_length)
    starts: list[int] = field(default_factory=list)  # index of each kept step's first token

    def spans(self) -> list[tuple[int, int]]:
        """Each kept step's tokens as [start, end): its text, suffix and separator."""
        return [(a, p + 1) for a, p in zip(self.starts, self.positions, strict=True)]


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
    if len(ids) + 1 >= fmt.max_length:
        raise CollateError(f"the problem alone is {len(ids)} tokens, more than max_length {fmt.max_length} "
                           "leaves room for (raise --max-length)")
    positions: list[int] = []
    starts: list[int] = []
    for s in steps:
        piece = pieces(s + fmt.step_suffix)
        if len(ids) + len(piece) + 1 > fmt.max_length:
            break
        starts.append(len(ids))
        ids.extend(piece)
        ids.append(sep_id)
        positions.append(len(ids) - 1)
    return Encoded(ids, positions, len(positions), starts)


@dataclass
class Example:
    """One training row: token ids, the separator positions and each labeled step's target and weight."""

    input_ids: list[int]
    positions: list[int]
    targets: list[float | None]  # one per position
    weights: list[float]  # one per position (0 where the target is None)
    group: str = ""  # problem hash (the split is by problem)
    starts: list[int] | None = None  # each step's first token, for pooling "min" (None: read at the separator)


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
    return Example(enc.input_ids, enc.positions, t, w, group, enc.starts if fmt.pooling == "min" else None)


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


def collate(examples: Sequence[Example], pad_id: int) -> dict:
    """A right-padded batch: ``input_ids``, ``attention_mask``, ``labels`` (hard 0/1 at separators, -100
    elsewhere: what ``AutoModelForTokenClassification``'s own loss reads), ``soft_labels`` and
    ``label_weights`` (the targets and weights at separators, 0 elsewhere: the loss mcprm trains with)."""
    import torch

    n = max(len(e.input_ids) for e in examples)
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
    out = {"input_ids": ids, "attention_mask": mask, "labels": labels, "soft_labels": soft,
           "label_weights": weights}
    if any(e.starts is not None for e in examples):  # pooling "min": which step each token belongs to
        n_steps = max(1, max(len(e.positions) for e in examples))
        step_index = torch.full((b, n), -1, dtype=torch.long)
        step_targets = torch.zeros((b, n_steps), dtype=torch.float32)
        step_weights = torch.zeros((b, n_steps), dtype=torch.float32)
        for i, e in enumerate(examples):
            starts = e.starts if e.starts is not None else e.positions
            for k, (a, p, y, w) in enumerate(zip(starts, e.positions, e.targets, e.weights, strict=True)):
                step_index[i, a: p + 1] = k
                if y is not None and w > 0:
                    step_targets[i, k] = float(y)
                    step_weights[i, k] = float(w)
        out.update(step_index=step_index, step_targets=step_targets, step_weights=step_weights)
    return out


def step_loss(logits, soft_labels, label_weights, pos_weight: float = 1.0, neg_weight: float = 1.0):
    """Cross-entropy of the 2-class head against soft targets at the labeled positions only:
    ``-(y log p1 + (1 - y) log p0)``, weighted per position (row weight, confidence) and per class
    (``pos_weight`` on the ``y`` part, ``neg_weight`` on the ``1 - y`` part: class balance). Averaged over the
    total weight. With hard targets this is the usual token-classification loss on the separators."""
    import torch

    # only the labeled positions (weight > 0) enter: in bf16 autocast a padding position's logits can be inf/nan
    # (Qwen2's large activations), and 0 * inf is nan, which poisoned every later step (real 1.5B run, issue 28)
    keep = label_weights > 0
    logp = torch.log_softmax(logits[keep].float(), dim=-1)
    y = soft_labels[keep]
    per = -(pos_weight * y * logp[..., 1] + neg_weight * (1 - y) * logp[..., 0])
    w = label_weights[keep]
    cls_w = pos_weight * y + neg_weight * (1 - y)
    denom = (w * cls_w).sum().clamp_min(1e-8)
    return (per * w).sum() / denom


def pooled_step_loss(logits, step_index, step_targets, step_weights, pos_weight: float = 1.0,
                     neg_weight: float = 1.0):
    """:func:`step_loss` for pooling ``min``: each step's log-odds of ``good`` is the least over its tokens
    (``step_index``: the step each token belongs to, -1 for none), then the same weighted cross-entropy against
    ``step_targets`` / ``step_weights`` (one per step)."""
    import torch
    import torch.nn.functional as F

    keep = step_weights > 0
    if not bool(keep.any()):
        return logits.float().sum() * 0.0
    pooled = pool_min(logits, step_index, step_targets.shape[1])[keep]
    y = step_targets[keep]
    per = -(pos_weight * y * F.logsigmoid(pooled) + neg_weight * (1 - y) * F.logsigmoid(-pooled))
    w = step_weights[keep]
    cls_w = pos_weight * y + neg_weight * (1 - y)
    return (per * w).sum() / (w * cls_w).sum().clamp_min(torch.finfo(torch.float32).tiny)


def pool_min(logits, step_index, n_steps: int):
    """(batch, n_steps) log-odds of ``good``: per step the least ``logit[1] - logit[0]`` over its tokens (+inf for
    a step with no token). Float32 whatever the logits' dtype."""
    import torch

    d = (logits[..., 1].float() - logits[..., 0].float())  # (b, n)
    steps = torch.arange(n_steps, device=d.device)
    member = step_index.unsqueeze(1) == steps[None, :, None]  # (b, S, n)
    inf = torch.tensor(float("inf"), device=d.device)
    return torch.where(member, d.unsqueeze(1), inf).amin(dim=-1)
