"""Read the solutions to label: JSON Lines, JSON or Parquet from any fsspec URL, validated row by row.

Inputs are one or more files, folders (searched recursively for ``.jsonl``/``.ndjson``/``.json``/
``.parquet``, optionally ``.gz``/``.bz2``/``.xz``/``.zst`` compressed for the JSON kinds) or globs, on any
fsspec file system (local path, ``s3://``, ``gs://``, ``hf://``, ``memory://``). Files are read in sorted
order within each given path, rows in file order, so a run always sees the same sequence.

Each row has a problem, a gold answer and either a list of steps or one solution text that
:func:`pipeline.input.split.split_solution` cuts into steps; field names are configurable (:class:`InputSpec`).
An optional id field names the solution; without it the id is :func:`pipeline.solution.content_key` of
(problem, answer, steps), so the same content gets the same id whatever file or format it comes from.

Validation never drops a row silently. A bad row becomes a :class:`Reject` (file, row, field, reason, raw
text); without ``skip_bad`` the whole input is checked and :class:`InputError` names the bad rows (the
first few in full) at the end of the pass, before anything is labeled; with ``skip_bad`` rejects go to a
JSONL rejects file and the rest proceeds. Row numbers: JSON Lines rows are named by 1-based ``line N`` (as
in an editor); Parquet rows and JSON-array items by 0-based ``row N``. ``Solution.source`` is
``"{file}:{row}"`` with the 0-based index.

Gold answers: with ``InputSpec.gold_check`` (``mcprm label`` sets it for the default sympy grader) the gold
answers of valid rows are read by the grader in batches, and a row whose gold it cannot read is rejected
like any other bad row (field: the answer field), before any rollout.

Duplicates: two rows with the same id and different content are an error naming both rows. Rows with the
same id *and* the same content (exact duplicates, e.g. the same solution listed twice) are not errors: the
first is kept, later copies are skipped, counted in :class:`IngestStats` ``duplicates`` and logged as a
warning; a row with another id but the content of an earlier row is skipped too (``same_content``): a
solution is labeled once. The whole input is read in one pass (:func:`iter_keyed_solutions`); what it keeps
is about 52 bytes a row and its id (ids by 64-bit hash and checked in full, content keys as 64-bit numbers,
places), everything else streams (JSON Lines in 1 MiB chunks, Parquet by record batches of the needed
columns only).
"""

from pipeline.input.files import file_format, iter_objects, iter_rows, resolve_files
from pipeline.input.reading import GoldCheck, IngestStats, RejectsWriter, iter_keyed_solutions
from pipeline.input.spec import InputError, InputSpec, RawRow, Reject
from pipeline.input.validation import validate

__all__ = [
    "GoldCheck", "IngestStats", "InputError", "InputSpec", "RawRow", "Reject", "RejectsWriter",
    "file_format", "iter_keyed_solutions", "iter_objects", "iter_rows", "resolve_files", "validate",
]
