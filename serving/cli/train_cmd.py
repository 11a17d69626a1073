"""`opencomposer train ...`: the training stages, each a command over the previous one's output.

data -> tokenizer -> pretrain -> mtp, and data -> regenerate (the model's own answers) -> mtp.
Each stage's work lives in `opencomposer.training` (imported inside the command, so `--help`
does not load torch); this module only turns flags into calls, shows progress and turns
training errors into one-line messages.
"""

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from opencomposer.serving.cli.help_style import CommandApp
from opencomposer.serving.cli.options import FLAG, ConfigOverrides, overrides_from, settings_for
from opencomposer.serving.cli.output import err, out
from opencomposer.training.errors import TrainingError

train_app = CommandApp(
    help="Training: build a code corpus, train a tokenizer, pretrain tiny-moe, train MTP layers.",
    no_args_is_help=True,
)


# ------------------------------------------------------------------ data and tokenizer


@train_app.command()
def data(
    sources: Annotated[
        list[str] | None,
        typer.Argument(
            help="Folders or git repositories (anything `git clone` takes). Default: the Python "
            "standard library and every distribution in this venv's site-packages."
        ),
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Data folder (corpus/ and manifest.json go here).")
    ] = Path("data"),
    val_fraction: Annotated[
        float, typer.Option(help="Share of repositories held out for validation.")
    ] = 0.05,
    max_files: Annotated[
        int | None, typer.Option(help="Stop after keeping this many files.")
    ] = None,
    max_mb: Annotated[float, typer.Option(help="Stop after keeping this many MB of text.")] = 256,
    max_repo_mb: Annotated[float, typer.Option(help="MB kept from one repository at most.")] = 4,
    max_file_kb: Annotated[float, typer.Option(help="Skip files larger than this.")] = 256,
) -> None:
    """Build a licence-checked, deduplicated code corpus (resumable: rerun to finish).

    With no sources and the default budget (the defaults of `training.corpus.Budget`): 39 s on
    two cores, 37,517 files seen, 6,565 kept (89 MB of text, 97 repositories train, 8 val).
    """
    from opencomposer.training.corpus import Budget, build_corpus
    from opencomposer.training.corpus_sources import default_sources, resolve_source

    chosen = (
        [resolve_source(spec, out_dir / "sources") for spec in sources]
        if sources
        else default_sources()
    )
    budget = Budget(
        max_files=max_files,
        max_bytes=int(max_mb * 2**20),
        max_repo_bytes=int(max_repo_mb * 2**20),
        max_file_bytes=int(max_file_kb * 2**10),
    )
    with _progress() as progress:
        task = progress.add_task("corpus", total=None)

        def advance(repo: str, seen: int) -> None:
            progress.update(task, completed=seen, description=repo)

        manifest = build_corpus(
            chosen, out_dir, val_fraction=val_fraction, budget=budget, progress=advance
        )
    splits = manifest["splits"]
    out.print(
        f"kept {manifest['kept']} of {manifest['seen']} files "
        f"({manifest['bytes']['kept'] / 2**20:.1f} MB): train {splits['train'].get('files', 0)}, "
        f"val {splits['val'].get('files', 0)}; manifest in {out_dir / 'manifest.json'}",
        markup=False,
        soft_wrap=True,
    )


@train_app.command()
def tokenizer(
    data_dir: Annotated[
        Path, typer.Option("--data", "-d", help="Data folder that `train data` wrote.")
    ] = Path("data"),
    vocab_size: Annotated[int, typer.Option(help="BPE vocabulary size.")] = 4096,
    fim_rate: Annotated[
        float, typer.Option(help="Share of documents turned into fill-in-the-middle ones.")
    ] = 0.5,
    seed: Annotated[int, typer.Option(help="Seed of the FIM choices and split points.")] = 0,
) -> None:
    """Train the BPE tokenizer into DATA/tokenizer/ and tokenize the corpus into DATA/tokens/.

    On the default corpus: 42 s to train, 76 s to tokenize (28.0 M train tokens, 0.63 M val).
    """
    from opencomposer.training.token_shards import tokenize_corpus
    from opencomposer.training.tokenizer import train_code_tokenizer

    if not (data_dir / "manifest.json").is_file():
        raise TrainingError(f"no corpus in {data_dir}: run `opencomposer train data --out DIR`")
    with _progress() as progress:
        task = progress.add_task("training the tokenizer", total=None)
        trained = train_code_tokenizer(data_dir, vocab_size=vocab_size)
        progress.update(task, description="tokenizing")

        def advance(split: str, documents: int) -> None:
            progress.update(task, completed=documents, description=f"tokenizing {split}")

        metas = tokenize_corpus(
            data_dir, trained, data_dir / "tokens", fim_rate=fim_rate, seed=seed, progress=advance
        )
    sizes = (f"{s} {m['tokens']} tokens in {m['documents']} documents" for s, m in metas.items())
    summary = f"vocabulary {trained.get_vocab_size()}; " + ", ".join(sizes)
    out.print(summary, markup=False, soft_wrap=True)


def _progress() -> Progress:
    # Off when stderr is not a terminal: a transient bar still leaves a blank line in a log,
    # and an error's one line must stay the only line.
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TextColumn("{task.completed} done"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


Threads = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="torch threads (default: torch's, one per core; torchrun gives each rank one). "
        "On a machine other work is using, fewer than its cores: threads waiting for a busy "
        "core stall the whole step (two threads with one core busy ran tiny-moe 23x slower).",
    ),
]


def _use_threads(threads: int | None) -> None:
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


# --- pretrain ------------------------------------------------------------------------------


@train_app.command("pretrain")
def pretrain(
    data: Annotated[
        Path,
        typer.Option(help="Packed corpus folder (`opencomposer train data`).", file_okay=False),
    ],
    out: Annotated[Path, typer.Option(help="Checkpoints, metrics.jsonl and plots/ go here.")],
    init: Annotated[
        str, typer.Option(help="Model to start from: a model store name or a folder.")
    ] = "tiny-moe",
    steps: Annotated[int, typer.Option(min=1, help="Steps of the short stage.")] = 1500,
    seq_len: Annotated[int, typer.Option(min=2, help="Tokens per row, short stage.")] = 256,
    long_steps: Annotated[
        int, typer.Option(min=0, help="Steps of the long (YaRN) stage; 0: none.")
    ] = 150,
    long_seq_len: Annotated[int, typer.Option(min=2, help="Tokens per row, long stage.")] = 1024,
    batch_rows: Annotated[
        int, typer.Option(min=1, help="Rows per step over all ranks (the global batch).")
    ] = 8,
    lr: Annotated[float, typer.Option(help="Peak learning rate (AdamW).")] = 3e-3,
    warmup: Annotated[int, typer.Option(min=0, help="Warmup steps.")] = 50,
    no_balance: Annotated[
        bool, typer.Option("--no-balance", help="No expert bias updates.", metavar=FLAG)
    ] = False,
    bf16: Annotated[
        bool, typer.Option("--bf16", help="bf16 autocast (pays on GPUs).", metavar=FLAG)
    ] = False,
    mtp_weight: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="Weight of the MTP self-distillation loss, trained jointly when the model "
            "has MTP layers; 0: the MTP layers are left as they are.",
        ),
    ] = 0.3,
    val_every: Annotated[int, typer.Option(min=0, help="Held-out loss every N steps.")] = 100,
    checkpoint_every: Annotated[
        int, typer.Option(min=0, help="Checkpoint every N steps (and at each stage's end).")
    ] = 500,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue from OUT's latest checkpoint.", metavar=FLAG)
    ] = False,
    threads: Threads = None,
    config: ConfigOverrides = None,
) -> None:
    """Continued pretraining of a deepseek_v3-family model: a short stage, then a long one
    with YaRN rope scaling; aux-loss-free expert balancing; its MTP layers trained jointly
    by self-distillation (KL to the model's own next-token distribution); checkpoints the
    engine serves, carrying the tokenizer the data was encoded with.

    CPU (tiny-moe; `make tiny-moe` runs 1,000 short + 60 long steps, measured at 55 minutes
    on one thread of a shared two-core machine, ~950 tokens/s):
      opencomposer train pretrain --data corpus/ --out runs/tiny-moe --steps 1000 --long-steps 60

    One GPU (bf16 autocast, a bigger global batch):
      torchrun --standalone --nproc_per_node 1 --no-python opencomposer train pretrain
        --data corpus/ --out runs/tiny-moe --bf16 --batch-rows 64

    Several GPUs on one node, or N nodes of 8 (run on every node; rank 0 writes):
      torchrun --nnodes N --nproc_per_node 8 --rdzv-backend c10d
        --rdzv-endpoint HOST0:29500 --rdzv-id cpt1 --no-python opencomposer train pretrain
        --data corpus/ --out runs/cpt --bf16 --batch-rows 512

    Gloo on CPU, NCCL on CUDA; --batch-rows must divide by the number of ranks. Resume with
    the same flags plus --resume."""
    from opencomposer.serving import model_store
    from opencomposer.training.data_source import PackedData
    from opencomposer.training.distributed import DataParallel
    from opencomposer.training.errors import TrainingError
    from opencomposer.training.mtp_distill import mtp_distillation_loss
    from opencomposer.training.pretrain import has_mtp_layers, two_stage_plan
    from opencomposer.training.pretrain import pretrain as run_pretrain

    try:
        folder = Path(init)
        if init in model_store.MODELS:
            models_dir = settings_for(None, overrides_from(config)).settings.models_dir
            folder = model_store.model_dir(models_dir, init)
            if not model_store.is_installed(models_dir, init):
                raise TrainingError(f"{init} is not installed: `opencomposer models init {init}`")
        dp = DataParallel.from_env()
        _use_threads(threads)
        plan = two_stage_plan(
            seq_len,
            steps,
            long_seq_len,
            long_steps,
            batch_rows=batch_rows,
            lr=lr,
            warmup=warmup,
            extra_weight=mtp_weight,
            balance=not no_balance,
            autocast=bf16,
            val_every=val_every,
            checkpoint_every=checkpoint_every,
        )
        packed = PackedData(data)
        run_pretrain(
            plan,
            folder,
            packed,
            out,
            resume=resume,
            dp=dp,
            extra_loss=mtp_distillation_loss if mtp_weight and has_mtp_layers(folder) else None,
            tokenizer=packed.tokenizer_dir,
        )
    except TrainingError as exc:
        err.print(f"opencomposer: pretrain: {exc}", markup=False, soft_wrap=True)
        raise typer.Exit(2) from None
    if dp.is_main:
        err.print(f"checkpoints, metrics.jsonl and plots/ in {out}", markup=False, soft_wrap=True)
    dp.close()


@train_app.command("compare")
def compare(
    runs: Annotated[
        list[str],
        typer.Argument(
            help="Pretraining runs: OUT folders of `train pretrain`, each DIR or LABEL=DIR.",
            show_default=False,
        ),
    ],
    out_dir: Annotated[
        Path, typer.Option("--out", help="The comparison's PNG plots go here.")
    ] = Path("compare"),
) -> None:
    """Pretraining runs side by side (with and without bias updates, 1 process and 2): final
    held-out loss, tokens/s and expert balance, and their curves on shared axes."""
    from rich.table import Table

    from opencomposer.training.plots import plot_comparison, summarize

    metrics: dict[str, Path] = {}
    for spec in runs:
        label, _, folder = spec.partition("=") if "=" in spec else ("", "", spec)
        path = Path(folder) / "metrics.jsonl"
        if not path.is_file():
            _fail(f"{folder}: no metrics.jsonl (not a `train pretrain` output folder)")
        metrics[label or Path(folder).name] = path
    try:
        summaries = [summarize(label, path) for label, path in metrics.items()]
        plots = plot_comparison(metrics, out_dir)
    except (ValueError, KeyError) as exc:
        _fail(f"unreadable metrics: {exc}")
    table = Table("run", "steps", "tokens", "held-out loss", "tokens/s", "max/mean load")
    for s in summaries:
        table.add_row(
            s.label,
            str(s.steps),
            f"{s.tokens:,}",
            "-" if s.final_val_loss is None else f"{s.final_val_loss:.4f}",
            f"{s.tokens_per_second:.0f}",
            "-" if s.expert_max_mean is None else f"{s.expert_max_mean:.2f}",
        )
    out.print(table)
    out.print(" ".join(str(p) for p in plots), markup=False, soft_wrap=True)


# --- train mtp -----------------------------------------------------------------------------


@train_app.command("regenerate")
def regenerate(
    model: Annotated[str, typer.Option(help="A model name (e.g. smollm2-135m) or a folder.")],
    data_dir: Annotated[
        Path, typer.Option("--data", "-d", help="Data folder that `train data` wrote.")
    ],
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Folder of samples (text files) to write.")
    ],
    count: Annotated[
        int, typer.Option(min=1, help="Samples in all (resumes after those on disk).")
    ] = 2000,
    max_tokens: Annotated[int, typer.Option(min=1, help="Tokens of an answer at most.")] = 192,
    batch: Annotated[int, typer.Option(min=1, help="Prompts decoded together.")] = 16,
    seed: Annotated[int, typer.Option(help="Seed of the prompt choices.")] = 0,
    bf16: Annotated[
        bool, typer.Option("--bf16", help="Decode in bfloat16 (CPUs with AMX, GPUs).", metavar=FLAG)
    ] = False,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N.")] = "cpu",
    threads: Threads = None,
) -> None:
    """The model's own greedy answers to prompts cut from a corpus (code, prose, and chat
    turns about its documented functions), written as text files for `train mtp --data`:
    a draft head learns best from what the model itself says.

    opencomposer train regenerate --model smollm2-135m --data DATA --out DATA/regenerated
    """
    import torch
    from tokenizers import Tokenizer

    from opencomposer.config import EngineSettings
    from opencomposer.serving.engines.embedded.chat_format import chat_format_for
    from opencomposer.serving.engines.embedded.loader import ModelLoadError, load_model
    from opencomposer.serving.engines.embedded.service import resolve_model
    from opencomposer.serving.engines.errors import EngineUnavailable
    from opencomposer.training import regenerate as regenerating
    from opencomposer.training.corpus import iter_corpus

    _use_threads(threads)
    try:
        with _progress() as progress:
            task = progress.add_task("reading the corpus", total=None)
            sources = regenerating.Sources.from_records(iter_corpus(data_dir, "train"))
            models_dir = settings_for(None, {}).settings.models_dir
            name, folder = resolve_model(EngineSettings(model=model), models_dir)
            if not (folder / "tokenizer.json").is_file():
                raise TrainingError(f"{folder}: no tokenizer.json to encode prompts with")
            progress.update(task, description="loading the model")
            llm = load_model(
                folder, device=device, dtype=torch.bfloat16 if bf16 else torch.float32, mtp=False
            )

            def advance(result: regenerating.RegenerateResult) -> None:
                rate = result.output_tokens / result.seconds
                progress.update(
                    task,
                    completed=result.kept + result.written,
                    description=f"regenerating ({rate:.0f} output tok/s)",
                )

            result = regenerating.regenerate(
                llm,
                Tokenizer.from_file(str(folder / "tokenizer.json")),
                chat_format_for(folder),
                sources,
                out_dir,
                model_name=name,
                config=regenerating.RegenerateConfig(
                    count=count, max_tokens=max_tokens, batch=batch, seed=seed
                ),
                on_batch=advance,
            )
    except (TrainingError, EngineUnavailable, ModelLoadError) as exc:
        _fail(str(exc))
    kinds = ", ".join(f"{kind} {n}" for kind, n in (result.kinds or {}).items())
    rate = result.output_tokens / result.seconds if result.seconds else 0.0
    out.print(
        f"wrote {result.written} samples ({kinds}; {result.output_tokens} answer tokens, "
        f"{rate:.0f} tok/s), kept {result.kept} already there, in {out_dir}",
        markup=False,
        soft_wrap=True,
    )


@train_app.command("mtp")
def mtp(
    model: Annotated[str, typer.Option(help="A model name (e.g. smollm2-135m) or a folder.")],
    data: Annotated[
        Path, typer.Option(help="A folder of text files (source code); some are held out.")
    ],
    out: Annotated[Path, typer.Option(help="The model folder to write (trunk linked + head).")],
    steps: Annotated[int, typer.Option(help="Optimizer steps.")] = 200,
    lr: Annotated[float, typer.Option(help="Peak AdamW learning rate.")] = 1e-3,
    seq_len: Annotated[int, typer.Option(help="Tokens per packed row.")] = 256,
    batch_rows: Annotated[int, typer.Option(help="Rows per step.")] = 4,
    warmup: Annotated[int, typer.Option(help="Linear warmup steps.")] = 20,
    eval_percent: Annotated[int, typer.Option(help="Percent of files held out.")] = 10,
    eval_rows: Annotated[int, typer.Option(help="Held-out rows whose acceptance is measured.")] = 8,
    eval_tokens: Annotated[int, typer.Option(help="Greedy tokens decoded per held-out row.")] = 64,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N.")] = "cpu",
    seed: Annotated[int, typer.Option(help="Seed of the fresh MTP layer and of the order.")] = 0,
    max_minutes: Annotated[
        float | None, typer.Option(help="Stop training after this long (shared machines).")
    ] = None,
    draft_vocab: Annotated[
        int,
        typer.Option(
            min=0,
            help="Tokens of the reduced draft vocabulary written beside the head (the "
            "data's most frequent); 0: drafts score the whole vocabulary.",
        ),
    ] = 8192,
    chain_steps: Annotated[
        int,
        typer.Option(
            min=1, max=8, help="Draft steps trained as the engine chains them (1: the first only)."
        ),
    ] = 3,
    bf16: Annotated[
        bool,
        typer.Option(
            "--bf16", help="bf16 autocast (pays on GPUs and on CPUs with AMX).", metavar=FLAG
        ),
    ] = False,
    threads: Threads = None,
    copy_trunk: Annotated[
        bool, typer.Option(help="Copy the trunk's shards instead of linking them.", metavar=FLAG)
    ] = False,
) -> None:
    """Train an MTP draft layer by self-distillation with the trunk frozen, and write a model
    folder the engine serves with MTP on.

    CPU:      opencomposer train mtp --model smollm2-135m --data DIR --out DIR
    One GPU:  opencomposer train mtp --model DIR --data DIR --out DIR --device cuda
    --batch-rows 32 --seq-len 1024
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    from tokenizers import Tokenizer

    from opencomposer.config import EngineSettings
    from opencomposer.serving.cli.output import err
    from opencomposer.serving.cli.output import out as console
    from opencomposer.serving.engines.embedded.service import resolve_model
    from opencomposer.serving.engines.errors import EngineUnavailable
    from opencomposer.training.errors import TrainingError
    from opencomposer.training.mtp_train import MTPTrainConfig, StepLog, train_mtp
    from opencomposer.training.text_rows import split_files, text_rows

    _use_threads(threads)
    try:
        models_dir = settings_for(None, {}).settings.models_dir
        _, folder = resolve_model(EngineSettings(model=model), models_dir)
        if not (folder / "tokenizer.json").is_file():
            raise TrainingError(f"{folder}: no tokenizer.json to tokenize --data with")
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # The corpus builder's read_rows(data, split, seq_len) replaces these two lines.
        train_files, held_out = split_files(data, eval_percent)
        rows, evaluation = (text_rows(f, tokenizer, seq_len) for f in (train_files, held_out))
        err.print(
            f"{len(train_files)} files, {len(rows)} rows of {seq_len} tokens to train on; "
            f"{len(held_out)} files held out ({len(evaluation)} rows)",
            soft_wrap=True,
        )
        config = MTPTrainConfig(
            steps=steps,
            lr=lr,
            batch_rows=batch_rows,
            warmup=min(warmup, steps),
            eval_tokens=eval_tokens,
            device=device,
            seed=seed,
            link_trunk=not copy_trunk,
            draft_vocab=draft_vocab,
            chain_steps=chain_steps,
            autocast=bf16,
            max_seconds=max_minutes * 60 if max_minutes is not None else None,
        )
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} {task.fields[info]}"),
            TimeRemainingColumn(),
            console=err,
        ) as progress:
            task = progress.add_task("loading", total=steps, info="")
            # Into a log (no live bar), a line every 5% of the steps instead.
            log_every = 0 if err.is_terminal else max(1, steps // 20)

            def on_step(log: StepLog) -> None:
                info = f"loss {log.loss:.3f} lr {log.lr:.1e} {log.tokens_per_second:.0f} tok/s"
                progress.update(task, completed=log.step + 1, info=info)
                if log_every and (log.step + 1) % log_every == 0:
                    err.print(f"step {log.step + 1}/{steps} {info}", soft_wrap=True)

            result = train_mtp(
                folder,
                rows,
                out,
                eval_rows=evaluation[:eval_rows],
                config=config,
                on_step=on_step,
                on_phase=lambda name: progress.update(task, description=name),
            )
    except (TrainingError, EngineUnavailable) as exc:
        _fail(str(exc))
    for label, stats in (("before", result.before), ("after", result.after)):
        lengths = ", ".join(f"k={k} {s.accept_length:.3f}" for k, s in stats.items())
        console.print(
            f"held-out acceptance length {label}: {lengths or 'not measured'}", soft_wrap=True
        )
    if result.draft_vocab_coverage is not None:
        console.print(
            f"drafts from the {draft_vocab}-token draft vocabulary "
            f"({result.draft_vocab_coverage:.1%} of held-out tokens)",
            soft_wrap=True,
        )
    if result.eval_loss_before is not None:
        console.print(
            f"held-out distillation loss {result.eval_loss_before:.4f} -> "
            f"{result.eval_loss_after:.4f}"
        )
    size = result.head.stat().st_size / 2**20
    console.print(f"wrote {result.head} ({size:.1f} MB) in {out}", markup=False, soft_wrap=True)


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"opencomposer: {message}\n")
    raise typer.Exit(2)
