#!/bin/bash
# A quarter and a bit of daily POS exports for twelve stores: legacy-format files (other
# column order, BOM, upper-case types) before each legacy store's migration, blank lines,
# re-sent headers mid-file and a sprinkling of malformed rows.
set -euo pipefail
cd /app
python3 - <<'PY'
import csv, datetime as dt, io, random
from pathlib import Path

rng = random.Random(20250930)
data = Path("data"); sales = data / "sales"; sales.mkdir(parents=True, exist_ok=True)
stores = [
    ("S01", "Berlin Mitte", "EU"), ("S02", "Chicago Loop", "NA"), ("S03", "Lyon Part-Dieu", "EU"),
    ("S04", "Osaka Umeda", "APAC"), ("S05", "Milano Duomo", "EU"), ("S06", "Toronto Eaton", "NA"),
    ("S07", "Madrid Sol", "EU"), ("S08", "Austin Domain", "NA"), ("S09", "Sydney Pitt St", "APAC"),
    ("S10", "Wien Neubau", "EU"), ("S11", "Seattle Pike", "NA"), ("S12", "Dublin Grafton", "EU"),
]
with (data / "stores.csv").open("w", newline="") as f:
    w = csv.writer(f); w.writerow(["store_id", "name", "region"]); w.writerows(stores)

legacy = {"S03": dt.date(2025, 8, 15), "S05": dt.date(2025, 9, 2), "S08": dt.date(2025, 8, 1)}
catalogue = {f"SKU-{n:04d}": round(rng.uniform(2.5, 240.0), 2) for n in range(1, 181)}
skus = sorted(catalogue)
new_header = ["date", "sku", "type", "quantity", "unit_price"]
old_header = ["date", "type", "sku", "unit_price", "quantity"]

def malformed(fields, header):
    fields = list(fields)
    qi, pi = header.index("quantity"), header.index("unit_price")
    kind = rng.randrange(6)
    if kind == 0:
        return fields[:-1]                   # truncated
    if kind == 1:
        return fields + [fields[-1]]         # a field too many
    if kind == 2:
        fields[qi] = "n/a"
    elif kind == 3:
        fields[qi] = ""
    elif kind == 4:
        fields[pi] = "ERR"
    else:
        fields[pi] += ".0"                   # 12.34.0
    return fields

day = dt.date(2025, 6, 24)
while day <= dt.date(2025, 10, 5):
    for store, _, region in stores:
        old = store in legacy and day < legacy[store]
        header = old_header if old else new_header
        rows = []
        busy = 1.6 if day.weekday() >= 5 else 1.0
        for _ in range(int(rng.randint(6, 22) * busy)):
            sku = rng.choice(skus)
            kind = "refund" if rng.random() < 0.12 else "sale"
            qty = rng.randint(1, 3) if kind == "refund" else rng.randint(1, 6)
            rec = {"date": day.isoformat(), "sku": sku, "type": kind.upper() if old else kind,
                   "quantity": str(qty), "unit_price": f"{catalogue[sku]:.2f}"}
            fields = [rec[c] for c in header]
            rows.append(malformed(fields, header) if rng.random() < 0.025 else fields)
        out = io.StringIO()
        if old:
            out.write("\ufeff")
        w = csv.writer(out, lineterminator="\r\n" if old else "\n")
        w.writerow(header)
        resend = rng.random() < 0.03
        for i, row in enumerate(rows):
            if rng.random() < 0.04:
                out.write("\n")
            if resend and i == len(rows) // 2:
                w.writerow(header)
            w.writerow(row)
        if rng.random() < 0.3:
            out.write("\n\n")
        folder = sales / store; folder.mkdir(exist_ok=True)
        (folder / f"{day.isoformat()}.csv").write_text(out.getvalue(), encoding="utf-8", newline="")
    day += dt.timedelta(days=1)
PY
