"""Two data-run rows compared on the same ProcessBench-MATH dev solutions, PRM-only: each protocol number's
difference (first row minus second) with its bootstrap SE and 95% interval over problems
(``pipeline.training.protocol.paired``), from the step scores the rows brought back (``rows/ROW/scores_pb.jsonl.gz``)
and the PRM's own threshold (``rows/ROW/metrics_pb.json``). No GPU: the PRMs stay on the machine that trained
them, their scores do not.

    python bench/gpu_e2e/paired_rows.py today1500 def1500 [--pb /work/shared/data/processbench_math_dev.jsonl.gz]

The reference is the dev part of the ProcessBench file (``bench_human_labels.part_of``); the held-aside quarter is
never read here.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE.parent))

ROWS = HERE / "results" / "data_run" / "rows"
PB = "/work/shared/data/processbench_math_dev.jsonl.gz"


def scored(row: str, pb: dict, rows_dir: Path = ROWS):
    """(the row's Scored solutions, its own threshold)."""
    from pipeline.training.protocol import Scored

    d = rows_dir / row
    if not (d / "scores_pb.jsonl.gz").exists():
        raise SystemExit(f"{d}: no scores_pb.jsonl.gz (has the row been landed? data_run.py status)")
    own = json.loads((d / "metrics_pb.json").read_text()).get("threshold_own")
    out = []
    with gzip.open(d / "scores_pb.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            ref = pb.get(str(r["id"]))
            if ref is None:
                raise SystemExit(f"{d / 'scores_pb.jsonl.gz'}: id {r['id']!r} is not in the dev part of the reference")
            out.append(Scored(id=str(r["id"]), problem=ref["problem"], scores=r["prm_score"], truth=int(ref["label"])))
    return out, own


def fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("first")
    ap.add_argument("second")
    ap.add_argument("--pb", default=PB, help="the ProcessBench-MATH file (its dev part is read)")
    ap.add_argument("--rows", default=str(ROWS), help="the rows' folder")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    import bench_human_labels as h

    from pipeline.training.protocol import paired

    pb = {str(r["id"]): r for r in h.read_set(a.pb) if h.part_of(r["id"]) == "dev"}
    sa, own_a = scored(a.first, pb, Path(a.rows))
    sb, own_b = scored(a.second, pb, Path(a.rows))
    res = paired(sa, sb, own_a, own_b, n_boot=a.bootstrap)
    if a.json:
        print(json.dumps(res, indent=1))
        return 0
    print(f"{a.first} minus {a.second}: {res['solutions']} solutions, {res['problems']} problems, "
          f"{res['bootstrap']} resamples")
    print("| number | first | second | difference | SE | 95% interval |\n|---|---:|---:|---:|---:|---|")
    for k, e in res["differences"].items():
        x, y = res["first"].get(k), res["second"].get(k)
        iv = "-" if e["low"] is None else f"[{e['low']:+.3f}, {e['high']:+.3f}]"
        diff = "-" if e["difference"] is None else f"{e['difference']:+.3f}"
        print(f"| {k} | {fmt(x)} | {fmt(y)} | {diff} | {fmt(e['se'])} | {iv} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
