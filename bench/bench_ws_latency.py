"""Live view: latency from a node's commit to its arrival at a websocket client, while a run writes
500 nodes per second. Prints figures only.

A real Daphne server runs the app against a scratch SQLite database; the run executes in the server's
executor (worker threads), so every change takes the real path: commit, after-commit hand-off,
coalescing forwarder on the server loop, channel layer, consumer, socket. Measured once with the
in-memory channel layer and once with Redis (if it answers on REDIS_URL, default 127.0.0.1:6379).

The "commit" stamp is the node's own started_at / finished_at, taken just before its write, so the
figure slightly overstates the commit-to-arrival time (by the write itself, well under a millisecond).
"""
from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._api import changed_at, launch  # noqa: E402 (after the path is set)


NODES = 2500
RATE = 500.0
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


def prepare_database(directory: Path):
    os.environ["DATABASE_URL"] = f"sqlite:///{directory / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")
    import django
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from knox.models import AuthToken
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-password-1")
    return user, AuthToken.objects.create(user=user)[1]


async def watch(server_url: str, session_id: str, cookie: str) -> dict:
    from bench._ws_client import WebSocket

    ws_url = f"ws://{urlsplit(server_url).netloc}/ws/sessions/{session_id}/"
    socket_ = await WebSocket.connect(ws_url, cookie=f"sessionid={cookie}")
    latencies, frames, changes, first, last = [], 0, 0, None, None
    try:
        while True:
            message = json.loads(await socket_.recv())
            arrived = time.time()
            kind = message["type"]
            if kind in ("snapshot", "snapshot_more", "heartbeat"):
                session = message.get("session")
                if session and session["status"] in ("completed", "error", "cancelled", "interrupted"):
                    break
                continue
            frames += 1
            items = message["items"] if kind == "batch" else [message]
            for item in items:
                changes += 1
                if item["type"] == "node" and item["node"]["name"] == "tick":
                    latencies.append((arrived - changed_at(item["node"])) * 1000)
                    first = first or changed_at(item["node"])
                    last = changed_at(item["node"])
            if any(item["type"] == "session" and item["session"]["status"] in
                   ("completed", "error", "cancelled", "interrupted") for item in items):
                break
    finally:
        await socket_.close()
    return {"latencies": latencies, "frames": frames, "changes": changes, "span": (last or 0) - (first or 0)}


def redis_answers(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port or 6379), timeout=1):
            return True
    except OSError:
        return False


def measure(label: str, extra_env: dict, directory: Path, user, token: str) -> None:
    from tests.e2e.support import DaphneServer, session_cookie

    env = {**os.environ, **extra_env,
           "OPENPROGRAM_FUNCTION_MODULES": "examples.functions,bench._paced_functions"}
    if "REDIS_URL" not in extra_env:
        env.pop("REDIS_URL", None)
    server = DaphneServer(env, directory / f"daphne-{len(label)}.log")
    try:
        session_id = launch(server.url, token, "paced_writer", {"n": NODES, "rate": RATE}, timeout=10)
        result = asyncio.run(watch(server.url, session_id, session_cookie(user)["value"]))
    finally:
        server.stop()
    latencies = sorted(result["latencies"])
    if len(latencies) < 20:
        print(f"{label}: only {len(latencies)} live node messages arrived; nothing to measure")
        return
    p95 = latencies[int(len(latencies) * 0.95) - 1]
    rate = len(latencies) / 2 / result["span"] if result["span"] else float("nan")
    print(f"{label}: {len(latencies)} node changes measured while writing ~{rate:.0f} nodes/s; "
          f"{result['frames']} websocket frames ({result['changes'] / max(result['frames'], 1):.1f} changes per frame)")
    print(f"  commit -> websocket arrival: median {statistics.median(latencies):.1f} ms, "
          f"p95 {p95:.1f} ms, max {latencies[-1]:.1f} ms")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-ws-") as scratch:
        directory = Path(scratch)
        user, token = prepare_database(directory)
        from dag.conf import conf
        window_ms = conf.BROADCAST_WINDOW_S * 1000
        print(f"bench_ws_latency: {NODES} nodes at {RATE:.0f}/s through a live Daphne server "
              f"(coalescing window {window_ms:.0f} ms)")
        measure("in-memory layer", {}, directory, user, token)
        if redis_answers(REDIS_URL):
            measure("Redis layer", {"REDIS_URL": REDIS_URL}, directory, user, token)
        else:
            print(f"Redis layer: skipped, nothing answers at {REDIS_URL}")


if __name__ == "__main__":
    main()
