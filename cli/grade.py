"""``mcprm grade``: grade one (gold, response) pair, or a JSON Lines file of them."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import typer

from graders.config import DEFAULT_TIMEOUT_S


def _fail(msg: str) -> typer.Exit:
    typer.echo(f"error: {msg}", err=True)
    return typer.Exit(code=1)


def _read_cases(path: Path) -> list[dict]:
    """Rows of a JSON Lines file, each with string (or integer) fields ``gold`` and ``response`` and an optional
    ``problem`` (the problem text: its wording decides policies such as an ordered pair vs a set)."""
    rows = []
    try:
        f = path.open(encoding="utf-8")
    except OSError as e:
        raise _fail(f"cannot read {path}: {e.strerror}") from None
    with f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise _fail(f"{path} line {lineno}: invalid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(row, dict):
                raise _fail(f"{path} line {lineno}: expected a JSON object with fields 'gold' and 'response'")
            for field in ("gold", "response"):
                if field not in row:
                    raise _fail(
                        f"{path} line {lineno}: missing field {field!r} (each line needs 'gold' and 'response')"
                    )
                value = row[field]
                if field == "gold" and isinstance(value, int | float) and not isinstance(value, bool):
                    row[field] = str(value)
                elif not isinstance(value, str):
                    raise _fail(
                        f"{path} line {lineno}: field {field!r} must be a string, got {type(value).__name__}"
                    )
            problem = row.get("problem")
            if problem is not None and not isinstance(problem, str):
                raise _fail(
                    f"{path} line {lineno}: field 'problem' must be a string or null, got {type(problem).__name__}"
                )
            rows.append(row)
    return rows


def _json_line(row: dict) -> str:
    """One JSON line; text that is not valid Unicode (a lone surrogate) is written with \\u escapes."""
    line = json.dumps(row, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(row, ensure_ascii=True)
    return line


def _write_atomically(path: Path, rows: list[dict]) -> None:
    """Write JSON Lines under a temporary name beside ``path``, then rename it over ``path``."""
    from pipeline.storage.atomic import AtomicFile

    with AtomicFile(str(path), text=True, fsync=False) as f:
        for row in rows:
            f.write(_json_line(row) + "\n")


def register(app: typer.Typer) -> None:
    @app.command("grade")
    def grade_cmd(
        gold: str = typer.Option(None, "--gold", help="Gold answer, e.g. '\\frac{1}{2}'."),
        response: str = typer.Option(None, "--response", help="Model response containing the final answer."),
        input: Path = typer.Option(
            None, "--input", "-i",
            help="JSON Lines file with fields 'gold', 'response' and optionally 'problem' (the problem text).",
        ),
        output: Path = typer.Option(
            None, "--output", "-o", help="Where to write the rows with verdicts (default: stdout)."
        ),
        grader: str = typer.Option(
            "sympy", "--grader", help="Registered grader: 'sympy' (default), 'exact', or 'math-verify' (when Math-Verify is installed)."
        ),
        timeout: float = typer.Option(
            DEFAULT_TIMEOUT_S, "--timeout", help="CPU-time budget in seconds per sympy verdict (retried once with 3x)."
        ),
        workers: int = typer.Option(0, "--workers", help="Sympy worker processes (0: min(4, CPU count))."),
        problem: str = typer.Option(
            None, "--problem", help="Problem text for --gold/--response (its wording decides 'auto' policies)."
        ),
        tuple_vs_set: str = typer.Option(
            "auto", "--tuple-vs-set",
            help="A tuple against the set of the same values: 'auto' (equal unless the problem asks for an "
            "ordered pair or an order), 'equal' or 'differ'. See docs/grading.md.",
        ),
    ) -> None:
        """Grade a response against a gold answer (prints the verdict), or every row of --input."""
        import graders

        if timeout <= 0:
            raise _fail("--timeout must be > 0")
        if workers < 0:
            raise _fail("--workers must be >= 0")
        try:
            graders.get_grader(grader)
        except (KeyError, ImportError) as e:
            raise _fail(str(e.args[0])) from None
        if tuple_vs_set not in ("auto", "equal", "differ"):
            raise _fail(f"--tuple-vs-set must be 'auto', 'equal' or 'differ', got {tuple_vs_set!r}")
        config = graders.GraderConfig(timeout_s=timeout, workers=workers, tuple_vs_set=tuple_vs_set)
        single = gold is not None or response is not None
        if single == (input is not None):
            raise _fail("give either --gold and --response, or --input FILE.jsonl")
        try:
            if single:
                if gold is None or response is None:
                    raise _fail("--gold and --response go together")
                verdict = graders.grade(gold, response, config, grader=grader, problem=problem)
                typer.echo(_json_line({**verdict.as_dict(), "kind": verdict.kind}))
                return
            if problem is not None:
                raise _fail("--problem goes with --gold and --response; in --input files use the field 'problem'")
            rows = _read_cases(input)
            t0 = time.perf_counter()
            problems = [r.get("problem") for r in rows]
            verdicts = graders.grade_batch(
                [(r["gold"], r["response"]) for r in rows], config, grader=grader,
                problems=problems if any(p is not None for p in problems) else None,
            )
            for row, v in zip(rows, verdicts, strict=True):
                row.update(v.as_dict())
                row["kind"] = v.kind
            if output is None or str(output) == "-":
                for row in rows:
                    sys.stdout.write(_json_line(row) + "\n")
            else:
                try:
                    _write_atomically(output, rows)
                except OSError as e:
                    raise _fail(f"cannot write {output}: {e.strerror or e}") from None
            n_true = sum(v.correct is True for v in verdicts)
            n_false = sum(v.correct is False for v in verdicts)
            n_none = sum(v.no_answer for v in verdicts)
            kinds = Counter(v.kind for v in verdicts if v.correct is None)
            why = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
            typer.echo(
                f"graded {len(rows)} rows in {time.perf_counter() - t0:.1f}s: {n_true} correct, {n_false} "
                f"incorrect ({n_none} with no final answer), {len(rows) - n_true - n_false} ungradable"
                + (f" ({why})" if why else ""),
                err=True,
            )
        finally:
            graders.shutdown()
