"""A read-through cache in front of the tenant directory; falls back to memory when the
shared backend is unreachable."""

import logging
import time

log = logging.getLogger("cache.store")


class Cache:
    def __init__(self, backend=None, ttl: float = 300.0) -> None:
        self.backend, self.ttl = backend, ttl
        self._local: dict[str, tuple[float, object]] = {}

    def get(self, key: str, load):
        if self.backend is not None:
            try:
                return self.backend.get_or_set(key, load, self.ttl)
            except TimeoutError:
                log.warning("cache backend timed out, using in-process cache", exc_info=True)
        hit = self._local.get(key)
        if hit and time.monotonic() - hit[0] < self.ttl:
            return hit[1]
        value = load()
        self._local[key] = (time.monotonic(), value)
        return value
