import pytest

from rollouts import GenRequest, SamplingConfig, backend_spec
from rollouts.prompts import make_prompt_format
from tests.rollouts.conftest import BUNDLED_MODEL

FMT = make_prompt_format("plain")
STEPS = ["We add 2 and 3.", "So 2 + 3 = 5.", "The answer is \\boxed{5}."]
SAMPLE = SamplingConfig(temperature=1.0, top_p=0.95, max_new_tokens=12)
GREEDY = SamplingConfig(temperature=0.0, max_new_tokens=12)


def solution_requests(problem="What is 2 + 3?", n=3, seed=0, group="sol"):
    """One request per step prefix of one solution (what a labeling strategy sends)."""
    return [
        GenRequest(FMT.prefix(problem, STEPS[: i + 1]), n=n, seed=seed + 1000 * i, group=group)
        for i in range(len(STEPS))
    ]


def texts(completions):
    return [[c.text for c in cs] for cs in completions]


def test_n_completions_per_request_with_counts(tiny_backend):
    reqs = solution_requests(n=3) + [GenRequest("Problem: x\nSolution:\n", n=5, seed=1, group="b")]
    out = tiny_backend.generate(reqs, SAMPLE)
    assert [len(cs) for cs in out] == [3, 3, 3, 5]
    for cs in out:
        for c in cs:
            assert 1 <= c.num_tokens <= SAMPLE.max_new_tokens
            assert c.finish_reason in ("stop", "length")
            if c.finish_reason == "length":
                # char-level tokenizer: at most one character per token (a random model may emit
                # special tokens, which are left out of the text)
                assert c.num_tokens == SAMPLE.max_new_tokens >= len(c.text) > 0
    assert tiny_backend.generate([GenRequest("p", n=0, seed=0)], SAMPLE) == [[]]


def test_same_seed_same_samples_different_seed_different(tiny_backend):
    reqs = solution_requests(n=4, seed=7)
    a, b = tiny_backend.generate(reqs, SAMPLE), tiny_backend.generate(reqs, SAMPLE)
    assert texts(a) == texts(b)
    # The n samples of one request are independent draws, not copies.
    assert all(len(set(t)) > 1 for t in texts(a))
    by_seed = {
        tuple(texts(tiny_backend.generate([GenRequest(reqs[0].prompt, 4, seed)], SAMPLE))[0])
        for seed in range(8)
    }
    assert len(by_seed) == 8


@pytest.mark.parametrize("backend", ["tiny_backend", "tiny_backend_plain"])
def test_request_alone_equals_request_in_batch(backend, request):
    be = request.getfixturevalue(backend)
    batch = (
        solution_requests(
            problem="Other problem, longer than the first one by a margin.", n=2, seed=3, group="o"
        )
        + solution_requests(n=3, seed=11)
        + [GenRequest("", n=2, seed=5, group="empty")]  # a one-token prompt (BOS only) in the same batch
    )
    together = texts(be.generate(batch, SAMPLE))
    for i, r in enumerate(batch):
        assert texts(be.generate([r], SAMPLE))[0] == together[i], f"request {i} differs alone vs in batch"


def test_prefix_reuse_matches_plain_generation(tiny_backend, tiny_backend_plain):
    batch = solution_requests(n=3, seed=1) + solution_requests(problem="Another one?", n=2, seed=9, group="x")
    batch.append(GenRequest("", n=2, seed=4, group="empty"))
    for sampling in (GREEDY, SAMPLE):
        assert texts(tiny_backend.generate(batch, sampling)) == texts(
            tiny_backend_plain.generate(batch, sampling)
        )


def test_micro_batches_give_same_results(tiny_model, tiny_backend):
    from rollouts.hf import HFBackend

    small = HFBackend(str(tiny_model), max_batch_rows=4)
    batch = solution_requests(n=3, seed=2) + solution_requests(problem="Q2", n=4, seed=8, group="q2")
    assert texts(small.generate(batch, SAMPLE)) == texts(tiny_backend.generate(batch, SAMPLE))


def _long_sample(be, sampling):
    """A (request, completion) whose sampled text has >= 8 characters (deterministic: fixed seeds)."""
    for seed in range(50):
        req = GenRequest(FMT.prefix("What is 2 + 3?", STEPS[:1]), n=1, seed=seed)
        c = be.generate([req], sampling)[0][0]
        if len(c.text) >= 8:
            return req, c
    raise AssertionError("no sample with 8 characters in 50 seeds")


def test_stop_strings_cut_the_text(tiny_backend):
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=24)
    req, free = _long_sample(tiny_backend, sampling)
    stop = free.text[4:6]
    with_stop = SamplingConfig(temperature=1.0, max_new_tokens=24, stop=(stop, "@@never@@"))
    c = tiny_backend.generate([req], with_stop)[0][0]
    assert c.finish_reason == "stop"
    assert c.text == free.text[: free.text.index(stop)]
    # tokens up to the one completing the stop string (>= chars: specials are not in the text)
    assert free.text.index(stop) + len(stop) <= c.num_tokens < free.num_tokens


def test_eos_ends_a_sample(tiny_model):
    from rollouts.hf import HFBackend

    be = HFBackend(str(tiny_model))
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=24)
    req, free = _long_sample(be, sampling)
    ch = free.text[5]
    be.eos_ids = be.eos_ids | {be.tokenizer.convert_tokens_to_ids(ch)}  # pretend that character is EOS
    c = be.generate([req], sampling)[0][0]
    assert (c.text, c.finish_reason) == (free.text[: free.text.index(ch)], "stop")
    assert free.text.index(ch) + 1 <= c.num_tokens < free.num_tokens


def test_token_stats(tiny_model):
    from rollouts.hf import HFBackend

    reqs = solution_requests(n=4, seed=3)
    prompt_lens = [len(r.prompt) + 1 for r in reqs]  # chars + BOS
    for reuse in (True, False):
        be = HFBackend(str(tiny_model), prefix_reuse=reuse)
        out = be.generate(reqs, SAMPLE)
        s = be.stats
        assert (s.requests, s.samples) == (3, 12)
        assert s.prompt_tokens == sum(4 * n for n in prompt_lens)
        assert s.generated_tokens == sum(c.num_tokens for cs in out for c in cs)
        if reuse:
            # Only the longest prompt (minus its last token) and one last token per row are computed.
            assert s.cached_prompt_tokens == s.prompt_tokens - (prompt_lens[-1] - 1) - 12
        else:
            assert s.cached_prompt_tokens == 0


def test_chat_prompt_gets_a_single_bos(tiny_backend, tiny_model):
    fmt = make_prompt_format("chat", str(tiny_model))
    prompt = fmt.prefix("1+1?", ["one"])
    ids = tiny_backend._tokenize([GenRequest(prompt, 1, 0)])[0]
    assert ids[0] == tiny_backend.tokenizer.bos_token_id and ids[1] != tiny_backend.tokenizer.bos_token_id
    assert len(ids) == len(prompt) - len("<s>") + 1


def test_errors(tiny_backend, tiny_model):
    with pytest.raises(ValueError, match="request 1 .*context is 512"):
        tiny_backend.generate([GenRequest("ok", 1, 0), GenRequest("x" * 600, 1, 0, group="g")], SAMPLE)
    with pytest.raises(ValueError, match="top_p"):
        tiny_backend.generate([GenRequest("ok", 1, 0)], SamplingConfig(top_p=0.0))
    with pytest.raises(ValueError, match="Unknown rollout backend"):
        backend_spec("nope")
    assert backend_spec("hf").load()(model_path=str(tiny_model)).name == "hf"  # how a run builds one


@pytest.mark.skipif(not (BUNDLED_MODEL / "config.json").exists(), reason="bundled model not trained yet")
def test_bundled_model_finishes_solutions():
    from pipeline.bundled.generator import generate_problems
    from rollouts.hf import HFBackend

    be = HFBackend(str(BUNDLED_MODEL))
    reqs = [
        GenRequest(FMT.prefix(p["problem"], p["steps"][:i]), n=4, seed=17 * i, group=p["id"])
        for p in generate_problems(n=2, seed=424242)
        for i in range(2)
    ]
    out = be.generate(reqs, SamplingConfig(temperature=1.0, max_new_tokens=256))
    comps = [c for cs in out for c in cs]
    # The bundled model ends solutions with "The answer is \boxed{X}." then EOS.
    assert sum(c.finish_reason == "stop" for c in comps) >= len(comps) * 3 // 4
    assert sum("\\boxed{" in c.text for c in comps) >= len(comps) // 2
    plain = HFBackend(str(BUNDLED_MODEL), prefix_reuse=False)
    assert texts(plain.generate(reqs, GREEDY)) == texts(be.generate(reqs, GREEDY))
