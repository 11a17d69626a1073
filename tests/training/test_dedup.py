from opencomposer.serving.model_recipes.tiny_moe import corpus_texts
from opencomposer.training.dedup import Deduplicator, jaccard_estimate, minhash, text_sha256


def test_minhash_estimates_jaccard_and_the_index_finds_near_copies():
    texts = sorted(corpus_texts(), key=len, reverse=True)
    base, other = texts[0], texts[1]
    lines = base.splitlines(keepends=True)
    near = "".join(lines[: int(len(lines) * 0.97)])  # the last 3% of lines cut off
    far = "".join(lines[: len(lines) // 2])  # half the file: Jaccard about 0.5
    assert minhash(base).tolist() == minhash(base).tolist()  # deterministic
    assert jaccard_estimate(minhash(base), minhash(near)) > 0.9
    assert jaccard_estimate(minhash(base), minhash(far)) < 0.7
    assert jaccard_estimate(minhash(base), minhash(other)) < 0.2
    dedup = Deduplicator()
    dedup.add(text_sha256(base), minhash(base))
    assert dedup.check(text_sha256(base), minhash(base)) == "exact_duplicate"
    assert dedup.check(text_sha256(near), minhash(near)) == "near_duplicate"
    assert dedup.check(text_sha256(far), minhash(far)) is None
    assert dedup.check(text_sha256(other), minhash(other)) is None
