"""What a rewrite produces, and the edit bookkeeping the rewrite's parts share: token overrides,
text edits, the shift helpers wrapped around tokens, and writing them all back (line for line).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.backends.emulator.rewrite.tokens import Locator, rewrite_tokens


@dataclass
class RewriteResult:
    """The rewritten text and what was rewritten.

    Attributes:
        text: the source with every ``__shared__`` declaration replaced; same number of lines.
        shared: ``(file, line, name, kind)`` per rewritten variable, kind ``"static"`` or
            ``"dynamic"``, in source order.
        shifts: ``(file, line, operator)`` per shift handed to the prelude's clamping helpers
            (``<<``, ``>>``, ``<<=``, ``>>=``), code first, then ``#define`` bodies, each in source order.
        sum_shifts: ``(file, line) -> (operator, sign)`` for the lines of code with a shift whose
            amount has a ``+`` or ``-`` outside brackets (``n >> 5 + n``: check the precedence), or
            that use a macro whose body has one; every such shift, handed to the helpers or not.
    """

    text: str
    shared: list[tuple[str, int, str, str]] = field(default_factory=list)
    shifts: list[tuple[str, int, str]] = field(default_factory=list)
    sum_shifts: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)


class SourceEdits:
    """A translation unit being rewritten: its text, tokens (:func:`.tokens.rewrite_tokens`, indexed
    by every method here) and locator, and the edits made so far, which the rewrite's parts add to
    and :meth:`apply` writes back.

    ``edits`` replace a span of text (without line breaks, but a ``#define`` body's); ``overrides``
    replace one token; ``shift_prefix`` / ``shift_suffix`` are the helper calls opened before and
    closed after a token (see :func:`grader.backends.emulator.rewrite.find_shifts`); ``result``
    collects what was rewritten (its ``text`` is only set by :meth:`apply`).
    """

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.loc = Locator(text, filename)
        self.toks = rewrite_tokens(text)
        self.edits: list[tuple[int, int, str]] = []  # (start, end, replacement without newlines)
        self.overrides: dict[int, str] = {}  # token index -> replacement text
        # shifts (see find_shifts): helper calls opened before a token, and closed after one
        self.shift_prefix: dict[int, list[str]] = {}
        self.shift_suffix: dict[int, str] = {}
        self.result = RewriteResult(text="")

    # -- helpers ---------------------------------------------------------------------------
    def join(self, lo: int, hi: int) -> str:
        """Tokens [lo, hi) as text: one space where the source had a gap, none where it had none."""
        out: list[str] = []
        for k in range(lo, hi):
            if k > lo and self.toks[k].start > self.toks[k - 1].end:
                out.append(" ")
            out.append(self.tok_text(k))
        return "".join(out)

    def tok_text(self, k: int) -> str:
        """Token k as rewritten: its override (or text), inside the shift helpers wrapped around it."""
        text = self.overrides.get(k, self.toks[k].src)
        if k in self.shift_prefix or k in self.shift_suffix:
            text = "".join(self.shift_prefix.get(k, ())) + text + self.shift_suffix.get(k, "")
        return text

    def p(self, k: int) -> str:
        """Punctuation text of token k, or '' when it is not punctuation or k is out of range."""
        return self.toks[k].text if 0 <= k < len(self.toks) and self.toks[k].kind == "punct" else ""

    def apply(self) -> RewriteResult:
        """Write every edit, override and shift wrap into the text; ``result`` with that text. An edit
        replacing several lines is followed by as many line breaks (a ``#define`` body keeps its
        own), so every line stays where it was."""
        text = self.text
        edits = list(self.edits)
        for k in set(self.overrides) | set(self.shift_prefix) | set(self.shift_suffix):
            edits.append((self.toks[k].start, self.toks[k].end, self.tok_text(k)))
        edits.sort()
        out: list[str] = []
        pos = 0
        for start, end, rep in edits:
            if start < pos:
                continue  # inside an earlier edit (e.g. a use inside a rewritten declaration)
            out.append(text[pos:start])
            original = text[start:end]
            if "\n" in rep:
                out.append(rep)  # a #define body: its own line breaks are kept in place
            else:
                out.append(rep + "\n" * original.count("\n"))
            pos = end
        out.append(text[pos:])
        self.result.text = "".join(out)
        return self.result

