"""Encoding the live stream into websocket frames that fit the server's payload limit.

Daphne's websocket library refuses to send a message over 1 MiB (and drops the connection), while a
snapshot of ten thousand nodes is several megabytes and one node may hold a huge output. So:
- every node is encoded once, and a node (or session) record over `NODE_LIMIT` has each of its large
  values cut to a preview of at most about `PREVIEW_CHARS` characters of JSON, whichever field it is
  (an output, or a provider's `usage`), and lists them in `truncated`: the database keeps them whole,
  and the export has them;
- lists of nodes are split across frames: a snapshot becomes `snapshot` (with `more: true`) followed by
  `snapshot_more` frames, the last with `more: false`; a batch becomes several batches, each with the
  rev of its last item.
JSON is ASCII-encoded, so a frame's length in characters is its size in bytes.
"""
from __future__ import annotations

from typing import Iterator, Optional

from ..recording.json_text import dumps_compact

FRAME_LIMIT = 900_000  # bytes per websocket message, under autobahn's 1 MiB default
NODE_LIMIT = 200_000  # bytes one streamed node may take before its big fields are cut
PREVIEW_CHARS = 2_000
NODE_FIELDS = ("input", "output", "error", "doc")
SESSION_FIELDS = ("args", "result", "error")
# What a browser needs to place a record in the tree, kept when nothing else fits (a safety net: a node
# or session record has too few fields to get there).
PLACING_FIELDS = ("id", "seq", "parent", "kind", "name", "status", "depth", "rev")


def dumps(value) -> str:
    return dumps_compact(value)  # json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)


def fit(record: dict, fields=NODE_FIELDS) -> str:
    """The record's JSON, at most NODE_LIMIT characters: if it is over, each value of `fields` (those
    expected to be large) whose JSON is over PREVIEW_CHARS is replaced by a preview and named in
    `truncated`, and then, if that was not enough, each such value of the other fields."""
    text = dumps(record)
    if len(text) <= NODE_LIMIT:
        return text
    record = dict(record)
    cut = []
    # The fields expected to be large first; the others (a provider's `usage`, which the page adds up)
    # only if the record is still too large without those.
    for round_fields in (fields, [key for key in record if key not in fields]):
        for field in round_fields:
            value = record.get(field)
            encoded = dumps(value)
            if len(encoded) > PREVIEW_CHARS:
                record[field] = preview(value if isinstance(value, str) else encoded)
                cut.append(field)
        record["truncated"] = cut
        text = dumps(record)
        if len(text) <= NODE_LIMIT:
            return text
    # Only a record of far more fields than a node or a session has gets here: what places it in the
    # tree is kept (each value a preview at most), and "*" says that everything else was left out.
    kept = {key: record[key] for key in PLACING_FIELDS if key in record}
    return dumps({**kept, "truncated": ["*"]})


def preview(text: str) -> str:
    """The start of `text` as a string whose JSON is at most about PREVIEW_CHARS characters, saying how
    much was left out."""
    keep = PREVIEW_CHARS
    # A character may take up to 12 in JSON (an emoji as two \u escapes): shorten until it fits.
    while (encoded := len(dumps(text[:keep]))) > PREVIEW_CHARS + 2:
        keep = keep * PREVIEW_CHARS // encoded
    return text[:keep] + f"… ({len(text) - keep} more characters)"


class NodeItem(dict):
    """A live node change, `{"type": "node", "rev": R, "node": record}`, that encodes its record once.

    `record_json` is the record's JSON (`dumps`), made on first use: PostgreSQL's write path stores the
    same text as the row, and `encode_item` reuses it for the stream, so a recorded node is encoded
    once for both. It is only valid while the record is not changed.
    """

    # None until made. A class attribute read through the instance, not a slot: an unset slot answers
    # with an AttributeError, and raising and catching one per recorded node cost more than the rest
    # of the lookup.
    _record_json: Optional[str] = None

    @property
    def record_json(self) -> str:
        text = self._record_json
        if text is None:
            self._record_json = text = dumps(self["node"])
        return text

    def renumber(self, seq: int, rev: int) -> None:
        """Give the change its node's final `seq` and `rev`, its record (and its JSON, if made) too."""
        record = self["node"]
        self["rev"] = record["rev"] = rev
        record["seq"] = seq
        text = self._record_json
        if text is None:
            return
        # A record's keys come in `as_dict` order: "seq" right after the integer "id", and "rev" after
        # every value that could hold a key of that name (only timestamps and an integer follow it).
        seq_at = text.index(',"seq":') + 7
        rev_at = text.rindex(',"rev":') + 7
        self._record_json = (f"{text[:seq_at]}{seq}{text[text.index(',', seq_at):rev_at]}{rev}"
                             f"{text[text.index(',', rev_at):]}")


def encode_item(item: dict) -> str:
    """One live message ({"type": "node"|"session", "rev", ...}) with its node fitted."""
    kind = item.get("type")
    if isinstance(item, NodeItem):
        text = item._record_json
        if text is None:  # not encoded for the database too (SQLite): the whole change at once
            text = dumps(item)
            if len(text) <= NODE_LIMIT:
                return text
            text = item.record_json
        return '{"type":"node","rev":%d,"node":%s}' % (item["rev"], text if len(text) <= NODE_LIMIT
                                                       else fit(item["node"]))
    if kind == "node" and isinstance(item.get("node"), dict):
        return '{"type":"node","rev":%d,"node":%s}' % (item["rev"], fit(item["node"]))
    if kind == "session" and isinstance(item.get("session"), dict):
        return '{"type":"session","rev":%d,"session":%s}' % (item["rev"], fit(item["session"], SESSION_FIELDS))
    return dumps(item)


SESSION_CHANGE = '{"type":"session"'
# Live changes cross the channel layer as runs: changes of contiguous revisions, each encoded once
# (`encode_item`) and joined by RUN_SEPARATOR. Compact JSON holds no raw newline (one in a string is
# written as an escape), so the separator stands only between changes: a viewer forwards a run as one
# batch frame by a single replace, whatever its length, and splits it only to drop what it has seen.
RUN_SEPARATOR = "\n"


def encoded_runs(items: list[dict]) -> list[tuple[int, int, str]]:
    """Live changes (each with its "rev") as (first rev, last rev, the changes encoded and joined) runs
    of contiguous revisions, in rev order."""
    return runs_of((_rev(item), encode_item(item)) for item in in_rev_order(items))


def in_rev_order(items: list[dict]) -> list[dict]:
    """Live changes in the order of their revisions (already so when one batch of one writer made them)."""
    return sorted(items, key=_rev)


def runs_of(changes) -> list[tuple[int, int, str]]:
    """(rev, encoded change) pairs, in rev order, as (first rev, last rev, joined) runs of contiguous
    revisions."""
    runs: list[tuple[int, int, str]] = []
    encoded: list[str] = []
    first = last = 0
    for rev, text in changes:
        if encoded and rev != last + 1:
            runs.append((first, last, RUN_SEPARATOR.join(encoded)))
            encoded = []
        if not encoded:
            first = rev
        encoded.append(text)
        last = rev
    if encoded:
        runs.append((first, last, RUN_SEPARATOR.join(encoded)))
    return runs


def _rev(item: dict) -> int:
    return item.get("rev", 0)


def run_after(first: int, joined: str, seen: int) -> str:
    """What of a run (its first rev `first`) comes after revision `seen` (at least `first` - 1)."""
    return joined if seen < first else joined.split(RUN_SEPARATOR, seen - first + 1)[-1]


def run_changes_session(joined: str) -> bool:
    """Whether a run holds a change of the session record itself."""
    return joined.startswith(SESSION_CHANGE) or (RUN_SEPARATOR + SESSION_CHANGE) in joined


def run_frames(first: int, last: int, joined: str) -> list[str]:
    """A run of live changes (revisions `first` to `last`) as frames: one change as itself, several as
    one batch, or as several where one would pass the frame limit."""
    if first == last:
        return [joined]
    if len(joined) + 64 <= FRAME_LIMIT:
        return ['{"type":"batch","rev":%d,"items":[%s]}' % (last, joined.replace(RUN_SEPARATOR, ","))]
    return encoded_live_frames(list(range(first, last + 1)), joined.split(RUN_SEPARATOR))


def _chunks(parts: list[str], room: int) -> Iterator[list[str]]:
    """Consecutive runs of `parts` whose joined size stays within `room` (at least one part each)."""
    chunk, size = [], 0
    for part in parts:
        if chunk and size + len(part) + 1 > room:
            yield chunk
            chunk, size = [], 0
        chunk.append(part)
        size += len(part) + 1
    yield chunk


def snapshot_frames(session: dict | None, nodes: list[dict], rev: int, since_rev: int | None, *,
                    last: bool = True, now: str | None = None) -> list[str]:
    """Frames for one part of a snapshot: it opens with `session` (None: it continues one) and the
    server's time `now` (ISO), and the final frame of the `last` part says `more: false`."""
    if session is not None:
        head = '{"type":"snapshot","session":%s,"rev":%d,"since_rev":%s,"now":%s' % (
            fit(session, SESSION_FIELDS), rev, dumps(since_rev), dumps(now))
    else:
        head = '{"type":"snapshot_more","rev":%d' % rev
    chunks = list(_chunks([fit(node) for node in nodes], FRAME_LIMIT - len(head) - 64))
    frames = []
    for index, chunk in enumerate(chunks):
        more = "false" if last and index == len(chunks) - 1 else "true"
        prefix = head if index == 0 else '{"type":"snapshot_more","rev":%d' % rev
        frames.append('%s,"more":%s,"nodes":[%s]}' % (prefix, more, ",".join(chunk)))
    return frames


def encoded_live_frames(revs: list[int], encoded: list[str]) -> list[str]:
    """Contiguous live changes, already encoded (`encode_item`), each with its rev, as frames: one
    change as itself, several as batches. The broadcaster encodes a change once, whatever the number
    of viewers, and the layer carries only strings."""
    if len(encoded) == 1:
        return list(encoded)
    frames = []
    position = 0
    for chunk in _chunks(encoded, FRAME_LIMIT - 64):
        position += len(chunk)
        frames.append('{"type":"batch","rev":%d,"items":[%s]}' % (revs[position - 1], ",".join(chunk)))
    return frames
