"""Pluggable graders: the :class:`Grader` protocol, the built-ins and a name registry.

Built-ins: ``"sympy"`` (default; every rule of :mod:`graders.compare` and :mod:`graders.symbolic`) and
``"exact"`` (the extracted answer and the gold are equal after :func:`graders.normalize.normalize`;
never None except when no answer is found). Register your own with :func:`register_grader`: either an
object with ``name``, ``version`` and ``grade_batch(pairs, config)``, or a plain function
``fn(gold, response, config) -> Verdict``. A grader that also reads the problem text is registered with
``reads_problems=True`` (the registry's declaration, :func:`reads_problems`) and gets (gold, response, problem)
triples (problem may be None); others get (gold, response) pairs. :func:`grader_identity` is what a corpus records: the version plus the non-default
policy options of the :class:`GraderConfig` it grades with.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Protocol, runtime_checkable

from graders.compare import compare_fast, compare_numbers, thousands_written
from graders.config import GraderConfig
from graders.extract import extract_answer, prepare_gold
from graders.normalize import normalize, split_top_level
from graders.numbers import parse_number
from graders.pairs import check_pair as _check_pair
from graders.pairs import check_triple as _check_triple
from graders.verdict import (
    CRASH,
    NO_ANSWER,
    NO_ANSWER_KIND,
    REJECTED,
    UNREADABLE,
    VERDICT,
    Verdict,
    kind_of,
)

SYMPY_GRADER_VERSION = "sympy-3"
EXACT_GRADER_VERSION = "exact-1"
_NOT_CACHED = ("timeout", "worker crashed", "out of memory")


@runtime_checkable
class Grader(Protocol):
    """Grades (gold, response) pairs; ``version`` changes whenever its verdicts may change."""

    name: str
    version: str

    def grade_batch(self, pairs: Sequence[tuple[str, str]], config: GraderConfig) -> list[Verdict]: ...


@runtime_checkable
class WarmsUp(Protocol):
    """A grader with something worth starting before its first batch (the sympy grader: its worker processes).
    A labeling worker calls :func:`warm_grader` while its model loads."""

    def warm(self, workers: int) -> None: ...


class VerdictCache:
    """A thread-safe LRU of (correct, reason) keyed by (grader, normalized gold, normalized answer, config)."""

    def __init__(self, max_size: int = 200_000):
        self.max_size = max_size
        self._d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key):
        with self._lock:
            v = self._d.get(key)
            if v is None:
                self.misses += 1
            else:
                self._d.move_to_end(key)
                self.hits += 1
            return v

    def put(self, key, value) -> None:
        if value[1] in _NOT_CACHED:
            return
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self.max_size:
                self._d.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._d)


CACHE = VerdictCache()


def with_problems(pairs: Sequence, problems: Sequence[str | None] | None) -> list:
    """``pairs`` as (gold, response, problem) triples (``problems`` given) or as they are."""
    if problems is None:
        return list(pairs)
    if len(problems) != len(pairs):
        raise ValueError(f"problems: expected one per pair ({len(pairs)}), got {len(problems)}")
    return [(*_check_pair(i, p), q) for i, (p, q) in enumerate(zip(pairs, problems))]


@lru_cache(maxsize=4096)
def _config_for(config: GraderConfig, problem: str | None) -> GraderConfig:
    return config.for_problem(problem)


def grader_identity(grader: str | Grader = "sympy", config: GraderConfig | None = None) -> str:
    """What a corpus records of its grader (a registered name or the grader itself): the grader's version, plus
    ``+`` and the policy options that differ from their defaults (:meth:`GraderConfig.policy_id`), so that a
    policy change never mixes verdicts; the bare version under the default policies."""
    version = (get_grader(grader) if isinstance(grader, str) else grader).version
    policy = (config or GraderConfig()).policy_id()
    return f"{version}+{policy}" if policy else version


@lru_cache(maxsize=1 << 14)
def _prepared_gold(gold: str) -> tuple[str, bool]:
    g = prepare_gold(gold)
    if len(g) > 100_000:
        g = g[:100_000]  # refused later by the size pre-screen; never normalized whole
    g = normalize(g)
    return g, parse_number(g) is not None


@lru_cache(maxsize=1 << 14)
def _text_gold(g_norm: str) -> bool:
    from graders.screen import is_text_answer

    return g_norm == "\\emptyset" or (is_text_answer(g_norm) and g_norm.casefold() not in ("yes", "no"))


@lru_cache(maxsize=1 << 14)
def _gold_parts(g_norm: str) -> int:
    """How many answers a gold written as a bare list (``2, 3``, ``a=2, b=3``) asks for (1 otherwise)."""
    if "," not in g_norm or g_norm[:1] in "([{\\":
        return 1
    return len(split_top_level(g_norm))


_NUM_RE = re.compile(r"(?<![\d.])-?\d+(?:\.\d+)?(?![\d.])")
_OPERATOR_RE = re.compile(r"[+*/^=<>!]|\\[a-zA-Z]+|\d\s*-|\(|\)")


def _numbers_all_differ(g_norm: str, a_norm: str, config: GraderConfig) -> bool:
    """The gold is a plain number and the (unreadable) answer is prose with plain numbers only -- no operator,
    no command, nothing that could combine them -- none of which is the gold: ``between 3 and 5`` against 4."""
    g = parse_number(g_norm)
    if g is None:
        return False
    text = re.sub(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}", r"\1", a_norm).replace("%", "")
    nums = _NUM_RE.findall(text)
    if not nums or len(nums) > 6 or _OPERATOR_RE.search(_NUM_RE.sub(" ", text)):
        return False
    for n in nums:
        a = parse_number(n)
        if a is None or compare_numbers(g, a, config)[0]:
            return False
    return True


_DEGREE_MARK_RE = re.compile(r"\\circ|°|\\degree")


def _degrees_as_radians(gold: str, answer: str, g_norm: str, a_norm: str) -> tuple[str, str]:
    """An angle in degrees against one in radians (``90^\\circ`` vs ``\\frac{\\pi}{2}``): the degrees, in radians."""
    g_deg, a_deg = bool(_DEGREE_MARK_RE.search(gold)), bool(_DEGREE_MARK_RE.search(answer))
    if g_deg and not a_deg and "\\pi" in a_norm and parse_number(g_norm) is not None:
        return f"\\frac{{{g_norm}}}{{180}}\\pi", a_norm
    if a_deg and not g_deg and "\\pi" in g_norm and parse_number(a_norm) is not None:
        return g_norm, f"\\frac{{{a_norm}}}{{180}}\\pi"
    return g_norm, a_norm


@runtime_checkable
class ChecksGolds(Protocol):
    """A grader that can say, before any rollout, which gold answers it cannot read (the sympy grader:
    :func:`check_golds`). Input validation runs it on every row's gold (pipeline.run.plan.gold_check)."""

    def check_golds(self, golds: Sequence[str], config: GraderConfig | None = None) -> list[str | None]: ...


class SympyGrader:
    """The default grader: in-process fast path, then sympy in killable worker processes.

    ``grade_batch`` never raises for string inputs: a bug on some exotic input becomes a ``None`` verdict
    whose reason names the error, so one strange continuation cannot stop a labeling run.
    """

    name = "sympy"
    version = SYMPY_GRADER_VERSION

    def check_golds(self, golds: Sequence[str], config: GraderConfig | None = None) -> list[str | None]:
        return check_golds(golds, config)

    def warm(self, workers: int) -> None:
        """Start the ``workers`` grader processes now: they load sympy in the background."""
        from graders.pool import get_pool

        get_pool(workers).warm()

    def _fast(self, gold: str, response: str, config: GraderConfig):
        """``(verdict, None)`` when decided in-process, else ``(None, (key, extracted))`` for the workers."""
        g_norm, _ = _prepared_gold(gold)
        yes_no = g_norm.casefold() in ("yes", "no")
        parts = _gold_parts(g_norm)
        extracted = extract_answer(
            response, fallback=config.last_number_fallback, yes_no=yes_no, parts=parts, text_gold=_text_gold(g_norm)
        )
        if extracted is None:
            return Verdict(False, NO_ANSWER, None, why=NO_ANSWER_KIND), None
        if len(extracted) > 20 * config.max_answer_chars:
            return Verdict(None, f"too large: {len(extracted)} characters", extracted[:200], why=REJECTED), None
        a_norm = normalize(extracted)
        if "\\pi" in a_norm or "\\pi" in g_norm:
            g_norm, a_norm = _degrees_as_radians(gold, extracted, g_norm, a_norm)
        if not a_norm:  # "$$", "\boxed{\text{}}": nothing written where the answer goes
            return Verdict(False, NO_ANSWER, None, why=NO_ANSWER_KIND), None
        grouped = thousands_written(gold) or thousands_written(extracted)
        key = (self.name, g_norm, a_norm, config, grouped)
        hit = CACHE.get(key)
        if hit is None:
            hit = compare_fast(g_norm, a_norm, config, grouped)
            if hit is not None:
                CACHE.put(key, hit)
        if hit is not None:
            return self._verdict(hit, extracted, response, g_norm, config), None
        return None, (key, extracted)

    @staticmethod
    def _verdict(res: tuple, extracted: str, response: str, g_norm: str, config: GraderConfig) -> Verdict:
        """The verdict of a comparison result, with its kind stated; an answer that cannot be read is no
        answer when it was only guessed (no box, no answer phrase: the unmarked fallback of a response that
        was cut off mid-formula), and wrong when no reading of it can equal a numeric gold."""
        correct, reason = res
        if correct is not None:
            return Verdict(correct, reason, extracted, why=VERDICT)
        why = kind_of(None, reason, extracted)
        if why == UNREADABLE:
            if extract_answer(response, fallback=False, parts=_gold_parts(g_norm)) is None:
                return Verdict(False, NO_ANSWER, None, why=NO_ANSWER_KIND)
            if _numbers_all_differ(g_norm, normalize(extracted), config):
                return Verdict(False, "numeric: no number of the answer is the gold", extracted, why=VERDICT)
        return Verdict(None, reason, extracted, why=why)

    def grade_batch(
        self, pairs: Sequence[tuple], config: GraderConfig, problems: Sequence[str | None] | None = None
    ) -> list[Verdict]:
        """Verdicts of (gold, response) pairs or (gold, response, problem) triples (or pairs and ``problems``)."""
        from graders.pool import get_pool

        pairs = with_problems(pairs, problems)
        out: list[Verdict | None] = [None] * len(pairs)
        todo: dict[tuple, list[tuple[int, str]]] = {}
        for i, pair in enumerate(pairs):
            gold, response, problem = _check_triple(i, pair)
            cfg = _config_for(config, problem)
            try:
                verdict, pending = self._fast(gold, response, cfg)
            except Exception as e:  # noqa: BLE001 - never let one input stop the batch
                reason = f"grader error: {type(e).__name__}: {e}"[:200]
                verdict, pending = Verdict(None, reason, None, why=CRASH), None
            if verdict is not None:
                out[i] = verdict
            else:
                key, extracted = pending
                todo.setdefault(key, []).append((i, extracted))
        if todo:
            keys = list(todo)
            results = get_pool(config.workers).run([(k[1], k[2], k[3]) for k in keys], config.timeout_s)
            for key, res in zip(keys, results, strict=True):
                CACHE.put(key, res)
                for i, extracted in todo[key]:
                    gold, response, _ = _check_triple(i, pairs[i])
                    out[i] = self._verdict(res, extracted, response, key[1], key[3])
        return out  # type: ignore[return-value]


class ExactGrader:
    """Normalized string equality of the extracted answer and the gold (no math)."""

    name = "exact"
    version = EXACT_GRADER_VERSION

    def grade_batch(self, pairs: Sequence[tuple[str, str]], config: GraderConfig) -> list[Verdict]:
        out = []
        for i, pair in enumerate(pairs):
            gold, response = _check_pair(i, pair)
            g_norm, g_is_number = _prepared_gold(gold)
            extracted = extract_answer(response, fallback=config.last_number_fallback)
            if extracted is None:
                out.append(Verdict(False, NO_ANSWER, None, why=NO_ANSWER_KIND))
            elif normalize(extracted) == g_norm:
                out.append(Verdict(True, "string match", extracted, why=VERDICT))
            else:
                out.append(Verdict(False, "strings differ", extracted, why=VERDICT))
        return out


class FunctionGrader:
    """Adapts ``fn(gold, response, config) -> Verdict`` to the :class:`Grader` protocol."""

    def __init__(self, name: str, fn: Callable[[str, str, GraderConfig], Verdict], version: str):
        self.name, self.version, self._fn = name, version, fn

    def grade_batch(self, pairs: Sequence[tuple[str, str]], config: GraderConfig) -> list[Verdict]:
        out = []
        for i, pair in enumerate(pairs):
            v = self._fn(*_check_pair(i, pair), config)
            if not isinstance(v, Verdict):
                raise TypeError(
                    f"grader {self.name!r} returned {type(v).__name__} for pair {i}, expected Verdict"
                )
            out.append(v)
        return out


_REGISTRY: dict[str, Grader] = {"sympy": SympyGrader(), "exact": ExactGrader()}
# the graders whose grade_batch takes (gold, response, problem) triples: the problem decides wording policies
_READS_PROBLEMS: set[str] = {"sympy"}


def register_grader(
    name: str,
    grader: Grader | Callable,
    *,
    version: str | None = None,
    overwrite: bool = False,
    reads_problems: bool = False,
) -> Grader:
    """Make ``grader`` available as ``get_grader(name)`` (and ``mcprm grade --grader name``).

    ``reads_problems=True``: its ``grade_batch`` takes (gold, response, problem) triples (a plain function never
    does: it is called with (gold, response, config))."""
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"grader name must be letters, digits, '-' or '_', got {name!r}")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"a grader named {name!r} is already registered; pass overwrite=True to replace it")
    if not hasattr(grader, "grade_batch"):
        if not callable(grader):
            raise TypeError(
                "grader must have grade_batch(pairs, config) or be a function (gold, response, config)"
            )
        if reads_problems:
            raise TypeError("reads_problems=True needs a grader object with grade_batch(triples, config); a "
                            "function grader is called with (gold, response, config)")
        grader = FunctionGrader(name, grader, version or f"{name}-1")
    elif version is not None:
        grader.version = version
    _REGISTRY[name] = grader
    if reads_problems:
        _READS_PROBLEMS.add(name)
    else:
        _READS_PROBLEMS.discard(name)
    return grader


def reads_problems(name: str) -> bool:
    """Whether grader ``name`` was declared to take (gold, response, problem) triples (:func:`register_grader`)."""
    return name in _READS_PROBLEMS


def get_grader(name: str = "sympy") -> Grader:
    """The grader registered under ``name`` (``math-verify`` registers itself on first use, if installed)."""
    if name == "math-verify" and name not in _REGISTRY:
        from graders.mathverify import MathVerifyGrader

        _REGISTRY[name] = MathVerifyGrader()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no grader named {name!r}; available: {', '.join(available_graders())}") from None


def warm_grader(name: str, workers: int) -> None:
    """Start what grader ``name`` needs before its first batch (:class:`WarmsUp`); nothing for the others."""
    grader = get_grader(name)
    if isinstance(grader, WarmsUp):
        grader.warm(workers)


def available_graders() -> list[str]:
    """Registered grader names (``math-verify`` is listed when the package is installed)."""
    import importlib.util

    names = set(_REGISTRY)
    if importlib.util.find_spec("math_verify") is not None:
        names.add("math-verify")
    return sorted(names)


def check_golds(golds: Sequence[str], config: GraderConfig | None = None) -> list[str | None]:
    """For each gold answer, why the default grader cannot read it (``None`` when it can).

    Run before any rollout so that an unreadable gold is reported once per row, not discovered later as
    thousands of ungradable verdicts. Cheap forms (numbers, words) are decided in-process; the rest is
    parsed in the killable sympy workers under the usual time limit.
    """
    from graders.screen import check_math, is_text_answer, prescreen

    config = config or GraderConfig()
    out: list[str | None] = [None] * len(golds)
    todo: dict[str, list[int]] = {}
    for i, gold in enumerate(golds):
        if not isinstance(gold, str):
            out[i] = f"gold answer must be a string, got {type(gold).__name__}"
            continue
        g, is_number = _prepared_gold(gold)
        if not g:
            out[i] = "empty gold answer"
        elif is_number or is_text_answer(g):
            continue
        elif why := prescreen(g, config.max_answer_chars) or check_math(g):
            out[i] = why
        else:
            todo.setdefault(g, []).append(i)
    if todo:
        from graders.pool import get_pool

        keys = list(todo)
        results = get_pool(config.workers).run([(g, g, config) for g in keys], config.timeout_s)
        for g, (ok, reason) in zip(keys, results, strict=True):
            if ok is not True:
                for i in todo[g]:
                    out[i] = reason
    return out
