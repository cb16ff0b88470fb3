"""A path that exists is read as it is spelled; only a path that does not exist is a glob.

File and directory names with ``[``, ``]``, ``?`` and ``*`` are read literally by every
reader, the pipeline's input check and the dedup workflows; a pattern that matches
nothing says so and how to match a literal ``[``. Every case checks that each input id is
read exactly once and that the input bytes are unchanged.
"""

from __future__ import annotations

import json
import string

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset
from curator_dask.io.errors import InputNotFoundError
from curator_dask.stages.io_stages import JsonlReader
from reliability.conftest import assert_exactly_once, snapshot_bytes

# Names made of letters, digits and the characters a glob gives meaning to.
NAME = st.text(alphabet=string.ascii_lowercase + "0123456789[]?*-_ ", min_size=1,
               max_size=10).filter(lambda n: n.strip() and not n.startswith((".", "_")))


def write_ids(path, ids, fmt="jsonl") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        path.write_text("".join(json.dumps({"id": i, "text": f"doc {i}"}) + "\n" for i in ids))
    else:
        pd.DataFrame({"id": ids, "text": [f"doc {i}" for i in ids]}).to_parquet(path)


def read_ids(path, fmt="jsonl") -> list[int]:
    reader = DocumentDataset.read_jsonl if fmt == "jsonl" else DocumentDataset.read_parquet
    return reader(str(path)).df.compute()["id"].tolist()


@pytest.mark.slow
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(NAME, min_size=1, max_size=5, unique=True),
       fmt=st.sampled_from(["jsonl", "parquet"]))
def test_every_existing_file_is_read_literally(tmp_path_factory, names, fmt):
    root = tmp_path_factory.mktemp("names")
    # Each name as a file, beside a file that the name would match as a glob pattern
    # ("a[1]" matches "a1"): reading the literal name must not pick the other one up.
    files = {}
    for k, name in enumerate(names):
        files[root / f"{name}.{fmt}"] = list(range(100 * k, 100 * k + 3))
        decoy = (
            root
            / f"{name.replace('[', '').replace(']', '').replace('?', 'x').replace('*', '')}.{fmt}"
        )
        if decoy not in files:
            files.setdefault(decoy, list(range(100 * k + 50, 100 * k + 52)))
    for path, ids in files.items():
        write_ids(path, ids, fmt)
    before = snapshot_bytes(root)
    for name in names:
        path = root / f"{name}.{fmt}"
        assert sorted(read_ids(path, fmt)) == files[path], name
    assert snapshot_bytes(root) == before


@pytest.mark.parametrize("directory", ["d[12]", "in?*", "a*b", "[x]"])
def test_an_existing_directory_with_wildcards_in_its_name_is_read_as_a_directory(
        tmp_path, directory):
    literal = tmp_path / directory / "part.jsonl"
    write_ids(literal, [1, 2, 3])
    write_ids(tmp_path / "d1" / "part.jsonl", [7])  # what "d[12]" would match as a glob
    before = snapshot_bytes(tmp_path)
    ids = read_ids(tmp_path / directory)
    assert_exactly_once([1, 2, 3], ids)
    JsonlReader(str(tmp_path / directory)).check_inputs()  # the command line's check
    assert snapshot_bytes(tmp_path) == before


def test_a_pattern_that_matches_nothing_says_how_to_match_a_bracket(tmp_path):
    write_ids(tmp_path / "part[1].jsonl", [1])
    with pytest.raises(InputNotFoundError) as caught:
        read_ids(tmp_path / "part[2].jsonl")
    message = str(caught.value)
    assert "no files match the pattern" in message and "[[]" in message
    assert isinstance(caught.value, FileNotFoundError)
    # The escape the message suggests works, and a real pattern still globs.
    assert read_ids(tmp_path / "part[[]1].jsonl") == [1]
    write_ids(tmp_path / "part2.jsonl", [2])
    assert sorted(read_ids(tmp_path / "part[12].jsonl")) == [2]
    assert sorted(read_ids(tmp_path / "part*.jsonl")) == [1, 2]


def test_a_missing_path_without_wildcards_names_the_path(tmp_path):
    with pytest.raises(InputNotFoundError, match=r"does not exist.*nope"):
        read_ids(tmp_path / "nope")


@pytest.mark.slow
def test_exact_dedup_workflow_reads_a_directory_with_brackets(tmp_path, client):
    from curator_dask.dedup import ExactDeduplicationWorkflow

    source = tmp_path / "in[1]"
    write_ids(source / "a.jsonl", [1, 2, 3])
    write_ids(tmp_path / "in1" / "a.jsonl", [9])  # the glob reading of "in[1]"
    before = snapshot_bytes(tmp_path / "in[1]")
    result = ExactDeduplicationWorkflow(str(source), str(tmp_path / "out"),
                                        str(tmp_path / "cache"), assign_id=False).run()
    out = pd.read_parquet(tmp_path / "out")
    assert_exactly_once([1, 2, 3], out["id"].tolist(), result.output.dropped)
    assert snapshot_bytes(tmp_path / "in[1]") == before
