"""`curator-dask migrate` and the NeMo module-path errors, driven by one mapping table.

The codemod is checked on generated NeMo Curator imports (hypothesis: any mix of the
table's modules and names must become imports that run) and on one behaviour per rule;
the import errors on every module path of the table; the page's table of module paths
against the table itself.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nemo_signatures import (
    NEMO_CLASSIFIER_KEYWORDS,
    NEMO_CLASSIFIER_MODULES,
    NEMO_DEFAULTS,
    NEMO_VALUES,
)

import curator_dask
from curator_dask.errors import CuratorError
from curator_dask.migrate import mapping
from curator_dask.migrate.codemod import migrate_source, unified_diff
from curator_dask.migrate.finder import NeMoModulePathError
from curator_dask.migrate.mapping import Refused, Renamed, keyword_rules
from curator_dask.stages.models.published import PUBLISHED

ROOT = Path(__file__).parent.parent


def migrated(source: str, **options):
    return migrate_source(source, **options)


# -- the table -----------------------------------------------------------------------------

def test_every_counterpart_in_the_table_exists():
    for name, counterpart in mapping.NAMES.items():
        if counterpart.ours is None:
            assert counterpart.note, f"{name} has neither a counterpart nor a note"
            continue
        module, _, attribute = counterpart.ours.rpartition(".")
        assert hasattr(importlib.import_module(module), attribute), counterpart.ours


def test_every_name_listed_under_a_module_has_an_entry():
    for nemo, module in mapping.MODULES.items():
        assert nemo.startswith("nemo_curator")
        assert set(module.names) <= set(mapping.NAMES), nemo


def test_the_page_shows_the_table_of_module_paths():
    page = (ROOT / "docs" / "migrating.md").read_text()
    assert mapping.module_table() in page


# -- import errors for NeMo-shaped paths ------------------------------------------------------

def _ours(nemo_module: str) -> str:
    return "curator_dask" + nemo_module[len("nemo_curator"):]


def _exists(fullname: str) -> bool:
    try:
        return importlib.util.find_spec(fullname) is not None
    except ModuleNotFoundError:  # a parent is missing
        return False


def _under_a_plain_module(fullname: str) -> bool:
    parts = fullname.split(".")
    for i in range(2, len(parts)):
        parent = ".".join(parts[:i])
        if _exists(parent) and not hasattr(importlib.import_module(parent), "__path__"):
            return True
    return False


@pytest.mark.parametrize("nemo_module", sorted(set(mapping.MODULES) - {"nemo_curator"}))
def test_a_nemo_module_path_under_curator_dask_says_where_its_names_are(nemo_module):
    fullname = _ours(nemo_module)
    if _exists(fullname):  # a real curator-dask module of that name is never shadowed
        assert importlib.import_module(fullname).__name__ == fullname
        return
    if _under_a_plain_module(fullname):
        # curator_dask.backends is a module: Python stops at "is not a package" before
        # asking any finder, and says so itself.
        with pytest.raises(ModuleNotFoundError, match="is not a package"):
            importlib.import_module(fullname)
        return
    with pytest.raises(NeMoModulePathError) as raised:
        importlib.import_module(fullname)
    error = raised.value
    assert isinstance(error, ModuleNotFoundError) and isinstance(error, CuratorError)
    message = str(error)
    # Python imports the parents first: the message is the first missing one's, and it
    # must still say where every name of this module lives.
    parts = fullname.split(".")
    first_missing = next(".".join(parts[:i]) for i in range(2, len(parts) + 1)
                         if not _exists(".".join(parts[:i])))
    assert f"No module named {first_missing!r}" in message
    assert "curator-dask migrate" in message
    imports = [line.strip() for line in message.splitlines()
               if line.strip().startswith("from curator_dask")]
    for name in mapping.MODULES[nemo_module].names:
        counterpart = mapping.NAMES[name]
        if counterpart.ours is None:
            assert f"{name}: no counterpart" in message
            continue
        assert any(line.startswith(f"from {counterpart.module} import ")
                   and counterpart.name in line.split(" import ")[1].split(", ")
                   for line in imports), (name, message)


def test_from_import_of_a_nemo_path_gives_the_message_not_a_bare_error():
    with pytest.raises(NeMoModulePathError, match="from curator_dask import JsonlReader, "):
        exec("from curator_dask.stages.text.io.reader import JsonlReader", {})
    with pytest.raises(NeMoModulePathError, match=r"curator_dask\.stages\.filters import Score"):
        exec("from curator_dask import ScoreFilter", {})


def test_a_missing_name_that_is_not_nemo_curators_is_the_usual_error():
    with pytest.raises(ModuleNotFoundError) as raised:
        importlib.import_module("curator_dask.no_such_module")
    assert not isinstance(raised.value, NeMoModulePathError)


def test_the_finder_is_asked_after_the_one_that_finds_real_modules():
    from importlib.machinery import PathFinder

    from curator_dask.migrate.finder import NeMoPathFinder

    assert sys.meta_path.index(NeMoPathFinder) > sys.meta_path.index(PathFinder)


@pytest.mark.slow
def test_importing_curator_dask_does_not_load_the_codemod():
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, curator_dask; print('libcst' in sys.modules)"],
        capture_output=True, text=True, check=True, cwd=ROOT).stdout.strip()
    assert loaded == "False"


# -- the codemod: generated imports ---------------------------------------------------------

_IMPORTABLE = sorted((module, name) for module, path in mapping.MODULES.items()
                     for name in path.names if mapping.NAMES[name].ours is not None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_IMPORTABLE), min_size=1, max_size=6),
       st.booleans())
def test_any_mix_of_nemo_imports_becomes_imports_that_run(picked, aliased):
    lines = []
    for i, (module, name) in enumerate(picked):
        alias = f" as alias_{i}" if aliased else ""
        lines.append(f"from {module} import {name}{alias}")
    uses = [f"alias_{i}" if aliased else mapping.NAMES[name].name
            for i, (_, name) in enumerate(picked)]
    source = "\n".join(lines) + "\nused = [" + ", ".join(
        f"alias_{i}" if aliased else name for i, (_, name) in enumerate(picked)) + "]\n"
    report = migrated(source)
    assert report.todo == []
    assert "nemo_curator" not in report.code
    scope: dict = {}
    exec(compile(report.code, "<migrated>", "exec"), scope)  # our output
    for (_, name), use in zip(picked, uses, strict=True):
        ours = mapping.NAMES[name]
        expected = getattr(importlib.import_module(ours.module), ours.name)
        assert scope[use] is expected


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(sorted({m for m, _ in _IMPORTABLE})), min_size=1,
                max_size=3, unique=True))
def test_migrating_twice_changes_nothing_more(modules):
    source = "".join(f"from {m} import {mapping.MODULES[m].names[0]}\n" for m in modules
                     if mapping.NAMES[mapping.MODULES[m].names[0]].ours)
    once = migrated(source).code
    assert migrated(once).code == once


# -- the codemod: one behaviour per rule --------------------------------------------------------

def test_a_renamed_name_is_renamed_where_it_is_used_but_not_as_an_attribute():
    report = migrated("from nemo_curator.core.client import RayClient\n"
                      "client = RayClient()\nother.RayClient = 1\n")
    assert "from curator_dask import ClusterSession" in report.code
    assert "client = ClusterSession()" in report.code
    assert "other.RayClient = 1" in report.code


def test_module_aliases_become_imports_of_what_is_used():
    report = migrated("import nemo_curator as nc\nf = nc.ScoreFilter(nc.AddId())\n")
    tree = ast.parse(report.code)
    imported = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                for a in n.names}
    assert imported == {("curator_dask.stages.filters", "ScoreFilter"), ("curator_dask", "AddId")}
    assert "f = ScoreFilter(AddId())" in report.code


def test_keywords_are_renamed_dropped_or_listed_and_comments_stay():
    source = ("from nemo_curator.stages.text.io.reader import JsonlReader\n"
              "from nemo_curator.modules import ExactDuplicates\n"
              "# read the corpus\n"
              "reader = JsonlReader(file_paths='in/', fields=['text'])  # the reader\n"
              "dedup = ExactDuplicates(logger='./', cache_dir='c', profile_dir='p')\n"
              "dups = dedup(dataset=reader)\n")
    report = migrated(source)
    assert "reader = JsonlReader(path='in/', columns=['text'])  # the reader" in report.code
    assert "# read the corpus" in report.code
    assert "ExactDuplicates(cache_path='c', profile_dir='p')" in report.code
    assert "dups = dedup(ds=reader)" in report.code
    assert [(n.line, "profile_dir" in n.message) for n in report.todo] == [(5, True)]


def test_method_names_follow_the_type_of_a_variable():
    report = migrated("from nemo_curator.datasets import DocumentDataset\n"
                      "ds = DocumentDataset.read_json('in/', input_files=None)\n"
                      "ds.to_json(output_path='out/')\nother.to_json('x')\n")
    assert "ds = DocumentDataset.read_jsonl('in/', path=None)" in report.code
    assert "ds.to_jsonl(path='out/')" in report.code
    assert "other.to_json('x')" in report.code  # of unknown type: left, warns if it runs


def test_a_hub_model_takes_the_directory_given_or_is_listed():
    source = ("from nemo_curator.classifiers import QualityClassifier\n"
              "q = QualityClassifier(filter_by=['High'], batch_size=64)\n")
    without = migrated(source)
    assert [n.line for n in without.todo] == [2]
    assert "--model QualityClassifier=DIR --model microsoft/deberta-v3-base=DIR" in \
        without.todo[0].message
    backbone_missing = migrated(source, models={"QualityClassifier": "/models/q"})
    assert "--model microsoft/deberta-v3-base=DIR" in backbone_missing.todo[0].message
    assert "--model QualityClassifier" not in backbone_missing.todo[0].message
    given_dirs = migrated(source, models={"QualityClassifier": "/models/q",
                                          "microsoft/DeBERTa-v3-base": "/models/base"})
    assert given_dirs.todo == []
    assert ('q = QualityClassifier(model_path="/models/q", base_model_path="/models/base", '
            'filter_by=[\'High\'], model_inference_batch_size=64)') in given_dirs.code


def test_the_table_names_the_models_the_classifiers_load():
    for name, published in PUBLISHED.items():
        assert mapping.NAMES[name].hub_model == published.model_id, name


def _call_keywords(code: str) -> dict:
    """The keyword arguments of ``stage = Cls(...)`` in migrated code, as values."""
    call = next(node.value for node in ast.walk(ast.parse(code))
                if isinstance(node, ast.Assign) and node.targets[0].id == "stage")
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords}


def _every_model_directory() -> dict[str, str]:
    return {key: f"/models/{i}" for i, key in enumerate(
        [*NEMO_CLASSIFIER_KEYWORDS, *(hub for name in NEMO_CLASSIFIER_KEYWORDS
                                      for _, hub in mapping.NAMES[name].models())])}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(NEMO_CLASSIFIER_KEYWORDS)), st.sampled_from((0, 1)), st.data())
def test_any_nemo_classifier_call_becomes_a_call_of_ours_with_the_same_values(name, version,
                                                                              data):
    keywords = data.draw(st.lists(st.sampled_from(sorted(NEMO_CLASSIFIER_KEYWORDS[name][version])),
                                  unique=True, max_size=6))
    source = (f"from {NEMO_CLASSIFIER_MODULES[version]} import {name}\n"
              f"stage = {name}(" + ", ".join(f"{k}={NEMO_VALUES[k]}" for k in keywords) + ")\n")
    report = migrated(source, models=_every_model_directory())
    init = getattr(curator_dask, name).__init__
    rules = keyword_rules(f"{init.__module__}.{init.__qualname__}")
    refused = sorted(k for k in keywords if isinstance(rules.get(k), Refused))
    assert sorted(n.message.partition("=")[0] for n in report.todo) == refused
    given_ours = _call_keywords(report.code)
    for keyword in refused:
        given_ours.pop(keyword)
    bound = inspect.signature(init).bind(None, **given_ours).arguments
    for keyword in keywords:
        rule, value = rules.get(keyword), ast.literal_eval(NEMO_VALUES[keyword])
        if isinstance(rule, Renamed):
            keyword, value = rule.ours, rule.convert(value) if rule.convert else value
        elif rule is not None:
            continue
        assert bound[keyword] == value, keyword


@pytest.mark.parametrize("version", (0, 1))
@pytest.mark.parametrize("name", sorted(NEMO_DEFAULTS))
def test_a_migrated_classifier_writes_and_reads_as_its_nemo_version_did(name, version):
    report = migrated(f"from {NEMO_CLASSIFIER_MODULES[version]} import {name}\n"
                      f"stage = {name}()\n")
    init = getattr(curator_dask, name).__init__
    rules = keyword_rules(f"{init.__module__}.{init.__qualname__}")
    bound = inspect.signature(init).bind(None, **_call_keywords(report.code))
    bound.apply_defaults()
    for keyword, value in NEMO_DEFAULTS[name][version].items():
        rule = rules.get(keyword)
        ours = rule.ours if isinstance(rule, Renamed) else keyword
        expected = None if keyword == "max_chars" and value == -1 else value  # -1: all
        assert bound.arguments[ours] == expected, (name, keyword)


def test_a_modifier_that_is_a_stage_here_loses_its_wrapper():
    report = migrated("from nemo_curator import Modify\n"
                      "from nemo_curator.modifiers.pii_modifier import PiiModifier\n"
                      "r = Modify(PiiModifier(supported_entities=['PERSON'], device='cpu'))\n",
                      models={"PiiModifier": "/models/spacy"})
    assert 'r = PiiRedactor(nlp_model_dir="/models/spacy", entities=[\'PERSON\'])' in report.code


def test_a_name_without_counterpart_is_listed_with_what_to_write():
    report = migrated("from nemo_curator.tasks import DocumentBatch\nx = 1\n")
    assert "DocumentBatch" not in report.code.split("x = 1")[0]
    assert report.todo and "pandas or cuDF frame" in report.todo[0].message


def test_a_cluster_started_at_module_level_gets_a_main_guard():
    source = ("from nemo_curator.core.client import RayClient\n\n"
              "def helper():\n    return 1\n\n"
              "client = RayClient()\nclient.start()\nprint(helper())\n")
    code = migrated(source).code
    tree = ast.parse(code)
    assert [type(n).__name__ for n in tree.body] == ["ImportFrom", "FunctionDef", "If"]
    assert "client.start()" in ast.unparse(tree.body[2].body)


def test_a_script_with_a_guard_or_without_a_cluster_is_left_as_it_is():
    guarded = ("from nemo_curator import get_client\n"
               "if __name__ == '__main__':\n    client = get_client()\n")
    assert migrated(guarded).code.count("__main__") == 1
    local = "from nemo_curator.pipeline import Pipeline\np = Pipeline('x')\np.run()\n"
    assert "__main__" not in migrated(local).code


def test_cpu_rewrites_only_the_gpu_only_choices():
    source = ("import dask\nfrom nemo_curator.datasets import DocumentDataset\n"
              "def pre_imports():\n    import cudf  # noqa\n\n"
              "def main(args, client):\n"
              "    backend = 'cudf'\n"
              "    if args.device != 'gpu':\n        raise ValueError('gpu only')\n"
              "    client.run(pre_imports)\n"
              "    options = {'cluster_type': 'cpu'}\n"
              "    options['cluster_type'] = 'gpu'\n"
              "    with dask.config.set({'dataframe.backend': backend}):\n"
              "        return DocumentDataset.read_json('in', backend='cudf', text_field='cudf')\n")
    plain = migrated(source).code
    assert plain.count("cudf") == 4 and "args.device" in plain
    code = migrated(source, cpu=True).code
    assert "args.device" not in code and "client.run" not in code
    assert 'backend = "pandas"' in code and "options['cluster_type'] = \"cpu\"" in code
    assert "read_jsonl('in', backend=\"pandas\", text_field='cudf')" in code
    assert "import cudf" in code  # the function stays; it is no longer called


def test_cpu_puts_a_classifier_on_the_cpu_and_reports_the_line():
    source = ("from nemo_curator.classifiers import DomainClassifier\n\n"
              "domain = DomainClassifier(device_type='cuda', text_field='cuda')\n")
    assert "device='cuda'" in migrated(source).code
    report = migrated(source, cpu=True)
    assert "DomainClassifier(device=\"cpu\", text_field='cuda')" in report.code
    assert [n.line for n in report.changes if "device_type='cuda'" in n.message] == [3]


def test_a_value_known_only_when_the_script_runs_keeps_its_nemo_keyword():
    report = migrated("from nemo_curator.classifiers import DomainClassifier\n"
                      "fast = True\nd = DomainClassifier(autocast=fast, batch_size=8)\n")
    assert "DomainClassifier(autocast=fast, model_inference_batch_size=8)" in report.code
    assert not any("autocast" in n.message for n in report.todo)


def test_loguru_becomes_logging():
    code = migrated("from loguru import logger\nlogger.info('x')\n").code
    scope: dict = {"__name__": "script"}
    exec(code, scope)
    assert scope["logger"].name == "script"


def test_the_diff_names_the_file_and_shows_the_change():
    report = migrated("from nemo_curator.modules import AddId\n")
    diff = unified_diff(report, "/abs/script.py")
    assert diff.startswith("--- a/abs/script.py\n+++ b/abs/script.py")
    assert "+from curator_dask import AddId" in diff


# -- the command ----------------------------------------------------------------------------------

def test_the_command_writes_in_place_and_lists_what_is_left(tmp_path):
    from curator_dask.cli.main import main

    script = tmp_path / "s.py"
    script.write_text("from nemo_curator.modules import ExactDuplicates\n"
                      "from nemo_curator.tasks import DocumentBatch\n")
    assert main(["migrate", str(tmp_path)]) == 1  # a diff, and one thing left
    assert "nemo_curator.modules" in script.read_text()
    assert main(["migrate", "--write", str(script)]) == 1
    assert script.read_text().startswith("from curator_dask.dedup import ExactDuplicates")


def test_the_command_exits_0_when_everything_was_rewritten(tmp_path, capsys):
    from curator_dask.cli.main import main

    script = tmp_path / "s.py"
    script.write_text("from nemo_curator.modules import AddId\n")
    assert main(["migrate", str(script)]) == 0
    assert "+from curator_dask import AddId" in capsys.readouterr().out


def test_the_command_refuses_a_missing_path_and_a_bad_model_option(tmp_path, capsys):
    from curator_dask.cli.main import main

    assert main(["migrate", str(tmp_path / "nope.py")]) == 1
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["migrate", "--model", "QualityClassifier", str(tmp_path)])
    assert exited.value.code == 2


def test_top_level_hint_names_where_a_nemo_name_lives():
    with pytest.raises(AttributeError, match=r"from curator_dask\.stages\.filters import"):
        curator_dask.ScoreFilter  # noqa: B018


def test_nemo_s_tokenizing_writer_becomes_ours_with_a_local_tokenizer():
    report = migrated("from nemo_curator.stages.text.io.writer import MegatronTokenizerWriter\n"
                      "writer = MegatronTokenizerWriter(path='out/', model_identifier='tok/',\n"
                      "                                 append_eod=True, hf_token='hf_x')\n")
    assert "from curator_dask.training import MegatronWriter" in report.code
    assert "MegatronWriter(path='out/', tokenizer='tok/',\n" in report.code
    assert "eos=True, hf_token='hf_x')" in report.code
    # The hub's token has no counterpart: the line is listed, saying to pass a directory.
    assert [(n.line, "hf_token" in n.message and "local directory" in n.message)
            for n in report.todo] == [(2, True)]
