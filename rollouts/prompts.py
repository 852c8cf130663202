"""How a problem and a partial solution become the prompt a continuation is sampled from.

A :class:`PromptFormat` is plain data (picklable, recorded in the run manifest): the text before the problem,
the text after it (up to where the solution starts) and the step separator. Two kinds:

``plain``
    A template with ``{problem}``, default ``"Problem: {problem}\\nSolution:\\n"``, steps joined with ``"\\n"``.
    This is the bundled model's format.
``chat``
    A tokenizer's chat template rendered once for a single user turn (optionally with a system prompt and an
    instruction template around the problem) with ``add_generation_prompt=True``. The partial solution is
    written as the start of the assistant turn, steps joined with ``"\\n\\n"``: no new turn, no re-stated
    instructions, so the model simply continues its own solution.

``prefix(problem, steps)`` is what a rollout continues from: header + ``sep.join(steps)`` + ``sep`` (the
separator is appended when there are steps, so the model starts the next step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

PLAIN_TEMPLATE = "Problem: {problem}\nSolution:\n"
PLACEHOLDER = "{problem}"
_SENTINEL = "\x00mcprm_problem\x00"


@dataclass(frozen=True)
class PromptFormat:
    """Prompt layout: ``before + problem + after`` is the header, then the steps joined by ``separator``."""

    kind: str  # "plain" | "chat"
    before: str
    after: str
    separator: str
    # Suggested stop strings for SamplingConfig.stop (the model's EOS ends a solution in any case).
    stop: tuple[str, ...] = ()
    source: str = ""  # where the chat template came from (model path), for the manifest

    def header(self, problem: str) -> str:
        return self.before + problem + self.after

    def prefix(self, problem: str, steps: Sequence[str]) -> str:
        """The prompt to continue after ``steps`` (the separator is appended when there are steps)."""
        if isinstance(steps, str):
            raise TypeError("steps must be a sequence of strings, not a single string")
        head = self.header(problem)
        return head + self.separator.join(steps) + self.separator if steps else head

    def full(self, problem: str, steps: Sequence[str]) -> str:
        """The whole solution as the model would have written it (no trailing separator)."""
        if isinstance(steps, str):
            raise TypeError("steps must be a sequence of strings, not a single string")
        return self.header(problem) + self.separator.join(steps)

    def to_dict(self) -> dict:
        return asdict(self)


def _split_template(template: str, what: str) -> tuple[str, str]:
    if template.count(PLACEHOLDER) != 1:
        raise ValueError(
            f"{what} must contain the placeholder {PLACEHOLDER} exactly once (found "
            f"{template.count(PLACEHOLDER)} times): {template!r}"
        )
    before, after = template.split(PLACEHOLDER)
    return before, after


def plain_format(template: str = PLAIN_TEMPLATE, separator: str = "\n") -> PromptFormat:
    before, after = _split_template(template, "The plain prompt template")
    return PromptFormat(kind="plain", before=before, after=after, separator=separator, stop=("\nProblem:",))


def chat_format(
    tokenizer,
    template: str = PLACEHOLDER,
    separator: str = "\n\n",
    system_prompt: str | None = None,
    source: str = "",
) -> PromptFormat:
    """Render ``tokenizer``'s chat template once around a sentinel and keep the text on either side of it.

    ``template`` is the user message with ``{problem}`` (e.g. an instruction such as "Solve step by step.
    Put the final answer in \\\\boxed{}.\\n\\n{problem}"); ``system_prompt`` an optional system turn.
    """
    if not getattr(tokenizer, "chat_template", None):
        name = source or getattr(tokenizer, "name_or_path", "") or "the tokenizer"
        raise ValueError(
            f"{name} has no chat template; use the 'plain' prompt format (--prompt-format plain) or a "
            "tokenizer that defines one."
        )
    before_user, after_user = _split_template(template, "The chat user-message template")
    messages = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": before_user + _SENTINEL + after_user})
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if not isinstance(rendered, str) or rendered.count(_SENTINEL) != 1:
        raise ValueError(
            f"The chat template of {source or 'the tokenizer'} does not render the user message verbatim "
            "(it rewrites or drops it), so the problem cannot be placed in the prompt; use the 'plain' format."
        )
    before, after = rendered.split(_SENTINEL)
    return PromptFormat(kind="chat", before=before, after=after, separator=separator, source=source)


def make_prompt_format(
    kind: str,
    model_path_or_tokenizer=None,
    template: str | None = None,
    separator: str | None = None,
    system_prompt: str | None = None,
) -> PromptFormat:
    """Build a prompt format: ``kind`` "plain" (template with {problem}) or "chat" (needs a tokenizer or a
    model path whose tokenizer has a chat template)."""
    if kind == "plain":
        return plain_format(template or PLAIN_TEMPLATE, "\n" if separator is None else separator)
    if kind == "chat":
        if model_path_or_tokenizer is None:
            raise ValueError(
                "The 'chat' prompt format needs a model path or tokenizer for its chat template."
            )
        source = ""
        tok = model_path_or_tokenizer
        if isinstance(tok, str):
            from .base import require

            source = tok
            transformers = require("transformers", "pip install transformers")
            tok = transformers.AutoTokenizer.from_pretrained(source)
        return chat_format(
            tok,
            template or PLACEHOLDER,
            "\n\n" if separator is None else separator,
            system_prompt=system_prompt,
            source=source or getattr(tok, "name_or_path", ""),
        )
    raise ValueError(f"Unknown prompt format {kind!r}; expected 'plain' or 'chat'.")
