"""Shared pieces of the CLI: the options every corpus command declares, error handling and console."""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Annotated

import typer

from pipeline.config import option_default

# The arguments and options the commands that read a corpus share, declared once (``corpus: Corpus =
# CORPUS_DEFAULT``): the corpus folder defaults to where `mcprm label` writes (its --output).
CORPUS_DEFAULT: str = option_default("output")
Corpus = Annotated[str, typer.Argument(help="Corpus folder (any fsspec URL).")]
Version = Annotated[int | None, typer.Option(help="A committed corpus version (default: current).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def err(msg: str) -> None:
    from rich.console import Console

    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {msg}")


def free_gpus(command: str) -> None:
    """This machine's idle warm workers (kept by an earlier ``mcprm label``) stopped before ``command``
    uses the GPUs itself; a failed check never stops the command."""
    try:
        from pipeline.execution.fleet import free_local_workers

        free_local_workers(command)
    except Exception as e:  # noqa: BLE001
        logging.getLogger("mcprm").warning("could not check this machine's warm workers: %s", e)


@contextlib.contextmanager
def user_errors(extra: tuple[type[BaseException], ...] = (), resume_hint: bool = False):
    """Turn the errors a user can act on into a message and exit code 1 (no traceback).

    ``resume_hint``: the command writes a corpus that a re-run resumes (``label``); only then do messages say
    that nothing was committed and that the same command resumes. Ctrl-C prints the interrupt's own message
    where it has one (``mcprm train``'s says whether a rerun resumes), else the resume hint, or for a command
    that does not resume, that it was interrupted. A typer ``Exit`` passes through as it is."""
    from pipeline.errors import McprmError, RemoteTaskError
    from pipeline.execution.shard_worker import WorkerError
    from pipeline.interrupts import catching
    from pipeline.storage.store import StorageError
    from rollouts.base import MissingDependency  # rollouts/ stays free of the pipeline's error classes

    known: tuple[type[BaseException], ...] = (FileNotFoundError, PermissionError, MissingDependency) + tuple(extra)
    try:
        with catching():  # a Ctrl-C that something swallowed still ends the command (pipeline.interrupts)
            yield
    except WorkerError as e:  # one message naming the row; the worker's traceback on request
        import os

        if os.environ.get("MCPRM_DEBUG"):
            print(e.detail or "", file=sys.stderr, flush=True)
        hint = ("Nothing was committed; finished shards are kept, and rerunning the same command resumes. "
                if resume_hint else "")
        err(f"{e}. {hint}(set MCPRM_DEBUG=1 to see the worker's traceback).")
        raise typer.Exit(1) from None
    except known as e:
        err(str(e))
        raise typer.Exit(1) from None
    except OSError as e:  # disk full, read-only file system, ... (pipeline.storage.store.StorageError too)
        if isinstance(e, StorageError) and e.message:  # pipeline.run: names the file and what was committed before
            err(e.message)
            raise typer.Exit(1) from None
        where = f" ({e.filename})" if e.filename else ""
        err(f"{e.strerror or e}{where}. " + ("Nothing committed; the previous corpus version is intact. Fix the "
                                             "storage problem and rerun the same command to resume."
                                             if resume_hint else "Fix the storage problem and run it again."))
        raise typer.Exit(1) from None
    except RemoteTaskError as e:  # a bug or an engine failure on a Ray worker: said as below, its traceback
        import os

        if os.environ.get("MCPRM_DEBUG"):
            print(e.detail, file=sys.stderr, flush=True)
        hint = "Nothing was committed; rerun the same command to resume " if resume_hint else ""
        err(f"{e}. {hint}(set MCPRM_DEBUG=1 to see the traceback).")
        raise typer.Exit(1) from None
    except McprmError as e:  # every other error of mcprm's own (pipeline.errors): its message says it all
        err(str(e))
        raise typer.Exit(1) from None
    except KeyboardInterrupt as e:
        err(str(e) or ("interrupted; rerun the same command to resume" if resume_hint
                       else "interrupted (run the command again to redo it)"))
        raise typer.Exit(130) from None
    except (typer.Exit, typer.Abort):  # already said what it had to say
        raise
    except Exception as e:  # a bug or an engine failure: one clear line, the traceback on request
        import os
        import traceback

        if os.environ.get("MCPRM_DEBUG"):
            traceback.print_exc()
        hint = "Nothing was committed; rerun the same command to resume " if resume_hint else ""
        err(f"{type(e).__name__}: {e}. {hint}(set MCPRM_DEBUG=1 to see the traceback).")
        raise typer.Exit(1) from None


def preflight(cfg, output: bool = True) -> None:
    """What a command that runs the model checks before it touches anything (a wrong device then fails in seconds, not after the input pass): the device and the
    backend can run on this machine (not checked for a Ray cluster's workers: --ray-address), and ``output``:
    the output folder is not a file."""
    from pipeline.run import preflight as check  # the checks pipeline.run.label() makes for library users too

    check(cfg, output=output)


def corpus_warnings(corpus: str, version: int | None = None) -> list[str]:
    """The warnings the labeling run recorded in the corpus's manifest (pipeline.notes.manifest_warnings); none
    when the manifest cannot be read (the command's own error says why)."""
    try:
        from pipeline.corpus import open_manifest
        from pipeline.notes import manifest_warnings

        return manifest_warnings(open_manifest(corpus, version)[1])
    except Exception:  # noqa: BLE001 - these lines only repeat what the run said; never a reason to fail
        return []


def repeat_warnings(corpus: str, version: int | None = None, warnings: list[str] | None = None) -> None:
    """The labeling run's warnings, one ``warning:`` line each on stderr: stats, report, export and train say
    them again, so labels that mean nothing are said to wherever they are read."""
    for w in corpus_warnings(corpus, version) if warnings is None else warnings:
        print(f"warning: {w}", file=sys.stderr, flush=True)


def echo(msg: str) -> None:
    print(msg, file=sys.stdout, flush=True)


def print_table(title: str, rows: list[tuple[str, str]]) -> None:
    """A two-column (metric, value) rich table on stdout."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    t.add_column("metric")
    t.add_column("value", justify="right")
    for r in rows:
        t.add_row(*r)
    Console().print(t)
