"use strict";

class UsageError extends Error {}

const USAGE = `usage: csvtab [options] [FILE]

  -d, --delimiter C     field separator (default ",")
  -f, --format F        text (default) or markdown
      --no-header       the first row is data, not a header
  -c, --columns LIST    only these columns, in this order (names, or 1-based numbers)
  -w, --max-width N     cut cells longer than N characters (ending them with "…")
  -h, --help            this help`;

/** Options from argv (without node and the script). Throws UsageError on bad input. */
function parseArgs(argv) {
  const opts = { delimiter: ",", format: "text", header: true, columns: null, maxWidth: null, file: null, help: false };
  const value = (i, name) => {
    if (i >= argv.length) throw new UsageError(`${name} needs a value`);
    return argv[i];
  };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let inline = null;
    if (arg.startsWith("--") && arg.includes("=")) {
      inline = arg.slice(arg.indexOf("=") + 1);
      arg = arg.slice(0, arg.indexOf("="));
    }
    const next = (name) => (inline !== null ? inline : value(++i, name));
    switch (arg) {
      case "-d":
      case "--delimiter": {
        let d = next(arg);
        if (d === "\\t" || d === "tab") d = "\t";
        if (d.length !== 1) throw new UsageError("the delimiter must be one character");
        opts.delimiter = d;
        break;
      }
      case "-f":
      case "--format": {
        const f = next(arg);
        if (f !== "text" && f !== "markdown") throw new UsageError(`unknown format ${f} (text or markdown)`);
        opts.format = f;
        break;
      }
      case "--no-header":
        opts.header = false;
        break;
      case "-c":
      case "--columns":
        opts.columns = next(arg)
          .split(",")
          .map((c) => c.trim())
          .filter(Boolean);
        break;
      case "-w":
      case "--max-width": {
        const w = next(arg).trim();
        if (!/^\d+$/.test(w) || Number(w) < 1) {
          throw new UsageError(`${arg} needs a whole number of at least 1, not ${JSON.stringify(w)}`);
        }
        opts.maxWidth = Number(w);
        break;
      }
      case "-h":
      case "--help":
        opts.help = true;
        break;
      default:
        if (arg.startsWith("-") && arg !== "-") throw new UsageError(`unknown option ${arg}`);
        if (opts.file !== null) throw new UsageError("only one FILE");
        opts.file = arg;
    }
  }
  return opts;
}

module.exports = { parseArgs, UsageError, USAGE };
