"""LLM-judge consensus (issue 16, point 4): ask a judge model where a solution's first error is, store its answer
beside the Monte Carlo one, and keep only the rows where both agree (Qwen2.5-Math-PRM's consensus filtering).

``mcprm judge OUT --backend openai|vllm|hf --model M`` judges every solution of the corpus at ``OUT`` (current
version by default) with :data:`CRITIQUE_TEMPLATE`, the ProcessBench critique prompt: the problem, then the
steps as tagged paragraphs ``<paragraph_0>...</paragraph_0>`` (indexed from 0), and the request to put the index
of the earliest wrong paragraph, or -1 when all are correct, in ``\\boxed{}``. The prompt goes through the same
:class:`rollouts.PromptFormat` as labeling: ``chat`` (the judge tokenizer's chat template, one user turn) when
the model has one, else ``plain`` (the prompt as it is). Generation uses the rollout backends
(:mod:`rollouts.registry`), temperature 0 by default (greedy; the hf backend, which has no greedy mode, samples
at temperature 1e-6, the same thing); ``samples > 1`` (with a temperature) takes the most frequent parsed index.

Replies are parsed by :func:`parse_reply` (the last ``\\boxed{}``; else an explicit answer line; a bare index or
``paragraph_3``; -1 for "none" / "no error" / "all correct"); an index outside ``-1 .. len(steps)-1`` or a
reply that says nothing clear is **unparseable**: counted, stored as a null index with its status and the raw
reply, never guessed. With several samples, a tie between the most frequent indices is ``no_majority`` (null).
A prompt that does not fit the judge's context (hf: the model's; others: ``--max-model-len`` with a tokenizer) is
not sent and stored as ``too_long`` (null, counted apart), so one long solution does not stop a run.

Storage: judgments never touch the corpus (its shards are immutable and checksummed). Each judge has its own
folder beside the data::

    OUT/judge/<judge-id>/judge.json            who the judge is: model, backend, prompt template and format,
                                               sampling, and ``identity`` (sha256 of what changes an answer:
                                               model, prompt, format, sampling, samples, seed); created once
    OUT/judge/<judge-id>/part-00000.sum.json   a part's checksum (bytes, sha256, rows), written before the part
    OUT/judge/<judge-id>/part-00000.parquet    one batch of judgments (:data:`JUDGE_COLUMNS`), never rewritten
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

``mcprm export --consensus JUDGE-ID`` (:class:`ConsensusFilter`) keeps a row only when the judge's index equals
the row's MC ``first_error`` (both -1, "no error", counts as agreement); rows whose judgment is null
(unparseable) or missing (not judged) are dropped, and each reason is counted. :func:`judge_summary` gives the
agreement rate and the unparseable count (``mcprm judge``'s summary, ``mcprm stats``).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import posixpath
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.errors import FatalError

log = logging.getLogger("mcprm")

JUDGE_DIR = "judge"
JUDGE_META = "judge.json"
JUDGE_SCHEMA_VERSION = 1

# The ProcessBench critique prompt (Zheng et al. 2024, "ProcessBench", code/templates/critique_template.txt).
# {problem} and {tagged_response} are replaced literally (no str.format: problems contain braces).
CRITIQUE_TEMPLATE = (
    "The following is a math problem and a solution (split into paragraphs, enclosed with tags and indexed from 0):"
    "\n\n[Math Problem]\n\n{problem}\n\n[Solution]\n\n{tagged_response}\n\n"
    "Your task is to review and critique the solution paragraph by paragraph. Once you identify an error in a "
    "paragraph, return the index of the paragraph where the earliest error occurs. Otherwise, return the index "
    "of -1 (which typically denotes \"not found\").\n\n"
    "Please put your final answer (i.e., the index) in \\boxed{}."
)

# statuses of a judgment (the ``status`` column); every one but "ok" has a null index
OK, UNPARSEABLE, OUT_OF_RANGE, NO_MAJORITY = "ok", "unparseable", "out_of_range", "no_majority"
TOO_LONG = "too_long"  # the prompt does not fit the judge's context: not sent (see judge_corpus)

# the reasons export counts in ``skipped`` for the rows --consensus drops
DROP_DISAGREE = "consensus: judge disagrees with MC"
DROP_NULL = "consensus: judge reply unparseable"
DROP_TOO_LONG = "consensus: prompt too long for the judge"
DROP_MISSING = "consensus: not judged"

JUDGE_COLUMNS = ["key", "id", "corpus_version", "n_steps", "judge_first_error", "status", "votes", "replies",
                 "mc_first_error", "generated_tokens"]


class JudgeError(FatalError, ValueError):
    """A judge option, a judge folder or a judge part that cannot be used; the message says what to do."""


def judge_schema():
    import pyarrow as pa

    return pa.schema([
        pa.field("key", pa.string(), nullable=False),  # the corpus row's content key
        pa.field("id", pa.string(), nullable=False),
        pa.field("corpus_version", pa.int32(), nullable=False),  # the version that was judged
        pa.field("n_steps", pa.int32(), nullable=False),
        pa.field("judge_first_error", pa.int32(), nullable=True),  # -1: no error; null: see status
        pa.field("status", pa.string(), nullable=False),
        pa.field("votes", pa.list_(pa.int32()), nullable=False),  # one parsed index per sample (null: unparseable)
        pa.field("replies", pa.list_(pa.string()), nullable=False),  # the raw replies
        pa.field("mc_first_error", pa.int32(), nullable=False),  # MC's first_error when judged (provenance)
        pa.field("generated_tokens", pa.int64(), nullable=False),
    ], metadata={b"mcprm_judge_schema_version": str(JUDGE_SCHEMA_VERSION).encode()})


# ------------------------------------------------------------------------------------------------ prompt
def tagged_paragraphs(steps: Sequence[str]) -> str:
    """The steps as ProcessBench's tagged paragraphs, indexed from 0, separated by blank lines."""
    return "\n\n".join(f"<paragraph_{i}>\n{s}\n</paragraph_{i}>" for i, s in enumerate(steps))


def critique_prompt(problem: str, steps: Sequence[str], template: str = CRITIQUE_TEMPLATE) -> str:
    """The judge's request for one solution (the user message; the prompt format wraps it)."""
    return template.replace("{problem}", problem).replace("{tagged_response}", tagged_paragraphs(steps))


# ------------------------------------------------------------------------------------------------ parser
_NO_ERROR = (r"-\s*1|none|no\s+errors?(?:\s+found)?|not\s+found|n/?a|null|"
             r"all(?:\s+(?:the\s+)?(?:paragraphs|steps))?\s+(?:are\s+)?correct|there\s+is\s+no\s+error|"
             r"no\s+incorrect\s+(?:paragraphs?|steps?)|no\s+(?:erroneous|wrong)\s+(?:paragraphs?|steps?)")
_INDEX = r"(?:paragraph[\s_#-]*)?(?:index\s*)?(-?\d+)"
_ANSWER_LINE = re.compile(
    r"^(?:(?:so|thus|therefore|hence|in\s+conclusion),?\s+)?(?:the\s+)?(?:"
    r"final\s+answer|answer|final\s+index|index\s+of\s+the\s+(?:earliest|first)\s+(?:error|erroneous\s+paragraph|"
    r"incorrect\s+paragraph|wrong\s+paragraph)|(?:earliest|first)\s+(?:error|erroneous\s+paragraph|"
    r"incorrect\s+paragraph|wrong\s+paragraph)(?:\s+(?:is|occurs|appears))?(?:\s+in)?)"
    r"\s*(?:is\b|:|=)?\s*(?P<rest>.*)$", re.I)


def _boxed(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces kept), in order."""
    out = []
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append(text[m.end():i - 1])
    return out


def _clean(s: str) -> str:
    s = re.sub(r"\\(?:text|textbf|mathrm|mathbf|texttt)\s*\{([^{}]*)\}", r"\1", s)
    s = s.replace("\\_", "_").replace("$", "").replace("**", "").replace("`", "")
    s = re.sub(r"[<>]", " ", s)
    return " ".join(s.split()).strip(" .,;:!\"'()[]")


def _value(s: str) -> int | None | str:
    """An index from a short answer text: an int, "none" for -1 phrases, or None (not an answer)."""
    s = _clean(s)
    if re.fullmatch(rf"(?:{_NO_ERROR})", s, re.I):
        return -1
    m = re.fullmatch(rf"{_INDEX}", s, re.I)
    if m:
        return int(m.group(1))
    return None


def parse_reply(text: str | None, n_steps: int) -> tuple[int | None, str]:
    """(index, status) of a judge's reply for a solution of ``n_steps`` paragraphs.

    The index is the earliest wrong paragraph (0-based) or -1 (no error). Read, in order, from: the text after
    the last ``</think>`` (a reasoning model's answer); the last ``\\boxed{}`` (its whole content must be an index,
    ``paragraph_3`` or a no-error phrase, else the reply is unparseable, with no look elsewhere); a reply that is
    only an index / ``paragraph_3`` / no-error phrase; the last line that says "answer: ...", "the earliest error is
    in paragraph 3", ... (its value, or the last integer of that line). Anything else is ``unparseable``; an
    index outside ``-1 .. n_steps-1`` is ``out_of_range``. Both give a null index; nothing is guessed."""
    if not text or not text.strip():
        return None, UNPARSEABLE
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    value: int | None = None
    boxed = _boxed(text)
    if boxed:
        value = _value(boxed[-1])
    else:
        value = _value(text)
        lines = [ln.strip().lstrip("#*->•").strip() for ln in text.splitlines() if ln.strip()]
        if value is None and lines:  # a last line that is only the answer ("Therefore, all steps are correct.")
            value = _value(re.sub(r"^(?:so|thus|therefore|hence|in\s+conclusion)\b,?", "", lines[-1], flags=re.I))
        if value is None:
            for line in reversed(lines):
                m = _ANSWER_LINE.search(_clean(re.sub(r"\([^)]*\)", " ", line)))  # "(0-indexed)" out
                if not m:
                    continue
                rest = m.group("rest")
                value = _value(rest)
                if value is None:  # the value must open the rest; a second number makes it ambiguous
                    head = re.match(rf"\s*(?:{_NO_ERROR})\b", rest, re.I)
                    ints = re.findall(r"-?\d+", rest)
                    if head and not ints:
                        value = -1
                    elif len(ints) == 1 and re.match(rf"\s*{_INDEX}\b", rest, re.I):
                        value = int(ints[0])
                break
    if value is None:
        return None, UNPARSEABLE
    if not -1 <= value < n_steps:
        return None, OUT_OF_RANGE
    return value, OK


def majority(votes: Sequence[int | None]) -> tuple[int | None, str]:
    """The most frequent parsed index of several samples (unparseable ones left out); a tie is ``no_majority``."""
    c = Counter(v for v in votes if v is not None)
    if not c:
        return None, UNPARSEABLE
    top = c.most_common()
    if len(top) > 1 and top[0][1] == top[1][1]:
        return None, NO_MAJORITY
    return top[0][0], OK


# ------------------------------------------------------------------------------------------------ settings
@dataclass
class JudgeSettings:
    """Who judges and how (``mcprm judge``'s options)."""

    model: str
    backend: str = "openai"
    tokenizer: str | None = None
    prompt_format: str = "auto"  # auto | chat | plain
    template: str = CRITIQUE_TEMPLATE
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 1024
    samples: int = 1
    seed: int = 0

    def problems(self) -> list[str]:
        out = []
        if not self.model:
            out.append("--model is required: the judge model (openai: the server's model name)")
        if self.prompt_format not in ("auto", "chat", "plain"):
            out.append(f"--prompt-format must be auto, chat or plain, got {self.prompt_format!r}")
        for ph in ("{problem}", "{tagged_response}"):
            if self.template.count(ph) != 1:
                out.append(f"the judge prompt template must contain {ph} exactly once")
        if self.temperature < 0:
            out.append(f"--temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            out.append(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            out.append(f"--max-new-tokens must be at least 1, got {self.max_new_tokens}")
        if self.samples < 1:
            out.append(f"--samples must be at least 1, got {self.samples}")
        if self.samples > 1 and self.temperature == 0:
            out.append("--samples > 1 needs a --temperature above 0 (greedy samples are all the same)")
        return out


def resolve_format(s: JudgeSettings):
    """The :class:`rollouts.PromptFormat` the judge prompt goes through: ``chat`` with the judge tokenizer's chat
    template (hf / vllm: ``--tokenizer`` or the model's; openai: only with ``--tokenizer``), ``plain`` otherwise
    (``auto``), or what ``--prompt-format`` says."""
    from rollouts.prompts import make_prompt_format

    tok = s.tokenizer or (s.model if s.backend in ("hf", "vllm") else None)
    if s.prompt_format == "plain" or (s.prompt_format == "auto" and tok is None):
        return make_prompt_format("plain", template="{problem}\n\n", separator="\n")
    if s.prompt_format == "chat" and tok is None:
        raise JudgeError("--prompt-format chat with --backend openai needs --tokenizer (the judge model's "
                         "tokenizer, for its chat template)")
    try:
        return make_prompt_format("chat", tok)
    except ValueError as e:  # no chat template
        if s.prompt_format == "chat":
            raise JudgeError(str(e)) from None
        return make_prompt_format("plain", template="{problem}\n\n", separator="\n")


def identity(s: JudgeSettings, fmt) -> dict:
    """What changes a judge's answers (hashed into the judge id): model, prompt, format, sampling, seed."""
    f = fmt.to_dict()
    f.pop("source", None)
    return {"model": s.model, "template": s.template, "prompt_format": f, "temperature": s.temperature,
            "top_p": s.top_p, "max_new_tokens": s.max_new_tokens, "samples": s.samples, "seed": s.seed}


def identity_hash(ident: dict) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def default_judge_id(model: str, ident_hash: str) -> str:
    name = posixpath.basename(model.rstrip("/")) or "judge"
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "judge"
    return f"{name[:48]}-{ident_hash[:8]}"


def check_judge_id(judge_id: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", judge_id or ""):
        raise JudgeError(f"judge id {judge_id!r} must be letters, digits, '.', '_' or '-' (a folder name)")
    return judge_id


# ------------------------------------------------------------------------------------------------ storage
_PART = re.compile(r"part-(\d{5,})\.parquet$")


def judge_url(url: str, judge_id: str) -> str:
    return url.rstrip("/") + f"/{JUDGE_DIR}/{judge_id}"


def _store(url: str):
    from pipeline.storage.store import CorpusStore

    return CorpusStore(url)


def list_judges(url: str) -> list[str]:
    """The judge ids of the corpus at ``url`` (folders of ``OUT/judge`` with a ``judge.json``)."""
    store = _store(url)
    try:
        names = store.fs.ls(store.path(JUDGE_DIR), detail=False)
    except FileNotFoundError:
        return []
    out = []
    for n in names:
        b = posixpath.basename(n.rstrip("/"))
        if store.exists(f"{JUDGE_DIR}/{b}/{JUDGE_META}"):
            out.append(b)
    return sorted(out)


def resolve_judge(url: str, judge_id: str | None) -> str:
    """A judge id that exists at ``url``: ``judge_id`` itself, or (None / "auto") the only judge there."""
    judges = list_judges(url)
    if judge_id in (None, "", "auto"):
        if len(judges) == 1:
            return judges[0]
        if not judges:
            raise JudgeError(f"{url} has no judge results ({url}/{JUDGE_DIR}/ is empty); run `mcprm judge {url} "
                             "--backend ... --model ...` first")
        raise JudgeError(f"{url} has several judges ({', '.join(judges)}); name one")
    check_judge_id(judge_id)
    if judge_id not in judges:
        have = f"judges there: {', '.join(judges)}" if judges else "it has none yet"
        raise JudgeError(f"no judge {judge_id!r} at {url}/{JUDGE_DIR}/ ({have}); run `mcprm judge {url} --judge-id "
                         f"{judge_id} --backend ... --model ...` first")
    return judge_id


def _part_names(jstore) -> list[tuple[int, str]]:
    try:
        names = jstore.fs.ls(jstore.root, detail=False)
    except FileNotFoundError:
        return []
    out = []
    for n in names:
        m = _PART.fullmatch(posixpath.basename(n))
        if m:
            out.append((int(m.group(1)), posixpath.basename(n)))
    return sorted(out)


def _load_part(jstore, name: str, columns: list[str] | None = None):
    """A part, checked against its checksum sidecar (size, sha256, schema, rows); JudgeError naming it else."""
    import pyarrow.parquet as pq

    from pipeline.storage.store import sidecar_rel

    uri = jstore.uri(name)
    try:
        side = jstore.read_json(sidecar_rel(name))
    except RuntimeError:
        side = None
    if not isinstance(side, dict) or "sha256" not in side:
        raise JudgeError(f"judge part {uri} has no readable checksum ({sidecar_rel(name)})")
    data = jstore.read_bytes(name)
    if len(data) != int(side.get("bytes", -1)) or hashlib.sha256(data).hexdigest() != side["sha256"]:
        raise JudgeError(f"judge part {uri} does not match its checksum (truncated or corrupted)")
    try:
        t = pq.read_table(io.BytesIO(data), use_threads=False)
    except Exception as e:  # noqa: BLE001 - ArrowInvalid, ZSTD errors
        raise JudgeError(f"judge part {uri} is unreadable ({type(e).__name__}: {e})") from None
    if not t.schema.equals(judge_schema(), check_metadata=False) or t.num_rows != int(side.get("rows", -1)):
        raise JudgeError(f"judge part {uri} does not have the judge schema or its recorded rows")
    return t.select(columns) if columns else t


def _k64(key: str) -> int:
    """A content key as a 64-bit int (keys are 16 hex digits; anything else is hashed)."""
    if len(key) == 16:
        try:
            return int(key, 16)
        except ValueError:
            pass
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


class Judgments:
    """A judge's answers by content key, held as two sorted numpy arrays (12 bytes a judged row); a null index is
    :attr:`NULL` (unparseable, out of range, no majority) or :attr:`TOO_LONG` (the prompt was not sent)."""

    NULL = -(2**31)
    TOO_LONG = -(2**31) + 1

    def __init__(self, keys: Iterable[int], index: Iterable[int | None], status: Iterable[str] | None = None):
        import numpy as np

        k = np.fromiter(keys, dtype=np.uint64)
        st = status if status is not None else iter(lambda: OK, None)
        v = np.fromiter(((self.TOO_LONG if s == TOO_LONG else self.NULL) if i is None else i
                         for i, s in zip(index, st)), dtype=np.int32, count=len(k))
        k, first = np.unique(k, return_index=True)  # sorted; a key in two parts keeps its first judgment
        self.keys, self.index = k, v[first]

    def __len__(self) -> int:
        return len(self.keys)

    def lookup(self, keys: Sequence[str]):
        """(found mask, index array with NULL where null) for ``keys``."""
        import numpy as np

        q = np.fromiter((_k64(k) for k in keys), dtype=np.uint64, count=len(keys))
        pos = np.searchsorted(self.keys, q)
        pos_c = np.minimum(pos, max(len(self.keys) - 1, 0))
        found = (pos < len(self.keys)) & (self.keys[pos_c] == q) if len(self.keys) else np.zeros(len(q), bool)
        idx = np.where(found, self.index[pos_c] if len(self.keys) else self.NULL, self.NULL)
        return found, idx


def load_judgments(url: str, judge_id: str) -> Judgments:
    """Every judgment of ``judge_id`` at ``url``, each part checked against its checksum."""
    jstore = _store(judge_url(url, judge_id))
    keys: list[int] = []
    idx: list[int | None] = []
    status: list[str] = []
    for _, name in _part_names(jstore):
        t = _load_part(jstore, name, ["key", "judge_first_error", "status"])
        keys.extend(_k64(k) for k in t.column("key").to_pylist())
        idx.extend(t.column("judge_first_error").to_pylist())
        status.extend(t.column("status").to_pylist())
    return Judgments(keys, idx, status)


def judge_meta(url: str, judge_id: str) -> dict:
    m = _store(judge_url(url, judge_id)).read_json(JUDGE_META)
    if not isinstance(m, dict):
        raise JudgeError(f"{judge_url(url, judge_id)}/{JUDGE_META} is missing")
    return m


def verify_judges(url: str) -> tuple[list[str], dict]:
    """Check every part of every judge at ``url`` against its checksum. (problems, {judge id: rows})."""
    problems: list[str] = []
    rows: dict[str, int] = {}
    for jid in list_judges(url):
        jstore = _store(judge_url(url, jid))
        rows[jid] = 0
        seen: set[str] = set()
        for _, name in _part_names(jstore):
            try:
                t = _load_part(jstore, name, ["key"])
            except JudgeError as e:
                problems.append(f"{e}; fix: rerun `mcprm judge {url} --judge-id {jid} ...` (it judges that part's "
                                "rows again)")
                continue
            keys = t.column("key").to_pylist()
            dup = seen.intersection(keys)
            if dup:
                problems.append(f"judge part {jstore.uri(name)} repeats {len(dup)} solution(s) of an earlier part")
            seen.update(keys)
            rows[jid] += len(keys)
    return problems, rows


# ------------------------------------------------------------------------------------------------ judging
@dataclass
class JudgeResult:
    output: str
    judge_id: str
    version: int
    judged: int  # solutions judged by this run
    already: int  # solutions an earlier run had judged
    parts: int  # parts written by this run
    repaired: int  # damaged parts removed (their rows judged again)
    generated_tokens: int
    statuses: dict[str, int] = field(default_factory=dict)  # this run's judgments by status
    summary: dict = field(default_factory=dict)  # judge_summary() after the run


def _seed(seed: int, key: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:4], "big") & 0x7FFFFFFF


def _sampling(s: JudgeSettings):
    from rollouts.base import SamplingConfig

    t = s.temperature
    if t == 0 and s.backend == "hf":
        t = 1e-6  # the hf backend samples (softmax(logits / T)): this is greedy up to exact ties
    return SamplingConfig(temperature=t, top_p=s.top_p, max_new_tokens=s.max_new_tokens)


def backend_options(s: JudgeSettings, **options: Any):
    """(spec, options) of the judge's rollout backend, checked (``options``: the backend's option fields, e.g.
    base_url, device, tensor_parallel_size, max_model_len; others are ignored). Raises JudgeError."""
    import dataclasses

    from rollouts.registry import backend_spec

    try:
        spec = backend_spec(s.backend)
    except ValueError as e:
        raise JudgeError(str(e)) from None
    names = {f.name for f in dataclasses.fields(spec.options)}
    opts = spec.options(**{k: v for k, v in options.items() if k in names and v is not None})
    bad = opts.problems(True)
    if bad:
        raise JudgeError("; ".join(bad))
    return spec, opts


def build_backend(s: JudgeSettings, **options: Any):
    """The rollout backend for the judge, through the registry (see :func:`backend_options`)."""
    from rollouts.registry import ModelRef

    spec, opts = backend_options(s, **options)
    return spec.build(ModelRef(s.model, s.tokenizer, options.get("dtype"), s.seed), opts)


def judge_corpus(url: str, settings: JudgeSettings, backend_factory: Callable[[], Any], *,
                 judge_id: str | None = None, version: int | None = None, batch_rows: int = 256,
                 limit: int | None = None, on_part: Callable[[int, int], None] | None = None,
                 context_tokens: int | None = None, count_tokens: Callable[[str], int] | None = None) -> JudgeResult:
    """Judge every solution of corpus ``url`` (``version``, default current) that ``judge_id`` has not judged yet,
    writing one checksummed part per ``batch_rows`` solutions (see the module docstring). ``backend_factory`` is
    called only when there is something to judge. ``limit``: judge at most this many solutions in this run.

    A prompt of ``context_tokens`` tokens or more (counted by ``count_tokens``; by default the backend's own
    ``max_positions`` and ``tokenizer`` where it has them, as the hf backend does) is not sent: its judgment is
    stored as ``too_long`` (null), so one long solution does not stop the run."""
    from pipeline.faults import fault_point
    from pipeline.storage.corpus import iter_corpus, open_manifest
    from pipeline.storage.lock import OutputLock
    from pipeline.storage.store import sidecar_rel

    bad = settings.problems()
    if batch_rows < 1:
        bad.append(f"--batch-size must be at least 1, got {batch_rows}")
    if limit is not None and limit < 0:
        bad.append(f"--limit must be >= 0, got {limit}")
    if bad:
        raise JudgeError("; ".join(bad))
    _, manifest = open_manifest(url, version)  # no corpus: CorpusError, before anything is written
    v = manifest["version"]
    fmt = resolve_format(settings)
    ident = identity(settings, fmt)
    ihash = identity_hash(ident)
    jid = check_judge_id(judge_id) if judge_id else default_judge_id(settings.model, ihash)
    jstore = _store(judge_url(url, jid))
    meta = {"format": "mcprm-judge", "schema_version": JUDGE_SCHEMA_VERSION, "judge_id": jid, "identity": ihash,
            "model": settings.model, "backend": settings.backend, "tokenizer": settings.tokenizer,
            "prompt_format": fmt.kind, "prompt_hash": hashlib.sha256(settings.template.encode()).hexdigest()[:16],
            "settings": ident, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    sampling = _sampling(settings)
    statuses: Counter = Counter()
    judged = parts = repaired = tokens = 0
    backend = None
    with OutputLock(jstore) as lock:
        old = jstore.read_json(JUDGE_META)  # written with the first part: a run that judged nothing leaves none
        if old is None and _part_names(jstore):
            raise JudgeError(f"{judge_url(url, jid)} has judge parts but no {JUDGE_META} (deleted?): which judge "
                             "wrote them is unknown; move the folder away or use another --judge-id")
        if old is not None and old.get("identity") != ihash:
            was, now = old.get("settings") or {}, json.loads(json.dumps(ident))
            diff = ", ".join(f"{k} {was.get(k)!r} there, {now[k]!r} now" if k != "template" else "prompt template"
                             for k in now if was.get(k) != now[k]) or "its identity"
            raise JudgeError(f"judge {jid!r} at {judge_url(url, jid)} holds the judgments of another judge (it differs "
                             f"in: {diff}); use another --judge-id, or leave it out for a judge id made from the "
                             "settings")
        for rel in jstore.fs.ls(jstore.root, detail=False):  # leftovers of killed writes (we hold the lock)
            if ".tmp-" in posixpath.basename(rel):
                jstore.delete(posixpath.basename(rel))
        done: set[int] = set()
        existing = _part_names(jstore)
        for _, name in existing:
            try:
                t = _load_part(jstore, name, ["key"])
            except JudgeError as e:
                log.warning("%s: judging its rows again", e)
                jstore.delete(name)
                jstore.delete(sidecar_rel(name))
                repaired += 1
                continue
            done.update(_k64(k) for k in t.column("key").to_pylist())
        already = len(done)
        next_part = (existing[-1][0] + 1) if existing else 0
        sidecars = [n for n in jstore.fs.ls(jstore.root, detail=False) if n.endswith(".sum.json")]
        for n in sidecars:  # an orphan sidecar (killed before its part) must not be reused with other content
            m = re.fullmatch(r"part-(\d{5,})\.sum\.json", posixpath.basename(n))
            if m:
                next_part = max(next_part, int(m.group(1)) + 1)

        def flush(batch: list[dict]) -> None:
            nonlocal backend, judged, parts, tokens, next_part
            if backend is None:
                backend = backend_factory()
                fit.extend(_length_check(backend, context_tokens, count_tokens))
            from rollouts.base import GenRequest

            prompts = [fmt.header(critique_prompt(r["problem"], r["steps"], settings.template)) for r in batch]
            sent = [i for i, p in enumerate(prompts) if not fit or fit[1](p) < fit[0]]
            outs: list = [None] * len(batch)
            reqs = [GenRequest(prompts[i], n=settings.samples, seed=_seed(settings.seed, batch[i]["key"]),
                               group=batch[i]["key"]) for i in sent]
            try:
                got = backend.generate(reqs, sampling) if reqs else []
            except Exception as e:  # a server error after its retries, an engine failure
                raise JudgeError(f"the judge backend failed ({type(e).__name__}: {e}); the {already + judged:,} judgments "
                                 "written before are kept: rerun the same command to continue") from e
            for i, comps in zip(sent, got, strict=True):
                outs[i] = comps
            rows = []
            for r, comps in zip(batch, outs, strict=True):
                n = len(r["steps"])
                parsed = [parse_reply(c.text, n) for c in comps or ()]
                if comps is None:
                    idx, status, comps = None, TOO_LONG, []
                elif len(parsed) == 1:
                    idx, status = parsed[0]
                else:
                    idx, status = majority([p[0] for p in parsed])
                statuses[status] += 1
                gen = sum(int(c.num_tokens) for c in comps)
                tokens += gen
                rows.append({"key": r["key"], "id": r["id"], "corpus_version": v, "n_steps": n,
                             "judge_first_error": idx, "status": status, "votes": [p[0] for p in parsed],
                             "replies": [c.text for c in comps], "mc_first_error": r["first_error"],
                             "generated_tokens": gen})
            if not jstore.exists(JUDGE_META):
                jstore.create_json(JUDGE_META, meta)
            _write_part(jstore, f"part-{next_part:05d}.parquet", rows)
            lock.check()
            next_part += 1
            parts += 1
            judged += len(rows)
            if on_part is not None:
                on_part(judged, parts)
            fault_point("judge-part-written", jstore.uri(f"part-{next_part - 1:05d}.parquet"))

        fit: list = []  # (context, count) once the backend is built, when a length check is possible
        batch: list[dict] = []
        try:
            for b in iter_corpus(url, v, ["key", "id", "problem", "steps", "first_error"]):
                for r in b.to_pylist():
                    if limit is not None and judged + len(batch) >= limit:
                        break
                    k = _k64(r["key"])
                    if k in done:
                        continue
                    done.add(k)
                    batch.append(r)
                    if len(batch) >= batch_rows:
                        flush(batch)
                        batch = []
            if batch:
                flush(batch)
        finally:
            if backend is not None:
                backend.close()
    res = JudgeResult(url, jid, v, judged, already, parts, repaired, tokens, dict(statuses))
    res.summary = judge_summary(url, jid, v)
    return res


def _length_check(backend, context: int | None, count: Callable[[str], int] | None) -> list:
    """[context, count] for the prompt-length check, or [] when the context or a token counter is unknown."""
    context = context or getattr(backend, "max_positions", None)
    tok = getattr(backend, "tokenizer", None)
    if count is None and tok is not None:
        def count(p: str) -> int:
            return len(tok(p, add_special_tokens=False)["input_ids"]) + 1  # + a BOS the backend may add

    return [int(context), count] if context and count is not None else []


def _write_part(jstore, name: str, rows: list[dict]) -> None:
    """One part, atomically: its checksum sidecar first, then the part (never over an existing part)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.storage.store import digest, sidecar_rel

    table = pa.Table.from_pylist(rows, schema=judge_schema())
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    data = buf.getvalue()
    jstore.write_json(sidecar_rel(name), dict(digest(data), rows=table.num_rows))
    try:
        jstore.create_bytes(name, data)
    except FileExistsError:
        raise JudgeError(f"judge part {jstore.uri(name)} already exists: another judge run wrote it; nothing of "
                         "this batch was written, rerun the same command") from None


# ------------------------------------------------------------------------------------------------ summary
def judge_summary(url: str, judge_id: str, version: int | None = None) -> dict:
    """How a judge's answers compare with MC's ``first_error`` on the rows of a corpus version: judged, not
    judged, agree / disagree (and how: judge earlier / later / no error / an error where MC has none),
    unparseable (null: unparseable, out of range, no majority), and the agreement rate (agree / (agree +
    disagree)) and its share of all judged rows."""
    import numpy as np

    from pipeline.storage.corpus import iter_corpus, open_manifest

    judge_id = resolve_judge(url, judge_id)
    _, m = open_manifest(url, version)
    j = load_judgments(url, judge_id)
    c = Counter()
    for b in iter_corpus(url, m["version"], ["key", "first_error"]):
        found, idx = j.lookup(b.column("key").to_pylist())
        fe = b.column("first_error").to_numpy(zero_copy_only=False).astype(np.int64)
        c["rows"] += len(fe)
        c["not_judged"] += int((~found).sum())
        null = found & (idx == Judgments.NULL)
        long = found & (idx == Judgments.TOO_LONG)
        c["unparseable"] += int(null.sum())
        c["too_long"] += int(long.sum())
        ok = found & ~null & ~long
        agree = ok & (idx == fe)
        c["agree"] += int(agree.sum())
        c["agree_no_error"] += int((agree & (fe == -1)).sum())
        dis = ok & ~agree
        c["disagree"] += int(dis.sum())
        c["judge_no_error_mc_error"] += int((dis & (idx == -1)).sum())
        c["judge_error_mc_no_error"] += int((dis & (fe == -1)).sum())
        both = dis & (idx != -1) & (fe != -1)
        c["judge_earlier"] += int((both & (idx < fe)).sum())
        c["judge_later"] += int((both & (idx > fe)).sum())
    decided = c["agree"] + c["disagree"]
    judged = decided + c["unparseable"] + c["too_long"]
    meta = judge_meta(url, judge_id)
    statuses: Counter = Counter()
    jstore = _store(judge_url(url, judge_id))
    for _, name in _part_names(jstore):
        statuses.update(_load_part(jstore, name, ["status"]).column("status").to_pylist())
    return {"judge_id": judge_id, "model": meta.get("model"), "version": m["version"], "rows": c["rows"],
            "judged": judged, "not_judged": c["not_judged"], "agree": c["agree"],
            "agree_no_error": c["agree_no_error"], "disagree": c["disagree"], "unparseable": c["unparseable"],
            "too_long": c["too_long"],
            "agreement_rate": c["agree"] / decided if decided else None,
            "agreement_rate_of_judged": c["agree"] / judged if judged else None,
            "disagreement": {k: c[k] for k in ("judge_earlier", "judge_later", "judge_no_error_mc_error",
                                               "judge_error_mc_no_error")},
            "statuses_all_parts": dict(sorted(statuses.items()))}


def judge_summaries(url: str, version: int | None = None) -> list[dict]:
    """:func:`judge_summary` of every judge of the corpus (empty without judges)."""
    return [judge_summary(url, jid, version) for jid in list_judges(url)]


# ------------------------------------------------------------------------------------------------ consensus
class ConsensusFilter:
    """``export --consensus``: keeps a corpus row only when the judge's first-error index equals MC's
    ``first_error`` (both -1 agree). Built before anything is written (an unknown judge id is a JudgeError);
    :meth:`batches` filters a stream of corpus record batches (they need :attr:`columns`)."""

    columns = ["key", "first_error"]

    def __init__(self, url: str, judge_id: str | None):
        self.judge_id = resolve_judge(url, judge_id)
        self.judgments = load_judgments(url, self.judge_id)
        self.kept = 0
        self.dropped: Counter = Counter()

    def mask(self, batch):
        """(keep mask, {reason: rows dropped}) of one record batch."""
        import numpy as np

        found, idx = self.judgments.lookup(batch.column("key").to_pylist())
        fe = batch.column("first_error").to_numpy(zero_copy_only=False).astype(np.int64)
        null = found & (idx == Judgments.NULL)
        long = found & (idx == Judgments.TOO_LONG)
        keep = found & ~null & ~long & (idx == fe)
        why = {DROP_MISSING: int((~found).sum()), DROP_NULL: int(null.sum()), DROP_TOO_LONG: int(long.sum()),
               DROP_DISAGREE: int((found & ~null & ~long & ~keep).sum())}
        return keep, {k: n for k, n in why.items() if n}

    def batches(self, batches: Iterable, counts: dict | None = None) -> Iterator:
        """``batches`` with the disagreeing, null and unjudged rows taken out. ``counts`` (export's: ``skipped``
        and ``corpus_rows``) gets the rows dropped, so that rows + sum(skipped) == corpus_rows still holds."""
        import pyarrow as pa

        for b in batches:
            keep, why = self.mask(b)
            kept = int(keep.sum())
            if counts is not None:
                self.kept += kept
                self.dropped.update(why)
                counts["corpus_rows"] = counts.get("corpus_rows", 0) + b.num_rows - kept
                sk = counts.setdefault("skipped", {})
                for k, n in why.items():
                    sk[k] = sk.get(k, 0) + n
            yield b if kept == b.num_rows else b.filter(pa.array(keep))
