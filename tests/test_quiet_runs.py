"""A run that goes well prints nothing at WARNING: a script that starts a local cluster
with ``get_client()`` and runs exact and fuzzy dedup (each with P2P shuffles, which
distributed notes at WARNING from the scheduler in the script's own process) and a
streaming pipeline leaves stderr free of warnings, while the work's own result is right.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import logging
    import pandas as pd
    from curator_dask import DocumentDataset, Pipeline, get_client
    from curator_dask.dedup import ExactDuplicates, FuzzyDuplicates
    from curator_dask.executors import StreamingExecutor
    from curator_dask.stages.filters import ScoreFilter, WordCountFilter
    from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

    logging.basicConfig(level=logging.WARNING)  # what a script's user sees
    if __name__ == "__main__":
        with get_client(n_workers=2, threads_per_worker=1):
            texts = [f"document {i % 40} says the same thing again and again and again"
                     for i in range(400)]
            frame = pd.DataFrame({"id": range(400), "text": pd.Series(texts, dtype="str")})
            frame.to_json("in.jsonl", orient="records", lines=True)
            ds = DocumentDataset.from_pandas(frame, npartitions=4)
            exact = len(ExactDuplicates().identify(ds).df.compute())
            fuzzy = len(FuzzyDuplicates(char_ngrams=5, num_bands=4, minhashes_per_band=2)
                        .identify(ds).df.compute())
            result = (Pipeline("quiet").add_stage(JsonlReader("in.jsonl", blocksize="4KiB"))
                      .add_stage(ScoreFilter(WordCountFilter(min_words=3)))
                      .add_stage(ParquetWriter("out"))
                      .run(StreamingExecutor(progress=False)))
            print(exact, fuzzy, result.rows)
""")


def test_a_run_that_goes_well_prints_no_warning(tmp_path):
    (tmp_path / "quiet.py").write_text(SCRIPT)
    run = subprocess.run([sys.executable, "quiet.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr
    exact, fuzzy, rows = (int(v) for v in run.stdout.split())
    assert exact == 400 and fuzzy == 400 and rows == 400  # 40 texts, 10 copies each
    warnings = [line for line in run.stderr.splitlines()
                if "WARNING" in line or "Warning:" in line]
    assert warnings == [], "\n".join(warnings)
