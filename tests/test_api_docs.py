"""docs/api.md, the API page of the job scripts: every name of albert_hf that a script under albert_hf/scripts/
imports has an entry there, every entry names something the package defines, and each entry is its definition's
signature and docstring as they are in the code (the docstring is the one home of what a function does; the page
shows it). After changing a script's imports or a documented docstring or signature, rewrite the entries with

    python tests/test_api_docs.py --write

Everything is read with `ast`, nothing imported: the page's entries are the package's source, and the test takes a
fraction of a second.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "albert_hf"
API_PAGE = ROOT / "docs" / "api.md"
# The page's entries start at this line; what is above it is written by hand.
GENERATED = "<!-- The entries below are written by `python tests/test_api_docs.py --write` from the code. -->"

# The scripts in the order their names are met: GLUE's first, the fine-tuning scripts, then pretraining's.
SCRIPTS = ("glue", "classify", "ner", "multiple_choice", "squad", "pretrain", "quickstart")

# The page's sections, in the order a script takes its steps, each with its modules. A script importing a module of
# the package that no section lists fails the rendering, naming it.
SECTIONS = (
    ("Arguments", ("albert_hf.arguments",)),
    ("Parsing and the steps fine-tuning scripts share", ("albert_hf.finetuning", "albert_hf.pretraining.arguments")),
    (
        "Job setup: the job, its config, tokenizer and model",
        (
            "albert_hf.job_setup",
            "albert_hf.formats",
            "albert_hf.configuration",
            "albert_hf.modeling",
            "albert_hf.errors",
            "albert_hf.pretraining.run",
        ),
    ),
    (
        "Data",
        (
            "albert_hf.data.sources",
            "albert_hf.data.text_checks",
            "albert_hf.data.labels",
            "albert_hf.data.glue_files",
            "albert_hf.data.text_pairs",
            "albert_hf.data.ner",
            "albert_hf.data.multiple_choice",
            "albert_hf.data.squad_windows",
            "albert_hf.data.word_segmentation",
            "albert_hf.data.caching",
            "albert_hf.output_files",
            "albert_hf.pretraining.corpus",
        ),
    ),
    (
        "Training and reliability",
        (
            "albert_hf.training.callbacks",
            "albert_hf.training.trainer",
            "albert_hf.training.squad_trainer",
            "albert_hf.seed_runs",
        ),
    ),
    (
        "Metrics",
        ("albert_hf.metrics", "albert_hf.metrics.glue", "albert_hf.metrics.ner", "albert_hf.pretraining.report"),
    ),
    ("Hub and model card", ("albert_hf.hub",)),
    ("The error boundary", ("albert_hf.error_boundary",)),
)

# Extension points a user of Trainer plugs in without a script, beside what the scripts import: the one tokenizer
# loader and the model classes no script builds.
EXTRA_ENTRIES = (
    ("albert_hf.formats", "load_tokenizer"),
    ("albert_hf.modeling", "AlbertModel"),
    ("albert_hf.modeling", "AlbertForMaskedLM"),
    ("albert_hf.modeling", "AlbertForPreTraining"),
)

MODULE_HEADING = re.compile(r"^### `(albert_hf(?:\.\w+)*)`$")
ENTRY_HEADING = re.compile(r"^#### `(\w+)`$")
LINE_LENGTH = 120


def module_file(module: str) -> Path:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py") if path.with_suffix(".py").exists() else path / "__init__.py"


def script_imports() -> dict[tuple[str, str], list[str]]:
    """(module, name) of every `from albert_hf... import name` of the scripts (function-level ones too), in the
    order the scripts first use the names, with the scripts that import each."""
    used: dict[tuple[str, str], list[str]] = {}
    for script in SCRIPTS:
        tree = ast.parse((PACKAGE / "scripts" / f"{script}.py").read_text(encoding="utf-8"))
        imported = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "albert_hf":
                for alias in node.names:
                    imported[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.Import):
                assert not any(alias.name.startswith("albert_hf") for alias in node.names), (
                    f"{script}.py: import names from albert_hf's modules (`from albert_hf.x import name`), so the API "
                    "page can list them"
                )
        # `main` is the script's steps in order; the task's functions above it come after, in their own order.
        main = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main")
        uses = sorted(
            (not main.lineno <= node.lineno <= main.end_lineno, node.lineno, node.col_offset, node.id)
            for node in ast.walk(tree)
            if isinstance(node, ast.Name) and node.id in imported
        )
        order = [use[-1] for use in uses] + sorted(imported)  # a name imported but never used still counts
        for name in order:
            used.setdefault(imported[name], [])
            if script not in used[imported[name]]:
                used[imported[name]].append(script)
    return used


@functools.cache
def parse_module(module: str) -> tuple[ast.Module, str] | None:
    path = module_file(module)
    if not path.exists():
        return None
    source = path.read_text(encoding="utf-8")
    return ast.parse(source), source


def definition(module: str, name: str) -> tuple[ast.AST, list[str], str | None] | None:
    """The top-level statement of `module` that binds `name`, the comment lines right above it, and for an
    assignment the source of the value bound to the name (as written: ruff formats the page's code blocks too);
    None when the module binds no such name."""
    parsed = parse_module(module)
    if parsed is None:
        return None
    tree, source = parsed
    lines = source.splitlines()
    for node in tree.body:
        value = None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name != name:
                continue
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == name:
                    value = node.value
                    break
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    names = [element.id for element in target.elts if isinstance(element, ast.Name)]
                    if name in names:
                        value = node.value.elts[names.index(name)]
                        break
            else:
                continue
        else:
            continue
        first = min([node.lineno] + [decorator.lineno for decorator in getattr(node, "decorator_list", [])])
        # A constant's comment: the lines of `#` right above it, or above the constants it is listed with.
        comments: list[str] = []
        for line in reversed(lines[: first - 1]):
            if line.startswith("#"):
                comments.insert(0, line.lstrip("# "))
            elif comments or not re.match(r"[A-Z_][A-Z0-9_]* *(:[^=]*)?= ", line):
                break
        return node, comments, None if value is None else ast.get_source_segment(source, value)
    return None


def parameters(arguments: ast.arguments, skip_self: bool = False) -> list[str]:
    def one(argument: ast.arg, default: ast.expr | None, prefix: str = "") -> str:
        text = prefix + argument.arg
        if argument.annotation is not None:
            text += f": {ast.unparse(argument.annotation)}"
        if default is not None:
            text += f" = {ast.unparse(default)}" if argument.annotation is not None else f"={ast.unparse(default)}"
        return text

    positional = arguments.posonlyargs + arguments.args
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    texts = [one(argument, default) for argument, default in zip(positional, defaults)]
    if arguments.posonlyargs:
        texts.insert(len(arguments.posonlyargs), "/")
    if arguments.vararg is not None:
        texts.append(one(arguments.vararg, None, "*"))
    elif arguments.kwonlyargs:
        texts.append("*")
    texts += [one(argument, default) for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults)]
    if arguments.kwarg is not None:
        texts.append(one(arguments.kwarg, None, "**"))
    if skip_self and positional and positional[0].arg in ("self", "cls"):
        texts.pop(0)
    return texts


def call(head: str, texts: list[str], tail: str = "") -> str:
    line = f"{head}({', '.join(texts)}){tail}"
    if len(line) <= LINE_LENGTH or not texts:
        return line
    return head + "(\n" + "".join(f"    {text},\n" for text in texts) + ")" + tail


def is_dataclass(node: ast.ClassDef) -> bool:
    return any(
        ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator).endswith("dataclass")
        for decorator in node.decorator_list
    )


def signature(node: ast.AST, name: str, value: str | None) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        tail = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
        return call(f"def {name}", parameters(node.args), tail)
    if isinstance(node, ast.ClassDef):
        bases = f"({', '.join(ast.unparse(base) for base in node.bases)})" if node.bases else ""
        if is_dataclass(node):
            fields = [
                statement.target.id
                for statement in node.body
                if isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and "ClassVar" not in ast.unparse(statement.annotation)
            ]
            listed = textwrap.wrap(f"fields: {', '.join(fields) or 'none of its own'}", LINE_LENGTH - 6)
            return f"@dataclass\nclass {name}{bases}:\n" + "\n".join(f"    # {line}" for line in listed)
        for statement in node.body:
            if isinstance(statement, ast.FunctionDef) and statement.name == "__init__":
                return f"class {name}{bases}\n" + call(name, parameters(statement.args, skip_self=True))
        return f"class {name}{bases}"
    annotation = f": {ast.unparse(node.annotation)}" if isinstance(node, ast.AnnAssign) else ""
    shown = value if value is not None and "\n" not in value else "..."
    return f"{name}{annotation} = {shown if len(shown) <= 80 else '...'}"


def description(node: ast.AST, comments: list[str]) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        text = ast.get_docstring(node) or ""
    else:
        text = " ".join(comments)
    # A docstring's indented lines (an Args: list, a table) read as a list on the page, not as code: a line indented
    # once is an item, one indented further continues the item above it.
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("        ") and lines:
            lines[-1] += " " + line.strip()
        elif line.startswith("    "):
            lines.append("- " + line.strip())
        else:
            lines.append(line)
    return "\n".join(lines).strip()


def public_names() -> dict[str, str]:
    """albert_hf's top-level names (`albert_hf.X`, loaded lazily) -> the module that defines each."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_PUBLIC_MODULES":
            return {name: f"albert_hf.{module}" for name, module in ast.literal_eval(node.value).items()}
    raise AssertionError("albert_hf/__init__.py has no _PUBLIC_MODULES")


def module_summary(module: str) -> str:
    docstring = ast.get_docstring(parse_module(module)[0]) or ""
    summary = docstring.split("\n\n")[0].replace("\n", " ").strip()
    return summary[:-1] + " (the module's docstring goes on)." if summary.endswith(":") else summary


def render() -> str:
    """The entries of the page: a heading per section, one per module, one per name with its import line, the
    scripts that import it, its signature and its docstring."""
    used = script_imports()
    listed = [module for _, modules in SECTIONS for module in modules]
    unlisted = sorted({module for module, _ in used} - set(listed))
    if unlisted:
        raise AssertionError(f"scripts import from modules no section of the API page lists: {unlisted} (SECTIONS)")
    top_level = public_names()
    out = [GENERATED, ""]
    for section, modules in SECTIONS:
        out += [f"## {section}", ""]
        for module in modules:
            names = [name for (of, name) in used if of == module]
            names += [name for (of, name) in EXTRA_ENTRIES if of == module and name not in names]
            if not names:
                continue
            out += [f"### `{module}`", "", module_summary(module), ""]
            for name in names:
                found = definition(module, name)
                if found is None:
                    raise AssertionError(f"{module} defines no {name}")
                node, comments, value = found
                scripts = used.get((module, name))
                where = f"used by {', '.join(scripts)}" if scripts else "no script imports it: an extension point"
                also = f"; also `albert_hf.{name}`" if top_level.get(name) == module else ""
                out += [f"#### `{name}`", "", f"`from {module} import {name}`{also} ({where})", ""]
                out += ["```python", signature(node, name, value), "```", ""]
                text = description(node, comments)
                out += [text, ""] if text else []
    return "\n".join(out).rstrip() + "\n"


def documented() -> list[tuple[str, str]]:
    """(module, name) of every entry of the page, read from its headings."""
    entries, module = [], None
    for line in API_PAGE.read_text(encoding="utf-8").splitlines():
        if (match := MODULE_HEADING.match(line)) is not None:
            module = match.group(1)
        elif (match := ENTRY_HEADING.match(line)) is not None:
            assert module is not None, f"docs/api.md: entry {line!r} comes before any module heading"
            entries.append((module, match.group(1)))
    return entries


def test_every_name_a_script_imports_has_an_entry():
    missing = sorted(f"{module}.{name}" for module, name in set(script_imports()) - set(documented()))
    assert not missing, f"docs/api.md has no entry for {missing}: run python tests/test_api_docs.py --write"


def test_every_entry_names_something_the_package_defines():
    entries = documented()
    assert len(entries) == len(set(entries)), "docs/api.md lists a name twice"
    absent = [f"{module}.{name}" for module, name in entries if definition(module, name) is None]
    assert not absent, f"docs/api.md names what the package does not define: {absent}"


def test_the_entries_are_the_code_s_signatures_and_docstrings():
    page = API_PAGE.read_text(encoding="utf-8")
    assert GENERATED in page, "docs/api.md lost the line its entries start after"
    assert page[page.index(GENERATED) :] == render(), (
        "docs/api.md's entries differ from the code's signatures and docstrings: run python tests/test_api_docs.py --write"
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_api_docs.py --write")
    page = API_PAGE.read_text(encoding="utf-8") if API_PAGE.exists() else GENERATED
    API_PAGE.write_text(page[: page.index(GENERATED)] + render(), encoding="utf-8")
    print(f"wrote {len(documented())} entries to {API_PAGE.relative_to(ROOT)}")
