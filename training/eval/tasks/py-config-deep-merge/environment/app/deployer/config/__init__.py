"""Layered configuration: built-in defaults, then each TOML file in order, then the
environment (DEPLOYER__SECTION__KEY=value). Later layers win, key by key."""

from deployer.config.loader import load

__all__ = ["load"]
