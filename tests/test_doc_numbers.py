"""Measured numbers live in BENCHMARKS.md alone.

- README.md may quote a measurement only where the same paragraph links the BENCHMARKS.md section that holds it,
  with the same value (README's rounding of the section's number);
- docs/*.md quote none: they link to BENCHMARKS.md's sections instead; what looks like a measurement there and is
  not one (a setting, a timeout, a fact of a file) is in ALLOWED below with the reason;
- every link into BENCHMARKS.md (or another Markdown page) with an #anchor names a heading of that page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "BENCHMARKS.md"
README = ROOT / "README.md"
# docs/architecture.md is a map of the code, not of results; it is held to the same rule all the same
DOCS = sorted((ROOT / "docs").glob("*.md"))

# --- what looks measured ----------------------------------------------------------------------------------------

NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
RATE = r"(?:k\s)?(?:tok/s|tokens/s|verdicts/s|rollouts/s|solutions/s|rows/s)"
TIME = r"(?:s|ms|us|µs|min|minutes?|seconds?|h|hours?)(?![\w/-])"
SIZE = r"(?:GB|MB|GiB|MiB|KB)(?!\w)"
UNIT = rf"(?:x(?!\w)|%|\s?{RATE}|\s?GPU-s(?!\w)|\s?{TIME}|\s?{SIZE})"
# a number right after one of these names is that metric's value
METRIC = re.compile(r"(?:F1|AUROC|ECE|MFU|Brier|accuracy|efficiency)\W{0,3}$")
TOKEN = re.compile(
    rf"(?<![\w.:/=+#-])[-+±]?(?P<a>{NUM})(?:\s?[-–]\s?(?P<b>{NUM}))?(?P<unit>{UNIT})?(?!\d|[.,]\d|-\d\d-|:\d)"
)
# "95% interval", "99% CI": a confidence level chosen, not a result
LEVEL = re.compile(
    r"\s*(?:\(?(?:exact|Wilson|Clopper-Pearson|bootstrap|paired|percentile)\s)*(?:interval|CI|upper|lower|confidence)"
)
# a number after one of these names is its version
VERSIONED = re.compile(
    r"(?:torch|Python|CUDA|cuDNN|nvcc|vLLM|vllm|SGLang|sglang|Ray|transformers|tokenizers|triton|schema)\s?$"
)
CODE_MARK = "\x00"  # where inline code stood
OPTION_MARK = "\x01"  # where an option's or a setting's name stood (`--k`, `bisect_fraction`): a value after it is a setting


@dataclass(frozen=True)
class Hit:
    text: str  # the number as written, range and unit included
    values: tuple[str, ...]  # each number of it, commas removed
    unit: str
    start: int  # offsets in the normalized text
    end: int


def normalize(text: str, keep_code_comments: bool = False) -> str:
    """Prose only, one space for every run of white space: code blocks, inline code and link targets out.

    With keep_code_comments, the comments of fenced code blocks (after `#`) stay, as prose."""

    def block(m: re.Match) -> str:
        if not keep_code_comments:
            return " "
        return " ".join(line.split("#", 1)[1] for line in m.group(0).splitlines() if "#" in line)

    text = re.sub(r"```.*?```", block, text, flags=re.S)
    text = re.sub(r"`-{1,2}[\w-]+`|`[a-z_]+:?`", OPTION_MARK, text)
    text = re.sub(r"`[^`\n]*(?:\n[^`\n]*)?`", CODE_MARK, text)  # inline code may wrap once
    text = re.sub(r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)", "]", text)
    text = re.sub(r"<[^>\n]+>", " ", text)
    return re.sub(r"\s+", " ", text)


def measured(text: str) -> list[Hit]:
    """Numbers in normalized prose that look like measurements: with a unit of time, rate, size, ratio (`x`) or
    share (`%`), right after a metric's name, or decimals. Not: versions, dates, names (`0.5B`, `Qwen2.5`), a
    value right after an option's name or after "default", confidence levels."""
    hits = []
    for m in TOKEN.finditer(text):
        a, b, unit = m.group("a"), m.group("b"), (m.group("unit") or "").strip()
        before, after = text[max(0, m.start() - 14) : m.start()], text[m.end() :]
        if not unit and re.match(r"[A-Za-z]|\s?[MBKGk]\b|\.\d", after):
            continue  # a name or a magnitude (0.5B, 1.06 M parameters) or a version's first part
        if re.search(rf"{OPTION_MARK}\s?\(?$|default:?\s?\(?$|[=<>≤≥]\s?$", before):
            continue  # an option's value, a documented default, a bound in a definition
        if unit == "%" and not b and LEVEL.match(after):
            continue
        if not unit and VERSIONED.search(before):
            continue
        if unit == "x" and re.match(r"\s?(?:H100|H200|A100|GPU)", after):
            continue  # a machine: "2x H100"
        if unit or METRIC.search(before) or "." in a or (b and "." in b):
            nums = tuple(n.replace(",", "") for n in (a, b) if n)
            hits.append(Hit(m.group(0).strip(), nums, unit, m.start(), m.end()))
    return hits


# --- BENCHMARKS.md: its sections and anchors --------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation out, spaces to hyphens."""
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s.replace("`", ""))
    return s.replace(" ", "-")


def sections(text: str) -> dict[str, str]:
    """anchor -> the section's text, from its heading to the next heading of the same or a higher level (so a
    section holds its subsections). A repeated heading gets -1, -2, ... as on GitHub."""
    lines = text.splitlines()
    heads, seen, in_code = [], {}, False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            in_code = not in_code
        m = None if in_code else re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            heads.append((i, len(m.group(1)), base if n == 0 else f"{base}-{n}"))
    out = {}
    for j, (i, level, anchor) in enumerate(heads):
        end = next((k for k, lv, _ in heads[j + 1 :] if lv <= level), len(lines))
        out[anchor] = "\n".join(lines[i:end])
    return out


def numbers(text: str) -> list[Decimal]:
    """Every number a text holds, code and tables included (commas out)."""
    return [Decimal(n.replace(",", "")) for n in re.findall(NUM, text)]


def matches(value: str, unit: str, pool: list[Decimal]) -> bool:
    """`value` is the pool's number as README writes it: equal, or that number rounded (half up) to README's
    decimals; minutes are also read as the section's seconds rounded to README's minutes."""
    v = Decimal(value)
    q = Decimal(1).scaleb(v.as_tuple().exponent)
    cands = list(pool)
    if unit.startswith("min"):
        cands += [p / 60 for p in pool]
    return any(p == v or p.quantize(q, rounding=ROUND_HALF_UP) == v for p in cands)


# --- README: each quoted number against the rows its paragraph links --------------------------------------------

BENCH_LINK = re.compile(r"\]\(BENCHMARKS\.md(?:#([^)\s]*))?\)")

# README numbers that look measured and are not (reason each)
README_ALLOWED: dict[str, str] = {
    "workers warm for 10 minutes": "the value `--keep-warm 10m` in the same sentence sets",
}


def blocks(text: str) -> list[str]:
    """Paragraphs and list items (a list item with its continuation lines), fenced code blocks apart."""
    out, cur, in_code = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            if in_code:
                out.append("\n".join(cur + [line]))
                cur = []
            elif cur:
                out.append("\n".join(cur))
                cur = [line]
                in_code = not in_code
                continue
            else:
                cur = [line]
            in_code = not in_code
            continue
        if in_code:
            cur.append(line)
        elif not line.strip() or re.match(r"\s*(?:[-*]|\d+\.)\s", line) or line.startswith("#"):
            if cur:
                out.append("\n".join(cur))
            cur = [line] if line.strip() else []
        else:
            cur.append(line)
    if cur:
        out.append("\n".join(cur))
    return out


def allowed_spans(text: str, phrases) -> list[tuple[int, int]]:
    spans = []
    for p in phrases:
        spans += [(m.start(), m.end()) for m in re.finditer(re.escape(p), text)]
    return spans


def readme_problems(readme: str, bench: str, allowed: dict[str, str] | None = None) -> list[str]:
    """Each README number that looks measured and is not in the BENCHMARKS.md sections its paragraph links (a code
    block's comment, which cannot link, against the whole page), said with where it stands."""
    allowed = README_ALLOWED if allowed is None else allowed
    secs = sections(bench)
    whole = numbers(bench)
    problems = []
    for blk in blocks(readme):
        code = blk.startswith("```")
        prose = normalize(blk, keep_code_comments=code)
        spans = allowed_spans(prose, allowed)
        hits = [h for h in measured(prose) if not any(s <= h.start and h.end <= e for s, e in spans)]
        if not hits:
            continue
        anchors = [a for a in BENCH_LINK.findall(blk)]
        if code:
            pool, where = whole, "BENCHMARKS.md (a code block's comment cannot link a row)"
        elif not anchors:
            problems += [
                f"{h.text!r} in {prose[:60]!r}...: no link to its BENCHMARKS.md row here" for h in hits
            ]
            continue
        elif "" in anchors:
            pool, where = whole, "BENCHMARKS.md"
        else:
            missing = [a for a in anchors if a not in secs]
            pool = [n for a in anchors if a in secs for n in numbers(secs[a])]
            where = "BENCHMARKS.md#" + ", #".join(anchors) + (f" (missing: {missing})" if missing else "")
        for h in hits:
            bad = [v for v in h.values if not matches(v, h.unit, pool)]
            if bad:
                ctx = prose[max(0, h.start - 50) : h.end + 20]
                problems.append(f"{h.text!r} (…{ctx}…): {', '.join(bad)} not in {where}")
    return problems


# --- docs: no measured numbers, but for these -------------------------------------------------------------------

# page -> {phrase holding the number(s): why it is not a measurement}. A phrase must still be on its page.
DEFAULT = "a documented default or setting"
TIMER = "a timer or bound the code sets"
ALLOWED: dict[str, dict[str, str]] = {
    "architecture.md": {
        "| 0.9 |": DEFAULT + " (the table of defaults: where each is declared)",
        "| 0.02 |": DEFAULT + " (the table of defaults)",
        "| 0.6 / 0.25 |": DEFAULT + " (the table of defaults)",
        "| 2.0 s |": DEFAULT + " (the table of defaults)",
    },
    "corpus.md": {"the last step: 1.0/0.0": "the two values a last step's label can take"},
    "gpus.md": {
        "loaded for 10 minutes after it": "the value --keep-warm 10m in the same sentence sets",
        "after a 60 s grace": TIMER,
        "waits at most 600 s for the one before": TIMER,
        "on a big GPU (at least 70 GiB, not an A100)": "vLLM's own rule for its defaults, quoted",
        "at most 8 GiB of weights": "AUTO_SEVERAL_MAX_WEIGHT_BYTES, a setting of rollouts/engine_sizing.py",
        "weights are at most 8 GiB (about 4B": DEFAULT + " (the bound of the sized engine count)",
        "(at least 70 GiB, not an A100)": "vLLM's own rule for its defaults, quoted",
        "every 50 ms": "the benchmark's sampling interval, a setting",
        "top_p 0.95 against 1": "the lever's definition, a setting",
    },
    "grading.md": {
        "retried once with 3x the budget": TIMER,
        "A wall-clock cap of 5x the budget + 5 s": TIMER,
        '"Maria needs 240 minutes"': "an example input to the grader",
    },
    "human-labels.md": {
        "ECE, 5 bins": "the binning, a setting",
        "AUROC: 0.5 says nothing": "the value of a ranking that knows nothing, by definition",
        "95% upper bound is 0.37": "the exact bound after 0 of 8, computed, not measured",
    },
    "inputs.md": {"4.1 MB": "the size of the bundled model's files"},
    "labels.md": {
        "more than 20% of the graded": "the threshold of a warning the run prints, a setting",
        "coarse (0, 0.5 or 1)": "the values a first wave of 2 can take",
        "at the stated 95%": "the confidence level the test checks",
        "under the 0.05 bar": "the calibration target, a setting",
        "the top bin cannot reach 1.0": "the value no binned confidence can reach, by the argument given",
        "dead ones reach the answer 2% of the time": "a constant of sequential's internal model",
        "is 1.0 or 0.0": "the two values a last step's mc_value can take",
        "succeeds at under 0.25x that prefix's rate": "what --relative-drop's default 0.25 means",
        "upper bound of the pass rate is 0.37": "the exact bound after 0 of 8, computed, not measured",
        "at weight 0.1": "the down-weight the option applies, a setting",
        "loses more than 0.5 against": "the relative rule's definition",
        "succeeds at rate 0.02": "a constant of the changepoint rule's model",
        "straddles 0.05": "the definition of an uncertain label that stats counts",
        "probe point 0.6, rollout reuse, relative drop 0.25": DEFAULT + "s of binary-search",
        "the probe point 0.6 helped": DEFAULT + " named (the measurement is linked)",
        "the target was first-error F1 0.60": "the design target, not a result",
    },
    "options.md": {
        # generated from the options' help (pipeline/options.py, rollouts/options.py); a help text that quotes
        # a measurement is to be replaced there by a pointer to BENCHMARKS.md (the help's owner edits the code)
        "~3% more tokens": "generated from pipeline/options.py's help text: a measurement to move",
        "(0.5 = midpoint)": "the option's meaning",
        "(90s, 30m, 2h;": "examples of the option's values",
        "fleet up: 1h)": DEFAULT,
    },
    "refresh.md": {
        "stale after 10 minutes without heartbeat": TIMER,
        "could not be written for 5 minutes": TIMER,
        "loaded for 10 minutes after it ends": "the value --keep-warm 10m in the same sentence sets",
        "(--keep-warm 600 s;": "a message the command prints, for that setting",
        "the keeper stops Ray 60 s after": TIMER,
        "the lease lapses after 60 s": TIMER,
        '"model load" is 0.0 s': "what the summary prints for a borrowed fleet, by construction",
        "renews it every 10 s": TIMER,
        "by itself 60 s after its last renewal": TIMER,
        "longer than the interval (26h)": "an example setting",
        "kept warm 26h for a 2-minute daily refresh": "an example setting",
    },
    "storage.md": {
        "for more than 30 s by another": TIMER,
        "a heartbeat refreshed every 30 s": TIMER,
        "older than 10 minutes": TIMER,
        "waits up to 10 s for it to go": TIMER,
        "handshake within 5 s": TIMER,
        "then after 30 s SIGKILL": TIMER,
        "first call (its cluster id) within 5 s": TIMER,
        "(lease, status, counters) waits at most 60 s": TIMER,
        "waits at most 60 s until each of them": TIMER,
    },
    "training.md": {
        "beta 0.05 (PRIME's)": DEFAULT,
        "at 0.05 it did not": DEFAULT + " named",
        "where 0.5 found": "the threshold rule's value, a setting",
        "so 0.5 is where they weigh": "the threshold rule's value, a setting",
        "above 0.5 and finds no first": "the threshold rule's value, a setting",
        "with them its 0.5 finds": "the threshold rule's value, a setting",
        "chance, its 0.5 threshold": "the threshold rule's value, a setting",
        "0.5 without validation": DEFAULT,
        "1 epoch at 1e-6 with beta 0.05": DEFAULT,
        "5% warm-up": DEFAULT,
        "below about -88.7": "the float32 bound below which exp underflows, a property of the arithmetic",
        "capped at 8 GiB": DEFAULT,
        "F1 at 0.5": "the metric's definition",
        "the first step below 0.5": "the metric's definition",
        "within 0.02 at d = 0, 0.8, 1.6": "a tolerance test_protocol.py asserts, and the cases it draws",
        "(inside [0.80, 0.97])": "the coverage band test_protocol.py asserts",
        "on 30% of the problems": "what --choose-on 0.3 sets",
        "on the other 70%": "what --choose-on 0.3 sets",
    },
    "troubleshooting.md": {
        "for a 50 KB problem": "an example input",
        "(at most 200) and 30 s are done": TIMER,
        "prints a line every 10 s": TIMER,
    },
}
# page -> {anchor of a section left out whole: why}
ALLOWED_SECTIONS: dict[str, dict[str, str]] = {
    "gpus.md": {
        "bringing-sglang-to-the-lent-gpu-machine": "package and transfer sizes of an install on the lent machine: "
        "facts of the files, not results"
    },
}


def doc_problems(
    name: str, text: str, allowed: dict[str, str], allowed_sections: dict[str, str] | None = None
) -> list[str]:
    secs = sections(text)
    out = [
        f"{name}: allow-listed section no longer on the page: #{a}"
        for a in allowed_sections or {}
        if a not in secs
    ]
    for a in allowed_sections or {}:
        text = text.replace(secs.get(a, "\x02"), "")
    prose = normalize(text)
    spans = allowed_spans(prose, allowed)
    out += [
        f"{name}: {h.text!r} in …{prose[max(0, h.start - 60) : h.end + 20]}…"
        for h in measured(prose)
        if not any(s <= h.start and h.end <= e for s, e in spans)
    ]
    out += [f"{name}: allow-list phrase no longer on the page: {p!r}" for p in allowed if p not in prose]
    return out


# --- anchors --------------------------------------------------------------------------------------------------

ANCHOR = re.compile(r"\]\(([^)\s#]*\.md)?#([^)\s]+)\)")


def broken_anchors(doc: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    out = []
    for target, anchor in ANCHOR.findall(text):
        page = (doc.parent / target) if target else doc
        if not page.is_file():
            continue  # a missing page is test_doc_links.py's to report
        if anchor not in sections(page.read_text()):
            out.append(f"{target or doc.name}#{anchor}")
    return out


# --- the tests --------------------------------------------------------------------------------------------------


def test_readme_quotes_only_numbers_of_the_rows_it_links():
    problems = readme_problems(README.read_text(), BENCH.read_text())
    assert not problems, "README.md quotes numbers BENCHMARKS.md does not hold there:\n" + "\n".join(problems)


def test_readme_quotes_some_numbers():
    # the README check above must have something to check
    assert len(measured(normalize(README.read_text()))) > 20


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_quote_no_measurements(doc: Path):
    problems = doc_problems(
        doc.name, doc.read_text(), ALLOWED.get(doc.name, {}), ALLOWED_SECTIONS.get(doc.name)
    )
    assert not problems, (
        "measured numbers belong in BENCHMARKS.md; link its section instead (or, for a number that is not a "
        "measurement, add it to ALLOWED with the reason):\n" + "\n".join(problems)
    )


def test_allow_list_names_pages_that_exist():
    assert set(ALLOWED) | set(ALLOWED_SECTIONS) <= {d.name for d in DOCS}


@pytest.mark.parametrize("doc", [README, BENCH, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_anchor_names_a_heading(doc: Path):
    broken = broken_anchors(doc)
    assert not broken, f"{doc.relative_to(ROOT)}: links to headings that do not exist: {broken}"


# --- the checker itself, on small examples ----------------------------------------------------------------------

BENCH_EXAMPLE = """# Benchmarks

## Label quality

### Against the exact checker

| sample | F1 | tokens |
|---|---:|---:|
| 7401 | **0.631** | 925,875 (0.91x) |

## Cost

### GPU-seconds, real 1.5B model

| run | labeling s |
|---|---:|
| defaults | 66.1, 0.480x |
"""


def test_slugs_are_githubs():
    assert slug("GPU-seconds, real 1.5B model") == "gpu-seconds-real-15b-model"
    assert (
        slug("One GPU: mcprm's vLLM backend against raw `vLLM`")
        == "one-gpu-mcprms-vllm-backend-against-raw-vllm"
    )
    assert slug("Real 1.5B model, one H100 (best-of-8)") == "real-15b-model-one-h100-best-of-8"
    assert list(sections("# A\n## B\n## B\n")) == ["a", "b", "b-1"]


def test_what_counts_as_measured():
    found = [
        h.text
        for h in measured(
            normalize(
                "F1 0.631 at 0.91x, 248 s, 22 minutes, 23,873 tok/s, 99.2%, 0.44-0.48x; AUROC 0.95. Not: vLLM 0.26.0, "
                "Qwen2.5-1.5B, 0.5B, 2026-11-27 16:02, a 95% interval, `--bisect-fraction` (0.6), default: 0.25, K=20, 1.06 M params"
            )
        )
    ]
    assert found == ["0.631", "0.91x", "248 s", "22 minutes", "23,873 tok/s", "99.2%", "0.44-0.48x", "0.95"]


def test_a_readme_number_not_in_its_row_is_found():
    readme = (
        "- the defaults: F1 **0.631** at 0.91x the tokens\n"
        "  ([rows](BENCHMARKS.md#against-the-exact-checker)), 0.48x the GPU-seconds\n"
        "  ([rows](BENCHMARKS.md#gpu-seconds-real-15b-model)).\n"
        "- right numbers, wrong row: F1 0.631 ([rows](BENCHMARKS.md#gpu-seconds-real-15b-model)).\n"
        "- a new measurement: 0.52x ([rows](BENCHMARKS.md#against-the-exact-checker)).\n"
        "- no link at all: 66 s.\n"
        "- a missing anchor: 0.631 ([rows](BENCHMARKS.md#nowhere)).\n"
        "- rounded right, 66 s; rounded wrong, 0.49x ([rows](BENCHMARKS.md#cost)).\n"
        "\n```bash\nmcprm label   # 66 s here, 70 s there\n```\n"
    )
    problems = readme_problems(readme, BENCH_EXAMPLE, allowed={})
    joined = "\n".join(problems)
    assert len(problems) == 6, joined
    assert "'0.631'" in problems[0] and "#gpu-seconds-real-15b-model" in problems[0]
    assert "'0.52x'" in problems[1]
    assert "'66 s'" in problems[2] and "no link" in problems[2]
    assert "missing: ['nowhere']" in problems[3]
    assert "'0.49x'" in problems[4]
    assert "'70 s'" in problems[5] and "code block" in problems[5]
    # the first item is right: each number is in a section that item links
    assert "0.91x" not in joined and "0.48x" not in joined


def test_a_measurement_in_a_doc_is_found_and_a_setting_is_not():
    doc = (
        "Waves grow 2x (`--wave-growth` 2.0); a lock is stale after 10 minutes. The defaults labeled in 0.48x\n"
        "per-step's GPU-seconds, F1 0.631 ([BENCHMARKS](../BENCHMARKS.md#cost)).\n"
    )
    problems = doc_problems(
        "d.md", doc, {"Waves grow 2x": "x", "stale after 10 minutes": "a default", "gone": "y"}
    )
    assert [p.split(": ", 1)[1].split(" in ")[0] for p in problems] == [
        "'0.48x'",
        "'0.631'",
        "allow-list phrase no longer on the page: 'gone'",
    ]


def test_a_broken_anchor_is_found(tmp_path: Path):
    (tmp_path / "BENCHMARKS.md").write_text(BENCH_EXAMPLE)
    doc = tmp_path / "page.md"
    doc.write_text(
        "[a](BENCHMARKS.md#cost) [b](BENCHMARKS.md#costs) [c](#here) [d](#there) `[e](BENCHMARKS.md#x)`\n# Here\n"
    )
    assert broken_anchors(doc) == ["BENCHMARKS.md#costs", "page.md#there"]
