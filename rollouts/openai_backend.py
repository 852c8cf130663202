"""Any OpenAI-compatible completions server (``vllm serve``, sglang, TGI ...) by base URL.

One POST ``/v1/completions`` per request with ``n``, ``seed``, ``temperature``, ``top_p``, ``max_tokens`` and
``stop``; up to ``max_concurrency`` requests in flight (a thread pool); retries with exponential backoff and
jitter on 408/429/5xx and connection errors (``Retry-After`` is honoured). Other errors fail at once with
the server's message.

Token counts: the completions API reports ``usage.completion_tokens`` for all ``n`` choices together, not
per choice (without logprobs). With ``n == 1`` the count is exact; with ``n > 1`` the total is split across
choices in proportion to their text length (largest-remainder rounding, so the per-request sum is exact).
``stats.prompt_tokens`` counts each sample's prompt (``usage.prompt_tokens * n``);
``stats.cached_prompt_tokens`` uses ``usage.prompt_tokens_details.cached_tokens`` when the server sends it.
Uses ``httpx`` when installed, else the standard library.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from .base import Completion, Counters, GenRequest, SamplingConfig

RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class OpenAIServerError(RuntimeError):
    """The server refused a request, or kept failing after all retries."""


def split_tokens(total: int, texts: Sequence[str]) -> list[int]:
    """Split ``total`` tokens across ``texts`` in proportion to their lengths (sum is exactly ``total``)."""
    if not texts:
        return []
    weights = [max(len(t), 1) for t in texts]
    w = sum(weights)
    shares = [total * x / w for x in weights]
    counts = [int(s) for s in shares]
    rest = total - sum(counts)
    for i in sorted(range(len(texts)), key=lambda i: counts[i] - shares[i])[:rest]:
        counts[i] += 1
    return counts


class OpenAIBackend:
    """Rollouts from an OpenAI-compatible ``/v1/completions`` endpoint; see the module docstring."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        max_concurrency: int = 16,
        max_retries: int = 5,
        timeout_s: float = 120,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
    ):
        if max_concurrency < 1 or max_retries < 0:
            raise ValueError("max_concurrency must be >= 1 and max_retries >= 0")
        base = base_url.rstrip("/")
        self.url = base + ("/completions" if base.endswith("/v1") else "/v1/completions")
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.stats = Counters()
        self.stats.extra["retries"] = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_concurrency, thread_name_prefix="mcprm-openai")
        try:
            import httpx

            self._client = httpx.Client(
                timeout=timeout_s, limits=httpx.Limits(max_connections=max_concurrency)
            )
        except ImportError:
            self._client = None

    # ------------------------------------------------------------------ HTTP

    def _headers(self) -> dict:
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def _post(self, payload: dict) -> tuple[int, dict, str]:
        """(status, headers, body). Raises OSError-like exceptions for connection problems."""
        data = json.dumps(payload).encode()
        if self._client is not None:
            r = self._client.post(self.url, content=data, headers=self._headers())
            return r.status_code, dict(r.headers), r.text
        req = urllib.request.Request(self.url, data=data, headers=self._headers(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                return r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers or {}), e.read().decode(errors="replace")

    def _connection_errors(self) -> tuple[type[BaseException], ...]:
        errs: tuple[type[BaseException], ...] = (
            OSError,
            TimeoutError,
        )  # URLError, ConnectionError are OSError
        if self._client is not None:
            import httpx

            errs += (httpx.TransportError,)
        return errs

    def _request(self, i: int, req: GenRequest, sampling: SamplingConfig) -> list[Completion]:
        payload = {
            "model": self.model,
            "prompt": req.prompt,
            "n": req.n,
            "seed": req.seed,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_new_tokens,
        }
        if sampling.stop:
            payload["stop"] = list(sampling.stop)
        if sampling.stop_token_ids:  # a vLLM server extension
            payload["stop_token_ids"] = list(sampling.stop_token_ids)
        if sampling.ignore_eos:
            payload["ignore_eos"] = True
        last = ""
        for attempt in range(self.max_retries + 1):
            delay = min(self.backoff_s * 2**attempt, self.max_backoff_s) * (0.5 + random.random() / 2)
            try:
                status, headers, body = self._post(payload)
            except self._connection_errors() as e:
                last = f"{type(e).__name__}: {e}"
            else:
                if status == 200:
                    return self._parse(i, req, body)
                if status not in RETRY_STATUS:
                    raise OpenAIServerError(
                        f"{self.url} refused request {i} (group {req.group!r}) with HTTP {status}: {body[:500]}"
                    )
                last = f"HTTP {status}: {body[:200]}"
                retry_after = {k.lower(): v for k, v in headers.items()}.get("retry-after", "")
                if retry_after.replace(".", "", 1).isdigit():
                    delay = min(float(retry_after), self.max_backoff_s)
            if attempt < self.max_retries:
                with self._lock:
                    self.stats.extra["retries"] += 1
                time.sleep(delay)
        raise OpenAIServerError(
            f"{self.url} failed request {i} (group {req.group!r}) {self.max_retries + 1} times; last error: "
            f"{last}. Check that the server is up and serves model {self.model!r}."
        )

    def _parse(self, i: int, req: GenRequest, body: str) -> list[Completion]:
        try:
            data = json.loads(body)
            choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
            texts = [c["text"] for c in choices]
        except (ValueError, KeyError, TypeError) as e:
            raise OpenAIServerError(
                f"{self.url}: malformed completions response for request {i}: {body[:300]}"
            ) from e
        if len(texts) != req.n:
            raise OpenAIServerError(
                f"{self.url} returned {len(texts)} choices for request {i} with n={req.n}; the server must "
                "support the 'n' parameter of /v1/completions."
            )
        usage = data.get("usage") or {}
        total = usage.get("completion_tokens")
        counts = (
            split_tokens(int(total), texts) if total is not None else [max(1, len(t) // 4) for t in texts]
        )
        comps = [
            Completion(t, k, "length" if c.get("finish_reason") == "length" else "stop")
            for t, k, c in zip(texts, counts, choices, strict=True)
        ]
        with self._lock:
            self.stats.requests += 1
            self.stats.samples += req.n
            self.stats.generated_tokens += sum(counts)
            self.stats.prompt_tokens += int(usage.get("prompt_tokens") or 0) * req.n
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
            self.stats.cached_prompt_tokens += int(cached or 0)
            if total is None:
                self.stats.extra["token_counts_estimated"] = True
        return comps

    # ------------------------------------------------------------------ public API

    def generate(self, requests: Sequence[GenRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        """Send every request (up to ``max_concurrency`` at once); results in request order."""
        t0 = time.perf_counter()
        futures = [
            self._pool.submit(self._request, i, r, sampling) if r.n > 0 else None
            for i, r in enumerate(requests)
        ]
        try:
            results = [f.result() if f is not None else [] for f in futures]
        except BaseException:
            for f in futures:
                if f is not None:
                    f.cancel()
            raise
        finally:
            self.stats.generate_seconds += time.perf_counter() - t0
        return results

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._client is not None:
            self._client.close()
