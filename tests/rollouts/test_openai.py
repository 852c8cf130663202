"""OpenAIBackend against a real HTTP server (tests/rollouts/_fake_openai_server.py) in a subprocess."""

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from rollouts import GenRequest, SamplingConfig
from rollouts.openai_backend import OpenAIBackend, OpenAIServerError, split_tokens

SERVER = Path(__file__).with_name("_fake_openai_server.py")
SAMPLING = SamplingConfig(temperature=1.0, top_p=0.95, max_new_tokens=10, stop=("\n",))


@pytest.fixture(scope="module")
def server(tiny_model):
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), str(tiny_model)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def requests_():
    return [
        GenRequest(f"Problem: {p}\nSolution:\n", n=n, seed=s, group=p)
        for p, n, s in [("1+1", 3, 5), ("2+2", 1, 6), ("3+3", 4, 7)]
    ]


def test_completions_match_the_backend_behind_the_server(server, tiny_backend):
    client = OpenAIBackend(server, model="tiny", max_concurrency=2, max_retries=3, backoff_s=0.01)
    reqs = requests_()
    _get(f"{server}/arm-failures/1")  # the next POST answers 503: one retry
    got = client.generate(reqs, SAMPLING)
    want = tiny_backend.generate(reqs, SAMPLING)
    assert [[c.text for c in cs] for cs in got] == [[c.text for c in cs] for cs in want]
    assert [[c.finish_reason for c in cs] for cs in got] == [[c.finish_reason for c in cs] for cs in want]
    # usage.completion_tokens is split across choices: per-request sums are exact.
    assert [sum(c.num_tokens for c in cs) for cs in got] == [sum(c.num_tokens for c in cs) for cs in want]
    assert got[1][0].num_tokens == want[1][0].num_tokens  # n == 1: exact
    assert client.stats.extra["retries"] == 1
    assert (client.stats.requests, client.stats.samples) == (3, 8)
    assert client.stats.generated_tokens == sum(c.num_tokens for cs in want for c in cs)
    client.close()


def test_retries_then_gives_up(server):
    _get(f"{server}/arm-failures/3")
    client = OpenAIBackend(server + "/v1", model="tiny", max_retries=2, backoff_s=0.01)
    with pytest.raises(OpenAIServerError, match="failed request 0 .* 3 times; last error: HTTP 503"):
        client.generate([GenRequest("Problem: 1\nSolution:\n", 1, 0)], SAMPLING)
    assert client.stats.extra["retries"] == 2


def test_client_errors_are_not_retried(server):
    before = _get(f"{server}/stats")["posts"]
    client = OpenAIBackend(server, model="no-such-model", max_retries=5, backoff_s=0.01)
    with pytest.raises(OpenAIServerError, match="HTTP 404.*no-such-model"):
        client.generate([GenRequest("Problem: 1\nSolution:\n", 1, 0)], SAMPLING)
    assert _get(f"{server}/stats")["posts"] == before + 1


def test_connection_refused_is_retried_then_reported():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = OpenAIBackend(f"http://127.0.0.1:{port}", model="tiny", max_retries=2, backoff_s=0.01)
    with pytest.raises(OpenAIServerError, match="3 times; last error: .*(Connection|refused)"):
        client.generate([GenRequest("p", 1, 0)], SAMPLING)


def test_split_tokens():
    assert split_tokens(10, ["aaaa", "a", "aaaaa"]) == [4, 1, 5]
    assert sum(split_tokens(7, ["ab", "abc", "", "a"])) == 7
    assert split_tokens(0, ["x", "y"]) == [0, 0]
    assert split_tokens(5, []) == []
