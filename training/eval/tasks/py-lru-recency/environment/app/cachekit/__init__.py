from cachekit.lru import LRUCache
from cachekit.memo import memoize

__all__ = ["LRUCache", "memoize"]
