"""The base model of a PRM: which one (the corpus's own labeling model by default), loaded as a causal LM's body
under a fresh 2-class token-classification head with the separator token in its vocabulary, and whether the
Trainer runs it in bf16."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.training.options import TrainConfig, TrainError


def default_base_model(corpus: str, version: int | None = None) -> str:
    """The model that labeled ``corpus`` (its manifest's config), the bundled model when that is the default;
    an error when the corpus was labeled through an OpenAI-compatible server (no local weights)."""
    from pipeline.corpus import open_manifest
    from pipeline.training.score import STRATEGY as SCORED
    from rollouts.registry import BACKENDS

    _, m = open_manifest(corpus, version)
    cfg = m.get("config") or {}
    flat: dict = {}
    for k, v in cfg.items():  # the config may be flat or grouped by section
        if isinstance(v, dict):
            flat.update(v)
        else:
            flat[k] = v
    backend = flat.get("backend")
    model = flat.get("model") or ""
    if m.get("strategy") == SCORED:
        raise TrainError(f"{corpus} was written by `mcprm score` (PRM scores, not Monte Carlo labels); train on a "
                         "labeled corpus, or pass --base-model and accept the PRM's own labels as targets")
    if backend in BACKENDS and not BACKENDS[backend].local_model:  # e.g. an OpenAI-compatible server
        raise TrainError(f"{corpus} was labeled by the {backend!r} backend (model {model!r} on a server), which has "
                         "no local weights here: pass --base-model PATH_OR_HUB_NAME (a causal LM).")
    if not model:
        from pipeline import bundled

        return str(bundled.model_dir())
    return str(model)


def resolve_bf16(cfg: TrainConfig) -> bool:
    """Whether the Trainer autocasts to bf16: --bf16 on (a GPU needed), off, or auto (a GPU that supports it)."""
    import torch

    cuda = torch.cuda.is_available()
    if cfg.bf16 == "on":
        if not cuda:
            raise TrainError("--bf16 on needs a GPU; this machine has none (use --bf16 auto)")
        return True
    if cfg.bf16 == "off":
        return False
    if cfg.kind == "implicit":  # auto: float32. The score is a sum of log-ratios of two models whose weights
        return False            # differ by less than bf16 resolves (score.py reads it in float32 too)
    # bf16 autocast over float32 master weights; training keeps cuDNN's attention kernel out (trainer.py), whose
    # NaN query gradients had made bf16 unusable on an H100
    return bool(cuda and torch.cuda.is_bf16_supported())


def resolve_compile(cfg: TrainConfig) -> bool:
    """Whether the decoder layers are compiled: --compile on, off, or auto (on a CUDA GPU)."""
    import torch

    if cfg.compile == "on":
        return True
    return cfg.compile == "auto" and torch.cuda.is_available()


def base_dtype(base: str):
    """The dtype the base model's config declares (``dtype``, formerly ``torch_dtype``); float32 if none."""
    import torch
    import transformers

    try:
        mcfg = transformers.AutoConfig.from_pretrained(base)
    except (OSError, ValueError):
        return torch.float32
    d = getattr(mcfg, "dtype", None) or getattr(mcfg, "torch_dtype", None)
    if isinstance(d, str):
        d = getattr(torch, d, None)
    return d if isinstance(d, torch.dtype) and d.is_floating_point else torch.float32


def count_parameters(base: str) -> int:
    """Parameters of the causal LM ``base``, counted on the meta device (no weights read)."""
    from rollouts.base import require

    torch = require("torch", "pip install torch")
    transformers = require("transformers", "pip install transformers")
    _check_exists(base)
    try:
        mcfg = transformers.AutoConfig.from_pretrained(base)
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(mcfg)
    except (OSError, ValueError) as e:
        raise TrainError(f"cannot load the base model {base!r} ({e}); pass --base-model with a causal LM "
                         "(a local folder or a hub name)") from None
    return sum(p.numel() for p in model.parameters())


def _check_exists(base: str) -> None:
    p = Path(base)
    if not p.exists() and (base.startswith((".", "/", "~")) or os.sep in base and len(base.split("/")) != 2):
        raise TrainError(f"base model {base!r} does not exist; pass --base-model with a local folder or a hub name")


def load_base(base: str, separator: str, kind: str = "head", separator_init: str = "mean"):
    """(model, tokenizer, separator id, added): the causal LM under a fresh 2-class token head (``kind`` head),
    or the causal LM and a frozen copy as an implicit PRM (``kind`` implicit, :mod:`pipeline.training.implicit`);
    the separator token added to the tokenizer (and the embeddings grown) when it lacks it, its embedding row
    set by ``separator_init`` (:func:`init_separator_row`)."""
    from rollouts.base import require

    torch = require("torch", "pip install torch")
    transformers = require("transformers", "pip install transformers")
    from pipeline.training.collate import ensure_separator

    _check_exists(base)
    try:
        tok = transformers.AutoTokenizer.from_pretrained(base)
        mcfg = transformers.AutoConfig.from_pretrained(base)
    except (OSError, ValueError) as e:
        raise TrainError(f"cannot load the base model {base!r} ({e}); pass --base-model with a causal LM "
                         "(a local folder or a hub name)") from None
    n_trained = len(tok)  # the tokens the base model was trained with: rows past them never were
    sep_id, added = ensure_separator(tok, separator)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else separator
    if kind == "implicit":
        from pipeline.training.implicit import load_base_implicit

        model = load_base_implicit(base, tok, sep_id, torch.float32)
        if added:  # the same row in both: the log-ratio at the separator starts at 0
            for m in (model.policy, model.reference):
                init_separator_row(m, tok, sep_id, separator_init, n_trained)
        return model, tok, sep_id, added
    with _quiet_head_warning(transformers):
        try:
            # float32 master weights: bf16 is autocast by the Trainer (--bf16), never pure-bf16 AdamW
            model = transformers.AutoModelForTokenClassification.from_pretrained(
                base, num_labels=2, id2label={0: "bad", 1: "good"}, label2id={"bad": 0, "good": 1},
                dtype=torch.float32)
        except ValueError as e:  # no token-classification class for this architecture
            raise TrainError(f"{base} ({mcfg.model_type}) has no AutoModelForTokenClassification class in "
                             f"transformers ({e}); choose a causal LM of a supported family (Llama, Qwen2, "
                             "Mistral, Gemma, ...)") from None
    emb = model.get_input_embeddings().num_embeddings
    if len(tok) > emb:
        model.resize_token_embeddings(len(tok))
    if added:
        init_separator_row(model, tok, sep_id, separator_init, n_trained)
    model.config.pad_token_id = tok.pad_token_id
    return model, tok, sep_id, added


def init_separator_row(model, tok, sep_id: int, how: str, n_trained: int) -> None:
    """Set the input embedding of a separator the tokenizer did not have: ``mean`` (the mean of the rows of the
    ``n_trained`` tokens the base model knows), ``newline`` (the newline token's row) or ``none`` (as the resize
    left it). Without this the head reads a row no training ever touched: a random draw where the embeddings
    grew, and where the vocabulary was padded past the tokenizer (Qwen2.5's 151,936 rows for 151,665 tokens),
    a reserved row that was never updated; every step's score is read right after that token."""
    import torch

    if how == "none":
        return
    weight = model.get_input_embeddings().weight
    with torch.no_grad():
        if how == "newline":
            ids = tok.encode("\n", add_special_tokens=False)
            if len(ids) != 1:
                raise TrainError(f"--separator-init newline: the tokenizer writes a newline as {len(ids)} tokens, "
                                 "not one; use --separator-init mean")
            row = weight[ids[0]].detach().clone()
        else:
            row = weight[:n_trained].detach().float().mean(dim=0).to(weight.dtype)
        weight[sep_id] = row


def chat_header(tok, manifest: dict) -> str:
    """The header template (with ``{problem}``) of ``--header-style chat``: ``tok``'s chat template rendered for
    one user turn with the generation prompt, around the corpus's own user-message template where its rollouts
    were sampled in the chat format (the layout the policy wrote in), else around the bare problem."""
    from rollouts.prompts import PLACEHOLDER, chat_format

    flat: dict = {}
    for k, v in (manifest.get("config") or {}).items():  # flat or grouped by section
        if isinstance(v, dict):
            flat.update(v)
        else:
            flat[k] = v
    template = (flat.get("prompt_template") or PLACEHOLDER) if flat.get("prompt_format") == "chat" else PLACEHOLDER
    try:
        fmt = chat_format(tok, template, source=getattr(tok, "name_or_path", ""))
    except ValueError as e:
        raise TrainError(f"--header-style chat: {e} (or train with --header-style plain)") from None
    return fmt.before + PLACEHOLDER + fmt.after


class _quiet_head_warning:
    """transformers warns that the new head is untrained: that is the point here."""

    def __init__(self, transformers):
        self.t = transformers

    def __enter__(self):
        self.level = self.t.logging.get_verbosity()
        self.t.logging.set_verbosity_error()

    def __exit__(self, *a):
        self.t.logging.set_verbosity(self.level)
