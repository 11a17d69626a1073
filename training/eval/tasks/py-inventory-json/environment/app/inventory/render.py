from inventory.store import Item

COLUMNS = ("sku", "name", "quantity", "price", "value")


def table(items: list[Item]) -> str:
    rows = [COLUMNS] + [tuple(str(getattr(item, c)) for c in COLUMNS) for item in items]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
    )
