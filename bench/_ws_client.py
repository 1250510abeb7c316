"""A minimal websocket client (RFC 6455, text frames, no extensions) for the benches: the project has
no client library, and the benches only need to read what the server sends."""
from __future__ import annotations

import asyncio
import base64
import os
import struct
from urllib.parse import urlsplit


class WebSocketClosed(Exception):
    pass


class WebSocket:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, url: str, cookie: str = "") -> "WebSocket":
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port, limit=2 ** 24)
        key = base64.b64encode(os.urandom(16)).decode()
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        origin = f"http://{parts.hostname}:{parts.port}"
        request = (f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                   f"Origin: {origin}\r\nCookie: {cookie}\r\n\r\n")
        writer.write(request.encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {head.decode(errors='replace')}")
        return cls(reader, writer)

    async def recv(self) -> str:
        """The next text message (continuation frames joined); a ping is answered, as a browser would (a
        server drops a client that leaves its pings unanswered: Daphne after 20 s + 30 s), pongs skipped."""
        message = b""
        while True:
            first, second = await self.reader.readexactly(2)
            fin, opcode, length = first & 0x80, first & 0x0F, second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", await self.reader.readexactly(8))
            payload = await self.reader.readexactly(length)
            if opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                raise WebSocketClosed(code)
            if opcode == 0x9:
                self._send(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            message += payload
            if fin:
                return message.decode()

    def _send(self, opcode: int, payload: bytes = b"") -> None:
        """One final frame of `opcode`, masked as a client's must be (control frames: payload <= 125 bytes)."""
        mask = os.urandom(4)
        masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
        self.writer.write(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)

    async def close(self) -> None:
        self._send(0x8)
        await self.writer.drain()
        self.writer.close()
