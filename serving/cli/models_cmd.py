"""`opencomposer models list|pull|init|install`: the local model store."""

from pathlib import Path
from typing import Annotated, TypedDict

import typer
from rich.table import Table

from opencomposer.serving import model_store as store
from opencomposer.serving.cli.help_style import CommandApp
from opencomposer.serving.cli.options import (
    FLAG,
    ConfigOverrides,
    Json,
    Workspace,
    overrides_from,
    settings_for,
)
from opencomposer.serving.cli.output import err, out, print_json

models_app = CommandApp(
    help="Models: what is installed, fetching and creating more.", no_args_is_help=True
)


class ModelRow(TypedDict):
    """One model of `models list`, as its JSON output has it."""

    name: str
    installed: bool
    path: str
    licence: str
    purpose: str
    source: str


def _source(model: store.PackagedModel | store.LocalModel, models_dir: Path) -> str:
    trained = store.trained_from(models_dir, model.name)
    if trained is not None:
        return f"trained here (models install, from {trained})"
    if isinstance(model, store.LocalModel):
        return f"local (models init {model.name})"
    return f"{model.package}=={model.version} (PyPI)"


@models_app.command("list")
def list_models(
    workspace: Workspace = None, config: ConfigOverrides = None, json: Json = False
) -> None:
    """Known models, whether each is installed, where, and how to get it."""
    folder = settings_for(workspace, overrides_from(config)).settings.models_dir
    rows: list[ModelRow] = [
        {
            "name": m.name,
            "installed": store.is_installed(folder, m.name),
            "path": str(store.model_dir(folder, m.name)),
            "licence": m.licence,
            "purpose": m.purpose,
            "source": _source(m, folder),
        }
        for m in store.MODELS.values()
    ]
    if json:
        print_json(rows)
        return
    table = Table(box=None, header_style="bold", padding=(0, 2, 0, 0))
    for column in ("model", "installed", "purpose", "source"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row["name"], "yes" if row["installed"] else "no", row["purpose"], row["source"]
        )
    out.print(table)
    out.print(f"\nmodel store: {folder}")


@models_app.command("pull")
def pull(
    name: Annotated[str, typer.Argument(help="Model name, as listed by `models list`.")],
    workspace: Workspace = None,
    config: ConfigOverrides = None,
) -> None:
    """Fetch a model from its pinned PyPI wheel, verify it and unpack it into the store."""
    folder = settings_for(workspace, overrides_from(config)).settings.models_dir
    if store.is_installed(folder, name):
        out.print(f"{name} is already installed in {store.model_dir(folder, name)}")
        return
    with err.status(f"fetching {name}"):
        try:
            path = store.pull(name, folder)
        except store.ModelPullError as exc:
            err.print(f"[red]cannot pull {name}[/]: {exc}")
            raise typer.Exit(1) from None
    out.print(f"{name} installed in {path}")


@models_app.command("init")
def init(
    name: Annotated[str, typer.Argument(help="A model created here, as listed by `models list`.")],
    seed: Annotated[int, typer.Option(help="Seed of the random weights.")] = 0,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace the model if it exists (trained weights included).",
            metavar=FLAG,
        ),
    ] = False,
    workspace: Workspace = None,
    config: ConfigOverrides = None,
) -> None:
    """Create a local model (architecture, tokenizer, seeded random weights) for training."""
    folder = settings_for(workspace, overrides_from(config)).settings.models_dir
    if store.is_installed(folder, name) and not force:
        out.print(f"{name} already exists in {store.model_dir(folder, name)} (--force replaces it)")
        return
    with err.status(f"creating {name}"):
        try:
            path = store.init(name, folder, seed=seed, force=force)
        except store.ModelPullError as exc:
            err.print(f"[red]cannot create {name}[/]: {exc}")
            raise typer.Exit(1) from None
    out.print(f"{name} created in {path} (seed {seed})")


@models_app.command("install")
def install(
    name: Annotated[str, typer.Argument(help="The model it becomes, as listed by `models list`.")],
    trained: Annotated[
        Path,
        typer.Argument(
            help="A trained folder: a `train pretrain` run (its latest checkpoint) or "
            "checkpoint, or a `train mtp` output.",
            file_okay=False,
            exists=True,
        ),
    ],
    workspace: Workspace = None,
    config: ConfigOverrides = None,
) -> None:
    """Install trained weights under a model's name (replacing what is there), so the engine
    serves them wherever that name is used."""
    from opencomposer.training.checkpoint import latest_checkpoint
    from opencomposer.training.errors import TrainingError

    folder = settings_for(workspace, overrides_from(config)).settings.models_dir
    with err.status(f"installing {name}"):
        try:
            path = store.install_trained(name, folder, latest_checkpoint(trained) or trained)
        except (store.ModelPullError, TrainingError) as exc:
            err.print(f"cannot install {name}: {exc}", markup=False, soft_wrap=True)
            raise typer.Exit(1) from None
    out.print(f"{name} installed in {path} from {trained}", markup=False, soft_wrap=True)
