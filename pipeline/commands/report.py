"""``mcprm report``: one self-contained HTML page (PNG figures embedded as base64) plus the same PNG files.

Figures: the ``mc_value`` distribution; hard-label balance by step position; the first-error position
histogram; final-answer correctness against first-error presence (the "right answer, wrong process" rate);
rollouts and tokens per solution and per strategy; and, with a reference, the ``eval`` metrics. The page
loads nothing from the network. Drawing uses matplotlib's object API (no pyplot, no display needed).
"""

from __future__ import annotations

import base64
import html
import io
from collections import Counter, defaultdict
from dataclasses import dataclass, field

MAX_POSITIONS = 20  # step positions shown one by one; later ones are pooled in a last bar

POS, NEG, UNL = "#2e7d32", "#c62828", "#9e9e9e"


@dataclass
class ReportResult:
    html: str  # URL of report.html
    figures: list[str]  # URLs of the PNG files
    stats: dict
    metrics: dict | None = None
    notes: list[str] = field(default_factory=list)


def _figure(width: float = 7.0, height: float = 3.6):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _pos_label(i: int) -> str:
    return f"{i + 1}" if i < MAX_POSITIONS else f"{MAX_POSITIONS + 1}+"


MC_BINS = [i / 20 for i in range(21)]


def _fig_mc_value_counts(counts: list[int], n: int, steps: int | None = None):
    """The mc_value histogram from its counts per bin of :data:`MC_BINS` (what ``ax.hist(mc, MC_BINS)`` draws),
    over the ``n`` sampled steps of ``steps``."""
    fig = _figure()
    ax = fig.add_subplot()
    if n:
        ax.hist(MC_BINS[:-1], bins=MC_BINS, weights=counts, color="#1565c0", edgecolor="white")
    else:
        ax.text(0.5, 0.5, "no step has an MC estimate", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("mc_value (share of continuations reaching the gold answer)")
    ax.set_ylabel("steps")
    of = "" if steps is None else f" of {steps:,}"
    # two lines: on one line the title was wider than the figure and was cut at both edges
    ax.set_title(f"MC value distribution\n{n:,} sampled steps{of} (unsampled steps not drawn)")
    return fig


def _fig_balance_counts(counts: dict[int, Counter]):
    """Hard labels by step position from ``{position (capped at MAX_POSITIONS): Counter(label)}``."""
    xs = sorted(counts)
    pos = [counts[x][True] for x in xs]
    neg = [counts[x][False] for x in xs]
    unl = [counts[x][None] for x in xs]
    fig = _figure()
    ax = fig.add_subplot()
    idx = list(range(len(xs)))
    ax.bar(idx, pos, color=POS, label="positive")
    ax.bar(idx, neg, bottom=pos, color=NEG, label="negative")
    ax.bar(idx, unl, bottom=[p + n for p, n in zip(pos, neg, strict=True)], color=UNL, label="unlabeled")
    ax.set_xticks(idx, [_pos_label(x) for x in xs])
    ax.set_xlabel("step position (1 = first step)")
    ax.set_ylabel("steps")
    ax.set_title("Hard labels by step position")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside the axes: never over a bar
    return fig


def _fig_first_error_counts(hist: Counter, none: int, total: int):
    """First-error positions from their histogram (capped at MAX_POSITIONS), the solutions without an error
    and all solutions."""
    fig = _figure()
    ax = fig.add_subplot()
    xs = sorted(hist)
    ax.bar(range(len(xs)), [hist[x] for x in xs], color=NEG)
    ax.set_xticks(range(len(xs)), [_pos_label(x) for x in xs])
    ax.set_xlabel("position of the first negative step (1 = first step; first_error + 1)")
    ax.set_ylabel("solutions")
    ax.set_title(f"First-error position ({total - none:,} with an error, {none:,} without)")
    return fig


def _fig_correctness_counts(counts: Counter):
    """Final answer vs process from ``Counter((solution_correct, has an error))``."""
    unknown = counts[(None, False)] + counts[(None, True)]
    groups = ["right answer", "wrong answer"] + (["unknown answer"] if unknown else [])
    no_err, err = [], []
    for g in groups:
        want = {"right answer": True, "wrong answer": False, "unknown answer": None}[g]
        no_err.append(counts[(want, False)])
        err.append(counts[(want, True)])
    fig = _figure()
    ax = fig.add_subplot()
    ax.bar(range(len(groups)), no_err, color=POS, label="no negative step")
    ax.bar(range(len(groups)), err, bottom=no_err, color=NEG, label="has a negative step")
    ax.set_xticks(range(len(groups)), groups)
    right = no_err[0] + err[0]
    rate = err[0] / right if right else None
    # two lines: one line was wider than the figure and was clipped at both edges
    ax.set_title("Final answer vs process\nright answer, wrong process: "
                 + ("n/a" if rate is None else f"{err[0]:,} of {right:,} ({rate:.1%})"))
    ax.set_ylabel("solutions")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig, rate


def _fig_cost_counts(rollouts: Counter, tokens: Counter, by: dict[str, list[int]]):
    """Rollouts per solution; beside it, mean cost per strategy when the corpus has several strategies, else
    the distribution of rollout tokens per solution (a per-strategy chart of one bar says nothing).
    From the counts of each rollouts / tokens value and ``{strategy: [rollouts, tokens, solutions]}``."""
    n = sum(rollouts.values())
    fig = _figure(9.0, 3.6)
    a1, a2 = fig.subplots(1, 2)

    def per_solution(ax, counts: Counter, color: str, what: str, mean_fmt: str) -> None:
        """Histogram of ``counts`` ({value: solutions}) titled with its mean per solution."""
        vs = sorted(counts)
        ax.hist(vs, bins=min(30, max(1, len(vs))), weights=[counts[v] for v in vs], color=color,
                edgecolor="white")
        ax.set_xlabel(f"{what} per solution")
        ax.set_ylabel("solutions")
        mean = sum(v * c for v, c in counts.items()) / max(1, n)
        ax.set_title(f"{what[0].upper()}{what[1:]} per solution (mean {mean:{mean_fmt}})")

    per_solution(a1, rollouts, "#6a1b9a", "rollouts", ".1f")
    names = sorted(by)
    if len(names) < 2:
        per_solution(a2, tokens, "#ef6c00", "rollout tokens", ",.0f")
        return fig
    mean_r = [by[s][0] / by[s][2] for s in names]
    mean_t = [by[s][1] / by[s][2] for s in names]
    idx = list(range(len(names)))
    a2.bar([i - 0.2 for i in idx], mean_r, width=0.4, color="#6a1b9a", label="rollouts")
    a2.set_ylabel("mean rollouts per solution")
    a2.set_xticks(idx, names)
    a3 = a2.twinx()
    a3.bar([i + 0.2 for i in idx], mean_t, width=0.4, color="#ef6c00", label="tokens")
    a3.set_ylabel("mean rollout tokens per solution")
    a2.set_title("Cost per strategy (purple: rollouts, orange: tokens)")
    return fig


class _Figures:
    """What the figures draw, accumulated batch by batch (memory bounded by the batch and by the number of
    distinct rollouts / token counts, not by the corpus)."""

    def __init__(self):
        self.mc = [0] * (len(MC_BINS) - 1)
        self.mc_n = 0  # steps in the histogram: an mc_value from draws of their own
        self.steps = 0
        self.answer_valued = 0  # an mc_value from the solution's own answer only (a last step not sampled)
        self.balance: dict[int, Counter] = defaultdict(Counter)
        self.fe_hist: Counter = Counter()
        self.fe_none = 0
        self.n = 0
        self.correctness: Counter = Counter()
        self.rollouts: Counter = Counter()
        self.tokens: Counter = Counter()
        self.by: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])

    def add(self, b) -> None:
        import numpy as np
        import pyarrow.compute as pc

        self.n += b.num_rows
        mc = b.column("mc_value").flatten()
        self.steps += len(mc)
        # a step is drawn only if it was sampled: its mc_value comes from draws of its own, not from the
        # solution's answer (a last step's 1.0/0.0) and never a null read as 0
        own = np.asarray(b.column("mc_total").flatten().to_numpy(zero_copy_only=False), dtype=np.int64)
        if "mc_reused" in b.schema.names:
            reused = b.column("mc_reused").flatten().fill_null(0).to_numpy(zero_copy_only=False)
            if len(reused) == len(own):  # else rows without the column's lists (written before it): no reuse
                own = own - np.asarray(reused, dtype=np.int64)
        valid = np.asarray(mc.is_valid())
        sampled = valid & (own > 0)
        self.answer_valued += int((valid & ~sampled).sum())
        mc = mc.fill_null(0.0).to_numpy(zero_copy_only=False).astype(float)[sampled]
        counts, _ = np.histogram(mc, bins=MC_BINS)
        self.mc_n += len(mc)
        self.mc = [a + int(c) for a, c in zip(self.mc, counts, strict=True)]
        labels = b.column("labels")
        flat = labels.flatten()
        if len(flat):
            parent = pc.list_parent_indices(labels).to_numpy()
            starts = labels.offsets.to_numpy()[:-1] - labels.offsets[0].as_py()
            pos = np.minimum(np.arange(len(flat)) - starts[parent], MAX_POSITIONS)
            valid = np.asarray(flat.is_valid())
            val = np.asarray(flat.fill_null(False))
            width = MAX_POSITIONS + 1
            for y, sel in ((True, valid & val), (False, valid & ~val), (None, ~valid)):
                for p, c in enumerate(np.bincount(pos[sel], minlength=width)):
                    if c:
                        self.balance[p][y] += int(c)
        fe = b.column("first_error").to_numpy(zero_copy_only=False)
        err = fe != -1
        self.fe_none += int((~err).sum())
        vals, cnt = np.unique(np.minimum(fe[err], MAX_POSITIONS), return_counts=True)
        self.fe_hist.update({int(v): int(c) for v, c in zip(vals, cnt, strict=True)})
        sc = b.column("solution_correct")
        for c in (True, False, None):
            sel = np.asarray(sc.is_null()) if c is None else np.asarray(sc.fill_null(not c)) == c
            for e in (False, True):
                k = int((sel & (err if e else ~err)).sum())
                if k:
                    self.correctness[(c, e)] += k
        r = b.column("rollouts").to_numpy(zero_copy_only=False)
        t = b.column("rollout_tokens").to_numpy(zero_copy_only=False)
        for arr, counter in ((r, self.rollouts), (t, self.tokens)):
            vals, cnt = np.unique(arr, return_counts=True)
            counter.update({int(v): int(c) for v, c in zip(vals, cnt, strict=True)})
        strat = b.column("strategy").dictionary_encode()
        codes = strat.indices.to_numpy(zero_copy_only=False)
        for i, name in enumerate(strat.dictionary.to_pylist()):
            sel = codes == i
            acc = self.by[name]
            acc[0] += int(r[sel].sum())
            acc[1] += int(t[sel].sum())
            acc[2] += int(sel.sum())


def _color(label: bool | None) -> str:
    return POS if label is True else NEG if label is False else UNL


def examples_html(rows: list[dict], n: int = 4) -> str:
    """A few solutions with each step's text, hard label and mc_value, colour-coded (green positive, red
    negative, grey unlabeled): some with a negative step and some without, in corpus order. A step not sampled
    (no draws of its own: null, or a last step valued by the answer alone) shows "—", never 0.00."""
    with_err = [r for r in rows if r["first_error"] != -1]
    without = [r for r in rows if r["first_error"] == -1]
    pick = with_err[: (n + 1) // 2] + without[: n // 2]
    pick += [r for r in rows if r not in pick][: n - len(pick)]
    out = []
    for r in pick:
        fe = r["first_error"]
        head = (f"{html.escape(str(r['id']))}: {html.escape(r['problem'])} (gold answer "
                f"{html.escape(str(r['answer']))}; " + ("no negative label" if fe == -1 else
                                                        f"first negative label at step {fe + 1}: the MC labels' first "
                                                        "error, not a checker's") + ")")
        body = []
        for i, step in enumerate(r["steps"]):
            lab = r["labels"][i] if i < len(r["labels"]) else None
            val = r["mc_value"][i] if i < len(r["mc_value"]) else None
            own = _own_draws(r, i)
            if own is not None and own <= 0:
                val = None  # not sampled: an answer-valued last step, or no estimate at all
            word = "positive" if lab is True else "negative" if lab is False else "unlabeled"
            body.append(f"<tr style=\"background:{_color(lab)}22\"><td>{i + 1}</td><td>{html.escape(step)}</td>"
                        f"<td style=\"color:{_color(lab)};font-weight:bold\">{word}</td>"
                        f"<td>{'—' if val is None else f'{val:.2f}'}</td></tr>")
        out.append(f"<h3>{head}</h3><table class=\"example\"><tr><th>step</th><th>text</th><th>label</th>"
                   f"<th>mc_value</th></tr>{''.join(body)}</table>")
    return "".join(out)


def _own_draws(r: dict, i: int) -> int | None:
    """Draws of step ``i``'s own (``mc_total - mc_reused``), or None when the row does not have the counts."""
    tot = r.get("mc_total")
    if tot is None or i >= len(tot) or tot[i] is None:
        return None
    reused = r.get("mc_reused")
    return tot[i] - (reused[i] or 0 if reused is not None and i < len(reused) else 0)


EVAL_KEYS = ("f1", "acc_error", "acc_correct", "step_accuracy", "error_precision", "error_recall",
             "positive_precision", "positive_recall", "brier")


def _fig_eval(metrics: dict):
    """The eval metrics where higher is better (F1, accuracies, precisions, recalls) on one axis, and the Brier
    score, where lower is better, on an axis of its own beside the 0.25 of always saying 0.5. Each value is
    written past its bar's end, inside an axis that leaves room for it (no text over another bar or label)."""
    keys = [k for k in EVAL_KEYS if k != "brier" and metrics.get(k) is not None]
    brier = metrics.get("brier")
    fig = _figure(8.0, 0.45 * max(len(keys), 3) + 1.4)
    if brier is not None:
        ax, bx = fig.subplots(1, 2, width_ratios=[3, 1.3])
    else:
        ax, bx = fig.add_subplot(), None
    ax.barh(range(len(keys)), [metrics[k] for k in keys], color="#00838f")
    ax.set_yticks(range(len(keys)), keys)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.18)  # room for a value written after a bar of 1.0
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    for i, k in enumerate(keys):
        ax.text(metrics[k] + 0.02, i, f"{metrics[k]:.3f}", va="center", fontsize=9)
    ax.set_xlabel("higher is better")
    ax.set_title(f"Against the reference ({metrics.get('solutions', 0):,} solutions)")
    if bx is not None:
        top = max(0.3, brier * 1.25)
        bx.bar([0], [brier], color="#6a1b9a", width=0.5)
        # the value under the bar and the reference line in the legend: no text can sit on the line or the bar
        bx.axhline(0.25, color="#555", linestyle="--", linewidth=1, label="always 0.5: 0.25")
        bx.set_ylim(0, top * 1.3)
        bx.set_xlim(-0.6, 0.6)
        bx.set_xticks([0], [f"brier {brier:.3f}"])
        bx.legend(loc="upper center", fontsize=8, frameon=False)
        bx.set_ylabel("lower is better")
        bx.set_title("Brier (mc_value)")
    return fig


def _table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _fmt(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.4f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


CSS = """body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#212121;background:#fff}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.6em}table{border-collapse:collapse;margin:0.5em 0}
th,td{border:1px solid #ccc;padding:4px 10px;text-align:left}th{background:#f5f5f5;font-weight:normal}
img{max-width:100%;border:1px solid #eee}figcaption{color:#555;font-size:0.9em}h3{font-size:1em}
.warn{background:#fff3e0;border-left:4px solid #e65100;padding:6px 10px}"""


def build_report(out_url: str, output_dir: str, *, version: int | None = None,
                 reference: str | None = None) -> ReportResult:
    """Draw the figures of corpus ``out_url`` into ``output_dir`` (any fsspec URL): ``report.html`` + PNGs."""
    from pipeline.commands.advice import brier_advice, right_answer_wrong_process_reading, uncertainty_advice
    from pipeline.corpus import corpus_stats, iter_corpus
    from pipeline.labeling.rules import corpus_uncertainty
    from pipeline.storage.output import check_output_folder
    from pipeline.storage.store import CorpusStore

    check_output_folder(output_dir)  # a file there is named as such, before any figure is drawn
    stats = corpus_stats(out_url, version)
    uncertainty = corpus_uncertainty(out_url, version)
    agg = _Figures()
    reused = ["mc_reused"] if (stats.get("schema_version") or _schema(out_url, version)) >= 4 else []
    for b in iter_corpus(out_url, version, ["labels", "mc_value", "mc_total", *reused, "first_error",
                                            "solution_correct", "rollouts", "rollout_tokens", "strategy"]):
        agg.add(b)
    examples: list[dict] = []
    for b in iter_corpus(out_url, version, ["id", "problem", "answer", "steps", "labels", "mc_value", "mc_total",
                                            *reused, "first_error"], batch_rows=200):
        examples.extend(b.slice(0, 200 - len(examples)).to_pylist())
        if len(examples) >= 200:
            break
    metrics = None
    if reference:
        from pipeline.commands.evaluate import evaluate

        metrics = evaluate(out_url, reference, version)

    fig_corr, rawp = _fig_correctness_counts(agg.correctness)
    figs = [
        ("mc_value.png", "Distribution of mc_value", _fig_mc_value_counts(agg.mc, agg.mc_n, agg.steps),
         f"Share of graded continuations from each step prefix that reached the gold answer, over the "
         f"{agg.mc_n:,} of {agg.steps:,} steps that were sampled (draws of their own). Not drawn: "
         f"{agg.steps - agg.mc_n - agg.answer_valued:,} steps with no estimate (a strategy that samples "
         f"only some prefixes skips them) and {agg.answer_valued:,} last steps valued by the solution's answer "
         "alone (1.0 or 0.0, no draws). A positive label does not need a value above 0: binary-search labels "
         "every step before a prefix that reached the answer positive, whatever its own draws (docs/labels.md); "
         "the labels' balance is the summary's positive rate, not this."),
        ("label_balance.png", "Hard-label balance by step position", _fig_balance_counts(agg.balance),
         "Positive / negative / unlabeled steps at each position (later steps after the first error are "
         "unlabeled under binary-search and adaptive)."),
        ("first_error.png", "First-error position", _fig_first_error_counts(agg.fe_hist, agg.fe_none, agg.n),
         "Where the first negative step falls, among solutions that have one."),
        ("correctness.png", "Final answer vs process", fig_corr,
         "Solutions whose final answer is right but that contain a negative step: the \"right answer, wrong "
         "process\" count. Under this corpus's labels: " + right_answer_wrong_process_reading(stats) + "."),
        ("cost.png", "Rollouts and tokens", _fig_cost_counts(agg.rollouts, agg.tokens, agg.by),
         "Rollouts per solution, and mean rollouts and generated tokens per solution for each strategy."),
    ]
    if metrics is not None:
        figs.append(("eval.png", "Label quality (eval)", _fig_eval(metrics),
                     f"Metrics of `mcprm eval` against reference {reference}."))

    store = CorpusStore(output_dir)
    urls, sections = [], []
    for name, title, fig, caption in figs:
        data = _png(fig)
        store.write_bytes(name, data)
        urls.append(store.uri(name))
        b64 = base64.b64encode(data).decode()
        sections.append(f"<h2>{html.escape(title)}</h2><figure><img alt=\"{html.escape(title)}\" "
                        f"src=\"data:image/png;base64,{b64}\"><figcaption>{html.escape(caption)}</figcaption></figure>")
    lab = stats["labels"]
    summary = [
        ("corpus", f"{out_url} (version {stats['version']})"),
        ("strategy, K", f"{stats['strategy']}, {stats['k']}"),
        ("solutions / steps", f"{stats['solutions']:,} / {stats['steps']:,}"),
        ("positive / negative / unlabeled steps", f"{lab['positive']:,} / {lab['negative']:,} / {lab['unlabeled']:,}"),
        (f"positive rate (of the {lab['positive'] + lab['negative']:,} labeled steps)", _fmt(stats["positive_rate"])),
        ("solutions with an error (a negative step; = stats' solutions_with_error)",
         f"{stats['solutions_with_error']:,}"),
        ("final answer correct", _fmt(stats["solution_correct_rate"])),
        ("right answer, wrong process", f"{stats['right_answer_wrong_process']:,}"
                                        + ("" if rawp is None else f" ({rawp:.1%} of right answers)")),
        ("rollouts / rollout tokens", f"{stats['rollouts']:,} / {stats['rollout_tokens']:,}"),
        ("continuations with no final answer / an unreadable answer (both counted as failures)",
         f"{_count(stats.get('no_answer'))} / {_count(stats.get('unreadable'))}"
         + ("" if stats.get("unreadable_rate") is None else f" ({stats['unreadable_rate']:.1%} unreadable)")),
        ("steps of right-answer solutions with 0 of K reaching the answer (the completer's misses; labels.md)",
         "n/a (right answers trusted)" if (d := stats.get("dead_right_prefixes")) is None
         else f"{d['dead']:,} of {d['probed']:,} ({d['rate']:.1%})"),
        _uncertainty_row(uncertainty),  # how far to trust the labels
    ]
    from pipeline.corpus import open_manifest
    from pipeline.notes import manifest_warnings

    warnings = manifest_warnings(open_manifest(out_url, version)[1])  # the labeling run's, repeated here
    advice = [("right answer, wrong process", right_answer_wrong_process_reading(stats))]
    if (u := uncertainty_advice(uncertainty, stats)) is not None:
        advice.append(("uncertain labels", u))
    if metrics is not None and (b := brier_advice(metrics.get("brier"))) is not None:
        advice.append(("brier", b))
    parts = ["<h1>mcprm corpus report</h1>"]
    parts += [f"<p class=\"warn\"><b>warning:</b> {html.escape(w)}</p>" for w in warnings]
    parts.append(_table(summary))
    parts.append("<h2>What these numbers can and cannot show</h2>" + _table(advice))
    if metrics is not None:
        names = {"solutions": "solutions compared with the reference",
                 "solutions_with_error": "reference solutions with an error (the reference's count, not the labels')",
                 "brier": f"brier (mc_value vs the reference's 0/1 on {metrics.get('brier_steps') or 0:,} sampled "
                          "steps up to its first error; always 0.5 = 0.25)"}
        parts.append("<h2>eval metrics</h2>" + _table([(names.get(k, k), _fmt(metrics.get(k))) for k in
                                                       ("solutions", "solutions_with_error", *EVAL_KEYS,
                                                        "steps_compared", "rollout_tokens")])
                     + "<p>The summary's \"solutions with an error\" counts solutions whose labels have a negative "
                       "step (as <code>mcprm stats</code> does); the eval table's count is of solutions the "
                       "reference marks wrong. They differ by the labels' errors against the reference.</p>")
    parts.extend(sections)
    parts.append("<h2>Example solutions</h2><p>A few solutions with each step's hard label and mc_value (green: "
                 "positive, red: negative, grey: unlabeled). Steps are numbered from 1, as in the charts; the "
                 "data's <code>first_error</code> column is the 0-based index (step N here is index N - 1).</p>"
                 + examples_html(examples))
    page = (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>mcprm report</title>"
            f"<style>{CSS}</style></head><body>{''.join(parts)}</body></html>\n")
    store.write_bytes("report.html", page.encode())
    return ReportResult(html=store.uri("report.html"), figures=urls, stats=stats, metrics=metrics, notes=warnings)


def _schema(out_url: str, version: int | None) -> int:
    from pipeline.corpus import open_manifest

    return int(open_manifest(out_url, version)[1].get("schema_version") or 1)


def _count(x: int | None) -> str:
    return "n/a" if x is None else f"{x:,}"


def _uncertainty_row(u: dict) -> tuple[str, str]:
    """Labels whose 95% interval straddles the threshold (pipeline.labeling.rules.corpus_uncertainty)."""
    if u["uncertain_steps"] is None:
        return ("uncertain labels / mean first-error confidence", "n/a (written before schema 3)")
    return (f"uncertain labels (95% interval straddles {u['threshold']:g}) / mean first-error confidence",
            f"{u['uncertain_steps']:,} of {u['sampled_labeled_steps']:,} sampled steps "
            f"({_fmt(u['uncertain_rate'])}) / {_fmt(u['mean_first_error_confidence'])}")
