"""The files every package has: the version the command line reports, the license, the docs index that reaches every
page. (The wheel's contents, `py.typed` and LICENSE among them, are checked by .ci/run on the built wheel.)"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from helpers.data import REPO_ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def markdown_links(path: Path) -> set[Path]:
    """The local files a markdown page links to, resolved from its folder."""
    text = path.read_text(encoding="utf-8")
    return {(path.parent / target).resolve() for target in LINK.findall(text) if "://" not in target}


def test_version_option_prints_the_version_of_the_project_metadata(capsys):
    from albert_hf.cli import main

    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"albert-hf {declared}\n"


def test_license_is_the_apache_2_0_text_pyproject_declares():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    text = (REPO_ROOT / "LICENSE").read_text()
    assert project["license"] == {"text": "Apache-2.0"}
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert text.count("\n") == 201 and "END OF TERMS AND CONDITIONS" in text  # the whole text, with its appendix


def test_docs_index_links_every_doc_and_the_readme_links_the_index():
    index = REPO_ROOT / "docs" / "index.md"
    linked = markdown_links(index)
    assert {page.resolve() for page in (REPO_ROOT / "docs").glob("*.md") if page != index} <= linked
    assert all(target.exists() for target in linked), sorted(str(t) for t in linked if not t.exists())
    assert index.resolve() in markdown_links(REPO_ROOT / "README.md")


def test_py_typed_is_package_data():
    package_data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert (REPO_ROOT / "albert_hf" / "py.typed").is_file() and "py.typed" in package_data["albert_hf"]


def test_the_public_names_are_one_list_for_the_run_time_and_for_type_checkers():
    """`albert_hf/__init__.py` loads each public name from its module on first access; `__init__.pyi` tells type
    checkers the same names from the same modules, so an editor completes exactly what `import albert_hf` has."""
    import ast
    import importlib

    import albert_hf

    stub = ast.parse((REPO_ROOT / "albert_hf" / "__init__.pyi").read_text(encoding="utf-8"))
    declared = {
        alias.asname: (node.module, alias.name)
        for node in stub.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert {name: (module, name) for name, module in albert_hf._PUBLIC_MODULES.items()} == declared
    assert sorted(albert_hf.__all__) == sorted(declared)
    for name, (module, _) in declared.items():  # each resolves to the object of the module the stub names
        assert getattr(albert_hf, name) is getattr(importlib.import_module(f"albert_hf.{module}"), name)
