"""``mcprm train``'s settings (:class:`TrainConfig`, checked by ``validate``), its error and its result: what
every part of the training room (targets, base model, card, the Trainer run) reads, below all of them."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.errors import FatalError
from pipeline.training.collate import DEFAULT_HEADER, DEFAULT_SEPARATOR
from rollouts.options import option

PSEUDO_RULES = ("outcome",)  # every step labeled with the solution's own final answer (an ORM's labels)
# head: a 2-class token head read at each step's separator (Qwen2.5-Math-PRM); implicit: the step score read
# through the LM's own head, log-likelihood ratio against the frozen base (pipeline.training.implicit)
KINDS = ("head", "implicit", "auto")
# auto (the default): implicit for a model under TINY_PARAMS, head above. On the bundled task (a 1M-parameter model)
# the implicit kind reaches 0.78-0.97x the Monte Carlo labels' first-error F1 where the head gets 0.28-0.34x; on the
# real 1.5B model both are level with majority vote at best-of-8 and the head scores 12x faster, in bf16
# (measured on the bundled task on a CPU, and on one H100)
DEFAULT_KIND = "auto"
# rows a reach-gated labeling could not reach (label_status "unreached": no continuation of the bare problem (if
# drawn) or of any probed prefix reached the gold answer, so their Monte Carlo labels say nothing about the steps): left out
# (drop), trained on at UNREACHED_WEIGHT (down-weight) or as they are (keep). Not applied to --label-rule outcome,
# whose targets are the graded final answer, evidence whatever the completer can do
UNREACHED_CHOICES = ("drop", "down-weight", "keep")
DEFAULT_UNREACHED = "drop"
UNREACHED_WEIGHT = 0.1
TINY_PARAMS = 50_000_000  # below this: the implicit kind, and the schedules of a small model (train.auto_schedule)
KIND_LAYOUT = {"head": (DEFAULT_SEPARATOR, "\n"), "implicit": ("\n", "")}  # (separator, step suffix) by kind
# the embedding row of a separator new to the tokenizer: the mean of the vocabulary's trained rows, the newline's
# row, or left as the resize made it (none; a reserved row of a padded vocabulary was never trained)
SEPARATOR_INITS = ("mean", "newline", "none")
# the text before the steps: plain ("Problem: ...\nSolution:\n"), or chat (the base tokenizer's chat template
# around the problem, with the corpus's own user-message template and system prompt when it was labeled in
# the chat format: the layout the policy wrote its solutions in)
HEADER_STYLES = ("plain", "chat")
# how the first-error threshold is chosen: 0.5 (the scores are probabilities of a good step when trained
# without class weights: below 0.5 the PRM finds the step more likely wrong than right); outcome (balanced
# accuracy of "an error found" against "final answer wrong" on the validation problems, else f1); f1 (the
# F1-best threshold against the validation problems' Monte Carlo first errors)
THRESHOLD_RULES = ("0.5", "outcome", "f1")


class TrainError(FatalError, ValueError):
    """The training cannot start or go on; the message says what to change."""


class TrainInterrupted(KeyboardInterrupt):
    """Ctrl-C during training; the message says what a rerun does (resumes from a checkpoint, or starts over)."""


@dataclass
class TrainConfig:
    """Every option of ``mcprm train``, each declared once here with its default and help
    (:func:`rollouts.options.option`, as ``mcprm label``'s are): the command's flags and ``--help`` are made from
    these fields (cli/train.py), and a TrainConfig built in Python has the same defaults."""

    corpus: str = option(help="Corpus folder (any fsspec URL).", cli=False)  # the command's argument
    output: str = option("./prm", "Folder of the trained PRM.", flags=("--output", "-o"))
    base_model: str | None = option(None, "Causal LM to start from (folder or hub name); required for a corpus "
                                          "labeled through an OpenAI-compatible server.",
                                    shown="the model that labeled the corpus, the bundled one for the default corpus")
    version: int | None = option(None, "A committed corpus version.", cli=False, shown="current")
    kind: str = option(DEFAULT_KIND, "head: a 2-class token head read at a separator after each step "
                                     "(Qwen2.5-Math-PRM); implicit: the step score read through the LM's own head, "
                                     "its log-likelihood ratio against the frozen base (Yuan et al. 2024), saved as "
                                     "two causal LMs; auto: implicit under 50 M parameters (the bundled model), "
                                     "head above (docs/training.md).")
    label_rule: str = option("hard", "Targets from the stored counts: hard, threshold, soft, relative, advantage, "
                                     "er-prm, changepoint (any rule `mcprm eval --label-rule` knows), or outcome "
                                     "(every step = the solution's own answer: an ORM's labels).")
    targets: str = option("hard", "hard: the rule's labels (0/1); soft: the rule's scores in [0, 1] "
                                  "(cross-entropy against them).")
    min_confidence: float | None = option(None, "Leave out rows whose first-error confidence is below this.")
    unreached: str = option(DEFAULT_UNREACHED, "Rows a --reach-gate labeling could not reach (label_status "
                                               "unreached: their labels say nothing about the steps): drop, "
                                               f"down-weight (x{UNREACHED_WEIGHT}) or keep. Not applied to "
                                               "--label-rule outcome.")
    # None (auto): with the implicit kind, where it gave +0.05 held-out F1 on two seeds of the bundled task; not
    # with the head (on the real 1.5B model it did not help the head)
    weight_by_confidence: bool | None = option(None, "Weight each row's steps by its first-error confidence (a "
                                                     "row without one weighs 1).", shown="with the implicit kind")
    # The weights multiply the odds the PRM learns by n_negative / n_positive, so 0.5 is where the two classes
    # weigh the same, not "as likely wrong as right". Monte Carlo labels of a policy's own solutions are mostly
    # positive; a head trained without the weights scores almost every step of another model's solutions above
    # 0.5 (ProcessBench-MATH dev: F1 0 at 0.5, step AUROC lower too), with them its 0.5 finds the errors (BENCHMARKS,
    # "PRM recipe on real text"). On for both kinds; the implicit kind without them ranked held-out steps of the
    # bundled task below their position (step AUROC 0.61 against 0.69 for "later is worse")
    class_balance: bool = option(True, "Weight the two classes inversely to their share of the training steps "
                                       "(0.5 then is where the classes weigh the same).")
    # A fitted threshold carries the policy's own validation rows to everyone's solutions: the outcome rule's 0.12
    # found almost no first error on ProcessBench-MATH dev where 0.5 found most of what the best threshold finds.
    # The implicit kind (the bundled tiny model, CPU) keeps the rule it was measured with
    threshold_rule: str | None = option(None, "The first-error threshold: 0.5 (nothing fitted); outcome (where 'an "
                                              "error found' best matches 'final answer wrong' on the validation "
                                              "problems, else f1); f1 (the F1-best one against the validation "
                                              "problems' Monte Carlo first errors).",
                                        shown="0.5 for the head, outcome for the implicit kind")
    # where a Monte Carlo estimate of the first error is most often off by a step or two
    error_tolerance: int = option(0, "No loss on this many steps just before a row's first error, where a Monte "
                                     "Carlo first error is most often a step or two off (SCAN's tolerance).")
    # "no continuation reached the answer" says little where the completer rarely solves the problem at all
    solve_rate_floor: float | None = option(None, "Down-weight negative targets of problems the completer rarely "
                                                  "solves: weight min(1, rate / FLOOR), rate its success rate on "
                                                  "the problem (first-step continuations and final answers of the "
                                                  "problem's rows).", shown="off")
    drop_after_first_error: bool = option(True, "No loss on the steps after a row's first negative one "
                                                "(PRM800K/Qwen convention).")
    val_fraction: float = option(0.1, "Share of problems held out (split by a hash of the problem text). They "
                                      "choose the weights kept (lowest validation loss) and the first-error "
                                      "threshold: from their final answers' grades where they have right and wrong "
                                      "ones, else against their Monte Carlo first errors. Never trained on.")
    # the defaults by kind and model size: train.auto_schedule
    epochs: float | None = option(None, "Epochs.",
                                  shown="head 3, implicit 1; under 50 M parameters, e.g. the bundled model: head "
                                        "10, implicit 6")
    learning_rate: float | None = option(None, "Peak learning rate.",
                                         shown="head 1e-5, implicit 1e-6; under 50 M parameters: head 1e-3, "
                                               "implicit 1e-4")
    beta: float | None = option(None, "implicit: the score's scale, beta x (summed log-ratio) + bias.",
                                shown="0.05; under 50 M parameters: 1")
    batch_size: int = option(16, "Solutions per device per micro-batch, at most (solutions of similar length go "
                                 "together).")
    # a batch of long rows holds fewer of them (trainer.TokenBatches)
    max_batch_tokens: int = option(16384, "Padded tokens per device per micro-batch, at most (a batch of long "
                                          "solutions holds fewer).")
    grad_accum: int = option(1, "Gradient accumulation steps.")
    warmup_ratio: float = option(0.05, "Share of the optimizer steps that warm the learning rate up.", cli=False)
    weight_decay: float = option(0.0, "The optimizer's weight decay.", cli=False)
    max_length: int = option(2048, "Most tokens per solution; later steps are cut (counted and reported).")
    # None: by kind (layout): head reads a reserved token after each step's newline (Qwen2.5-Math-PRM);
    # implicit reads the newline itself, so the LM sees its own text format with no token it never saw
    separator: str | None = option(None, "The step separator token the PRM is read at (added to the tokenizer "
                                         "when it is not one token).",
                                   shown=f"head {DEFAULT_SEPARATOR!r}; implicit '\\n' (the newline itself)")
    step_suffix: str | None = option(None, "Text after each step, before the separator ('\\n' is a newline).",
                                     shown="head '\\n'; implicit ''")
    header: str = option(DEFAULT_HEADER, "header_style plain: the template, with {problem}.", cli=False)
    header_style: str = option("plain", "The text before the steps: plain ('Problem: ...' / 'Solution:'), or chat "
                                        "(the base model's chat template around the problem, with the corpus's own "
                                        "user-message template when it was labeled with --prompt-format chat).")
    separator_init: str = option("mean", "The embedding of a separator new to the tokenizer: mean (of the trained "
                                         "rows), newline (the newline's row), none (as the resize left it: "
                                         "untrained).")
    head_lr_scale: float = option(1.0, "--kind head: the new head's learning rate as a multiple of the body's.")
    # 1: the head alone throughout (a probe of the frozen body)
    head_only_ratio: float = option(0.0, "--kind head: this share of the optimizer steps trains the head alone, "
                                         "then the body joins with its own warm-up (1: the head alone "
                                         "throughout).")
    bf16: str = option("auto", "auto (bf16 autocast on a GPU that supports it; float32 for the implicit kind) | "
                               "on | off")
    # torch.compile of each decoder layer (fused norms, activations and casts; one graph serves every layer):
    # auto = on a CUDA GPU (where the eager kernels spent most of a 1.5B model's step on memory traffic), off on
    # a CPU (compiling costs more than it saves on a small model)
    compile: str = option("auto", "auto (torch.compile of each decoder layer on a GPU) | on | off. Costs a "
                                  "one-off compile (tens of seconds) at the first steps.")
    gradient_checkpointing: bool = option(False, "Trade compute for memory (large models).")
    seed: int = option(0, "Seed of the head's init and the data order.")
    save_steps: int = option(0, "Checkpoint every N optimizer steps into DIR/checkpoints, for --resume (0: no "
                                "checkpoints; the best epoch is kept in memory).")
    keep_checkpoints: bool = option(False, "Keep DIR/checkpoints after a successful run (removed by default).")
    resume: bool = option(False, "Go on from the last checkpoint in DIR/checkpoints (written with --save-steps).")
    overwrite: bool = option(False, "Replace a PRM or checkpoints in DIR.")
    progress: bool = option(True, "Progress on stderr: a bar on a terminal, plain lines (one per epoch) when "
                                  "piped to a file.")
    limit: int | None = option(None, "Train on the first N corpus rows only.")
    extra: dict = option(help="Free-form notes, recorded in the model card.", factory=dict, cli=False)

    def resolved(self, n_params: int) -> TrainConfig:
        """This config with ``auto`` kind and weighting decided for a base model of ``n_params`` parameters."""
        import dataclasses

        kind = self.kind if self.kind != "auto" else ("implicit" if n_params < TINY_PARAMS else "head")
        weight = self.weight_by_confidence if self.weight_by_confidence is not None else kind == "implicit"
        rule = self.threshold_rule if self.threshold_rule is not None else ("outcome" if kind == "implicit" else "0.5")
        return dataclasses.replace(self, kind=kind, weight_by_confidence=weight, threshold_rule=rule)

    def layout(self) -> tuple[str, str]:
        """(separator, step suffix): the given ones, else the kind's (:data:`KIND_LAYOUT`)."""
        sep, suffix = KIND_LAYOUT.get(self.kind, KIND_LAYOUT["head"])
        return (self.separator if self.separator is not None else sep,
                self.step_suffix if self.step_suffix is not None else suffix)

    def validate(self) -> None:
        from pipeline.labeling.rules import RULES

        bad = []
        if self.label_rule not in RULES and self.label_rule not in PSEUDO_RULES:
            bad.append(f"--label-rule must be one of {', '.join([*RULES, *PSEUDO_RULES])}, got {self.label_rule!r}")
        if self.kind not in KINDS:
            bad.append(f"--kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.targets not in ("hard", "soft"):
            bad.append(f"--targets must be 'hard' or 'soft', got {self.targets!r}")
        if self.unreached not in UNREACHED_CHOICES:
            bad.append(f"--unreached must be one of {', '.join(UNREACHED_CHOICES)}, got {self.unreached!r}")
        if self.min_confidence is not None and not 0 <= self.min_confidence <= 1:
            bad.append(f"--min-confidence must be in [0, 1], got {self.min_confidence}")
        if not 0 <= self.val_fraction < 1:
            bad.append(f"--val-fraction must be in [0, 1), got {self.val_fraction}")
        if self.epochs is not None and self.epochs <= 0:
            bad.append(f"--epochs must be positive, got {self.epochs}")
        if self.beta is not None and self.beta <= 0:
            bad.append(f"--beta must be positive, got {self.beta}")
        if self.learning_rate is not None and self.learning_rate <= 0:
            bad.append(f"--learning-rate must be positive, got {self.learning_rate}")
        if self.batch_size < 1 or self.grad_accum < 1:
            bad.append("--batch-size and --grad-accum must be at least 1")
        if self.max_batch_tokens < 8:
            bad.append(f"--max-batch-tokens must be at least 8, got {self.max_batch_tokens}")
        if self.save_steps < 0:
            bad.append(f"--save-steps must be 0 (no checkpoints) or more, got {self.save_steps}")
        if self.bf16 not in ("auto", "on", "off"):
            bad.append(f"--bf16 must be auto, on or off, got {self.bf16!r}")
        if self.compile not in ("auto", "on", "off"):
            bad.append(f"--compile must be auto, on or off, got {self.compile!r}")
        for name, value, allowed in (("--separator-init", self.separator_init, SEPARATOR_INITS),
                                     ("--header-style", self.header_style, HEADER_STYLES),
                                     ("--threshold-rule", self.threshold_rule, THRESHOLD_RULES)):
            if value is not None and value not in allowed:
                bad.append(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        if self.head_lr_scale <= 0:
            bad.append(f"--head-lr-scale must be positive, got {self.head_lr_scale}")
        if not 0 <= self.head_only_ratio <= 1:
            bad.append(f"--head-only-ratio must be in [0, 1], got {self.head_only_ratio}")
        if self.kind == "implicit" and (self.head_lr_scale != 1.0 or self.head_only_ratio):
            bad.append("--head-lr-scale and --head-only-ratio are for --kind head (an implicit PRM has no new head)")
        if self.error_tolerance < 0:
            bad.append(f"--error-tolerance must be 0 or more steps, got {self.error_tolerance}")
        if self.solve_rate_floor is not None and not 0 < self.solve_rate_floor <= 1:
            bad.append(f"--solve-rate-floor must be in (0, 1], got {self.solve_rate_floor}")
        if bad:
            raise TrainError("; ".join(bad))


@dataclass
class TrainResult:
    output: str
    card: dict
    seconds: float
