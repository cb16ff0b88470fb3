"""Every NeMo Curator keyword in the mapping table is accepted with a visible warning at
the caller's line, or refused with curator-dask's spelling, on the real callable.

The test walks :data:`curator_dask.migrate.mapping.KEYWORDS`: for each callable (a
constructor, a function, a method) and each NeMo keyword, it calls the callable with that
keyword and checks the outcome the table promises. A callable missing the decorator, a
renamed keyword whose target the callable does not take, or a warning attributed to a
line inside curator-dask fails it.
"""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import warnings

import pytest
from nemo_signatures import NEMO_CLASSIFIER_KEYWORDS

import curator_dask
from curator_dask.compat import NeMoCuratorWarning, NeMoKeywordError
from curator_dask.migrate.mapping import KEYWORDS, Ignored, Refused, Renamed, keyword_rules

#: Stands for any value: where the callable uses it, it fails, after the keyword was handled.
PROBE = object()
#: Keywords that make a callable fail right after its NeMo keywords are handled, where it
#: would otherwise do something (get_client would start a cluster).
STOP_EARLY = {"curator_dask.cluster.client.get_client": {"cluster_type": "not-a-cluster-type"}}


def resolve(dotted: str):
    """(owner class or None, the callable's name, the object) for a KEYWORDS key."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        obj, owner = module, None
        for attribute in parts[i:]:
            owner, obj = obj, getattr(obj, attribute)
        return (owner if isinstance(owner, type) else None), parts[-1], obj
    raise ImportError(dotted)


def call(dotted: str, **kwargs):
    """Call the callable at ``dotted`` with ``kwargs`` as a script would."""
    owner, name, obj = resolve(dotted)
    kwargs = {**STOP_EARLY.get(dotted, {}), **kwargs}
    if owner is None:
        return obj(**kwargs)
    if name == "__init__":
        return owner(**kwargs)
    if isinstance(inspect.getattr_static(owner, name), classmethod):
        return getattr(owner, name)(**kwargs)
    instance = owner.__new__(owner)  # the method's own code is not what is checked
    return getattr(instance, name)(**kwargs)


def outcome(dotted: str, keyword: str, value):
    """The warnings the call raised and the exception it ended with (or None)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call(dotted, **{keyword: value})
            error = None
        except Exception as err:  # the callable's own failure on PROBE values
            error = err
    return [w for w in caught if issubclass(w.category, NeMoCuratorWarning)], error


CASES = [(dotted, keyword, rule) for dotted, rules in KEYWORDS.items()
         for keyword, rule in rules.items()]


def test_the_table_covers_the_keywords_nemo_scripts_failed_on():
    present = {(d.rsplit(".", 2)[-2], k) for d, k, _ in CASES}
    for owner, keyword in [("ProcessingStage", "dataset"), ("ExactDuplicates", "dataset"),
                           ("FuzzyDuplicates", "dataset"), ("JsonlReader", "file_paths"),
                           ("JsonlReader", "fields"), ("Modify", "modifier_fn"),
                           ("FuzzyDeduplicationWorkflow", "input_file_extensions")]:
        assert (owner, keyword) in present, (owner, keyword)


@pytest.mark.parametrize("dotted, keyword, rule", CASES,
                         ids=[f"{d.split('.', 1)[1]}:{k}" for d, k, _ in CASES])
def test_a_nemo_keyword_is_accepted_with_a_warning_or_refused_with_our_spelling(
        dotted, keyword, rule):
    if isinstance(rule, Refused):
        with pytest.raises(NeMoKeywordError) as raised:
            call(dotted, **{keyword: PROBE})
        assert rule.fix in str(raised.value) and f"{keyword}=" in str(raised.value)
        assert isinstance(raised.value, TypeError)
        return
    value = [".jsonl"] if isinstance(rule, Ignored) and rule.refuse_if else PROBE
    warned, error = outcome(dotted, keyword, value)
    about = [w for w in warned if f"({keyword}=...)" in str(w.message)]
    assert len(about) == 1, f"{dotted}({keyword}=...) did not warn once: {warned}"
    message = str(about[0].message)
    if isinstance(rule, Renamed):
        assert f"({rule.ours}=" in message
        if rule.convert is not None:  # the value it becomes, as the call received it
            assert f"({rule.ours}={rule.convert(value)!r})" in message
        _, _, obj = resolve(dotted)
        parameters = inspect.signature(obj).parameters
        assert rule.ours in parameters or any(
            p.kind is p.VAR_KEYWORD for p in parameters.values()), rule.ours
    else:
        assert "no effect in curator-dask" in message and rule.reason in message
    assert {w.filename for w in warned} == {__file__}, "warnings must point at the caller"
    if error is not None:
        assert f"'{keyword}'" not in str(error), error


@pytest.mark.parametrize("name", sorted(NEMO_CLASSIFIER_KEYWORDS))
def test_every_keyword_of_a_nemo_classifier_is_a_parameter_or_a_rule(name):
    init = getattr(curator_dask, name).__init__
    parameters = set(inspect.signature(init).parameters)
    rules = keyword_rules(f"{init.__module__}.{init.__qualname__}")
    nemo_0x, nemo_1x = NEMO_CLASSIFIER_KEYWORDS[name]
    assert (nemo_0x | nemo_1x) - parameters - set(rules) == set()
    assert parameters & set(rules) == set()  # a rule never hides a parameter of ours


@pytest.mark.parametrize("dotted, keyword, rule",
                         [c for c in CASES if isinstance(c[2], Ignored) and c[2].refuse_if],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_an_ignored_keyword_whose_value_would_change_the_result_is_refused(dotted, keyword,
                                                                           rule):
    with pytest.raises(NeMoKeywordError, match=rule.refusal):
        call(dotted, **{keyword: [".txt"]})


def test_a_nemo_keyword_and_ours_together_are_an_error():
    from curator_dask import JsonlReader

    with pytest.raises(NeMoKeywordError, match="give path= only"):
        JsonlReader("a/", file_paths="b/")


def test_the_config_object_warns_at_the_callers_line_not_in_generated_code():
    from curator_dask.dedup import FuzzyDuplicatesConfig

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FuzzyDuplicatesConfig(cache_dir="cache", num_buckets=10)
    assert [w.filename for w in caught] == [__file__]
    assert issubclass(caught[0].category, NeMoCuratorWarning)


@pytest.mark.slow
def test_the_warning_is_shown_by_default_outside_main(tmp_path):
    # A module the script imports uses NeMo Curator's spelling: DeprecationWarning would
    # be hidden there by Python's default filters; this one is shown, at that module's line.
    (tmp_path / "helper.py").write_text(
        "from curator_dask import JsonlReader\n\n\ndef reader():\n"
        "    return JsonlReader(file_paths='in/')\n")
    (tmp_path / "script.py").write_text("import helper\nhelper.reader()\n")
    ran = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    assert "helper.py:5: NeMoCuratorWarning: JsonlReader(file_paths=...)" in ran.stderr
