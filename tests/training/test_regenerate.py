"""Regenerated MTP data: prompts cut from real code and prose, answered by the real engine,
each sample written whole, the set resumable and fixed by its seed."""

from pathlib import Path

import pytest
from support.llama_mtp import write_llama_checkpoint
from tokenizers import Tokenizer

from opencomposer.serving.engines.embedded.chat_format import chat_format_for
from opencomposer.serving.engines.embedded.engine import LLMEngine
from opencomposer.serving.engines.embedded.loader import load_model
from opencomposer.serving.engines.embedded.sequence import SamplingOptions
from opencomposer.serving.model_recipes.tiny_moe import train_tokenizer
from opencomposer.training.errors import TrainingError
from opencomposer.training.regenerate import (
    RegenerateConfig,
    Sources,
    documented_functions,
    make_prompt,
    regenerate,
)

pytest.importorskip("transformers")

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PROSE = "# Title\n\nFirst paragraph of the guide.\n\nSecond one, with more words.\n\nThird.\n"


@pytest.fixture
def sources(code_texts: list[str]) -> Sources:
    records = [{"text": text, "language": "python"} for text in code_texts[:20]]
    return Sources.from_records([*records, {"text": PROSE, "language": "markdown"}])


@pytest.fixture
def model_dir(tmp_path: Path, code_texts: list[str]) -> Path:
    folder = tmp_path / "model"
    write_llama_checkpoint(folder, mtp=False, vocab_size=512)
    tokenizer = train_tokenizer(code_texts[:40], vocab_size=400)
    tokenizer.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "chat_template.jinja").write_text(TEMPLATE)
    return folder


def run(model_dir: Path, sources: Sources, out: Path, **config: int) -> object:
    return regenerate(
        load_model(model_dir),
        Tokenizer.from_file(str(model_dir / "tokenizer.json")),
        chat_format_for(model_dir),
        sources,
        out,
        model_name="tiny",
        config=RegenerateConfig(**{"count": 6, "max_tokens": 12, "batch": 4, **config}),
    )


def test_documented_functions_are_found_with_signature_and_summary() -> None:
    source = (
        "def area(width: float, height: float = 1.0) -> float:\n"
        '    """Return the area of a rectangle.\n\n    More text.\n    """\n'
        "    return width * height\n\n\n"
        'def _private():\n    """Hidden helpers are not asked about."""\n\n\n'
        'def terse():\n    """Short."""\n\n\n'
        "class Shape:\n"
        "    async def grow(self, by):\n"
        '        """Grow the shape by a factor."""\n'
    )
    found = documented_functions(source)
    assert [(signature, summary) for signature, summary, _ in found] == [
        ("area(width: float, height: float=1.0)", "Return the area of a rectangle."),
        ("grow(self, by)", "Grow the shape by a factor."),
    ]
    assert found[0][2].startswith("def area(") and found[0][2].endswith("return width * height")
    assert documented_functions("def broken(:\n") == []


def test_prompts_are_fixed_by_seed_and_index_and_cover_every_kind(
    sources: Sources, model_dir: Path, code_texts: list[str]
) -> None:
    chat = chat_format_for(model_dir)
    prompts = [make_prompt(sources, chat, 7, i) for i in range(60)]
    assert prompts == [make_prompt(sources, chat, 7, i) for i in range(60)]
    assert prompts != [make_prompt(sources, chat, 8, i) for i in range(60)]
    kinds = {p.kind for p in prompts}
    assert kinds == {"code", "prose", "chat"}
    for prompt in prompts:
        if prompt.kind == "chat":
            assert prompt.text.startswith("<|im_start|>user\n")
            assert prompt.text.endswith("<|im_start|>assistant\n")
        elif prompt.kind == "code":
            assert any(prompt.text in text for text in code_texts[:20])
        else:
            assert prompt.text.endswith("\n\n") and prompt.text.strip() in PROSE


def test_samples_are_the_engines_greedy_answers(
    sources: Sources, model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = run(model_dir, sources, out)
    files = sorted(out.glob("*.txt"))
    assert [f.name for f in files] == [f"{i:07d}.txt" for i in range(6)]
    assert not list(out.glob("*.tmp"))
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    chat = chat_format_for(model_dir)
    model = load_model(model_dir)
    for index, file in enumerate(files):
        prompt = make_prompt(sources, chat, 0, index).text
        text = file.read_text()
        assert text.startswith(prompt)
        ids = tokenizer.encode(prompt, add_special_tokens=False).ids
        [seq] = LLMEngine(model).generate([ids], SamplingOptions(max_tokens=12))
        assert text[len(prompt) :] == tokenizer.decode(seq.output_ids, skip_special_tokens=False)
    assert result.written == 6 and result.kept == 0  # type: ignore[attr-defined]
    assert 0 < result.output_tokens <= 6 * 12  # type: ignore[attr-defined]


def test_a_rerun_resumes_and_extends_the_same_set(
    sources: Sources, model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run(model_dir, sources, out, count=3)
    first = {f.name: f.read_text() for f in out.glob("*.txt")}
    (out / "0000001.txt").unlink()  # as if the run had stopped before writing it
    again = run(model_dir, sources, out, count=5)
    assert (again.written, again.kept) == (3, 2)  # type: ignore[attr-defined]
    now = {f.name: f.read_text() for f in out.glob("*.txt")}
    assert len(now) == 5 and all(now[name] == text for name, text in first.items())
    alone = tmp_path / "alone"
    run(model_dir, sources, alone, count=5)
    assert {f.name: f.read_text() for f in alone.glob("*.txt")} == now


def test_another_seed_or_model_in_the_same_folder_is_refused(
    sources: Sources, model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run(model_dir, sources, out, count=1)
    with pytest.raises(TrainingError, match="choose another --out"):
        run(model_dir, sources, out, count=1, seed=3)


def test_a_corpus_without_code_is_refused() -> None:
    with pytest.raises(TrainingError, match="no code"):
        Sources.from_records([{"text": PROSE, "language": "markdown"}])
