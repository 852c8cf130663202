"""LLM-judge consensus: ask a judge model where a solution's first error is, store its answer
beside the Monte Carlo one, and keep only the rows where both agree (Qwen2.5-Math-PRM's consensus filtering).

``mcprm judge OUT --backend openai|vllm|hf --model M`` judges every solution of the corpus at ``OUT`` (current
version by default) with :data:`~pipeline.judge.reply.CRITIQUE_TEMPLATE`, the ProcessBench critique prompt: the
problem, then the steps as tagged paragraphs ``<paragraph_0>...</paragraph_0>`` (indexed from 0), and the request
to put the index of the earliest wrong paragraph, or -1 when all are correct, in ``\\boxed{}``. The prompt goes
through the same :class:`rollouts.PromptFormat` as labeling: ``chat`` (the judge tokenizer's chat template, one
user turn) when the model has one, else ``plain`` (the prompt as it is). Generation uses the rollout backends
(:mod:`rollouts.registry`), temperature 0 by default (greedy; the hf backend, which has no greedy mode, samples at
temperature 1e-6, the same thing); ``samples > 1`` (with a temperature) takes the most frequent parsed index.

Replies are parsed by :func:`~pipeline.judge.reply.parse_reply` (the last ``\\boxed{}``; else an explicit answer
line; a bare index or ``paragraph_3``; -1 for "none" / "no error" / "all correct"); an index outside ``-1 ..
len(steps)-1`` or a reply that says nothing clear is **unparseable**: counted, stored as a null index with its
status and the raw reply, never guessed. With several samples, a tie between the most frequent indices is
``no_majority`` (null). A prompt that does not fit the judge's context (hf: the model's; others:
``--max-model-len`` with a tokenizer) is not sent and stored as ``too_long`` (null, counted apart), so one long
solution does not stop a run.

Storage: judgments never touch the corpus (its shards are immutable and checksummed). Each judge has its own
folder beside the data::

    OUT/judge/<judge-id>/judge.json            who the judge is: model, backend, prompt template and format,
                                               sampling, and ``identity`` (sha256 of what changes an answer:
                                               model, prompt, format, sampling, samples, seed); created once
    OUT/judge/<judge-id>/part-00000.sum.json   a part's checksum (bytes, sha256, rows), written before the part
    OUT/judge/<judge-id>/part-00000.parquet    one batch of judgments (store.JUDGE_COLUMNS), never rewritten
    OUT/judge/<judge-id>/_lock                 held while a judge run writes (pipeline.storage.lock)

The default judge id is ``<model name>-<first 8 hex digits of the identity>``, so another model, prompt or
sampling gets another folder; ``--judge-id`` names it, and a run whose identity differs from the folder's
``judge.json`` is refused. Rows are keyed by the solution's content ``key`` (problem, answer, steps: exactly what
the judge is shown), with the ``id`` and the ``corpus_version`` that was judged as provenance; so a judgment
holds for every corpus version containing that solution, and a refreshed corpus only needs its new rows judged.

Every file is written atomically (:class:`pipeline.storage.store.CorpusStore`: a temporary name, then a rename).
A run writes one part per batch of ``batch_rows`` solutions, so a killed run keeps its finished parts and the
same command continues with the solutions no part holds (no duplicates: keys already judged are skipped). A
part that does not match its checksum is reported and judged again (by ``mcprm judge``) or refused (by
export / stats). ``mcprm judge OUT --verify`` checks every part of every judge against its checksum.

``mcprm export --consensus JUDGE-ID`` (:class:`~pipeline.judge.store.ConsensusFilter`) keeps a row only when the
judge's index equals the row's MC ``first_error`` (both -1, "no error", counts as agreement); rows whose judgment
is null (unparseable) or missing (not judged) are dropped, and each reason is counted.
:func:`~pipeline.judge.store.judge_summary` gives the agreement rate and the unparseable count (``mcprm judge``'s
summary, ``mcprm stats``).

The package: :mod:`~pipeline.judge.run` (the settings and the run), :mod:`~pipeline.judge.reply` (the prompt,
reading a reply, the majority vote), :mod:`~pipeline.judge.store` (the judge folders, reading judgments, the
summary, ``export --consensus``'s filter); export, stats and verify import only the store.
"""
