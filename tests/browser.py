"""Headless Chromium for the tests of HTML pages (the class report, the student's HTML report): the
page as Chromium parsed it (``--dump-dom``) or a screenshot, and a small reader of the DOM it gives."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.pace import seconds

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium (Debian package chromium) is not "
                                                             "installed: the page is not rendered")
#: Elements that hold no others in the pages tested (void, or SVG shapes written empty).
_LEAVES = ("meta", "br", "img", "input", "link", "path", "rect", "use", "line", "circle")


def chromium(tmp_path: Path, page: Path, *args: str) -> str:
    """Run headless Chromium on ``page`` with ``args`` (``--dump-dom``, ``--screenshot=FILE``) and a
    profile of its own under ``tmp_path``, no network; its stdout (the DOM for ``--dump-dom``)."""
    profile = tmp_path / "chromium-profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", *args, page.resolve().as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds(90))  # 90 s on an idle machine
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Dom(HTMLParser):
    """Elements (tag, attributes, parent tags, the classes of the parents) and the visible text of a page."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str], tuple[str, ...]]] = []
        self.classes: list[frozenset[str]] = []
        self.stack: list[tuple[str, frozenset[str]]] = []
        self.text: list[str] = []
        self.title = ""
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = {k: v or "" for k, v in attrs}
        self.elements.append((tag, attrs, tuple(t for t, _ in self.stack)))
        self.classes.append(frozenset(c for _, cs in self.stack for c in cs))
        if tag not in _LEAVES:
            self.stack.append((tag, frozenset(attrs.get("class", "").split())))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}, tuple(t for t, _ in self.stack)))
        self.classes.append(frozenset(c for _, cs in self.stack for c in cs))

    def handle_endtag(self, tag):
        if any(t == tag for t, _ in self.stack):
            while self.stack.pop()[0] != tag:
                pass

    def handle_data(self, data):
        if self.stack and self.stack[-1][0] == "title":
            self.title += data
        if not self.stack or self.stack[-1][0] not in ("script", "style"):
            self.text.append(data)

    def tags(self, tag: str) -> list[dict[str, str]]:
        """The attributes of every ``tag`` element, in page order."""
        return [a for t, a, _ in self.elements if t == tag]

    def inside(self, tag: str, ancestor: str) -> int:
        """How many ``tag`` elements have an ``ancestor`` element above them."""
        return sum(t == tag and ancestor in parents for t, _, parents in self.elements)

    def within(self, tag: str, cls: str) -> list[dict[str, str]]:
        """The attributes of every ``tag`` element below an element of class ``cls``."""
        return [a for (t, a, _), classes in zip(self.elements, self.classes) if t == tag and cls in classes]
