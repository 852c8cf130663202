"""The Hugging Face Trainer as a PRM is trained with it: what mcprm changes in it, each for a reason.

* **Batches by length and tokens** (:class:`TokenBatches`): rows of similar length together, at most
  ``batch_size`` rows and ``max_batch_tokens`` padded tokens a micro-batch. Padding every batch to its longest
  row in corpus order spent most of a GPU's time on pad tokens; a token budget also keeps a batch of long rows
  from running out of memory.
* **One loss scale for every micro-batch** (:func:`pipeline.training.collate.step_loss`'s ``denominator``): each
  labeled step's loss is divided by the mean total label weight of a micro-batch, and the Trainer divides by the
  accumulation steps. So the update is the same for G=1 with batch 2B and for G=2 with batch B, and the same on
  one GPU and on several (DDP averages the ranks' gradients). transformers 5 stops dividing by the accumulation
  steps when it counts ``num_items_in_batch`` from a ``labels`` key, which a mean-reducing loss then multiplied
  by G; mcprm's loss does not take that count, so the Trainer is told so (``model_accepts_loss_kwargs``).
* **No cuDNN attention in training** (:func:`attention_guard`): PyTorch's cuDNN scaled-dot-product attention
  returns NaN query gradients when an explicit mask is passed, the length is 64 mod 128 and a row's logsumexp is
  below ln(FLT_MAX) ~ -88.7 (Qwen2.5 has heads whose logits are all that negative). Padded batches pass a mask
  and hit such lengths. The flash and memory-efficient kernels are exact there and as fast.
* **No padding mask for the head** (``compute_loss``): rows are right-padded and the base is a causal LM, so a
  real token never attends to a pad after it; without the mask its outputs are the same, and attention runs the
  causal flash kernel instead of the masked memory-efficient one (no 4-D mask is built either).
* **Decoder layers compiled** (:func:`compile_layers`, ``--compile``): each layer's norms, rotary embedding,
  activation, residual adds and bf16 casts fused by ``torch.compile`` with dynamic shapes (batches differ in
  length and rows); PyTorch reuses one graph for every layer, so the compile is a one-off of seconds to tens
  of seconds, not one per layer. In eager mode those memory-bound kernels took about as long as the matrix
  products at 1.5B.
* **A step with a non-finite gradient is skipped and counted** (``PrmTrainer.skipped_steps``), never applied:
  clipping would spread one NaN to every weight.
* **The best epoch kept in memory** (:class:`KeepBest`): the weights with the lowest validation loss are copied
  to host memory after each evaluation and restored at the end, so no checkpoint is written unless asked
  (``--save-steps``): a 1.5B model's checkpoint with its optimizer state is 18 GB.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Sequence


class ExampleList:
    """Examples as the Trainer's dataset (indexable, sized)."""

    def __init__(self, examples):
        self.examples = examples

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]


class TokenBatches:
    """Micro-batches of row indices, a new draw every epoch (``set_epoch``, which the Trainer calls), the same
    number every epoch and on every process of a multi-GPU run (all derive it from ``seed``).

    Each epoch: the rows shuffled, cut into chunks of ``chunk_batches x max_rows`` rows, each chunk sorted by
    length (neighbours have similar lengths, so padding is small), then packed into batches of at most
    ``max_rows`` rows and ``max_tokens`` padded tokens (a row longer than the budget goes alone), the batches'
    order shuffled. Their number is fixed at the first epoch's count plus a little slack (the Trainer plans its
    schedule on it); an epoch that packs into fewer splits its largest batches, one that would need more packs
    under a budget raised by as little as it takes. With ``ranks`` processes, each consecutive group of ``ranks``
    batches (one micro-batch of every process) holds batches of similar cost. A random draw rather than one fixed sort: on the bundled task a
    PRM trained on fixed length-sorted batches ranked held-out steps worse (step AUC 0.686 against 0.710)."""

    def __init__(self, lengths: Sequence[int], max_rows: int, max_tokens: int, seed: int = 0,
                 pad_multiple: int = 1, chunk_batches: int = 8, ranks: int = 1):
        self.lengths = [-(-int(n) // pad_multiple) * pad_multiple for n in lengths]
        self.max_rows, self.max_tokens, self.seed = max(1, max_rows), max_tokens, seed
        self.chunk = max(1, chunk_batches) * self.max_rows
        self.epoch = 0
        self.ranks = max(1, ranks)
        self.tokens = sum(int(n) for n in lengths)
        first = self._pack(self._order(0), self.max_tokens)
        self.count = min(len(self.lengths), len(first) + len(first) // 20)  # +5% slack
        self.padded_tokens = sum(self._cost(b) for b in self.compose(0))

    def _order(self, epoch: int) -> list[int]:
        idx = list(range(len(self.lengths)))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(idx)
        out: list[int] = []
        for i in range(0, len(idx), self.chunk):
            out.extend(sorted(idx[i:i + self.chunk], key=lambda j: (self.lengths[j], j)))
        return out

    def _cost(self, batch: list[int]) -> int:
        return max(self.lengths[i] for i in batch) * len(batch)

    def _pack(self, order: list[int], budget: int) -> list[list[int]]:
        batches: list[list[int]] = []
        cur: list[int] = []
        longest = 0
        for i in order:
            wide = max(longest, self.lengths[i])
            if cur and (len(cur) >= self.max_rows or wide * (len(cur) + 1) > budget):
                batches.append(cur)
                cur, wide = [], self.lengths[i]
            cur.append(i)
            longest = wide
        if cur:
            batches.append(cur)
        return batches

    def compose(self, epoch: int) -> list[list[int]]:
        """The epoch's batches, in the order they are trained on."""
        order = self._order(epoch)
        budget = self.max_tokens
        batches = self._pack(order, budget)
        while len(batches) > self.count:
            budget = int(budget * 1.05) + 8
            batches = self._pack(order, budget)
        while len(batches) < self.count:
            j = max(range(len(batches)), key=lambda b: self._cost(batches[b]) if len(batches[b]) > 1 else -1)
            b = batches.pop(j)
            h = len(b) // 2
            batches[j:j] = [b[:h], b[h:]]
        rng = random.Random(self.seed * 1_000_003 + epoch + 7)
        if self.ranks == 1:
            rng.shuffle(batches)
            return batches
        # several processes take batches in turn (batch i goes to rank i mod ranks) and wait for each other at
        # every gradient all-reduce: batches of similar cost go out together, so no rank idles behind a long one
        batches.sort(key=self._cost)
        groups = [batches[i:i + self.ranks] for i in range(0, len(batches), self.ranks)]
        rng.shuffle(groups)
        return [b for g in groups for b in g]

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        batches = self.compose(self.epoch)
        self.epoch += 1  # a caller that never sets the epoch still gets a new draw each time
        yield from batches


def attention_guard():
    """A context in which scaled-dot-product attention never picks cuDNN's kernel (see the module doc); a no-op
    without CUDA or on a torch without the ``sdpa_kernel`` context."""
    import torch

    if not torch.cuda.is_available():
        return contextlib.nullcontext()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


def compile_layers(model) -> int:
    """``torch.compile`` every decoder layer of ``model`` in place (module doc); returns how many. Layers are
    found by class name (``...DecoderLayer``: Llama, Qwen2, Mistral, Gemma and most causal LMs); the weights and
    their names do not change, so saving is unaffected."""
    n = 0
    for m in model.modules():
        if type(m).__name__.endswith("DecoderLayer") and hasattr(m, "compile"):
            m.compile(dynamic=True)
            n += 1
    return n


def _grads_finite(params) -> bool:
    import torch

    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return True
    # one fused norm per tensor and a single host sync: cheap next to the optimizer step itself
    norms = torch._foreach_norm(grads) if hasattr(torch, "_foreach_norm") else [g.norm() for g in grads]
    return bool(torch.isfinite(torch.stack([n.float() for n in norms])).all())


def make_interrupt_check():
    """A callback that ends training at the next optimizer step once Ctrl-C was asked for, even if the
    KeyboardInterrupt it raised was swallowed somewhere inside a step (pipeline.interrupts)."""
    from transformers import TrainerCallback

    from pipeline.interrupts import raise_if_requested

    class InterruptCheck(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            raise_if_requested()

        def on_substep_end(self, args, state, control, **kw):
            raise_if_requested()

    return InterruptCheck()


def make_speed_meter(warmup_fraction: float = 0.1, min_warmup: int = 3):
    """A callback that times the optimizer steps: the run's rate after its first steps (the compile, the first
    kernels' autotuning and the allocator's growth happen there) as well as over the whole run."""
    from transformers import TrainerCallback

    class SpeedMeter(TrainerCallback):
        def __init__(self):
            self.times: list[float] = []

        def on_step_end(self, args, state, control, **kw):
            import time

            self.times.append(time.perf_counter())

        def steady(self, start: float, total_tokens: int) -> dict:
            """Warm-up seconds and the rate after it. The steps' tokens are taken as equal shares of the run's
            (batches are drawn at random, so the shares are about equal over many steps)."""
            s = len(self.times)
            w = max(min_warmup, math.ceil(warmup_fraction * s))
            if s <= w + 1:
                return {}
            tokens = total_tokens * (s - w) / s
            return {"warmup_steps": w, "warmup_seconds": round(self.times[w - 1] - start, 2),
                    "steady_tokens_per_s": round(tokens / (self.times[-1] - self.times[w - 1]), 1)}

    return SpeedMeter()


def make_progress_lines():
    """A callback that writes plain progress lines on stderr (no bar, no escapes: output piped to a file): the
    plan at the start, then one line per logged epoch (training loss, validation loss, time)."""
    import sys
    import time

    from transformers import TrainerCallback

    class ProgressLines(TrainerCallback):
        def __init__(self):
            self.t0 = time.perf_counter()

        def _say(self, text: str) -> None:
            print(f"[mcprm] train: {text}", file=sys.stderr, flush=True)

        def on_train_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()
            self._say(f"{state.max_steps:,} optimizer steps over {args.num_train_epochs:g} epochs")

        def on_log(self, args, state, control, logs=None, **kw):
            logs = logs or {}
            parts = [f"epoch {state.epoch or 0:.1f}/{args.num_train_epochs:g}",
                     f"step {state.global_step:,}/{state.max_steps:,}"]
            for key, name in (("loss", "loss"), ("eval_loss", "validation loss")):
                if isinstance(logs.get(key), int | float):
                    parts.append(f"{name} {logs[key]:.4f}")
            if not any(k in logs for k in ("loss", "eval_loss")):
                return  # the run's closing summary: the card and the command's own lines say it
            self._say(", ".join(parts) + f", {time.perf_counter() - self.t0:.0f} s")

    return ProgressLines()


def make_keep_best():
    from transformers import TrainerCallback

    class KeepBest(TrainerCallback):
        """The trainable weights at the lowest validation loss so far, on the host (see the module doc)."""

        def __init__(self):
            self.best: float | None = None
            self.step: int | None = None
            self.epoch: float | None = None
            self.weights: dict | None = None
            self.model = None

        def on_evaluate(self, args, state, control, metrics=None, **kw):
            loss = (metrics or {}).get("eval_loss")
            if self.model is None or loss is None or not math.isfinite(loss):
                return
            if self.best is None or loss < self.best:
                self.best, self.step, self.epoch = float(loss), state.global_step, state.epoch
                self.weights = {k: v.detach().to("cpu", copy=True)
                                for k, v in self.model.state_dict().items() if not k.startswith("reference.")}

        def restore(self) -> bool:
            if self.weights is None or self.model is None:
                return False
            self.model.load_state_dict(self.weights, strict=False)
            return True

    return KeepBest()


def pad_multiple() -> int:
    """Rows are padded to a multiple of this: 8 on a GPU (whole tensor-core tiles), 1 on a CPU."""
    import torch

    return 8 if torch.cuda.is_available() else 1


def train_batches(train_examples, batch_size: int, max_batch_tokens: int, seed: int, ranks: int = 1
                  ) -> TokenBatches:
    return TokenBatches([len(e.input_ids) for e in train_examples], batch_size, max_batch_tokens, seed=seed,
                        pad_multiple=pad_multiple(), ranks=ranks)


def head_parameter_names(model) -> set[str]:
    """The names of the parameters outside the base model's body: the new head (``score`` / ``classifier``)."""
    prefix = getattr(model, "base_model_prefix", "") + "."
    return {n for n, _ in model.named_parameters() if not n.startswith(prefix)}


def part_schedule(step: int, start: int, warmup: int, total: int) -> float:
    """The learning-rate factor at optimizer ``step`` of a part that starts training at ``start``: 0 before,
    then the Trainer's linear schedule (``warmup`` steps up, then down to 0 at ``total``) over its own steps."""
    if step < start:
        return 0.0
    s, n = step - start, max(1, total - start)
    if s < warmup:
        return s / max(1, warmup)
    return max(0.0, (n - s) / max(1, n - warmup))


def make_trainer(*, model, args, train_examples, eval_examples, batches: TokenBatches, pad_id: int,
                 pos_weight: float, neg_weight: float, implicit: bool, callbacks=(), head_lr_scale: float = 1.0,
                 head_only_steps: int = 0):
    """The PRM's Trainer (the HF ``Trainer`` with the changes of the module doc) over ``batches`` of
    ``train_examples``, ready to ``train()``. ``head_lr_scale``: the head's learning rate as a multiple of the
    body's; ``head_only_steps``: optimizer steps at the start in which only the head learns (the body's
    learning rate 0, its own warm-up after them)."""
    import torch
    from transformers import Trainer

    from pipeline.training.collate import collate, step_loss

    multiple = pad_multiple()
    # the mean total label weight of a micro-batch: every micro-batch's loss is divided by this one number
    total = 0.0
    for e in train_examples:
        for y, w in zip(e.targets, e.weights, strict=True):
            if y is not None and w > 0:
                total += w * (pos_weight * y + neg_weight * (1 - y))
    scale = max(total / max(1, len(batches)), 1e-8)

    def collator(batch):
        return collate(batch, pad_id, multiple)

    class PrmTrainer(Trainer):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.model_accepts_loss_kwargs = False  # the Trainer divides by the accumulation steps (module doc)
            self.skipped_steps = 0
            self.batches = batches
            self.loss_scale = scale

        def get_train_dataloader(self):
            from torch.utils.data import DataLoader

            return self.accelerator.prepare(DataLoader(self.train_dataset, batch_sampler=batches,
                                                       collate_fn=collator, num_workers=0))

        def create_optimizer(self, *a, **kw):
            if self.optimizer is None and (head_lr_scale != 1.0 or head_only_steps):
                self.optimizer = self._part_optimizer()
            opt = super().create_optimizer(*a, **kw)
            if not getattr(opt, "_mcprm_guarded", False):
                step = opt.step
                params = [p for g in opt.param_groups for p in g["params"]]
                trainer = self

                def guarded_step(*sa, **skw):
                    if not _grads_finite(params):
                        trainer.skipped_steps += 1
                        opt.zero_grad(set_to_none=True)
                        return None
                    return step(*sa, **skw)

                opt.step = guarded_step
                opt._mcprm_guarded = True
            return opt

        def _part_optimizer(self):
            """The Trainer's optimizer with the head in param groups of their own (``mcprm_head``), at
            ``head_lr_scale`` times the learning rate; weight decay as the Trainer applies it."""
            model = self.model
            head = head_parameter_names(model)
            decay = set(self.get_decay_parameter_names(model))
            groups = []
            for is_head in (False, True):
                for is_decay in (True, False):
                    params = [p for n, p in model.named_parameters()
                              if p.requires_grad and (n in head) == is_head and (n in decay) == is_decay]
                    if params:
                        groups.append({"params": params, "weight_decay": self.args.weight_decay if is_decay else 0.0,
                                       "lr": self.args.learning_rate * (head_lr_scale if is_head else 1.0),
                                       "mcprm_head": is_head})
            cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(self.args, model)
            return cls(groups, **kwargs)

        def create_scheduler(self, num_training_steps, optimizer=None):
            if self.lr_scheduler is None and head_only_steps:
                from torch.optim.lr_scheduler import LambdaLR

                opt = optimizer if optimizer is not None else self.optimizer
                warm = self.args.get_warmup_steps(num_training_steps)
                fns = [(lambda step, start=0 if g.get("mcprm_head") else head_only_steps:
                        part_schedule(step, start, warm, num_training_steps)) for g in opt.param_groups]
                self.lr_scheduler = LambdaLR(opt, fns)
                self._created_lr_scheduler = True
                return self.lr_scheduler
            return super().create_scheduler(num_training_steps, optimizer)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            soft = inputs.pop("soft_labels")
            weights = inputs.pop("label_weights")
            inputs.pop("labels", None)
            start = inputs.pop("response_start", None)
            if implicit:  # the implicit PRM sums its log-ratios from where the solution starts
                inputs["response_start"] = start
            else:  # right-padded rows of a causal LM: the mask changes no real token's output (module doc)
                inputs.pop("attention_mask", None)
            out = model(**inputs)
            # training: the one scale of every micro-batch; evaluation: each batch's own mean
            denom = self.loss_scale if model.training else None
            loss = step_loss(out.logits, soft, weights, pos_weight, neg_weight, denominator=denom)
            return (loss, out) if return_outputs else loss

        def training_step(self, model, inputs, num_items_in_batch=None):
            with attention_guard():
                return super().training_step(model, inputs, num_items_in_batch)

        def _save(self, output_dir=None, state_dict=None):
            if not implicit:
                return super()._save(output_dir, state_dict)
            # an implicit PRM is no PreTrainedModel: its checkpoint is the trained part's state dict (the frozen
            # reference is rebuilt from the base model), tied tensors written apart (safetensors refuses shared
            # memory); the Trainer loads it back non-strictly (--resume)
            import os

            import safetensors.torch

            out = output_dir or self.args.output_dir
            if self.args.should_save:
                os.makedirs(out, exist_ok=True)
                sd = state_dict if state_dict is not None else self.accelerator.unwrap_model(self.model).state_dict()
                sd = {k: v.detach().clone().contiguous() for k, v in sd.items() if not k.startswith("reference.")}
                safetensors.torch.save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

        def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
            inputs = self._prepare_inputs(inputs)
            with torch.no_grad():
                loss = self.compute_loss(model, dict(inputs))
            return loss.detach(), None, None

    return PrmTrainer(model=model, args=args, train_dataset=ExampleList(train_examples),
                      eval_dataset=ExampleList(eval_examples) if eval_examples else None, data_collator=collator,
                      callbacks=list(callbacks))
