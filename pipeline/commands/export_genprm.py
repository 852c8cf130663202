r"""``export --format genprm``: training rows for a generative verifier (GenPRM / ThinkPRM / ProcessBench-critic
style): a critique prompt and, as the target, the index of the first wrong step or -1.

Each record: ``id``; ``prompt`` = ProcessBench's critique prompt (the problem, then the steps as
``<paragraph_i>`` ... ``</paragraph_i>`` indexed from 0, then the task: return the earliest wrong paragraph's
index, or -1, in ``\boxed{}``); ``completion`` = a short verdict per paragraph up to the first error ("Paragraph i
is correct." / "Paragraph k contains the first error.") ending with ``\boxed{k}`` (``\boxed{-1}`` for none);
``label`` = that index (int). ``prompt``/``completion`` is the prompt-completion format SFT trainers (TRL's
``SFTTrainer``, OpenRLHF's SFT) read as is; ``label`` is what an RL verifier's reward or an evaluation compares
with the ``\boxed{}`` answer.

Labels: the corpus's stored labels, or any rule of :mod:`pipeline.labeling.rules` from the stored counts
(``--label-rule``); rows whose steps before the first error are not all labeled are skipped (undecided);
``--min-confidence`` drops rows whose first error is less sure than that. Shards are written into a staging folder
and moved in only when every row was built and read back, as the other formats are. This module writes and reads
the texts; the exporter and its run are :class:`pipeline.commands.exporters.genprm.GenPrm`.
"""

from __future__ import annotations

import re

PROMPT = (
    "The following is a math problem and a solution (split into paragraphs, enclosed with tags and indexed from "
    "0):\n\n[Math Problem]\n\n{problem}\n\n[Solution]\n\n{paragraphs}\n\nYour task is to review and critique the "
    "solution paragraph by paragraph. Once you identify an error in a paragraph, return the index of the "
    "paragraph where the earliest error occurs. Otherwise, return the index of -1 (which typically denotes "
    "\"not found\").\n\nPlease put your final answer (i.e., the index) in \\boxed{{}}."
)
_BOXED = re.compile(r"\\boxed\{(-?\d+)\}\s*$")


def critique_prompt(problem: str, steps: list[str]) -> str:
    paragraphs = "\n\n".join(f"<paragraph_{i}>\n{s}\n</paragraph_{i}>" for i, s in enumerate(steps))
    return PROMPT.format(problem=problem, paragraphs=paragraphs)


def critique_target(first_error: int, n_steps: int) -> str:
    upto = n_steps if first_error == -1 else first_error
    lines = [f"Paragraph {i} is correct." for i in range(upto)]
    if first_error != -1:
        lines.append(f"Paragraph {first_error} contains the first error.")
    else:
        lines.append("No paragraph contains an error.")
    return "\n".join(lines) + f"\n\n\\boxed{{{first_error}}}"


def parse_prompt(prompt: str, problem: str) -> list[str]:
    """The steps a critique prompt of ``problem`` holds (the inverse of :func:`critique_prompt`)."""
    head, tail = PROMPT.split("{paragraphs}")
    head, tail = head.format(problem=problem), tail.format()
    if not prompt.startswith(head) or not prompt.endswith(tail) or len(prompt) < len(head) + len(tail):
        raise ValueError("the prompt is not the critique prompt of this problem")
    body, steps, pos = prompt[len(head):len(prompt) - len(tail)], [], 0
    while pos < len(body):
        i = len(steps)
        start, close = f"<paragraph_{i}>\n", f"\n</paragraph_{i}>"
        end = body.find(close, pos + len(start))
        if not body.startswith(start, pos) or end == -1:
            raise ValueError(f"paragraph {i} is not enclosed in <paragraph_{i}> tags")
        steps.append(body[pos + len(start):end])
        pos = end + len(close)
        if pos < len(body):
            if not body.startswith("\n\n", pos):
                raise ValueError(f"paragraph {i} is not followed by a blank line")
            pos += 2
    return steps


def parse_target(completion: str) -> int:
    """The first-error index a completion ends with (the inverse of :func:`critique_target`)."""
    m = _BOXED.search(completion)
    if not m:
        raise ValueError("no \\boxed{index} at the end of the completion")
    return int(m.group(1))
