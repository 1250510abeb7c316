"""What the benches that drive a running server share: a launch through its REST API, and when a node
changed (the moment a websocket arrival is measured from)."""
from __future__ import annotations

import json
import urllib.request
from datetime import datetime


def launch(server_url: str, token: str, function: str, args: dict, timeout: float = 30) -> str:
    """POST /api/sessions/ with `token`; the new session's id."""
    body = json.dumps({"function": function, "args": args}).encode()
    request = urllib.request.Request(f"{server_url}/api/sessions/", data=body, method="POST", headers={
        "Authorization": f"Token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)["id"]


def changed_at(node: dict) -> float:
    """The node's last change as a timestamp: its start while running, else its end."""
    moment = node["started_at"] if node["status"] == "running" else node["finished_at"]
    return datetime.fromisoformat(moment).timestamp()
