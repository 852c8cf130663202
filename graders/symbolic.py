"""Symbolic equality of two parsed answers (runs inside the worker processes; imports sympy).

Rules, in order: equations (``x = 3`` vs ``3`` when the left side is a single symbol; two equations are
equal when their sides match or their differences are proportional), inequalities as sets (``1 < x \\le 2``
= ``(1, 2]``), collections (tuples ordered, sets and bare lists unordered by default, matrices by shape and
entries), sets and intervals (bracket types matter), then scalars: constants are compared numerically with
50 digits (``rel_tol``; a decimal may round a non-terminating value, see ``GraderConfig``), expressions
with symbols by ``simplify`` (or ``expand``) after a quick numeric check at fixed sample points.
"""

from __future__ import annotations

from fractions import Fraction

import sympy
from sympy.core.function import AppliedUndef
from sympy.core.relational import Relational
from sympy.matrices.expressions import MatrixExpr

from graders.compare import LENIENT_TAG, relation_values, split_choice
from graders.config import GraderConfig
from graders.numbers import Number, approx_equal
from graders.safe_parse import Parsed, ParseError, PlainList, parse
from graders.screen import lenient

_SAMPLES = (sympy.Rational(7, 13), sympy.Rational(-11, 17), sympy.Rational(23, 9), sympy.Rational(-5, 3))
_PREC = 50
_INTEGER_PARAMETERS = frozenset("knm")  # names of an integer parameter (x = \frac{\pi}{4} + k\pi)


class Undecided(Exception):
    """The comparison cannot be decided (the verdict becomes None)."""


class Comparer:
    """Compares two parsed answers under one :class:`GraderConfig`; ``rule`` names what decided."""

    def __init__(self, config: GraderConfig):
        self.cfg = config
        self.rule = ""

    # -------------------------------------------------------------------------------------------- entry
    def equal(self, a, b, num_a: Number | None = None, num_b: Number | None = None) -> bool:
        a, b = _explicit_matrix(a), _explicit_matrix(b)
        if isinstance(a, Relational) or isinstance(b, Relational):
            r = self._relations(a, b)
            if r is not None:
                return r
        if self.cfg.interval_vs_inequality:
            a, b = self._as_set(a), self._as_set(b)
        if self._is_collection(a) or self._is_collection(b):
            return self._collections(a, b)
        if isinstance(a, sympy.Set) or isinstance(b, sympy.Set):
            return self._sets(a, b)
        if isinstance(a, sympy.MatrixBase) and isinstance(b, sympy.MatrixBase):
            if a.shape != b.shape:
                self.rule = f"matrix: shapes {a.shape} vs {b.shape}"
                return False
            ok = all(self.equal(x, y) for x, y in zip(a, b, strict=True))
            self.rule = "matrix" if ok else "matrix: entries differ"
            return ok
        if isinstance(a, sympy.MatrixBase) or isinstance(b, sympy.MatrixBase):
            self.rule = "matrix vs non-matrix"
            return False
        if isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr):
            return self._scalars(a, b, num_a, num_b)
        self.rule = "structural"
        if a == b:
            return True
        if type(a) is not type(b):
            self.rule = f"different kinds ({type(a).__name__} vs {type(b).__name__})"
        return False

    # ---------------------------------------------------------------------------------------- equations
    def _relations(self, a, b) -> bool | None:
        a_eq, b_eq = isinstance(a, sympy.Equality), isinstance(b, sympy.Equality)
        fa, fb = _function_def(a), _function_def(b)
        if fa is not None or fb is not None:  # f(x) = ...: compare the bodies, renaming the variable
            if a_eq and b_eq and (fa is None or fb is None):
                pass  # different functions or a function against another equation: the general rule
            else:
                body_a, var_a = (fa[1], fa[2]) if fa else (a, None)
                body_b, var_b = (fb[1], fb[2]) if fb else (b, None)
                if var_a is None:
                    var_a = _single_symbol(body_a)
                if var_b is None:
                    var_b = _single_symbol(body_b)
                if var_a is not None and var_b is not None and var_a != var_b:
                    if not self.cfg.rename_function_variable:
                        self.rule = "function: variables differ"
                        return False
                    body_b = body_b.xreplace({var_b: var_a})
                self.rule = "function"
                return self.equal(body_a, body_b)
        if a_eq and b_eq:
            self.rule = "equation"
            if self._sides_equal(a.lhs, b.lhs) and self._sides_equal(a.rhs, b.rhs):
                return True
            if self._sides_equal(a.lhs, b.rhs) and self._sides_equal(a.rhs, b.lhs):
                return True
            if any(not isinstance(x, sympy.Expr) for x in (a.lhs, a.rhs, b.lhs, b.rhs)):
                self.rule = "equation: different"  # (x, y) = (10, 2) against x = 4/7: sides differ
                return False
            da, db = a.lhs - a.rhs, b.lhs - b.rhs
            if isinstance(da, sympy.Expr) and isinstance(db, sympy.Expr) and db != 0:
                ratio = sympy.simplify(da / db)
                if ratio.is_number and ratio != 0 and ratio.is_finite:
                    self.rule = "equation: proportional"
                    return True
            self.rule = "equation: different"
            return False
        if self.cfg.equation_lhs_symbol:
            if a_eq and not isinstance(b, Relational):
                side = self._solved_side(a)
                if side is not None:
                    return self.equal(side, b)
            if b_eq and not isinstance(a, Relational):
                side = self._solved_side(b)
                if side is not None:
                    return self.equal(a, side)
        return None

    def _sides_equal(self, x, y) -> bool:
        """One side of an equation against one of another; a side that cannot be decided is not equal (the
        equations may still be proportional)."""
        try:
            return self.equal(x, y)
        except (Undecided, TypeError, ValueError, AttributeError, NotImplementedError):
            return False

    @staticmethod
    def _solved_side(eq):  # noqa: D102
        if isinstance(eq.lhs, sympy.Symbol):
            return eq.rhs
        if isinstance(eq.rhs, sympy.Symbol) and not getattr(eq.lhs, "free_symbols", True):
            return eq.lhs
        return None

    @classmethod
    def _as_set(cls, x):
        """Univariate inequalities (and their and/or, or a list of them: ``x<1, x>2``) as a set."""
        if isinstance(x, (PlainList, sympy.FiniteSet)):
            items = x.items if isinstance(x, PlainList) else x.args
            sets = [cls._as_set(i) for i in items]
            if (
                items
                and all(isinstance(i, (Relational, sympy.And, sympy.Or)) for i in items)
                and all(isinstance(s, sympy.Set) for s in sets)
            ):
                syms = set().union(*(i.free_symbols for i in items))
                if len(syms) == 1:
                    return sympy.Union(*sets)
            return x
        if isinstance(x, (Relational, sympy.And, sympy.Or)) and not isinstance(x, sympy.Equality):
            syms = x.free_symbols
            if len(syms) == 1:
                try:
                    return x.as_set()
                except (NotImplementedError, TypeError, ValueError):
                    return x
        return x

    # -------------------------------------------------------------------------------------- collections
    @staticmethod
    def _is_collection(x) -> bool:
        return isinstance(x, (PlainList, sympy.Tuple, sympy.FiniteSet)) or (
            isinstance(x, sympy.MatrixBase) and 1 in x.shape
        )

    def _items(self, x) -> tuple[list, bool | None]:
        """(items, ordered?) -- None for 'ordered' means a scalar wrapped as a 1-element collection."""
        if isinstance(x, PlainList):
            return list(x.items), x.ordered or self.cfg.comma_list == "ordered"
        if isinstance(x, sympy.Tuple):
            return list(x.args), self.cfg.ordered_tuples
        if isinstance(x, sympy.FiniteSet):
            return list(x.args), False
        if isinstance(x, sympy.MatrixBase):
            return list(x), True
        if (
            isinstance(x, sympy.Interval)
            and not (x.left.is_infinite or x.right.is_infinite)
            and x.left_open
            and x.right_open
        ):
            return [x.left, x.right], self.cfg.ordered_tuples  # (1, 2) is also the pair (1, 2)
        return [x], None

    def _collections(self, a, b) -> bool:
        a_set, b_set = isinstance(a, sympy.FiniteSet), isinstance(b, sympy.FiniteSet)
        if a_set != b_set and isinstance(b if a_set else a, (sympy.Tuple, sympy.Interval)):
            if self.cfg.tuple_vs_set == "differ" or (
                self.cfg.tuple_vs_set == "auto" and not a_set and not _ascending(self._items(a)[0])
            ):  # a gold tuple written out of increasing order, (3, 1), is a point: order matters
                self.rule = "tuple vs set"  # (3, 1) is ordered, {1, 3} is not: different objects
                return False
            ok = self._unordered(self._items(a)[0], self._items(b)[0])
            self.rule = "tuple vs set: same values" if ok else "tuple vs set: values differ"
            return ok
        if isinstance(a, sympy.MatrixBase) and isinstance(b, sympy.MatrixBase) and a.shape != b.shape:
            self.rule = f"matrix: shapes {a.shape} vs {b.shape}"
            return False
        ia, oa = self._items(a)
        ib, ob = self._items(b)
        if oa is None or ob is None:  # a scalar vs a collection: equal only to a 1-element collection
            if len(ia) != 1 or len(ib) != 1:
                self.rule = "collection vs single value"
                return False
            return self.equal(ia[0], ib[0])
        ordered = oa and ob
        if ordered and len(ia) != len(ib):
            self.rule = f"collections of different sizes ({len(ia)} vs {len(ib)})"
            return False
        if ordered:
            for x, y in zip(ia, ib, strict=True):
                if not self.equal(x, y):
                    self.rule = "ordered: element differs"
                    return False
            self.rule = "ordered collection"
            return True
        ok = self._unordered(ia, ib)
        if ok:
            self.rule = "unordered collection"
        return ok

    def _unordered(self, ia: list, ib: list) -> bool:
        ia, ib = _distinct(ia), _distinct(ib)  # unordered: a set, duplicates count once
        if len(ia) != len(ib):
            self.rule = f"sets of different sizes ({len(ia)} vs {len(ib)})"
            return False
        unmatched = list(ib)
        for x in ia:
            for j, y in enumerate(unmatched):
                if self.equal(x, y):
                    del unmatched[j]
                    break
            else:
                self.rule = "unordered: no match for an element"
                return False
        return True

    # --------------------------------------------------------------------------------------------- sets
    def _sets(self, a, b) -> bool:
        if not (isinstance(a, sympy.Set) and isinstance(b, sympy.Set)):
            self.rule = "set vs non-set"
            return False
        if isinstance(a, sympy.Interval) and isinstance(b, sympy.Interval):
            if (a.left_open, a.right_open) != (b.left_open, b.right_open):
                self.rule = "interval: bracket types differ"
                return False
            ok = self.equal(a.left, b.left) and self.equal(a.right, b.right)
            self.rule = "interval" if ok else "interval: endpoints differ"
            return ok
        self.rule = "set"
        if a == b:
            return True
        if isinstance(a, sympy.Union) and isinstance(b, sympy.Union) and len(a.args) == len(b.args):
            return all(self._sets(x, y) for x, y in zip(a.args, b.args, strict=True))
        diff = a.symmetric_difference(b).is_empty
        if diff is None:
            raise Undecided("cannot decide set equality")
        return bool(diff)

    # ------------------------------------------------------------------------------------------ scalars
    def _scalars(self, a: sympy.Expr, b: sympy.Expr, num_a: Number | None, num_b: Number | None) -> bool:
        if a == b:
            self.rule = "symbolic: identical"
            return True
        if (
            isinstance(a, AppliedUndef) and isinstance(b, AppliedUndef) and a.func == b.func
            and len(a.args) == len(b.args) == 1 and all(isinstance(x.args[0], sympy.Symbol) for x in (a, b))
        ):  # fmt: skip
            self.rule = "function: renamed variable"  # f(x) vs f(y): the same function
            return self.cfg.rename_function_variable or a == b
        if not a.free_symbols and not b.free_symbols:
            return self._constants(a, b, num_a, num_b)
        fa, fb = a.free_symbols, b.free_symbols
        if len(fa) == 1 and len(fb) == 1 and fa != fb and {str(s) for s in fa | fb} <= _INTEGER_PARAMETERS:
            b = b.xreplace({next(iter(fb)): next(iter(fa))})  # k\pi vs n\pi: one integer parameter, renamed
            if a == b:
                self.rule = "symbolic: renamed integer parameter"
                return True
        if self.cfg.symbolic == "expand":
            self.rule = "symbolic: expand"
            return sympy.expand(a - b) == 0
        diff = a - b
        if diff == 0:
            self.rule = "symbolic: identical"
            return True
        syms = sorted(a.free_symbols | b.free_symbols, key=str)
        for k in range(2):
            point = {s: _SAMPLES[(i + k) % len(_SAMPLES)] for i, s in enumerate(syms)}
            va, vb = a.xreplace(point).evalf(30), b.xreplace(point).evalf(30)
            if not (va.is_number and vb.is_number and va.is_finite and vb.is_finite):
                continue  # a pole or an unevaluated function: no evidence either way
            if bool(abs(va - vb) > 1e-12 * (1 + abs(va))):
                self.rule = "symbolic: differ at a sample point"
                return self._equal_for_positive(a, b, syms)
        self.rule = "symbolic: simplify"
        if sympy.simplify(diff) == 0:
            return True
        eq = diff.equals(0)
        if eq is None:
            raise Undecided("symbolic equivalence undecided")
        return bool(eq)

    def _equal_for_positive(self, a, b, syms) -> bool:
        """``\\sqrt{1/n}`` vs ``\\frac{1}{\\sqrt{n}}``: equal where the variables are positive, which is what a
        written radical of a variable assumes; only for expressions with a fractional power and no ``|x|``."""
        if a.has(sympy.Abs) or b.has(sympy.Abs):
            return False
        if not any(not p.exp.is_integer for e in (a, b) for p in e.atoms(sympy.Pow)):
            return False
        for k in range(2):
            point = {s: abs(_SAMPLES[(i + k) % len(_SAMPLES)]) for i, s in enumerate(syms)}
            va, vb = a.xreplace(point).evalf(30), b.xreplace(point).evalf(30)
            if not (va.is_number and vb.is_number) or bool(abs(va - vb) > 1e-12 * (1 + abs(va))):
                return False
        pos = {s: sympy.Symbol(s.name, positive=True) for s in syms}
        if sympy.simplify(a.xreplace(pos) - b.xreplace(pos)) == 0:
            self.rule = "symbolic: equal for positive variables"
            return True
        return False

    def _constants(self, a, b, num_a: Number | None, num_b: Number | None) -> bool:
        num_a = num_a or _as_decimal(a)
        num_b = num_b or _as_decimal(b)
        va, vb = a.evalf(_PREC), b.evalf(_PREC)
        if not (va.is_number and vb.is_number):
            raise Undecided("cannot evaluate")
        if va.is_infinite or vb.is_infinite or va.has(sympy.zoo, sympy.nan) or vb.has(sympy.zoo, sympy.nan):
            self.rule = "numeric: infinite"
            return va == vb
        diff = abs(va - vb)
        scale = max(abs(va), abs(vb))
        self.rule = "numeric: equal"
        if diff <= self.cfg.rel_tol * scale or diff == 0:
            return True
        self.rule = "numeric: different values"
        for dec, other, other_num in ((num_a, vb, num_b), (num_b, va, num_a)):
            if dec is None or dec.frac_digits is None or dec.sig_digits < self.cfg.approx_min_sig_digits:
                continue
            if other_num is not None and other_num.frac_digits is not None:
                continue  # two decimals: compared exactly
            exact = (
                other_num.value if other_num is not None else _to_fraction(other) if other.is_real else None
            )
            if exact is not None and approx_equal(dec, exact, self.cfg.approx_min_sig_digits):
                self.rule = "numeric: rounded decimal"
                return True
        return False


def _ascending(items: list) -> bool:
    """The items are real numbers written in increasing order (or not all numbers: no order to read)."""
    try:
        if not all(getattr(x, "is_number", False) and x.is_real for x in items):
            return True
        return all(bool(x < y) for x, y in zip(items, items[1:]))
    except TypeError:
        return True


def _explicit_matrix(x):
    """A matrix expression of explicit matrices (``A + B``, ``A B``) evaluated to its matrix."""
    if isinstance(x, MatrixExpr) and not isinstance(x, sympy.MatrixBase):
        try:
            return x.doit().as_explicit()
        except (TypeError, ValueError, AttributeError, NotImplementedError, sympy.ShapeError):
            return x
    return x


def _distinct(items: list) -> list:
    out: list = []
    for x in items:
        if not any(x == y for y in out):
            out.append(x)
    return out


def _as_decimal(x) -> Number | None:
    """A terminating rational inside a structure (``2.6667`` in ``(0.6, 2.6667]``) as a decimal Number, so
    that it may stand for a rounded value like a top-level decimal does."""
    if not isinstance(x, sympy.Rational) or x.q == 1:
        return None
    q, twos, fives = int(x.q), 0, 0
    while q % 2 == 0:
        q, twos = q // 2, twos + 1
    while q % 5 == 0:
        q, fives = q // 5, fives + 1
    if q != 1:
        return None
    digits = max(twos, fives)
    text = str(int(abs(Fraction(int(x.p), int(x.q)) * 10**digits)))
    return Number(Fraction(int(x.p), int(x.q)), frac_digits=digits, sig_digits=len(text.lstrip("0")))


def _function_def(x):
    """``(name, body, variable)`` of ``f(t) = body`` (one-variable function definition), else None."""
    if not isinstance(x, sympy.Equality):
        return None
    lhs = x.lhs
    if isinstance(lhs, AppliedUndef) and len(lhs.args) == 1 and isinstance(lhs.args[0], sympy.Symbol):
        return str(lhs.func), x.rhs, lhs.args[0]
    return None


def _single_symbol(expr):
    syms = getattr(expr, "free_symbols", set())
    return next(iter(syms)) if len(syms) == 1 else None


def _to_fraction(v) -> Fraction:
    """A 50-digit sympy Float of a non-rational value as a Fraction that never terminates."""
    r = sympy.Rational(v)
    # the value is irrational or non-terminating; its 50-digit image must not look terminating
    return Fraction(int(r.p), int(r.q)) + Fraction(1, 3 * 10**60)


def _candidates(p: Parsed, policy: str) -> list:
    if not p.percent:
        return [p.value]
    if policy == "number":
        return [p.value]
    frac = p.value / 100 if isinstance(p.value, sympy.Expr) else p.value
    return [frac] if policy == "fraction" else [p.value, frac]


def _parse_leniently(answer: str) -> Parsed | None:
    loose = lenient(answer)
    if loose is None:
        return None
    try:
        return parse(loose)
    except ParseError:
        return None


def sympy_verdict(gold: str, answer: str, config: GraderConfig) -> tuple[bool | None, str]:
    """Decide whether two normalized answers are equal; ``(None, reason)`` when it cannot be decided."""
    answer = split_choice(gold, answer)[1] or answer
    if config.equation_lhs_symbol:
        gold, answer = relation_values(gold, answer)
    try:
        g = parse(gold)
    except ParseError as e:
        return None, f"gold unparseable: {e}"
    tag = ""
    try:
        a = parse(answer)
    except ParseError as e:
        a = _parse_leniently(answer)  # a second, looser reading (see graders.screen.lenient)
        if a is None:
            return None, f"answer unparseable: {e}"
        tag = LENIENT_TAG
    cmp = Comparer(config)
    undecided = None
    first_rule = None
    for gv in _candidates(g, config.percent):
        for av in _candidates(a, config.percent):
            try:
                if cmp.equal(gv, av, g.number, a.number):
                    return True, cmp.rule + tag
            except Undecided as e:
                undecided = str(e)
            except (TypeError, ValueError, AttributeError, NotImplementedError) as e:
                undecided = f"comparison failed: {type(e).__name__}"
            first_rule = first_rule or cmp.rule
    if undecided is not None:
        return None, undecided
    return False, (first_rule or "different") + tag
