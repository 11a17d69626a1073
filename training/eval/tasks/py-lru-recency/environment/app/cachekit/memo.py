import functools
from collections.abc import Callable
from typing import Any

from cachekit.lru import LRUCache


def memoize(capacity: int = 128) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        cache: LRUCache[tuple[Any, ...], Any] = LRUCache(capacity)

        @functools.wraps(function)
        def wrapper(*args: Any) -> Any:
            if args in cache:
                return cache.get(args)
            value = function(*args)
            cache.put(args, value)
            return value

        wrapper.cache = cache  # type: ignore[attr-defined]
        return wrapper

    return decorate
