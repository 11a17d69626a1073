from cachekit import LRUCache, memoize


def test_get_refreshes_recency():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert "a" in cache and "c" in cache and "b" not in cache


def test_order_oldest_first():
    cache = LRUCache(3)
    for key in "xyz":
        cache.put(key, key)
    cache.get("x")
    assert cache.keys() == ["y", "z", "x"]


def test_put_existing_refreshes():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    cache.put("c", 3)
    assert cache.get("a") == 10 and "b" not in cache


def test_miss_counts():
    cache = LRUCache(1)
    assert cache.get("nope", 7) == 7
    assert (cache.hits, cache.misses) == (0, 1)


def test_memoize_keeps_hot_keys():
    calls = []

    @memoize(capacity=2)
    def square(n):
        calls.append(n)
        return n * n

    square(1)
    square(2)
    square(1)
    square(3)
    square(1)
    assert calls == [1, 2, 3]
