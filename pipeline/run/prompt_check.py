"""Rows that cannot fit the model are found before any rollout.

A rollout's prompt is the problem and the steps as the prompt format renders them; it must leave room for
``max_new_tokens`` within the model's context (``--max-model-len``, else the model config's
``max_position_embeddings``). :class:`PromptCheck` counts tokens with the run's own tokenizer, only for
texts long enough to possibly not fit (a text of B UTF-8 bytes is at most B tokens with byte-level or
character tokenizers), so a normal input costs no tokenization.
"""

from __future__ import annotations

import functools
import logging

from pipeline.bundled import MODEL_ADVICE

log = logging.getLogger("mcprm")


class PromptCheck:
    def __init__(self, prompt_format, count_tokens, context: int, max_new_tokens: int, bundled: bool = False):
        self.bundled = bundled  # the bundled model: its context is small and it knows only its own task
        self.prompt = prompt_format
        self.count = count_tokens
        self.context = int(context)
        self.max_new_tokens = int(max_new_tokens)

    def __call__(self, solutions) -> list[str | None]:
        room = self.context - self.max_new_tokens
        out: list[str | None] = []
        for sol in solutions:
            text = self.prompt.prefix(sol.problem, list(sol.steps))
            if len(text.encode("utf-8")) <= room:
                out.append(None)
                continue
            n = self.count(text)
            out.append(None if n <= room else (
                f"prompt too long for the model: {n:,} tokens (problem + steps as the prompt format renders "
                f"them) + max_new_tokens {self.max_new_tokens:,} = {n + self.max_new_tokens:,} > the model's "
                f"context of {self.context:,} tokens. " + (
                    "The bundled model knows only its synthetic task (short 'Compute ...' problems): "
                    f"{MODEL_ADVICE}, one with a longer context. Lowering --max-new-tokens would only cut its "
                    "continuations short" if self.bundled else
                    "Use a --model with a longer context, shorten or drop the row (--skip-bad writes it to "
                    "rejects/), or lower --max-new-tokens")))
        return out


def model_context(cfg) -> int | None:
    if cfg.max_model_len:
        return int(cfg.max_model_len)
    try:
        from transformers import AutoConfig

        mc = AutoConfig.from_pretrained(cfg.model)
    except Exception:  # noqa: BLE001 - a hub name offline, an API model: no local config to read
        return None
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        v = getattr(mc, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


@functools.lru_cache(maxsize=4)
def _check_for(key: tuple) -> PromptCheck | None:
    from pipeline.config import LabelConfig

    cfg = LabelConfig(**dict(key))
    context = model_context(cfg)
    if context is None:
        log.info("model context unknown (no local model config): prompt lengths are not checked before labeling")
        return None
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(cfg.tokenizer or cfg.model)
    except Exception as e:  # noqa: BLE001
        log.info("tokenizer of %s not loadable here (%s): prompt lengths are not checked", cfg.model, e)
        return None
    from pipeline.bundled import is_bundled_model

    return PromptCheck(cfg.prompt_builder(), lambda t: len(tok.encode(t, add_special_tokens=False)), context,
                       cfg.max_new_tokens, bundled=is_bundled_model(cfg.model))


def prompt_check(cfg) -> PromptCheck | None:
    """The check for a run's configuration; None for the openai backend (the server's model and context are
    not known here) or when the model has no local config/tokenizer."""
    if not cfg.backend_spec.local_model or not cfg.model:
        return None
    key = (("model", cfg.model), ("tokenizer", cfg.tokenizer), ("max_model_len", cfg.max_model_len),
           ("max_new_tokens", cfg.max_new_tokens), ("prompt_format", cfg.prompt_format),
           ("prompt_template", cfg.prompt_template), ("step_separator", cfg.step_separator))
    return _check_for(key)
