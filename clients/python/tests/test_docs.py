"""The examples of docs/python.md run, in order, as one session against a
new server, and print what the document shows.

An example is a ```pycon block, a doctest (``>>>`` and ``...`` lines, then
what they print; ``...`` in the output stands for any text), or a ```python
block, run as it is, whose output is the ```text block right after it, if
any (else it must print nothing). Both see the same names, as one session
of the interpreter would, with LEASEKEEPER_SERVER naming the server.
"""

import doctest
import io
import re
from typing import Any, List, Tuple

import pytest

import support
from conftest import AnswerCheck

import leasekeeper
from leasekeeper import _http

DOC = support.REPO / "docs" / "python.md"

# What the examples must show between them, so that the document cannot
# drop one unnoticed.
COVERS = [
    "lk.lock(", ".acquire(", "lk.renew(", "lk.release(", "lk.revoke(", "lk.write(", "lk.read(", "lk.inspect(",
    "lk.status(", "lk.locks(", "lk.history(", "lk.watch(", "lk.health(", "lease.write(", "lease.read(",
    "lease.lost", "lease.predecessors", "NotAcquired", "LeaseLost", "leasekeeper.Error", "StaleToken",
    "wait=", "shared=True",
]

FENCE = re.compile(r"^```(\w*)\s*$")


def read_blocks(text: str) -> List[Tuple[str, int, str]]:
    """The fenced blocks: (language, line of the first line in it, text)."""
    blocks = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].lstrip().startswith(">>> "):
                raise AssertionError("docs/python.md:%d: an example outside a ```pycon block" % (i + 1))
            i += 1
            continue
        start = i + 1
        j = start
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        blocks.append((m.group(1), start + 1, "\n".join(lines[start:j]) + "\n"))
        i = j + 1
    return blocks


def examples(text: str) -> List[doctest.Example]:
    """The document's examples, in order."""
    out: List[doctest.Example] = []
    parser = doctest.DocTestParser()
    blocks = read_blocks(text)
    for k, (lang, line, body) in enumerate(blocks):
        if lang == "pycon":
            for e in parser.get_examples(body):
                e.lineno += line - 1
                out.append(e)
        elif lang == "python":
            want = ""
            if k + 1 < len(blocks) and blocks[k + 1][0] == "text":
                want = blocks[k + 1][2]
            # Run as a module's code, several statements at once.
            source = "exec(compile(%r, 'docs/python.md, line %d', 'exec'))\n" % (body, line)
            out.append(doctest.Example(source, want, lineno=line - 1))
    return out


def test_docs_examples(server: support.Server, answers: AnswerCheck, monkeypatch: pytest.MonkeyPatch) -> None:
    text = DOC.read_text()
    found = examples(text)
    sources = "".join(e.source + e.want for e in found)
    missing = [c for c in COVERS if c not in sources]
    assert missing == [], "docs/python.md's examples no longer show %s" % missing

    monkeypatch.setenv("LEASEKEEPER_SERVER", server.url)
    # Every Client of the examples has its answers checked against the
    # OpenAPI document too.
    init = _http.Transport.__init__

    def hooked(self: _http.Transport, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        answers.hook_transport(self)

    monkeypatch.setattr(_http.Transport, "__init__", hooked)

    test = doctest.DocTest(found, {"__name__": "docs_python_md"}, "docs/python.md", str(DOC), 0, text)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = io.StringIO()
    try:
        result = runner.run(test, out=report.write, clear_globs=False)
    finally:
        for value in list(test.globs.values()):
            if isinstance(value, (leasekeeper.Lease,)):
                try:
                    value.release()
                except Exception:
                    pass
    assert result.attempted == len(found) > 20
    assert result.failed == 0, report.getvalue()


def test_docs_examples_can_fail(server: support.Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEASEKEEPER_SERVER", server.url)
    doc = "```pycon\n>>> from leasekeeper import Client\n>>> Client().health()['status']\n'not ok'\n```\n"
    doc += "```python\nprint('printed')\n```\n\n```text\nsomething else\n```\n"
    found = examples(doc)
    assert len(found) == 3
    test = doctest.DocTest(found, {}, "planted", None, 0, doc)
    result = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS).run(test, out=io.StringIO().write)
    assert (result.failed, result.attempted) == (2, 3)
    with pytest.raises(AssertionError):
        read_blocks("Some prose.\n\n    >>> lk.health()\n")
