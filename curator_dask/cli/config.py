"""Pipelines from YAML files: read with a safe loader, checked key by key, line by line.

A pipeline file::

    name: clean-web                 # optional; default: the file's name
    description: filters, dedup, embeddings
    cluster:                        # options of curator_dask.get_client
      n_workers: 4
      # scheduler_address: tcp://scheduler:8786   (connect instead of starting one)
    executor:
      type: streaming               # streaming | batch | local
      max_in_flight: 8              # the executor's own options
    reader:
      type: jsonl                   # jsonl | parquet | warc | blend
      path: data/
      blocksize: 64MiB
    stages:                         # in order; names from `curator-dask stages`
      - AddId
      - LanguageIdFilter: {languages: [en]}
      - WordCountFilter:
          min_words: 50
          score_field: word_count   # a filter also takes ScoreFilter's options
      - ExactDedup
    writer:
      type: parquet                 # parquet | jsonl | megatron
      path: out/
      mode: overwrite
    report: reports/report.html     # the curation report (optional; not inside the output)

Every mapping is checked against what it may hold: an unknown key, stage, reader, writer
or executor type is an error naming the file, the line, and the valid choices. Options of
the cluster, the executor, readers, writers and stages are the parameters of the
functions and classes they go to (read by :mod:`inspect`), so they cannot drift from the
code, and each value is checked against the parameter's type hint: ``min_words: twenty``
is an error naming the file, the line, the parameter and the type it expects
(:class:`ConfigError`, exit code 2 from the CLI). :meth:`PipelineConfig.check_inputs`
checks that the reader's input exists. Relative paths are relative to the working
directory.

Examples
--------
>>> config = load_config_text('''
... reader: {type: jsonl, path: data/}
... stages:
...   - WordCountFilter: {min_words: 20}
... writer: {type: parquet, path: out/}
... ''', source="example.yaml")
>>> print(config.pipeline.describe())
Pipeline 'example'
  1. read_jsonl     CPU=1  reader
  2. word_count     CPU=1  partition stage
  3. write_parquet  CPU=1  writer
>>> text = "reader: {type: jsonl, path: x}\\nstages: [WordCount]\\n"
>>> load_config_text(text, "p.yaml")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
curator_dask.cli.config.ConfigError: p.yaml, line 2: unknown stage 'WordCount' (did you ...
>>> text = "reader: {type: jsonl, path: x}\\nstages:\\n  - WordCountFilter: {min_words: ten}\\n"
>>> load_config_text(text, "p.yaml")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
curator_dask.cli.config.ConfigError: p.yaml, line 3: WordCountFilter: min_words expects int, ...
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from curator_dask.cli.registry import (
    Parameter,
    ParameterTypeError,
    convert_option,
    parameters_of,
    stage_catalog,
)
from curator_dask.errors import CuratorError
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import (
    JsonlReader,
    JsonlWriter,
    ParquetReader,
    ParquetWriter,
    WarcReader,
)
from curator_dask.training import BlendReader, MegatronWriter

__all__ = [
    "READERS",
    "TOP_LEVEL_KEYS",
    "WRITERS",
    "ConfigError",
    "PipelineConfig",
    "load_config",
    "load_config_text",
]

#: The keys a pipeline file may have at its top level.
TOP_LEVEL_KEYS = ("name", "description", "cluster", "executor", "reader", "stages", "writer",
                  "report", "performance_report")
READERS = {"jsonl": JsonlReader, "parquet": ParquetReader, "warc": WarcReader,
           "blend": BlendReader}
WRITERS = {"parquet": ParquetWriter, "jsonl": JsonlWriter, "megatron": MegatronWriter}


class ConfigError(CuratorError, ValueError):
    """A pipeline file that cannot be used; the message names the file and line."""

    def __init__(self, source: str, line: int | None, message: str):
        self.source, self.line = source, line
        where = f"{source}, line {line}" if line else source
        super().__init__(f"{where}: {message}")


# -- YAML with line numbers ------------------------------------------------------------------

class _Mapping(dict):
    """A YAML mapping that remembers the line of each key (1-based)."""

    line: int = 0
    key_lines: dict

    def line_of(self, key) -> int:
        return self.key_lines.get(key, self.line)


class _Sequence(list):
    """A YAML sequence that remembers the line of each item (1-based)."""

    line: int = 0
    item_lines: list


class _DuplicateKey(CuratorError):
    def __init__(self, key, line: int):
        self.key, self.line = key, line


class _LineLoader(yaml.SafeLoader):
    """PyYAML's safe loader, building mappings and sequences that know their lines."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> _Mapping:
    loader.flatten_mapping(node)
    out = _Mapping()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise _DuplicateKey(key, key_node.start_mark.line + 1)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> _Sequence:
    out = _Sequence(loader.construct_object(item, deep=True) for item in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [item.start_mark.line + 1 for item in node.value]
    return out


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


# -- the result --------------------------------------------------------------------------------

@dataclass
class PipelineConfig:
    """A checked pipeline file: the pipeline, and how and where to run it."""

    pipeline: Pipeline
    executor_type: str = "streaming"
    executor_options: dict = field(default_factory=dict)
    cluster_options: dict = field(default_factory=dict)
    report: str | None = None
    performance_report: str | None = None
    #: The file and the line of the reader's ``path:`` (for :meth:`check_inputs`).
    source: str = "<pipeline>"
    reader_path_line: int | None = None

    def check_inputs(self) -> None:
        """Raise :class:`ConfigError` at the reader's ``path:`` line if the input does not
        exist or holds no file the reader reads."""
        reader = self.pipeline.stages[0]
        try:
            reader.check_inputs()
        except (OSError, ValueError) as err:
            raise ConfigError(self.source, self.reader_path_line,
                              f"reader path: {err}") from None

    def executor(self, client=None):
        """The executor the file asks for (on ``client`` when it takes one)."""
        cls = executor_types()[self.executor_type]
        options = dict(self.executor_options)
        if client is not None and "client" in _names(cls):
            options["client"] = client
        return cls(**options)


def executor_types() -> dict[str, type]:
    """The executors by their ``name`` (``streaming``, ``batch``, ``local``)."""
    from curator_dask import executors

    found = {}
    for attr in executors.__all__:
        cls = getattr(executors, attr)
        if isinstance(cls, type) and issubclass(cls, executors.Executor) \
                and cls is not executors.Executor:
            found[cls.name] = cls
    return found


def _names(func, skip=("self",)) -> list[str]:
    return [p.name for p in parameters_of(func, skip=skip)]


#: get_client parameters a pipeline file cannot give (objects, not values).
_NOT_CLUSTER_OPTIONS = ("cluster",)


def cluster_options() -> tuple[Parameter, ...]:
    """What a ``cluster:`` mapping may hold: the named parameters of ``get_client``."""
    from curator_dask.cluster import get_client

    return parameters_of(get_client, skip=_NOT_CLUSTER_OPTIONS)


def cluster_option_names() -> list[str]:
    """The names of :func:`cluster_options`."""
    return [p.name for p in cluster_options()]


# -- checking ------------------------------------------------------------------------------

#: What a constructor raises for a value it cannot use: each becomes a :class:`ConfigError`
#: at the line of the key it names (``ArithmeticError``: a number converted out of range,
#: such as an infinite size turned into an integer).
_BUILD_ERRORS = (TypeError, ValueError, KeyError, OSError, ImportError, ArithmeticError)

class _Checker:
    def __init__(self, source: str):
        self.source = source

    def fail(self, line: int | None, message: str):
        raise ConfigError(self.source, line, message)

    def mapping(self, value, line: int, what: str) -> _Mapping:
        if value is None:
            value = _Mapping()
            value.line, value.key_lines = line, {}
        if not isinstance(value, Mapping):
            self.fail(line, f"{what} must be a mapping (key: value lines), got "
                            f"{type(value).__name__} {value!r}")
        return value

    def keys(self, mapping: _Mapping, valid, what: str) -> None:
        valid = list(valid)
        for key in mapping:
            if key not in valid:
                self.fail(mapping.line_of(key), f"unknown {what} {key!r}{_suggest(key, valid)}; "
                                                f"valid {what}s: {', '.join(valid)}")

    def choice(self, mapping: _Mapping, key: str, choices, what: str, default=None) -> str:
        value = mapping.get(key, default)
        if value is None:
            self.fail(mapping.line, f"{what} needs '{key}: ' one of {', '.join(choices)}")
        if value not in choices:
            self.fail(mapping.line_of(key), f"unknown {what} {value!r}"
                                            f"{_suggest(str(value), list(choices))}; valid "
                                            f"{what}s: {', '.join(choices)}")
        return value

    def values(self, mapping: _Mapping, parameters, what: str) -> dict:
        """The mapping's values checked against the type hints of ``parameters`` (keys
        already checked); an error names the key's line, the parameter and its type."""
        by_name = {p.name: p for p in parameters}
        out = {}
        for key, value in mapping.items():
            value = _plain(value)
            try:
                out[key] = by_name[key].check(value) if key in by_name else value
            except ParameterTypeError as err:
                self.fail(mapping.line_of(key), f"{what}: {err}")
        return out

    def build(self, cls, options: Mapping, mapping: _Mapping, what: str):
        try:
            return cls(**options)
        except _BUILD_ERRORS as err:
            self.fail(_line_named_in(err, mapping), f"{what}: {err}")


def _line_named_in(err: Exception, mapping: _Mapping) -> int:
    """The line of the first key of ``mapping`` the error message names (a constructor's
    ``blocksize must be ...``), else the mapping's own line."""
    message = str(err)
    named = [key for key in mapping if isinstance(key, str) and key in message]
    if named:
        return mapping.line_of(min(named, key=message.index))
    return mapping.line


def _suggest(word: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(str(word), valid, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _plain(value):
    """A YAML value without the line-tracking types (for constructors that check types)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def load_config(path: str | os.PathLike) -> PipelineConfig:
    """Read and check a pipeline file; raises :class:`ConfigError` naming the line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(str(path), None, f"cannot read the pipeline file: {err.strerror}") \
            from None
    return load_config_text(text, source=str(path))


def load_config_text(text: str, source: str = "<pipeline>") -> PipelineConfig:
    """Check the YAML ``text`` of a pipeline file (``source`` names it in errors)."""
    check = _Checker(source)
    try:
        document = yaml.load(text, Loader=_LineLoader)  # a SafeLoader subclass
    except _DuplicateKey as err:
        check.fail(err.line, f"duplicate key {err.key!r}")
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        check.fail(mark.line + 1 if mark else None,
                   f"not valid YAML: {err.problem or err.context}")
    except yaml.YAMLError as err:
        check.fail(None, f"not valid YAML: {err}")
    top = check.mapping(document, 1, "a pipeline file")
    check.keys(top, TOP_LEVEL_KEYS, "top-level key")
    for key in ("reader", "stages"):
        if key not in top:
            check.fail(None, f"a pipeline needs a '{key}:' section")

    name = top.get("name") or Path(source).stem or "pipeline"
    pipeline = Pipeline(str(name), description=str(top.get("description") or ""))
    pipeline.add_stage(_io_stage(check, top, "reader", READERS))
    for stage in _stages(check, top["stages"], top.line_of("stages")):
        pipeline.add_stage(stage)
    if top.get("writer") is not None:
        pipeline.add_stage(_io_stage(check, top, "writer", WRITERS))

    executor = check.mapping(top.get("executor"), top.line_of("executor"), "executor")
    types = executor_types()
    executor_type = check.choice(executor, "type", list(types), "executor type",
                                 default="streaming")
    given = _keys_only(executor, [k for k in executor if k != "type"])
    parameters = parameters_of(types[executor_type], skip=("self", "client"))
    check.keys(given, [p.name for p in parameters], f"{executor_type} executor option")
    options = check.values(given, parameters, f"{executor_type} executor")
    check.build(types[executor_type], options, given, f"{executor_type} executor")

    cluster = check.mapping(top.get("cluster"), top.line_of("cluster"), "cluster")
    check.keys(cluster, cluster_option_names(), "cluster option")
    cluster_values = check.values(cluster, cluster_options(), "cluster")
    reader_section = top["reader"]
    return PipelineConfig(pipeline, executor_type, options, cluster_values,
                          report=_optional_str(check, top, "report"),
                          performance_report=_optional_str(check, top, "performance_report"),
                          source=source, reader_path_line=reader_section.line_of("path"))


def _keys_only(mapping: _Mapping, keys) -> _Mapping:
    out = _Mapping({k: mapping[k] for k in keys})
    out.line, out.key_lines = mapping.line, mapping.key_lines
    return out


def _optional_str(check: _Checker, top: _Mapping, key: str) -> str | None:
    value = top.get(key)
    if value is not None and not isinstance(value, str):
        check.fail(top.line_of(key), f"{key} must be a file path, got {value!r}")
    return value


def _io_stage(check: _Checker, top: _Mapping, key: str, classes: dict[str, type]):
    section = check.mapping(top[key], top.line_of(key), key)
    kind = check.choice(section, "type", list(classes), f"{key} type")
    cls = classes[kind]
    given = _keys_only(section, [k for k in section if k != "type"])
    parameters = parameters_of(cls)
    check.keys(given, [p.name for p in parameters], f"{kind} {key} option")
    for parameter in parameters:
        if parameter.required and parameter.name not in given:
            check.fail(top.line_of(key), f"the {key} needs a '{parameter.name}:'")
    options = check.values(given, parameters, f"{kind} {key}")
    return check.build(cls, options, given, f"{kind} {key}")


def _stages(check: _Checker, items, line: int) -> list:
    if not isinstance(items, list):
        check.fail(line, "stages must be a list ('- StageName: {parameters}' items)")
    catalog = stage_catalog()
    valid = list(catalog)
    out = []
    for position, item in enumerate(items):
        item_line = items.item_lines[position] if isinstance(items, _Sequence) else line
        if isinstance(item, str):
            name, params, params_line = item, _Mapping(), item_line
            params.line, params.key_lines = item_line, {}
        elif isinstance(item, Mapping) and len(item) == 1:
            name = next(iter(item))
            params = check.mapping(item[name], item_line, f"the parameters of {name}")
            params_line = item_line
        else:
            check.fail(item_line, "each stage is a name, or one 'Name: {parameters}' mapping; "
                                  f"got {_plain(item)!r}")
        if name not in catalog:
            check.fail(item_line, f"unknown stage {name!r}{_suggest(str(name), valid)}; "
                                  f"valid stages: {', '.join(valid)}")
        spec = catalog[name]
        accepted = spec.accepted()
        for key in params:
            if key not in accepted:
                check.fail(params.line_of(key), f"{name} has no parameter {key!r}"
                                                f"{_suggest(str(key), accepted)}; its parameters "
                                                f"are: {', '.join(accepted)}")
        values = {}
        for key, value in params.items():
            try:
                # resources: a mapping becomes a Resources before its type is checked.
                values[key] = spec.parameter(key).check(convert_option(key, _plain(value)))
            except (ParameterTypeError, TypeError, ValueError, ArithmeticError) as err:
                check.fail(params.line_of(key), f"{name}: {err}")
        try:
            out.append(spec.build(values))
        except _BUILD_ERRORS as err:
            check.fail(_line_named_in(err, params) if params else params_line,
                       f"stage {name}: {err}")
    return out
