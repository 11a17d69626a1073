"""A fake SGLang server, run as `python fake_sglang.py --model-path ... --host H --port P` by
the sglang engine's own launch path (SGLang itself only runs on GPU machines).

It speaks just enough of SGLang's HTTP API: /health, /v1/models, a streamed chat completion
and `POST /update_weights_from_disk`, whose request it records (with the names and shapes of
the tensors it read from the folder) as one JSON line in `--fake-record`. Its child ignores
SIGTERM, like a wedged scheduler process, so only a group SIGKILL removes it. Modes, given as
`--fake-mode`: `crash` exits while starting, `slow` loads for a second, `hang` never gets
healthy, `refuse-weights` answers every weights update as SGLang does a failed one.
"""

import json
import os
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FAKE = Path(__file__)
"""The script, for `command_prefix=(sys.executable, str(FAKE))`."""


def main(args: list[str]) -> None:
    def opt(name: str, default: str | None = None) -> str | None:
        return args[args.index(name) + 1] if name in args else default

    mode = opt("--fake-mode")
    print("fake sglang starting:", " ".join(args), flush=True)
    if mode == "crash":
        print("RuntimeError: CUDA out of memory (fake)", flush=True)
        sys.exit(3)
    if mode == "slow":  # loading weights
        time.sleep(1)
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)",
        ]
    )
    with open(str(opt("--fake-pidfile")), "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    model = opt("--served-model-name") or opt("--model-path")
    record = opt("--fake-record")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body)}\n\n".encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *values: Any) -> None:
            print("request:", format % values, flush=True)

        def reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if mode == "hang":
                return self.send_error(503)
            models = {"object": "list", "data": [{"id": model, "object": "model"}]}
            body = {"/health": {}, "/v1/models": models}.get(self.path)
            if body is None:
                return self.send_error(404)
            self.reply(200, body)

        def do_POST(self) -> None:
            request = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/update_weights_from_disk":
                return self.update_weights(json.loads(request))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for piece in ("hello ", "from ", "sglang"):
                self.wfile.write(chunk({"content": piece}))
            self.wfile.write(chunk({}, "stop"))
            usage = {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
            final = {
                "id": "c",
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [],
                "usage": usage,
            }
            self.wfile.write(f"data: {json.dumps(final)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

        def update_weights(self, body: dict[str, Any]) -> None:
            from safetensors import safe_open

            tensors = {}
            for file in sorted(Path(body["model_path"]).glob("*.safetensors")):
                with safe_open(str(file), "np") as weights:
                    names = weights.keys()  # a safetensors file is not iterable
                    tensors |= {name: list(weights.get_slice(name).get_shape()) for name in names}
            if record is not None:
                with open(record, "a") as f:
                    f.write(json.dumps({"request": body, "tensors": tensors}) + "\n")
            if mode == "refuse-weights":
                message = "Failed to update weights: shape mismatch (fake)"
                return self.reply(400, {"success": False, "message": message})
            message = "Succeeded to update model weights."
            self.reply(200, {"success": True, "message": message, "num_paused_requests": 0})

    ThreadingHTTPServer((str(opt("--host")), int(str(opt("--port")))), Handler).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
