"""Recipes for the models opencomposer creates on this machine rather than fetches (`models
init`): a config, seeded initial weights and a tokenizer, written as a Hugging Face folder.

They live here, beside the model store that calls them, and not inside the embedded engine:
the engine only loads checkpoints (and SGLang or transformers load these ones too). Nor can
they live in `training/`, which trains them: `serving` never imports `training`, and
`opencomposer models init` must work without it.
"""
