"""`opencomposer train ...`: the training stages, each a command over the previous one's output.

data -> tokenizer -> pretrain -> mtp. Each stage's work lives in `opencomposer.training`
(imported inside the command, so `--help` does not load torch); this module only turns flags
into calls, shows progress and turns training errors into one-line messages.
"""

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from opencomposer.serving.cli.help_style import CommandApp
from opencomposer.serving.cli.options import FLAG, settings_for

train_app = CommandApp(
    help="Training: build a code corpus, train a tokenizer, pretrain tiny-moe, train MTP layers.",
    no_args_is_help=True,
)


# --- train mtp -----------------------------------------------------------------------------


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
            f"{len(held_out)} files held out ({len(evaluation)} rows)"
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

            def on_step(log: StepLog) -> None:
                info = f"loss {log.loss:.3f} lr {log.lr:.1e} {log.tokens_per_second:.0f} tok/s"
                progress.update(task, completed=log.step + 1, info=info)

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
        console.print(f"held-out acceptance length {label}: {lengths or 'not measured'}")
    if result.eval_loss_before is not None:
        console.print(
            f"held-out distillation loss {result.eval_loss_before:.4f} -> "
            f"{result.eval_loss_after:.4f}"
        )
    console.print(f"wrote {result.head} ({result.head.stat().st_size / 2**20:.1f} MB) in {out}")


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"opencomposer: {message}\n")
    raise typer.Exit(2)
