"""A small plain-text ledger: a CSV journal, balances and exports."""

__version__ = "0.4.1"
