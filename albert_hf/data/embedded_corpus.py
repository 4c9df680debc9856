"""The quickstart's offline corpus: English prose that every Python installation already ships.

Two sources, both read without a download or an import of the documented modules:

- the language reference (`pydoc_data.topics`, the text behind `help("if")`): one document per topic;
- the docstrings of the standard library's own source files (read with `ast`, so no module is imported and
  nothing is executed): one document per docstring (`stdlib-docstrings`), or per module with its docstrings in
  source order (`stdlib-modules`). A docstring is the natural document here: it opens with a one-line summary and
  goes on to details, an order that sentence-order prediction can learn from a few thousand examples, while the
  joins between one function's docstring and the next carry no order at all.

Only prose paragraphs are kept: grammar productions, code examples (`>>>`, indented blocks) and reST underlines
teach MLM little about the language and give SOP no order to learn. Each document is a list of sentences, as
`load_text_documents` gives for text files.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from datasets import Dataset

from .sentences import split_sentences

# The sources of the corpus (`albert-hf quickstart --embedded`), and those it reads by default.
EMBEDDED_SOURCES = ("language-reference", "stdlib-docstrings", "stdlib-modules")
DEFAULT_EMBEDDED_SOURCES = ("language-reference", "stdlib-docstrings")

# Standard-library folders left out: test suites (mostly code and test data), the IDE, demos, vendored packages.
_SKIPPED_FOLDERS = frozenset(
    {"test", "tests", "idlelib", "turtledemo", "site-packages", "dist-packages", "__pycache__", "lib2to3", "ensurepip"}
)
_UNDERLINE = re.compile(r"^\s*([*=~^\-#+])\1{2,}\s*$")
_LETTERS = re.compile(r"[A-Za-z]")


def is_prose(paragraph: str) -> bool:
    """Whether a paragraph of documentation is running text rather than code, grammar, a table or a heading."""
    lines = paragraph.splitlines()
    if not lines or any(line[:1].isspace() for line in lines) or any(_UNDERLINE.match(line) for line in lines):
        return False
    text = " ".join(line.strip() for line in lines)
    if text.startswith((">>>", "...", "::", "..", "|", "+-")) or "::=" in text or len(text) < 40:
        return False
    letters = len(_LETTERS.findall(text))
    return letters >= 0.6 * len(text) and text.rstrip()[-1:] in ".:!?)\"'"


def prose_sentences(text: str) -> list[str]:
    """The sentences of the prose paragraphs of a documentation text (paragraphs end at blank lines)."""
    paragraphs = re.split(r"\n[ \t]*\n", text.replace("\r\n", "\n"))
    return [sentence for paragraph in paragraphs if is_prose(paragraph) for sentence in split_sentences(paragraph)]


def language_reference_texts() -> list[str]:
    """CPython's language reference (`pydoc_data.topics`), one text per topic in sorted order."""
    from pydoc_data.topics import topics

    return [topics[name] for name in sorted(topics)]


def _module_docstrings(source: str) -> list[str]:
    tree = ast.parse(source)
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    nodes = sorted((node for node in ast.walk(tree) if isinstance(node, kinds)), key=lambda n: getattr(n, "lineno", 0))
    return [doc for doc in (ast.get_docstring(node) for node in nodes) if doc]


def stdlib_source_files(stdlib: str | os.PathLike | None = None) -> Iterator[Path]:
    """The standard library's .py files, in a fixed order, without its test suites and tools."""
    root = Path(stdlib or sysconfig.get_paths()["stdlib"])
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if name not in _SKIPPED_FOLDERS)
        yield from (Path(folder) / name for name in sorted(files) if name.endswith(".py"))


def stdlib_docstrings(stdlib: str | os.PathLike | None = None) -> list[list[str]]:
    """The docstrings of each standard-library module, in source order (modules without any left out)."""
    return [list(docstrings) for docstrings in _parsed_docstrings(str(stdlib or sysconfig.get_paths()["stdlib"]))]


@functools.lru_cache(maxsize=4)
def _parsed_docstrings(stdlib: str) -> tuple[tuple[str, ...], ...]:
    """Parsing the whole standard library takes seconds: done once per process and folder."""
    modules = []
    for path in stdlib_source_files(stdlib):
        try:
            docstrings = _module_docstrings(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):  # a few files are templates or not UTF-8
            continue
        if docstrings:
            modules.append(tuple(docstrings))
    return tuple(modules)


def stdlib_docstring_texts(stdlib: str | os.PathLike | None = None) -> list[str]:
    """One text per standard-library module: its docstrings in source order, separated by blank lines."""
    return ["\n\n".join(docstrings) for docstrings in stdlib_docstrings(stdlib)]


def embedded_documents(sources: tuple[str, ...] = DEFAULT_EMBEDDED_SOURCES, min_sentences: int = 2) -> Dataset:
    """The embedded corpus as {"sentences": list[str]} rows; documents with fewer than `min_sentences` prose
    sentences are dropped (SOP needs two segments), and so are repeats of a document (inherited docstrings are
    copied from class to class), so that no held-out document is also a training one."""
    unknown = sorted(set(sources) - set(EMBEDDED_SOURCES))
    if unknown or not sources:
        raise ValueError(f"Unknown embedded corpus source(s) {unknown or sources}; choose from {EMBEDDED_SOURCES}.")
    texts = []
    if "language-reference" in sources:
        texts += language_reference_texts()
    if "stdlib-docstrings" in sources:
        texts += [docstring for docstrings in stdlib_docstrings() for docstring in docstrings]
    if "stdlib-modules" in sources:
        texts += stdlib_docstring_texts()
    documents = [sentences for sentences in map(prose_sentences, texts) if len(sentences) >= min_sentences]
    unique = list({tuple(sentences): sentences for sentences in documents}.values())  # first occurrences, in order
    return Dataset.from_dict({"sentences": unique})
