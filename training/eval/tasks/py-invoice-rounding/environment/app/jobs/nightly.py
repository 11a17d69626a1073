"""The nightly invoicing run: every tenant's usage file in data/usage/ becomes an invoice
in out/invoices/. `python3 -m jobs.nightly [DATA] [OUT]`"""

import json
import logging
import sys
from pathlib import Path

from billing.invoice import build_invoice

log = logging.getLogger("jobs.nightly")


def run(data: Path, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    done = 0
    for path in sorted((data / "usage").glob("*.json")):
        record = json.loads(path.read_text())
        tenant = record["tenant"]
        try:
            invoice = build_invoice(tenant, record["period"], record["usage"], record.get("plan", "standard"))
        except Exception:
            log.exception("invoicing failed for tenant %s", tenant)
            raise
        (out / f"{tenant}.json").write_text(json.dumps(invoice.as_dict(), indent=2))
        done += 1
    log.info("invoicing done: %d tenants", done)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    args = [Path(a) for a in sys.argv[1:]]
    sys.exit(run(args[0] if args else Path("data"), args[1] if len(args) > 1 else Path("out/invoices")))
