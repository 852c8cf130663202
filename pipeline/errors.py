"""mcprm's own errors: one base class, two kinds.

* :class:`FatalError`: the command cannot go on (a bad option, input that cannot be labeled as a whole, the
  output's storage, its lock, a damaged corpus, a cluster that cannot run the workers). The message says
  what to do; the CLI prints it and exits 1.
* :class:`RowError`: one row (a solution, an input row, an export row) cannot be processed; the message names
  it (file and line). The CLI prints it the same way; code that reads rows turns it into a reject.

Every class keeps its historical built-in base too (``ValueError``, ``RuntimeError``, ``OSError``), so code
that catches those still does. Errors of ``rollouts/`` and ``graders/`` stay outside: those packages know
nothing of the pipeline.
"""

from __future__ import annotations


class McprmError(Exception):
    """An error a user can act on: its message is the whole story (no traceback)."""


class FatalError(McprmError):
    """The command cannot go on."""


class RowError(McprmError):
    """One row cannot be processed; the message names it."""


class RemoteTaskError(FatalError, RuntimeError):
    """An error a remote (Ray) task raised that is not one of mcprm's own: a bug or an engine failure on a
    worker. ``cause`` is the exception the task raised, ``detail`` the worker's traceback (shown with
    ``MCPRM_DEBUG=1``); it is raised ``from`` Ray's own exception. Its message is the cause's type and text."""

    def __init__(self, cause: BaseException, detail: str = ""):
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause
        self.detail = detail
