"""A real (small) OpenAI-compatible ``/v1/completions`` server over a socket, backed by the HF backend.

Usage: python _fake_openai_server.py MODEL_DIR [--fail-first N] [--fail-status 503] [--script FILE]
Prints ``PORT <n>`` on stdout once listening on 127.0.0.1. The first N POSTs answer ``--fail-status`` (to
exercise client retries); ``GET /arm-failures/N`` makes the next N POSTs fail the same way, ``GET /stats``
returns how many POSTs arrived. Used by tests/rollouts/test_openai.py.

``--script FILE`` (a scripted judge, tests/integration/test_judge.py): no model is loaded; FILE is JSON
``{"rules": [{"contains": [TEXT, ...], "reply": TEXT}, ...], "default": TEXT}`` and every choice of a request is
the reply of the first rule whose texts all occur in the prompt (else the default).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rollouts.base import GenRequest, SamplingConfig  # noqa: E402
from rollouts.hf import HFBackend  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--fail-status", type=int, default=503)
    ap.add_argument("--script", default=None)
    args = ap.parse_args()

    script = json.loads(Path(args.script).read_text()) if args.script else None
    if script is None:
        import torch

        torch.set_num_threads(1)
        backend = HFBackend(args.model)
    lock = threading.Lock()
    state = {"posts": 0, "fail_until": args.fail_first}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # keep test output clean
            pass

        def _send(self, status: int, obj: dict) -> None:
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with lock:
                state["posts"] += 1
                fail = state["posts"] <= state["fail_until"]
            if fail:
                return self._send(args.fail_status, {"error": {"message": "injected failure"}})
            if self.path != "/v1/completions":
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            if body.get("model") != "tiny":
                return self._send(404, {"error": {"message": f"model {body.get('model')!r} not found"}})
            sampling = SamplingConfig(
                temperature=float(body.get("temperature", 1.0)),
                top_p=float(body.get("top_p", 1.0)),
                max_new_tokens=int(body.get("max_tokens", 16)),
                stop=tuple(body.get("stop") or ()),
            )
            req = GenRequest(body["prompt"], n=int(body.get("n", 1)), seed=int(body.get("seed", 0)))
            if script is not None:
                reply = next((r["reply"] for r in script["rules"] if all(t in req.prompt for t in r["contains"])),
                             script.get("default", ""))
                return self._send(200, {"object": "text_completion", "model": "tiny", "choices": [
                    {"index": i, "text": reply, "finish_reason": "stop"} for i in range(req.n)],
                    "usage": {"prompt_tokens": len(req.prompt) // 4, "completion_tokens": req.n * len(reply) // 4}})
            with lock:  # one generation at a time on the shared model
                comps = backend.generate([req], sampling)[0]
            prompt_tokens = len(backend.tokenizer(req.prompt)["input_ids"])
            self._send(
                200,
                {
                    "object": "text_completion",
                    "model": "tiny",
                    "choices": [
                        {"index": i, "text": c.text, "finish_reason": c.finish_reason}
                        for i, c in enumerate(comps)
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": sum(c.num_tokens for c in comps),
                    },
                },
            )

        def do_GET(self):  # noqa: N802
            if self.path == "/stats":
                return self._send(200, {"posts": state["posts"]})
            if self.path.startswith("/arm-failures/"):
                with lock:
                    state["fail_until"] = state["posts"] + int(self.path.rsplit("/", 1)[1])
                return self._send(200, {"armed": state["fail_until"] - state["posts"]})
            self._send(404, {"error": {"message": "not found"}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
