"""``mcprm bestofn SCORED``: best-of-N accuracy of PRM reranking vs majority vote, random pick, pass@N."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.common import AsJson, Version, user_errors


def register(app: typer.Typer) -> None:
    app.command("bestofn")(bestofn_cmd)


def bestofn_cmd(
    scored: Annotated[str, typer.Argument(help="Scored corpus (`mcprm score` of `mcprm generate --n N` output, "
                                               "with gold answers).")] = "./mcprm-scored",
    n: Annotated[list[int] | None, typer.Option("--n", help="Solutions per problem to choose from (repeatable; "
                                                            "default: powers of two up to the largest N every "
                                                            "problem has).")] = None,
    version: Version = None,
    choose_on: Annotated[float | None, typer.Option(
        "--choose-on", help="Share of the problems (by hash) that chooses the PRM aggregation (min, product, last, "
                            "vote) at the largest N; the table is then measured on the other problems only, so "
                            "the chosen one's number is held out.")] = None,
    as_json: AsJson = False,
) -> None:
    """Rerank each problem's first N solutions by the PRM (min, product, last step, PRM-weighted vote) and
    compare with majority vote, a random pick and pass@N; standard errors over problems."""
    from pipeline.training.rerank import SELECTORS, best_of_n

    with user_errors(extra=(ValueError,)):
        res = best_of_n(scored, n, version, choose_on)
    if as_json:
        print(json.dumps(res, indent=2))
        return

    def f(e):
        if e.get("accuracy") is None:
            return "n/a"
        return f"{e['accuracy']:.3f}" + (f" ±{e['se']:.3f}" if e.get("se") is not None else "")

    print(f"{scored}: {res['problems']} problems, {res['solutions']} solutions "
          f"({res['solutions_per_problem']['min']}-{res['solutions_per_problem']['max']} per problem)"
          + (f"; {res['ungraded']} without a gradable answer count as wrong" if res["ungraded"] else ""))
    if res.get("cut"):
        print(f"warning: {res['cut']} solutions had steps past the PRM's max length (no score there): the PRM "
              "selectors rank them on their early steps only; score with a larger --max-length")
    print(f"{'N':>4} {'problems':>8} " + " ".join(f"{s:>14}" for s in SELECTORS))
    for r in res["results"]:
        print(f"{r['n']:>4} {r['problems']:>8} " + " ".join(f"{f(r['selectors'][s]):>14}" for s in SELECTORS))
    last = res["results"][-1]
    ch = res.get("chosen")
    sel = ch["selector"] if ch else "prm-min"
    d = last["selectors"][sel]
    if ch:
        print(f"chosen on {ch['validation_problems']} validation problems at N={ch['n']}: {sel} (validation "
              + ", ".join(f"{k} {v:.3f}" for k, v in ch["validation_accuracy"].items() if v is not None)
              + f"); the table is the other {ch['held_out_problems']} problems")
    if d.get("vs_majority") is not None:
        se = f" ±{d['vs_majority_se']:.3f}" if d.get("vs_majority_se") is not None else ""
        print(f"{sel} - majority at N={last['n']}: {d['vs_majority']:+.3f}{se} (paired over problems"
              + (", held out)" if ch else ")"))
