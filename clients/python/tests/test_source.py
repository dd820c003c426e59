"""The source itself: Python 3.9's syntax, a docstring on every public
name, one version, the typing marker."""

import ast
import inspect
import re
import sys
from typing import List

import support

import leasekeeper

SOURCES = sorted(support.PYTHON_DIR.rglob("*.py"))


def test_sources_found() -> None:
    names = {p.relative_to(support.PYTHON_DIR).as_posix() for p in SOURCES}
    assert {"leasekeeper/__init__.py", "leasekeeper/_client.py", "tests/test_source.py"} <= names


def test_python_3_9_syntax() -> None:
    # Only a newer Python is here: parse as 3.9 would (no match, no except*,
    # ...), and refuse what 3.9 parses but cannot run: X | Y in annotations,
    # evaluated by typing.get_type_hints.
    problems: List[str] = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(), filename=str(path), feature_version=(3, 9))
        for node in ast.walk(tree):
            annotations = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                annotations += [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs if x.annotation]
                annotations += [x.annotation for x in (a.vararg, a.kwarg) if x is not None and x.annotation]
                if node.returns is not None:
                    annotations.append(node.returns)
            elif isinstance(node, ast.AnnAssign):
                annotations.append(node.annotation)
            for ann in annotations:
                text = ast.unparse(ann)
                if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
                    text = ann.value
                if "|" in text:
                    problems.append("%s:%d: %s" % (path, ann.lineno, text))
    assert problems == [], "X | Y annotations, which Python 3.9 cannot evaluate: %s" % problems


def test_the_3_9_check_can_fail() -> None:
    for src in ("match x:\n    case 1:\n        pass\n", "try:\n    pass\nexcept* ValueError:\n    pass\n"):
        try:
            ast.parse(src, feature_version=(3, 9))
        except SyntaxError:
            continue
        raise AssertionError("parsed as 3.9: %r" % src)


def test_docstrings() -> None:
    missing = []
    for path in SOURCES:
        if path.parent.name == "leasekeeper" and ast.get_docstring(ast.parse(path.read_text())) is None:
            missing.append(str(path))
    for name in leasekeeper.__all__:
        obj = getattr(leasekeeper, name)
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if not inspect.isclass(obj):
            continue
        for attr, value in vars(obj).items():
            if attr.startswith("_"):
                continue
            if isinstance(value, property) or inspect.isfunction(value):
                if not (value.__doc__ or "").strip():
                    missing.append("%s.%s" % (name, attr))
    assert missing == []


def test_one_version() -> None:
    go = (support.REPO / "leasekeeper.go").read_text()
    m = re.search(r'^var Version = "([^"]+)"', go, re.M)
    assert m is not None
    assert leasekeeper.__version__ == m.group(1), "the client's version is the leasekeeper release's"
    pyproject = (support.PYTHON_DIR / "pyproject.toml").read_text()
    assert 'version = {attr = "leasekeeper._version.VERSION"}' in pyproject


def test_typed() -> None:
    assert (support.PYTHON_DIR / "leasekeeper" / "py.typed").exists()
    assert 'leasekeeper = ["py.typed"]' in (support.PYTHON_DIR / "pyproject.toml").read_text()


def test_standard_library_only() -> None:
    pyproject = (support.PYTHON_DIR / "pyproject.toml").read_text()
    assert "dependencies = []" in pyproject
    imported = set()
    for path in (support.PYTHON_DIR / "leasekeeper").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    stdlib = getattr(sys, "stdlib_module_names", None)
    if stdlib is not None:
        assert imported - set(stdlib) - {"__future__"} == set()
