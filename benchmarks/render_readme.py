"""Copy each ``benchmarks/results/<name>.md`` table into README.md.

The README holds markers ``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->``;
the text between them is replaced by the table and the command and machine
from ``<name>.json``, so README figures are never typed by hand.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def render_block(name: str) -> str:
    results = ROOT / "benchmarks" / "results"
    table = (results / f"{name}.md").read_text(encoding="utf-8").strip()
    meta = json.loads((results / f"{name}.json").read_text(encoding="utf-8"))
    m = meta["machine"]
    where = f"{m['cores']} cores, {m['cpu']}" + (f", GPU {m['gpu']}" if m.get("gpu") else "")
    return f"{table}\n\nMeasured {meta['date']} on {where} with `{meta['command']}` " \
           f"(raw figures: `benchmarks/results/{name}.json`)."


def main() -> int:
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    for name in re.findall(r"<!-- results:([\w-]+) -->", text):
        if not (ROOT / "benchmarks" / "results" / f"{name}.json").exists():
            continue
        pattern = re.compile(rf"(<!-- results:{name} -->\n).*?(<!-- /results:{name} -->)", re.S)
        text = pattern.sub(lambda m: m.group(1) + render_block(name) + "\n" + m.group(2), text)
    readme.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
