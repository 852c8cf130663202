"""``--kind implicit``: a PRM read through the language model's own head (Yuan et al. 2024, "Free Process Rewards
without Process Labels"; PRIME), trained here on mcprm's step labels.

Two copies of the base causal LM: the *policy* (trained) and the *reference* (frozen). Step ``k``'s log-odds of
"the solution is good up to step k" is

    q_k = beta x sum over the solution's tokens up to step k's separator of (log p_policy - log p_reference) + b

(the header with the problem and the separator tokens themselves left out; ``b`` one trained scalar; ``beta``
fixed, TrainConfig.beta). So the
score is read from what the model expected at every token of every step, not from one hidden state at the
separator: on the bundled task a token-classification head on the 1M-parameter model never learned to compare
what was written with what it expected, while the model's own likelihood finds the first error at F1 0.80
(a recipe study on the bundled task). The loss, targets, class balance, split and threshold are those of the
head kind: :class:`ImplicitPrm` returns 2-class logits ``[0, q]`` at every position, so
:func:`pipeline.training.collate.step_loss` and :func:`pipeline.training.score.predict_probs` read it unchanged.

Saved as two plain causal LMs (``DIR`` the policy, ``DIR/reference`` the reference; both load with
``AutoModelForCausalLM``) and ``config.json``'s ``mcprm_prm`` (``kind: implicit``, ``bias``). Scoring costs two
forward passes.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

REFERENCE_DIR = "reference"


@cache
def _module():  # the class, defined once torch is needed (light imports)
    import torch

    class ImplicitPrm(torch.nn.Module):
        """Policy + frozen reference + bias; ``forward`` gives ``logits`` of shape (batch, length, 2)."""

        wants_response_start = True  # forward takes where each row's solution starts (after its header)
        logits_per_token = 2  # (vocab) float32 logits of two models per token: score.predict_probs's batch budget

        def __init__(self, policy, reference, sep_id: int, bias: float = 0.0, beta: float = 1.0):
            super().__init__()
            self.policy = policy
            self.reference = reference
            for p in self.reference.parameters():
                p.requires_grad_(False)
            self.reference.eval()
            self.sep_id = int(sep_id)
            self.beta = float(beta)
            self.bias = torch.nn.Parameter(torch.tensor(float(bias)))
            self.config = policy.config  # what the Trainer reads from a model
            # the Trainer's checkpoints leave the frozen reference out (train.PrmTrainer._save); loading one back
            # it finds exactly these keys missing, which it then accepts
            self._keys_to_ignore_on_save = [k for k in self.state_dict() if k.startswith("reference.")]

        def tie_weights(self):
            self.policy.tie_weights()

        def train(self, mode: bool = True):
            super().train(mode)
            self.reference.eval()  # frozen: never dropout
            return self

        def gradient_checkpointing_enable(self, **kw):
            self.policy.gradient_checkpointing_enable(**kw)

        @staticmethod
        def _token_logprobs(model, input_ids, attention_mask):
            logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
            # [t] = log p(ids[t + 1] | ids[..t]); gather - logsumexp keeps no second (batch, length, vocab) tensor
            got = logits.gather(-1, input_ids[:, 1:, None])[..., 0] - torch.logsumexp(logits, dim=-1)
            return torch.nn.functional.pad(got, (1, 0))  # aligned with input_ids: [t] = log p(ids[t])

        def forward(self, input_ids, attention_mask=None, response_start=None, **_):
            if attention_mask is None:
                attention_mask = torch.ones_like(input_ids)
            lp = self._token_logprobs(self.policy, input_ids, attention_mask)
            with torch.no_grad():
                lr = self._token_logprobs(self.reference, input_ids, attention_mask)
            d = lp - lr
            n = input_ids.shape[1]
            pos = torch.arange(n, device=input_ids.device)[None, :]
            keep = (attention_mask > 0) & (input_ids != self.sep_id)
            if response_start is not None:
                keep = keep & (pos >= response_start.to(input_ids.device)[:, None])
            q = self.beta * torch.cumsum(d * keep, dim=1) + self.bias
            logits = torch.stack([torch.zeros_like(q), q], dim=-1)
            return _Out(logits)

    class _Out:
        def __init__(self, logits):
            self.logits = logits

    return ImplicitPrm


def build(policy, reference, sep_id: int, bias: float = 0.0, beta: float = 1.0):
    """An :class:`ImplicitPrm` over the two causal LMs."""
    return _module()(policy, reference, sep_id, bias, beta)


def load_base_implicit(base: str, tok, sep_id: int, dtype):
    """Policy and reference from ``base`` (float32 master weights), embeddings grown to the tokenizer's size."""
    import transformers

    pol = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
    ref = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
    for m in (pol, ref):
        if len(tok) > m.get_input_embeddings().num_embeddings:
            m.resize_token_embeddings(len(tok))
        m.config.pad_token_id = tok.pad_token_id
    return build(pol, ref, sep_id)


def save(model, tok, out: Path, prm_cfg: dict) -> None:
    """The policy in ``out``, the reference in ``out/reference``; ``mcprm_prm`` on the policy's config."""
    model.policy.config.mcprm_prm = {**prm_cfg, "kind": "implicit", "bias": float(model.bias.detach().cpu()),
                                     "beta": model.beta,
                                     "reference": REFERENCE_DIR}
    model.policy.save_pretrained(out)
    tok.save_pretrained(out)
    ref_dir = out / REFERENCE_DIR
    model.reference.save_pretrained(ref_dir)
    tok.save_pretrained(ref_dir)


def load(path: str, prm: dict, sep_id: int, dtype, device: str):
    """A saved implicit PRM (:func:`save`), on ``device``, in eval mode."""
    import transformers

    p = Path(path)
    ref_dir = p / prm.get("reference", REFERENCE_DIR)
    if not (ref_dir / "config.json").exists():
        raise FileNotFoundError(f"{path}: an implicit PRM needs its reference model in {ref_dir} (written by "
                                "`mcprm train --kind implicit`)")
    pol = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    ref = transformers.AutoModelForCausalLM.from_pretrained(ref_dir, dtype=dtype)
    return build(pol, ref, sep_id, float(prm.get("bias", 0.0)), float(prm.get("beta", 1.0))).to(device).eval()
