"""`opencomposer train ...`: the training stages, each a command over the previous one's output.

data -> tokenizer -> pretrain -> mtp. Each stage's work lives in `opencomposer.training`
(imported inside the command, so `--help` does not load torch); this module only turns flags
into calls, shows progress and turns training errors into one-line messages.
"""

from opencomposer.serving.cli.help_style import CommandApp

train_app = CommandApp(
    help="Training: build a code corpus, train a tokenizer, pretrain tiny-moe, train MTP layers.",
    no_args_is_help=True,
)
