"""`python3 -m deployer.cli [FILES...]`: prints the effective configuration as JSON."""

import json
import sys
from pathlib import Path

from deployer.config import load


def main(argv: list[str] | None = None) -> int:
    files = [Path(a) for a in (sys.argv[1:] if argv is None else argv)] or [Path("conf/base.toml"), Path("conf/local.toml")]
    print(json.dumps(load(files), indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
