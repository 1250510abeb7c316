"""The Redis channel layer, with the one background call channels_redis leaves unguarded made outage-safe.

After each received message channels_redis fires a task that removes it from the channel's backup
queue, and nobody awaits it: when Redis goes away at that moment, asyncio logs "Task exception was never
retrieved" with a traceback. Here that failure is reported as part of the outage (dag.live.layer_outage)
instead. The message stays in the backup queue and is delivered once more when Redis is back; the
stream drops it by its revision.
"""
from __future__ import annotations

from channels_redis.core import RedisChannelLayer

from .layer_outage import LAYER_UNREACHABLE, outage


class OutageTolerantRedisChannelLayer(RedisChannelLayer):
    async def _clean_receive_backup(self, index, channel):
        try:
            await super()._clean_receive_backup(index, channel)
        except LAYER_UNREACHABLE as exc:
            outage.failed("clearing a received message's backup", exc)
