"""Build curator_dask/data/python-docs-sample.jsonl.gz from the Python documentation.

Source: the Python Language Reference topics shipped with CPython (``pydoc_data.topics``)
and the docstrings of standard-library modules, classes and functions. Both are part of
the Python documentation, distributed under the Python Software Foundation License 2.0.
Run with the Python whose documentation you want: ``python scripts/build_sample.py``.
"""

from __future__ import annotations

import gzip
import importlib
import inspect
import json
import pkgutil
import re
import sys
import warnings
from pathlib import Path

OUT = (
    Path(__file__).resolve().parent.parent / "curator_dask" / "data" / "python-docs-sample.jsonl.gz"
)
SKIP = re.compile(r"^(test|idlelib|tkinter|turtle|lib2to3|ensurepip|this|antigravity|__)")


def topic_documents():
    from pydoc_data.topics import topics

    for name in sorted(topics):
        sections = re.split(r"\n(?=[^\n]+\n[=*\-]{3,}\n)", topics[name])
        for i, section in enumerate(sections):
            text = section.strip()
            if len(text) >= 200:
                yield {"text": text, "source": f"reference/{name}#{i}"}


def docstring_documents():
    warnings.simplefilter("ignore")
    for info in sorted(pkgutil.iter_modules(), key=lambda m: m.name):
        if SKIP.match(info.name) or info.name not in sys.stdlib_module_names:
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:
            continue
        members = [(info.name, module)]
        for attr, value in sorted(vars(module).items()):
            if attr.startswith("_") or getattr(value, "__module__", None) != info.name:
                continue
            if inspect.isclass(value) or inspect.isfunction(value):
                members.append((f"{info.name}.{attr}", value))
        for qualname, obj in members:
            doc = inspect.getdoc(obj)
            if doc and len(doc) >= 200:
                yield {"text": doc, "source": f"docstring/{qualname}"}


def main() -> None:
    seen = set()
    rows = []
    for doc in [*topic_documents(), *docstring_documents()]:
        if doc["text"] not in seen:
            seen.add(doc["text"])
            rows.append(doc)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(OUT, "wt", encoding="utf-8", compresslevel=9) as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    size = sum(len(r["text"]) for r in rows)
    print(f"{len(rows)} documents, {size / 1e6:.1f} MB of text -> {OUT}")


if __name__ == "__main__":
    main()
