"""What a run tells its user besides the labels: which executor ran it and why, and warnings about data that
is silently wrong (recorded in the manifest as ``execution`` and ``warnings``, printed in the run summary).

Warnings (each per run, with counts and what to do):

- ``one-step``: most solutions split into a single step (wrong ``--splitter`` for this text): a one-step
  solution has no intermediate step to label.
- ``answer-line-step``: solutions whose last step is only a GSM8K-style ``#### 72`` answer line, or whose
  steps still hold ``<<48/2=24>>`` calculator annotations (use ``--splitter gsm8k``).
- ``bundled-model``: the bundled model labels problems unlike its synthetic task (the only task it knows):
  its labels mean nothing there (use ``--model``).
- ``no-success``: almost no rollout reached the gold answer from any prefix: the model cannot solve these
  problems, so its labels are meaningless (use a stronger model, or check the gold answers / prompt).

Every command that reads the corpus (stats, report, export, train) repeats them (:func:`manifest_warnings`).
"""

from __future__ import annotations

import re

from pipeline.bundled import MODEL_ADVICE
from pipeline.solution import Solution

ONE_STEP_SHARE = 0.5  # warn when more than this share of solutions has a single step
# warn when fewer than this share of the sampled step prefixes has a continuation that reaches the gold answer (a
# share of prefixes, not of continuations: binary-search spends K failures on every dead prefix by design, and
# rollout reuse adds many draws, so the continuations' success rate is low on a task the model does solve)
NO_SUCCESS_PREFIXES = 0.05
# warn when more than this share of graded continuations had an answer the grader could not read (counted as
# failures, pipeline.labeling.last_step; a large share means the prompt format or the model's answer style is off)
UNREADABLE_SHARE = 0.2
_ANSWER_LINE = re.compile(r"^\s*####\s*\S")
_CALC = re.compile(r"<<[^<>\n]*>>")


class InputNotes:
    """Observes the validated solutions of a run (pass 1) for the input-side warnings."""

    def __init__(self, bundled_model: bool = False) -> None:
        self.bundled_model = bundled_model  # the run's model is the bundled one: are its problems its task's?
        self.unlike_bundled = 0
        self.solutions = 0
        self.one_step = 0
        self.answer_line = 0
        self.calc = 0
        self.example: dict[str, str] = {}

    def observe(self, sol: Solution) -> None:
        self.solutions += 1
        if self.bundled_model:
            from pipeline.bundled import is_bundled_task

            if not is_bundled_task(sol.problem):
                self.unlike_bundled += 1
                self.example.setdefault("bundled-model", sol.source)
        if len(sol.steps) == 1:
            self.one_step += 1
            self.example.setdefault("one-step", sol.source)
        if sol.steps and _ANSWER_LINE.match(sol.steps[-1]):
            self.answer_line += 1
            self.example.setdefault("answer-line-step", sol.source)
        if any("<<" in s and _CALC.search(s) for s in sol.steps):
            self.calc += 1
            self.example.setdefault("calc", sol.source)

    def warnings(self, splitter: str) -> list[dict]:
        out = []
        n = self.solutions
        if self.unlike_bundled:
            out.append({
                "code": "bundled-model",
                "message": f"{self.unlike_bundled} of {n} problems are unlike the bundled model's synthetic task "
                           f"(e.g. {self.example['bundled-model']}), the only task that 1 M-parameter model knows: "
                           f"its labels on them mean nothing; {MODEL_ADVICE}.",
            })
        if n and self.one_step / n > ONE_STEP_SHARE:
            out.append({
                "code": "one-step",
                "message": f"{self.one_step} of {n} solutions split into one step (e.g. {self.example['one-step']}) "
                           f"with --splitter {splitter}: a one-step solution has no intermediate step to label. "
                           "Check the splitter (newline, step-prefix, regex, gsm8k) against your solutions' layout.",
            })
        if self.answer_line or self.calc:
            parts = []
            if self.answer_line:
                parts.append(f"{self.answer_line} of {n} solutions keep a '#### answer' line as their last step "
                             f"(e.g. {self.example['answer-line-step']})")
            if self.calc:
                parts.append(f"{self.calc} of {n} solutions have <<...>> calculator annotations in their steps "
                             f"(e.g. {self.example['calc']})")
            out.append({
                "code": "answer-line-step",
                "message": "; ".join(parts) + ". For GSM8K-style solutions use --splitter gsm8k (strips both).",
            })
        return out


def rollout_warnings(store, shard_paths: list[str], max_shards: int = 50) -> tuple[list[dict], dict]:
    """The ``no-success`` warning, from the new shards' counts (at most ``max_shards`` read)."""
    correct = graded = prefixes = alive = unreadable = 0
    names = ("mc_correct", "mc_total", "mc_ungradable", "mc_unreadable")
    for rel in shard_paths[:max_shards]:
        t = store.read_table(rel, columns=list(names))
        cols = [t.column(c).to_pylist() for c in names]
        for cs, ts, us, rs in zip(*cols):
            for c, tot, u, r in zip(cs or (), ts or (), us or (), rs or ()):
                if tot - u > 0:
                    prefixes += 1
                    alive += c > 0
                    correct += c
                    graded += tot - u
                    unreadable += r
    stats = {"continuations_graded": graded, "continuations_correct": correct,
             "continuations_unreadable": unreadable,
             "success_rate": round(correct / graded, 4) if graded else None,
             "prefixes_sampled": prefixes, "prefixes_with_success": alive}
    out = []
    if graded >= 20 and unreadable / graded > UNREADABLE_SHARE:
        out.append({
            "code": "unreadable",
            "message": f"{unreadable} of {graded} graded continuations ({unreadable / graded:.0%}) ended with an "
                       "answer the grader could not read; they count as failures (did not reach the gold "
                       "answer). Check the prompt format (--prompt-format, --prompt-template) and that the model "
                       "writes its final answer in \\boxed{} or 'The answer is ...'; `--unreadable exclude` "
                       "leaves them out instead.",
        })
    if prefixes >= 5 and graded >= 20 and alive / prefixes < NO_SUCCESS_PREFIXES:
        return out + [{
            "code": "no-success",
            "message": f"almost no rollout reached the gold answer: {alive} of {prefixes} sampled step prefixes "
                       f"had a continuation that did ({correct} of {graded} graded continuations). The model "
                       f"cannot solve these problems, so its labels are meaningless: {MODEL_ADVICE}; or check "
                       "the gold answers and the prompt format.",
        }], stats
    return out, stats


def run_notes(cfg, store, new_shard_paths: list[str], input_notes: InputNotes | None) -> dict:
    """``execution`` and ``warnings`` for the manifest."""
    from pipeline.execution.executors import choose_executor

    name, why = choose_executor(cfg)
    warnings = input_notes.warnings(cfg.splitter) if input_notes is not None else []
    if cfg.reuse_rollouts and not cfg.backend_spec.token_ids:
        warnings.append({"code": "no-reuse", "message": f"rollout reuse is off with --backend {cfg.backend}: it "
                         "returns no token ids, and a continuation counts for a later prefix only if its tokens "
                         "are that prompt's (docs/labels.md). Every draw is a fresh rollout."})
    more, stats = rollout_warnings(store, new_shard_paths)
    return {"execution": {"executor": name, "reason": why}, "warnings": warnings + more, "rollout_success": stats}


def manifest_warnings(manifest: dict | None) -> list[str]:
    """The warnings the labeling run recorded in the corpus's manifest, as one line each: every command that
    reads the corpus (stats, report, export, train) repeats them, so labels that mean nothing are said to at
    every step, not only in the run's own summary."""
    return [str(w.get("message")) for w in (manifest or {}).get("warnings") or [] if w.get("message")]
