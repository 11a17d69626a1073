"""Usage pricing and invoices."""
