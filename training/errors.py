"""What a training command can refuse: bad input named in one line, never a traceback.

Every stage raises a `TrainingError` (or a subclass) for input it cannot use (an empty corpus,
a tokenizer without the special tokens, a corrupt checkpoint); the CLI prints its message and
exits 2, like a configuration error.
"""


class TrainingError(Exception):
    """Input a training stage cannot use; the message says what and how to fix it."""
