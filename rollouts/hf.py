"""Transformers backend (CPU or GPU) with its own batched decode loop and prefix KV reuse.

How a ``generate`` call runs:

1. Every prompt is tokenized whole (so token boundaries are those of the full prompt).
2. Requests are ordered so that a group's requests (one solution's step prefixes) stay together, and cut into
   micro-batches of at most ``max_batch_rows`` sample rows (a request's ``n`` rows are never split).
3. With ``prefix_reuse=True`` each request's prompt minus its last token is taken from a *trunk*: the KV
   cache of a token sequence already encoded in this call. A prompt that is a prefix of a trunk (step i of a
   solution whose step i+1 was encoded) costs nothing; otherwise only the tokens after the longest common
   prefix with a trunk are encoded, once, whatever ``n`` is. The trunk's KV is then expanded to the
   request's ``n`` rows (left-padded to a common length) and decoding starts by feeding the last prompt token.
   With ``prefix_reuse=False`` (the benchmark baseline) each sample row re-encodes its whole prompt.
4. All rows of the micro-batch decode together; finished rows (EOS, stop string, length) are dropped.

Sampling is reproducible per request: each request owns a ``torch.Generator`` seeded with ``request.seed``
that draws ``n`` uniforms per decode step (one per sample, used by inverse-CDF sampling), so a request gives
the same samples whatever else is in the batch, up to floating-point differences between batch shapes. Sample
i is the i-th of those uniforms per step, so it depends on the request's ``n`` as well as its seed (vLLM's
depends on ``seed + i`` only): the same ``(prompt, seed, n)`` gives the same samples, which is what the scheduler
keeps fixed for a wave (rollouts.base.GenRequest). Measured with the bundled model: a request's next-token
log-probabilities at every decode step agree alone and in a mixed, left-padded batch to about 2e-5 on both
paths, and its first token's with a plain forward pass of the unpadded prompt
(tests/rollouts/test_hf_batch_invariance.py, bench/bench_hf_batch_invariance.py).
Prefix reuse needs a decoder with full attention in every layer (Llama, Qwen2, ...); sliding-window or
linear-attention models must use ``prefix_reuse=False`` or the vLLM backend.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence
from dataclasses import dataclass

from .base import Completion, Counters, GenRequest, SamplingConfig, require

_TORCH_HINT = "pip install torch --index-url https://download.pytorch.org/whl/cpu  (or a CUDA build on GPU)"


@dataclass
class _Trunk:
    """An encoded token sequence of one group: its ids and per-layer (key, value) of shape [1, H, L, D]."""

    ids: list[int]
    kv: list[tuple]


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class HFBackend:
    """Generation with a ``transformers`` causal LM; see the module docstring for the algorithm."""

    name = "hf"

    def __init__(
        self,
        model_path: str,
        tokenizer_path: str | None = None,
        device: str = "cpu",
        dtype=None,
        max_batch_rows: int = 64,
        prefix_reuse: bool = True,
    ):
        torch = require("torch", _TORCH_HINT)
        transformers = require("transformers", "pip install transformers")
        if max_batch_rows < 1:
            raise ValueError(f"max_batch_rows must be >= 1, got {max_batch_rows}")
        from .devices import device_problem

        if why := device_problem(device):  # a clear message, not torch's RuntimeError / AssertionError
            raise ValueError(why)
        self._torch = torch
        self.model_path = str(model_path)
        self.device = torch.device(device)
        self.max_batch_rows = max_batch_rows
        self.prefix_reuse = prefix_reuse
        self.stats = Counters()

        try:  # no "Loading weights" progress bars in mcprm's output
            transformers.utils.logging.disable_progress_bar()
        except AttributeError:  # pragma: no cover - older transformers
            pass
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer_path or model_path))
        model = transformers.AutoModelForCausalLM.from_pretrained(self.model_path)
        if dtype is None or dtype == "auto":
            dtype = torch.float32 if self.device.type == "cpu" else torch.bfloat16
        elif isinstance(dtype, str):
            if not isinstance(getattr(torch, dtype, None), torch.dtype):
                raise ValueError(f"Unknown dtype {dtype!r}; use e.g. 'float32', 'bfloat16' or 'float16'.")
            dtype = getattr(torch, dtype)
        self.model = model.to(device=self.device, dtype=dtype).eval()
        self.dtype = dtype

        cfg = self.model.config.get_text_config() if hasattr(self.model.config, "get_text_config") else None
        cfg = cfg or self.model.config
        self.max_positions = getattr(cfg, "max_position_embeddings", None)
        layer_types = set(getattr(cfg, "layer_types", None) or ["full_attention"])
        if prefix_reuse and (layer_types != {"full_attention"} or getattr(cfg, "use_sliding_window", False)):
            raise ValueError(
                f"prefix_reuse needs full attention in every layer; {self.model_path} has layer types "
                f"{sorted(layer_types)}. Use prefix_reuse=False or the vllm backend."
            )

        eos: set[int] = set()
        for src in (getattr(self.model, "generation_config", None), self.tokenizer):
            ids = getattr(src, "eos_token_id", None)
            if ids is not None:
                eos.update([ids] if isinstance(ids, int) else ids)
        if not eos:
            raise ValueError(
                f"{self.model_path}: neither the tokenizer nor generation_config defines an EOS token."
            )
        self.eos_ids = eos
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(eos)

        params = inspect.signature(self.model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)

    # ------------------------------------------------------------------ public API

    def generate(self, requests: Sequence[GenRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        """Return, for every request, ``request.n`` independent completions (see module docstring)."""
        t0 = time.perf_counter()
        if sampling.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {sampling.max_new_tokens}")
        if sampling.temperature < 0 or not 0 < sampling.top_p <= 1:
            raise ValueError(f"temperature must be >= 0 and 0 < top_p <= 1, got {sampling}")
        encoded = self._tokenize(requests)
        results: list[list[Completion]] = [[] for _ in requests]

        # Keep a group's requests adjacent (in order of the group's first appearance), then cut micro-batches.
        first_seen: dict[str, int] = {}
        for i, r in enumerate(requests):
            first_seen.setdefault(r.group, i)
        order = sorted(
            (i for i, r in enumerate(requests) if r.n > 0), key=lambda i: (first_seen[requests[i].group], i)
        )
        batches: list[list[int]] = []
        rows = 0
        for i in order:
            if batches and rows + requests[i].n <= self.max_batch_rows:
                batches[-1].append(i)
                rows += requests[i].n
            else:
                batches.append([i])
                rows = requests[i].n

        last_batch = {requests[i].group: b for b, batch in enumerate(batches) for i in batch}
        trunks: dict[str, list[_Trunk]] = {}
        with self._torch.inference_mode():
            for b, batch in enumerate(batches):
                outs = self._run_batch(
                    [requests[i] for i in batch], [encoded[i] for i in batch], sampling, trunks
                )
                for i, comps in zip(batch, outs, strict=True):
                    results[i] = comps
                # Trunks of groups that no later micro-batch needs are freed.
                for g in [g for g in trunks if last_batch[g] <= b]:
                    del trunks[g]

        self.stats.requests += len(requests)
        self.stats.samples += sum(r.n for r in requests)
        self.stats.generated_tokens += sum(c.num_tokens for cs in results for c in cs)
        self.stats.generate_seconds += time.perf_counter() - t0
        return results

    def close(self) -> None:
        self.model = None

    # ------------------------------------------------------------------ internals

    def encode_prompt(self, prompt: str) -> list[int]:
        """The token ids the model is fed for ``prompt`` (rollout reuse compares them with a continuation's)."""
        bos = self.tokenizer.bos_token
        # A chat-template prompt already starts with the BOS text: do not add a second one.
        add_special = not (bos and prompt.startswith(bos))
        return self.tokenizer(prompt, add_special_tokens=add_special)["input_ids"]

    def _tokenize(self, requests: Sequence[GenRequest]) -> list[list[int]]:
        out = []
        for i, r in enumerate(requests):
            if not isinstance(r.prompt, str) or r.n < 0:
                raise ValueError(f"request {i}: prompt must be a string and n >= 0 (got n={r.n})")
            ids = self.encode_prompt(r.prompt)
            if not ids:
                raise ValueError(f"request {i}: the prompt encodes to zero tokens; give a non-empty prompt.")
            if self.max_positions and len(ids) >= self.max_positions:
                raise ValueError(
                    f"request {i} (group {r.group!r}): prompt has {len(ids)} tokens, the model's context is "
                    f"{self.max_positions}; shorten the problem/solution or use a longer-context model."
                )
            out.append(ids)
        return out

    def _forward(self, input_ids, attention_mask, position_ids, cache, last_only: bool):
        kwargs = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            self._cache_kw: cache,
            "use_cache": True,
        }
        if last_only and self._keep_kw:
            kwargs[self._keep_kw] = 1
        return self.model(**kwargs).logits

    def _new_cache(self, kv: list[tuple] | None = None):
        transformers = require("transformers", "pip install transformers")
        cache = (
            transformers.DynamicCache()
            if kv is not None
            else transformers.DynamicCache(config=self.model.config)
        )
        for layer_idx, (k, v) in enumerate(kv or []):
            cache.update(k, v, layer_idx)
        return cache

    @staticmethod
    def _cache_tensors(cache) -> list[tuple]:
        if hasattr(cache, "layers"):
            return [(layer.keys, layer.values) for layer in cache.layers]
        return list(zip(cache.key_cache, cache.value_cache, strict=True))  # transformers < 4.56

    def _trunk_kv(self, trunks: list[_Trunk], target: list[int]) -> tuple[list[tuple], int]:
        """KV of ``target`` (shape [1, H, len, D] per layer) built from the best trunk; returns (kv, cached)."""
        torch = self._torch
        best, best_lcp = None, 0
        for t in trunks:
            n = _lcp(t.ids, target)
            if n > best_lcp:
                best, best_lcp = t, n
        m = len(target)
        if best is not None and best_lcp == m:
            return [(k[:, :, :m], v[:, :, :m]) for k, v in best.kv], m
        past = [(k[:, :, :best_lcp], v[:, :, :best_lcp]) for k, v in best.kv] if best_lcp else None
        cache = self._new_cache(past or [])
        ids = torch.tensor([target[best_lcp:]], device=self.device)
        pos = torch.arange(best_lcp, m, device=self.device)[None]
        mask = torch.ones(1, m, dtype=torch.long, device=self.device)
        self._forward(ids, mask, pos, cache, last_only=True)
        kv = self._cache_tensors(cache)
        # The new trunk replaces trunks that are prefixes of it.
        trunks[:] = [t for t in trunks if not (len(t.ids) <= m and target[: len(t.ids)] == t.ids)]
        trunks.append(_Trunk(list(target), kv))
        return kv, best_lcp

    def _run_batch(self, reqs, encoded, sampling: SamplingConfig, trunks: dict) -> list[list[Completion]]:
        if not self.prefix_reuse:
            return self._run_batch_plain(reqs, encoded, sampling)
        torch = self._torch
        dev = self.device
        row_req = [j for j, r in enumerate(reqs) for _ in range(r.n)]
        row_sample = [s for r in reqs for s in range(r.n)]
        lens = [len(encoded[j]) for j in row_req]
        B = len(row_req)

        # Past of every request = its prompt minus the last token, taken from (or added to) the group's trunks.
        # Longest prompts first, so that the shorter prompts of a solution are found inside their trunk.
        kv_by_req: dict[int, list[tuple] | None] = {}
        computed = 0
        for j in sorted(range(len(reqs)), key=lambda j: -len(encoded[j])):
            target = encoded[j][:-1]
            if not target:
                kv_by_req[j] = None
                continue
            kv, cached = self._trunk_kv(trunks.setdefault(reqs[j].group, []), target)
            kv_by_req[j] = kv
            computed += len(target) - cached
        computed += B  # the last prompt token is fed once per sample row

        # Left-pad every past to P positions and expand it to the request's n rows.
        P = max(lens) - 1
        mask = torch.zeros(B, P + 1, dtype=torch.long, device=dev)
        for r, L in enumerate(lens):
            mask[r, P - (L - 1) :] = 1
        layers = []
        ref = next((kv for kv in kv_by_req.values() if kv is not None), None)
        for li in range(len(ref) if ref else 0):
            ks, vs = [], []
            for j, r in enumerate(reqs):
                if kv_by_req[j] is None:  # a one-token prompt: an all-padding past
                    k = v = ref[li][0].new_zeros(ref[li][0].shape[:2] + (0,) + ref[li][0].shape[3:])
                else:
                    k, v = kv_by_req[j][li]
                pad = P - k.shape[2]
                if pad:
                    k = torch.nn.functional.pad(k, (0, 0, pad, 0))
                    v = torch.nn.functional.pad(v, (0, 0, pad, 0))
                ks.append(k.expand(r.n, -1, -1, -1))
                vs.append(v.expand(r.n, -1, -1, -1))
            layers.append((torch.cat(ks), torch.cat(vs)))
        cache = self._new_cache(layers)
        input_ids = torch.tensor([[encoded[j][-1]] for j in row_req], device=dev)
        positions = torch.tensor([[L - 1] for L in lens], device=dev)
        self.stats.prompt_tokens += sum(lens)
        self.stats.cached_prompt_tokens += sum(lens) - computed
        return self._decode(reqs, row_req, row_sample, lens, input_ids, mask, positions, cache, sampling)

    def _run_batch_plain(self, reqs, encoded, sampling: SamplingConfig) -> list[list[Completion]]:
        """Every row re-encodes its whole prompt (left-padded batch prefill)."""
        torch = self._torch
        row_req = [j for j, r in enumerate(reqs) for _ in range(r.n)]
        row_sample = [s for r in reqs for s in range(r.n)]
        lens = [len(encoded[j]) for j in row_req]
        T = max(lens)
        input_ids = torch.full((len(row_req), T), self.pad_id, dtype=torch.long)
        mask = torch.zeros(len(row_req), T, dtype=torch.long)
        for r, j in enumerate(row_req):
            input_ids[r, T - lens[r] :] = torch.tensor(encoded[j])
            mask[r, T - lens[r] :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        self.stats.prompt_tokens += sum(lens)
        return self._decode(
            reqs,
            row_req,
            row_sample,
            lens,
            input_ids.to(self.device),
            mask.to(self.device),
            positions.to(self.device),
            self._new_cache(),
            sampling,
        )

    def _decode(self, reqs, row_req, row_sample, lens, input_ids, mask, positions, cache, sampling):
        torch = self._torch
        dev = self.device
        B = len(row_req)
        gens = [torch.Generator(device="cpu").manual_seed(int(r.seed)) for r in reqs]
        limit = [
            min(sampling.max_new_tokens, self.max_positions - L)
            if self.max_positions
            else sampling.max_new_tokens
            for L in lens
        ]
        tokens: list[list[int]] = [[] for _ in range(B)]
        done: list[Completion | None] = [None] * B
        stops = tuple(s for s in sampling.stop if s)
        extra_stop = set(sampling.stop_token_ids)
        active = list(range(B))  # row ids still decoding, in cache order
        greedy = sampling.temperature == 0
        while active:
            logits = self._forward(input_ids, mask, positions, cache, last_only=True)[:, -1, :].float()
            if greedy:
                nxt = logits.argmax(-1)
            else:
                rows_req = [row_req[r] for r in active]
                nxt = self._sample(logits, sampling, rows_req, [row_sample[r] for r in active], gens, reqs)
            nxt_list = nxt.tolist()
            finished_pos = []
            texts = None
            if stops:
                texts = self.tokenizer.batch_decode(
                    [tokens[r] + [t] for r, t in zip(active, nxt_list, strict=True)], skip_special_tokens=True
                )
            for p, (r, t) in enumerate(zip(active, nxt_list, strict=True)):
                tokens[r].append(t)
                if (t in self.eos_ids and not sampling.ignore_eos) or t in extra_stop:
                    done[r] = Completion(self._text(tokens[r][:-1]), len(tokens[r]), "stop", tuple(tokens[r][:-1]))
                elif stops and (cut := _first_stop(texts[p], stops)) is not None:
                    done[r] = Completion(texts[p][:cut], len(tokens[r]), "stop", tuple(tokens[r]))
                elif len(tokens[r]) >= limit[r]:
                    done[r] = Completion(self._text(tokens[r]), len(tokens[r]), "length", tuple(tokens[r]))
                if done[r] is not None:
                    finished_pos.append(p)
            if len(finished_pos) == len(active):
                break
            mask = torch.cat([mask, torch.ones(mask.shape[0], 1, dtype=mask.dtype, device=dev)], dim=1)
            positions = positions[:, -1:] + 1
            input_ids = nxt[:, None]
            if finished_pos:
                gone = set(finished_pos)
                keep = [p for p in range(len(active)) if p not in gone]
                idx = torch.tensor(keep, device=dev)
                active = [active[p] for p in keep]
                cache.batch_select_indices(idx)
                mask, positions, input_ids = mask[idx], positions[idx], input_ids[idx]
                # Drop left-padding columns no remaining row needs.
                drop = int((mask.cumsum(-1) == 0).sum(-1).min())
                if drop and all(
                    type(layer).__name__ == "DynamicLayer" for layer in getattr(cache, "layers", [None])
                ):
                    for layer in cache.layers:
                        layer.keys = layer.keys[:, :, drop:]
                        layer.values = layer.values[:, :, drop:]
                    mask = mask[:, drop:]
        out: list[list[Completion]] = [[] for _ in reqs]
        for r in range(B):
            out[row_req[r]].append(done[r])
        return out

    def _sample(self, logits, sampling: SamplingConfig, req_of_row, sample_of_row, gens, reqs):
        torch = self._torch
        probs = torch.softmax(logits / sampling.temperature, dim=-1)
        if sampling.top_p < 1.0:
            probs, order = probs.sort(dim=-1, descending=True)
            cum = probs.cumsum(-1)
            # Keep the smallest set of top tokens whose mass reaches top_p (always at least one token).
            probs = probs.masked_fill(cum - probs >= sampling.top_p, 0.0)
        else:
            order = None
        # n uniforms per active request per step from the request's own generator.
        draws: dict[int, list[float]] = {}
        for j in dict.fromkeys(req_of_row):
            draws[j] = torch.rand(reqs[j].n, generator=gens[j], dtype=torch.float64).tolist()
        u = torch.tensor(
            [draws[j][s] for j, s in zip(req_of_row, sample_of_row, strict=True)], device=probs.device
        )
        cdf = probs.double().cumsum(-1)
        choice = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).clamp(max=probs.shape[-1] - 1)
        return (order.gather(-1, choice) if order is not None else choice)[:, 0]

    def _text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)


def _first_stop(text: str, stops: tuple[str, ...]) -> int | None:
    hits = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(hits) if hits else None
