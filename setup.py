"""Maps the card's top-level folders into the single import namespace `opencomposer`.

pyproject.toml holds the metadata; this file only exists because the package list of a
multi-root `package-dir` mapping cannot be discovered statically. Nothing is installed as a
bare top-level `agent`, `lsp`, ... module, which would collide with users' own code when the
agent runs it.
"""

from setuptools import find_packages, setup

PACKAGE_ROOTS = {
    "opencomposer": "opencomposer",
    "opencomposer.agent": "agent",
    "opencomposer.lsp": "lsp",
    "opencomposer.serving": "serving",
    "opencomposer.kernels": "kernels",
    "opencomposer.training": "training",
}


def _packages() -> list[str]:
    found = []
    for namespace, folder in PACKAGE_ROOTS.items():
        found.append(namespace)
        found.extend(f"{namespace}.{sub}" for sub in find_packages(folder))
    return found


setup(package_dir=PACKAGE_ROOTS, packages=_packages())
