"""A prompt's next-token distribution in the hf backend does not depend on what else is in the batch (issue 24).

Per-step sends one request of n=8 per step prefix; binary-search sends waves of n=2 of many solutions' prefixes
batched together (left padding, shared-prefix KV trunks, position ids, masks). If a prompt's distribution
depended on its batch, the two strategies' success rates would differ. With the real bundled model and the
pipeline's prompts, the log-probabilities the sampler sees at every decode step of a request must be the same
alone and in a mixed padded batch, on the trunk (prefix-KV) path and the plain path, and the first token's must
equal a plain forward pass of the unpadded prompt (bench/bench_hf_batch_invariance.py measures it, with the
success rates).
"""

from __future__ import annotations

import json

import pytest

from rollouts import GenRequest, SamplingConfig
from rollouts.prompts import make_prompt_format
from tests.rollouts.conftest import BUNDLED_MODEL, REPO

pytestmark = pytest.mark.skipif(not (BUNDLED_MODEL / "model.safetensors").exists(), reason="data/model not built")

FMT = make_prompt_format("plain")
SAMPLING = SamplingConfig(temperature=1.0, max_new_tokens=48, stop=FMT.stop)
TOL = 1e-4  # float32 on CPU: different batch shapes differ by ~2e-5 (measured)


def recording(prefix_reuse: bool):
    """An HFBackend whose sampler records each row's log-probabilities: (prompt, seed, sample) -> [per step]."""
    import torch

    from rollouts.hf import HFBackend

    class Recording(HFBackend):
        record: dict | None = None

        def _sample(self, logits, sampling, req_of_row, sample_of_row, gens, reqs):
            if self.record is not None:
                lp = torch.log_softmax(logits.double() / sampling.temperature, -1)
                for row, (j, s) in enumerate(zip(req_of_row, sample_of_row, strict=True)):
                    self.record.setdefault((reqs[j].prompt, reqs[j].seed, s), []).append(lp[row])
            return super()._sample(logits, sampling, req_of_row, sample_of_row, gens, reqs)

    torch.set_num_threads(1)
    return Recording(str(BUNDLED_MODEL), max_batch_rows=64, prefix_reuse=prefix_reuse)


@pytest.fixture(scope="module")
def rows():
    with (REPO / "data" / "sample.jsonl").open() as f:
        out = [json.loads(line) for line in f if line.strip()]
    out.sort(key=lambda r: len(FMT.full(r["problem"], r["steps"])))
    return out


def prefixes(row, n=2, seed=0):
    return [GenRequest(FMT.prefix(row["problem"], row["steps"][: i + 1]), n, seed + i, row["id"])
            for i in range(len(row["steps"]) - 1)]


def run(backend, reqs):
    backend.record = {}
    out = backend.generate(reqs, SAMPLING)
    rec, backend.record = backend.record, None
    return out, rec


@pytest.mark.parametrize("prefix_reuse", [True, False], ids=["trunk", "plain"])
def test_logprobs_alone_equal_logprobs_in_a_mixed_padded_batch(rows, prefix_reuse):
    import torch

    be = recording(prefix_reuse)
    mine = rows[len(rows) // 2]
    target = prefixes(mine, n=2, seed=100)[1]  # step 1 of a mid-length solution, binary-search's wave of 2
    short, long_ = rows[0], rows[-1]
    batch = (prefixes(long_, seed=7) + [GenRequest("P", 2, 3, "one")]  # a one-token prompt: an empty past
             + prefixes(mine, n=2, seed=100)  # its own shorter and longer prefixes: found in / next to a trunk
             + prefixes(short, seed=11))
    assert target in batch
    comps_alone, alone = run(be, [target])
    comps_mixed, mixed = run(be, batch)
    # Same seed, same distribution at every step -> the same continuations.
    assert [c.text for c in comps_alone[0]] == [c.text for c in comps_mixed[batch.index(target)]]
    steps = 0
    for key, seq in alone.items():
        assert len(seq) == len(mixed[key])
        for t, (x, y) in enumerate(zip(seq, mixed[key], strict=True)):
            diff = float((x - y).abs().max())
            assert diff < TOL, f"{key[2]}: decode step {t}: log-probabilities alone vs mixed differ by {diff:.2e}"
            steps += 1
    assert steps >= 4
    # The first token's distribution is the model's for the unpadded prompt.
    ids = torch.tensor([be.encode_prompt(target.prompt)])
    with torch.inference_mode():
        ref = torch.log_softmax(be.model(input_ids=ids).logits[0, -1].double(), -1)
    for lp in (alone[(target.prompt, target.seed, 0)][0], mixed[(target.prompt, target.seed, 1)][0]):
        assert float((lp - ref).abs().max()) < TOL


def test_first_token_distribution_independent_of_n_and_path(rows):
    """A request of n=8 (per-step) and one of n=2 (binary-search) of the same prompt see the same first-token
    distribution, on both paths (the sampler's draws differ; the distribution may not)."""
    trunk, plain = recording(True), recording(False)
    mine = rows[len(rows) // 3]
    p = FMT.prefix(mine["problem"], mine["steps"][:2])
    firsts = []
    for be in (trunk, plain):
        _, r8 = run(be, [GenRequest(p, 8, 1, mine["id"])])
        _, r2 = run(be, prefixes(rows[-1], seed=5) + [GenRequest(p, 2, 2, mine["id"])] + prefixes(rows[0], seed=9))
        firsts += [r8[(p, 1, 7)][0], r2[(p, 2, 1)][0]]
    for lp in firsts[1:]:
        assert float((lp - firsts[0]).abs().max()) < TOL
