"""Compiled kernels go to one cache per user, also from a read-only installation."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import curator_dask

# Compiles one small kernel, then says whether it came from the cache.
_SCRIPT = """
import numpy as np
from curator_dask import numba_cache
from curator_dask.text import kernels
assert list(kernels.prefix_hashes(np.arange(3, dtype=np.int64)))[0] == 0
print(numba_cache.cache_dir(), kernels.prefix_hashes.stats.cache_hits.__len__() > 0,
      numba_cache.__file__)
"""


def _read_only_copy(tmp_path: Path) -> Path:
    package = tmp_path / "site" / "curator_dask"
    shutil.copytree(Path(curator_dask.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in [package, *package.rglob("*")]:
        mode = path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
        path.chmod(mode)
    return package.parent


def _run(site: Path, env_overrides: dict) -> tuple[str, bool]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(env_overrides, PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")
    # Not from the repository's directory: ``python -c`` puts the working directory first
    # on sys.path, which would import the package there instead of the copy.
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300, check=True, cwd=site.parent).stdout.split()
    assert Path(out[2]).is_relative_to(site), f"imported {out[2]}, not the copy in {site}"
    return out[0], out[1] == "True"


def _nbi_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.nbi"))


@pytest.mark.slow
def test_kernels_cache_in_the_user_cache_dir_from_a_read_only_install(tmp_path):
    site = _read_only_copy(tmp_path)
    xdg = tmp_path / "xdg"
    try:
        where, hit = _run(site, {"XDG_CACHE_HOME": str(xdg), "HOME": str(tmp_path)})
        assert Path(where).parent == xdg / "curator-dask" / "numba"
        assert not hit  # compiled this time...
        assert _nbi_files(Path(where)), "the compiled kernel was not written to the cache"
        assert not _nbi_files(site), "nothing is written into the installed package"
        _, hit = _run(site, {"XDG_CACHE_HOME": str(xdg), "HOME": str(tmp_path)})
        assert hit  # ...and loaded from the cache by the next process
    finally:
        for path in [site, *site.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


@pytest.mark.slow
def test_a_change_to_any_source_file_compiles_the_kernels_again(tmp_path):
    # numba checks a cached kernel only against the file that defines it; a kernel that
    # inlines a function of another module must not be loaded stale after that changes.
    site = _read_only_copy(tmp_path)
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)}
    try:
        before, _ = _run(site, env)
        again, hit = _run(site, env)
        assert (again, hit) == (before, True)
        other = site / "curator_dask" / "dedup" / "fuzzy" / "murmur.py"  # not the kernel's file
        other.chmod(other.stat().st_mode | stat.S_IWUSR)
        other.write_text(other.read_text() + "\n# changed\n")
        after, hit = _run(site, env)
        assert after != before
        assert not hit  # compiled afresh from the changed sources
    finally:
        for path in [site, *site.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


@pytest.mark.slow
def test_a_numba_cache_dir_the_user_set_is_used_as_is(tmp_path):
    site = _read_only_copy(tmp_path)
    mine = tmp_path / "mine"
    try:
        where, _ = _run(site, {"NUMBA_CACHE_DIR": str(mine),
                               "XDG_CACHE_HOME": str(tmp_path / "xdg")})
        assert Path(where) == mine
        assert _nbi_files(mine)
        assert not (tmp_path / "xdg").exists()
    finally:
        for path in [site, *site.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


# The kernels a curation job uses in one process: every heuristic filter the demo runs,
# and fuzzy dedup in memory (MinHash, LSH, connected components on one worker).
_JOB = """
import pandas as pd
from curator_dask import DocumentDataset
from curator_dask.dedup import FuzzyDuplicates
from curator_dask.stages.filters import (MeanWordLengthFilter, NumbersFilter,
    RepeatedLinesFilter, UrlsFilter, WordCountFilter)

texts = [f"document {i} says the same thing again and again, number {i % 3}" for i in range(40)]
frame = pd.DataFrame({"id": range(40), "text": pd.Series(texts, dtype="str")})
ds = DocumentDataset.from_pandas(frame, npartitions=2)
for kind in (WordCountFilter, RepeatedLinesFilter, UrlsFilter, NumbersFilter,
             MeanWordLengthFilter):
    kind().score(ds.df.compute()["text"])
print(len(FuzzyDuplicates(char_ngrams=5, num_bands=4, minhashes_per_band=2)
          .identify(ds).df.compute()))
"""


@pytest.mark.slow
def test_an_install_step_compiles_every_kernel_a_job_uses(tmp_path):
    """``python -m curator_dask.precompile`` (what ``make demo`` runs after installing)
    leaves nothing for a later job to compile: numba's cache log of the job shows only
    loads, no kernel saved."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(NUMBA_CACHE_DIR=str(tmp_path / "kernels"))
    subprocess.run([sys.executable, "-m", "curator_dask.precompile"], env=env, check=True,
                   capture_output=True, timeout=600)
    assert _nbi_files(tmp_path / "kernels")
    job = subprocess.run([sys.executable, "-c", _JOB], env={**env, "NUMBA_DEBUG_CACHE": "1"},
                         capture_output=True, text=True, timeout=600, check=True)
    log = job.stdout + job.stderr
    assert "data loaded from" in log  # the job did use the kernels, from the cache
    compiled = sorted({line.split("/")[-1].strip("'") for line in log.splitlines()
                       if "index saved" in line})
    assert compiled == [], f"compiled after the install step: {compiled}"
