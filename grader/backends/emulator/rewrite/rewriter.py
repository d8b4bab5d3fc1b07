"""The rewrite's pass over a translation unit (:class:`_Rewriter`) and the package's entry points,
:func:`rewrite_source` and :func:`find_definitions`.
"""

from __future__ import annotations

import re
from typing import Callable

from grader.backends.emulator.lockdown import ASM_KEYWORDS, REFUSED_ATTRIBUTES
from grader.backends.emulator.rewrite.asm import AsmStatements
from grader.backends.emulator.rewrite.edits import RewriteResult, SourceEdits
from grader.backends.emulator.rewrite.macro_shifts import macros_in_if, macros_with_unsafe_arguments
from grader.backends.emulator.rewrite.shared import SharedDeclarations
from grader.backends.emulator.rewrite.shifts import Shift, find_shifts, shift_wraps, sum_shifts
from grader.backends.emulator.rewrite.tokens import (Locator, Tok, Unsupported, define_head, match_backward,
                                                     match_forward, rewrite_tokens)
from grader.source.ctokens import tokenize
from grader.core.errors import CompileError

#: Names of the emulator's runtime (its memory-check hooks, entry points and ABI): a submission that
#: defines or names one could switch the checks off, so it is refused.
_RESERVED_RE = re.compile(r"__tsan_\w*|__ubsan_\w*|__asan_\w*|__sanitizer_\w*|__sg_\w*|__SG_\w*"
                          r"|sg_(?:abi_version|kernel_\w+|trim|take_output|findings|launch\w*|alloc|result)")
#: Attributes that turn the instrumentation (and so the emulator's checks) off for a function.
_UNCHECKED_ATTRIBUTES = {"no_sanitize", "__no_sanitize__", "no_sanitize_thread", "__no_sanitize_thread__",
                         "no_sanitize_undefined", "__no_sanitize_undefined__", "disable_sanitizer_instrumentation",
                         "__disable_sanitizer_instrumentation__"}

#: Jump statements reported to the runtime (the kinds of sg_abi.h's __SG_J_*).
_JUMPS = {"return": 0, "break": 1, "continue": 2}
#: Calls whose result is the lanes that execute them together (_close_am_block numbers them).
_ACTIVEMASK = {"__activemask", "coalesced_threads"}


def _c_string(text: str) -> str:
    """``text`` as a C string literal."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


class _Rewriter(SourceEdits):
    """One rewrite of a translation unit (:func:`rewrite_source`): one pass over its tokens that
    follows the scopes (namespace, class, function, initializer) and the statement heads, and
    hands each construct to its part (``shared``: the ``__shared__`` declarations, ``asm``: inline
    PTX; both edit this unit)."""

    def __init__(self, text: str, filename: str) -> None:
        super().__init__(text, filename)
        # macros an #if may expand, or whose arguments would change a shift's operand: their shifts
        # stay built-in
        self.if_macros: set[str] = set()
        self.shared = SharedDeclarations(self)
        self.asm = AsmStatements(self)
        # per open brace, the jump statements reported (_jump): set() or {"break", "continue"}, with
        # "return" in a kernel
        self.jumps_on: list[set[str]] = []
        # __activemask() calls (_close_am_block): how many so far, and per open block (a brace, or
        # the brace-less statement of an `if`, `else`, `for`, `while`) the count at its start, whether
        # it is a loop's body, whether it is brace-less, and its calls' `(` tokens with their indices
        self.am_count = 0
        self.am_blocks: list[tuple[int, bool, bool, list[tuple[int, int]]]] = [(0, False, False, [])]
        self.am_bodies: dict[int, bool] = {}  # first token of a brace-less if/for/while body -> a loop's
        # the pass's position: open scopes ("ns", "class", "func", "init"), the first token of the
        # current statement head (at brace level), and the parenthesis depth in it
        self.scopes: list[str] = []
        self.head = 0
        self.paren = 0

    # -- main loop ---------------------------------------------------------------------------
    def run(self) -> RewriteResult:
        """Rewrite the whole text; the result (see :func:`rewrite_source`).

        Raises:
            Unsupported: a construct the rewrite cannot express or refuses.
        """
        self._wrap_shifts()
        i = 0
        while i < len(self.toks):
            if i in self.am_bodies:  # a brace-less body: a block of its own for __activemask()
                self.am_blocks.append((self.am_count, self.am_bodies.pop(i), True, []))
            i = self._step(i)
        while self.am_blocks:
            self._close_am_block()
        return self.apply()

    def _step(self, i: int) -> int:
        """Handle toks[i]; the index of the next token to look at."""
        t = self.toks[i]
        if t.kind == "pp":
            self._directive(i)
        elif t.kind == "id":
            after = self._identifier(i)
            if after is not None:
                return after
        elif t.kind == "punct" and t.text in self._PUNCTUATORS:
            self._PUNCTUATORS[t.text](self, i)
        return i + 1

    def _directive(self, i: int) -> None:
        """A preprocessor directive: follow ``#line``, refuse the runtime's names and the refused
        attributes, and rewrite a ``#define`` body's shifts and file-scope shared names."""
        t = self.toks[i]
        self.loc.directive(t)
        for part in t.parts:
            if part.kind == "id":
                self._refuse_reserved(part.value, part.start)
        if len(t.parts) > 2 and t.parts[1].value in ("define", "undef") and t.parts[2].value in REFUSED_ATTRIBUTES:
            raise Unsupported(f"`#{t.parts[1].value} {t.parts[2].value}`: the emulator keeps this attribute "
                               "out of student code (it binds a symbol to a name of its own choosing, which "
                               "could switch the memory checks off); remove it", t.start, "not allowed")
        self._rewrite_define(i)

    def _identifier(self, i: int) -> int | None:
        """An identifier: an ``asm`` statement or a ``__shared__`` declaration (rewritten whole: the
        index after it), else a jump, an ``__activemask()`` call, a block opener or a use of a
        file-scope shared name (None: go on with the next token)."""
        t = self.toks[i]
        self._refuse_reserved(t.text, t.start)
        if t.text in ASM_KEYWORDS and "func" in self.scopes and self.asm.statement_starts(i):
            after = self.asm.rewrite(i)
            if after is not None:
                self.head, self.paren = after, 0
                return after
        if t.text == "__shared__":
            return self._shared_declaration_at(i)
        if self.jumps_on and t.text in self.jumps_on[-1]:
            self._jump(i)
        self._track_activemask_blocks(i)
        self._use_file_scope_name(i)
        return None

    def _shared_declaration_at(self, i: int) -> int:
        """Rewrite the ``__shared__`` declaration at toks[i]; the index after it.

        Raises:
            Unsupported: one inside a class or an initializer (outside a function).
        """
        in_func = "func" in self.scopes
        if not in_func and any(s in ("class", "init") for s in self.scopes):
            raise Unsupported("a __shared__ declaration inside a class or an initializer", self.toks[i].start)
        after = self.shared.declaration(i, function_scope=in_func)
        self.head, self.paren = after, 0
        return after

    def _track_activemask_blocks(self, i: int) -> None:
        """Number an ``__activemask()`` call at toks[i] in its block, and open a block for the
        brace-less statement an ``else`` (now) or an ``if``, ``for``, ``while``, ``switch`` (at its
        body's first token) governs."""
        t = self.toks[i]
        if t.text in _ACTIVEMASK and self.p(i + 1) == "(" and self.p(i + 2) == ")":
            self.am_blocks[-1][3].append((i + 1, self.am_count))
            self.am_count += 1
        if t.text == "else" and self.p(i + 1) != "{":
            self.am_blocks.append((self.am_count, False, True, []))
        if t.text in ("if", "for", "while", "switch") and self.p(i + 1) == "(":
            close = match_forward(self.toks, i + 1, len(self.toks))
            if close > 0 and self.p(close + 1) not in ("{", ";"):
                self.am_bodies[close + 1] = t.text != "if" and t.text != "switch"

    def _use_file_scope_name(self, i: int) -> None:
        """A use of a file-scope shared name at toks[i] calls its accessor (not a member access)."""
        accessor = self.shared.file_names.get(self.toks[i].text)
        if accessor is None:
            return
        prev = self.p(i - 1)
        if prev == "::":  # ns::name -> ns::__sg_refN()
            self.overrides[i] = f"{accessor}()"
        elif prev not in (".", "->"):
            self.overrides[i] = f"({accessor}())"

    def _open_paren(self, i: int) -> None:
        """``(``: one level deeper in the statement head."""
        self.paren += 1

    def _close_paren(self, i: int) -> None:
        """``)``: one level out."""
        self.paren = max(0, self.paren - 1)

    def _semicolon(self, i: int) -> None:
        """``;`` at parenthesis level 0 ends a statement, and the brace-less blocks it ended."""
        if self.paren != 0:
            return
        self.head = i + 1
        while self.am_blocks[-1][2]:  # the end of brace-less statements
            self._close_am_block()

    def _open_brace(self, i: int) -> None:
        """``{``: open a scope of the kind its head tells, with the jumps reported in it."""
        self.am_blocks.append((self.am_count, self._loop_body(i), False, []))
        kind = self._classify(self.head, i, self.scopes)
        if kind == "func" and "func" not in self.scopes:  # a function's body
            self.jumps_on.append(self._jumps_reported(self.head, i))
        else:
            self.jumps_on.append(self.jumps_on[-1] if self.jumps_on and kind == "func" else set())
        self.scopes.append(kind)
        self.head, self.paren = i + 1, 0

    def _jumps_reported(self, head: int, brace: int) -> set[str]:
        """The jump statements reported in the body of the function whose head is toks[head:brace]:
        ``return``, ``break``, ``continue`` in a kernel, ``break`` and ``continue`` in a device
        function, none in a ``constexpr`` / ``consteval`` one (its calls may be constant-evaluated)."""
        words = {w.text for w in self.toks[head:brace] if w.kind == "id"}
        if words & {"constexpr", "consteval"}:
            return set()
        return {k for k in _JUMPS if "__global__" in words or ("__device__" in words and k != "return")}

    def _close_brace(self, i: int) -> None:
        """``}``: close its scope, its block of ``__activemask()`` calls and the brace-less blocks
        that end with it (not those an ``else`` after it continues)."""
        if self.scopes:
            self.scopes.pop()
            self.jumps_on.pop()
        while len(self.am_blocks) > 1 and self.am_blocks[-1][2]:
            self._close_am_block()
        if len(self.am_blocks) > 1:
            self._close_am_block()
        toks = self.toks
        if not (i + 1 < len(toks) and toks[i + 1].kind == "id" and toks[i + 1].text == "else"):
            while self.am_blocks[-1][2]:  # brace-less statements end with this block
                self._close_am_block()
        self.head, self.paren = i + 1, 0

    #: What each punctuator that matters to the pass does (_step dispatches on it).
    _PUNCTUATORS: dict[str, Callable[["_Rewriter", int], None]] = {
        "(": _open_paren, ")": _close_paren, ";": _semicolon, "{": _open_brace, "}": _close_brace}

    def _loop_body(self, brace: int) -> bool:
        """Whether the ``{`` at toks[brace] opens the body of a ``for``, ``while`` or ``do``."""
        if brace > 0 and self.toks[brace - 1].kind == "id" and self.toks[brace - 1].text == "do":
            return True
        if brace == 0 or self.p(brace - 1) != ")":
            return False
        k = match_backward(self.toks, brace - 1, 0)
        return k > 0 and self.toks[k - 1].kind == "id" and self.toks[k - 1].text in ("for", "while")

    def _close_am_block(self) -> None:
        """Close the innermost block of __activemask() calls: each call of it gets its place
        (``__activemask(ord, first, last, loop)``: its index among the file's calls, the indices of the
        block's first and last, whether the block is a loop's body), from which the runtime tells
        which calls a lane reaches a call from without leaving its block (warp/activemask.cpp,
        resolve_activemask: a GPU reconverges the warp there)."""
        first, loop, _, calls = self.am_blocks.pop()
        for paren, ord_ in calls:
            self.overrides[paren] = f"({ord_}, {first}, {self.am_count - 1}, {int(loop)}"


    def _jump(self, i: int) -> None:
        """Report the jump statement at toks[i] (``return``, ``break``, ``continue``) to the runtime:
        the statement becomes a block that first calls ``__sg_jump_at(kind, file, line)`` (the
        prelude's name for ``__sg_jump``). Left alone where its ``;`` is not found for certain (a
        directive or an unbalanced bracket before it)."""
        toks, j, depth = self.toks, i + 1, 0
        while j < len(toks) and toks[j].kind != "pp":
            w = self.p(j)
            if w and w in "([{":
                depth += 1
            elif w and w in ")]}":
                depth -= 1
                if depth < 0:
                    return
            elif w == ";" and depth == 0:
                break
            j += 1
        else:
            return
        if toks[i].text != "return" and j != i + 1:
            return
        file, line = self.loc.locate(toks[i].start)
        self.overrides[i] = f"{{ __sg_jump_at({_JUMPS[toks[i].text]}, {_c_string(file)}, {line}); {toks[i].text}"
        self.overrides[j] = "; }"

    def _refuse_reserved(self, word: str, offset: int) -> None:
        """Raise when ``word`` (an identifier of the student's code) belongs to the runtime."""
        if _RESERVED_RE.fullmatch(word):
            what = f"`{word}`: this name is reserved for the emulator's runtime (its memory-check hooks); rename it"
        elif word in _UNCHECKED_ATTRIBUTES:
            what = f"`{word}`: it would turn off the emulator's memory checks; remove it"
        else:
            return
        if not self.loc.locate(offset)[0].startswith("<scangrade"):
            raise Unsupported(what, offset, "not allowed")

    def _classify(self, head: int, brace: int, scopes: list[str]) -> str:
        """What the ``{`` at toks[brace] opens, its statement head starting at toks[head]: ``"func"``
        (a function's body, or any block inside one), ``"ns"`` (a namespace or ``extern "C"``),
        ``"class"`` or ``"init"`` (a brace initializer)."""
        if any(s == "func" for s in scopes):
            return "func"
        words = [t.text for t in self.toks[head:brace] if t.kind != "pp"]
        if "namespace" in words:
            return "ns"
        if len(words) >= 2 and words[-2] == "extern" and self.toks[brace - 1].kind == "str":
            return "ns"
        if "operator" in words:
            return "func"
        for w in words:
            if w == "(":
                return "func"
            if w == "=":
                return "init"
        if any(w in ("struct", "class", "union", "enum") for w in words):
            return "class"
        return "init" if words else "ns"


    def _rewrite_define(self, i: int) -> None:
        """Hand a ``#define`` body's shifts to the prelude's helpers, and apply file-scope shared
        names inside it, as a macro would."""
        t = self.toks[i]
        text = self._shift_define(t)
        head = define_head(t)
        if head is not None:
            text = self.asm.rewrite_define(text, head[2], t.start + head[2])
        if head is None or not self.shared.file_names:
            if text != t.text:
                self.edits.append((t.start, t.end, text))
            return
        body = text[head[2]:]
        out: list[str] = []
        pos, before = 0, ""
        for tok in tokenize(body):
            out.append(body[pos:tok.start])
            accessor = self.shared.file_names.get(tok.value) if tok.kind == "id" else None
            if accessor is None or before in (".", "->"):
                out.append(body[tok.start:tok.end])
            else:
                out.append(f"{accessor}()" if before == "::" else f"({accessor}())")
            pos, before = tok.end, tok.value
        new = text[:head[2]] + "".join(out) + body[pos:]
        if new != t.text:
            self.edits.append((t.start, t.end, new))

    # -- shifts ------------------------------------------------------------------------------------
    def _wrap_shifts(self) -> None:
        """Wrap the left operand of every shift of the code (not directives) in the prelude's helper
        (see :func:`find_shifts`); the calls carry the operator's file and line."""
        self.if_macros = macros_in_if(self.toks) | macros_with_unsafe_arguments(self.toks)
        self._sum_shifts()
        shifts = find_shifts(self.toks)
        if not shifts:
            return
        loc = Locator(self.text, self.filename)
        k = 0
        sites: dict[int, str] = {}
        for s in shifts:
            while k < s.op:
                if self.toks[k].kind == "pp":
                    loc.directive(self.toks[k])
                k += 1
            file, line = loc.locate(self.toks[s.op].start)
            sites[s.op] = f"{_c_string(file)}, {line}, {s.flags}"
            self.result.shifts.append((file, line, s.text))
        self.shift_prefix, self.shift_suffix = shift_wraps(shifts, lambda s: sites[s.op])

    def _sum_shifts(self) -> None:
        """Fill ``result.sum_shifts``: the lines of code with a shift whose amount has a ``+`` or
        ``-`` outside brackets, or that name a macro whose body has one (which an operator
        precedence mistake explains; a lane mask ``1u << lane`` has none)."""
        macros: dict[str, tuple[str, str]] = {}
        for t in self.toks:
            head = define_head(t) if t.kind == "pp" else None
            body = sum_shifts(rewrite_tokens(";" + t.text[head[2]:]), 1) if head is not None else []
            if body:
                macros[head[0]] = body[0][1:]
        code = {first: (text, sign) for first, text, sign in sum_shifts(self.toks)}
        loc = Locator(self.text, self.filename)
        for k, t in enumerate(self.toks):
            if t.kind == "pp":
                loc.directive(t)
            site = code.get(k) or (macros.get(t.text) if t.kind == "id" else None)
            if site:
                self.result.sum_shifts.setdefault(loc.locate(t.start), site)

    def _shift_define(self, t: Tok) -> str:
        """The directive ``t`` with the shifts of its ``#define`` body wrapped (``t.text`` when none,
        or when an ``#if`` may expand the macro: a call cannot be evaluated there). The helpers get
        the line of the shift and, through ``__LINE__``, the line where the macro is used."""
        head = define_head(t)
        if head is None or head[0] in self.if_macros:
            return t.text
        src = ";" + t.text[head[2]:]  # `;`: a leading `#` is not a directive, and no operand reaches out
        toks = rewrite_tokens(src)
        shifts = find_shifts(toks, 1)
        if not shifts:
            return t.text
        base = t.start + head[2] - 1
        name = _c_string(head[0])

        def site(s: Shift) -> str:
            file, line = self.loc.locate(base + toks[s.op].start)
            self.result.shifts.append((file, line, s.text))
            return f"{_c_string(file)}, {line}, {s.flags}, __LINE__, {name}"

        prefix, suffix = shift_wraps(shifts, site)
        out: list[str] = []
        pos = 1
        for k in range(1, len(toks)):
            tk = toks[k]
            out.append(src[pos:tk.start])
            out.append("".join(prefix.get(k, ())) + tk.src + suffix.get(k, ""))
            pos = tk.end
        out.append(src[pos:])
        return t.text[:head[2]] + "".join(out)


def rewrite_source(text: str, *, filename: str = "<source>") -> RewriteResult:
    """Rewrite every ``__shared__`` declaration of a CUDA C++ translation unit for the emulator, and
    hand every shift's left operand to the prelude's clamping helpers (see :func:`find_shifts`).

    Args:
        text: the full source (the grader's part header with its ``#line`` markers, then the
            student's file).
        filename: the name used for locations before the first ``#line`` marker.

    Returns:
        A :class:`RewriteResult` whose ``text`` has exactly as many lines as ``text``.

    Raises:
        CompileError: ``"not supported by the emulator: <what> (<file>:<line>)"`` for a
            ``__shared__`` declaration this rewrite cannot express (an initializer, a function
            pointer declarator, a declaration inside a class...); ``"not allowed: `<name>`: ...
            (<file>:<line>)"`` for a name reserved for the runtime (``__tsan_*``, ``__ubsan_*``,
            ``__sg_*``, the ``sg_*`` ABI) or an attribute that turns the instrumentation off
            (``no_sanitize_thread``, ``no_sanitize(...)``).
    """
    rw = _Rewriter(text, filename)
    try:
        return rw.run()
    except Unsupported as exc:
        # Resolve #line markers up to the failure point (directives after it were not seen).
        loc = Locator(text, filename)
        for tok in rw.toks:
            if tok.start >= exc.offset:
                break
            if tok.kind == "pp":
                loc.directive(tok)
        file, line = loc.locate(exc.offset)
        raise CompileError(f"{exc.lead}: {exc.what} ({file}:{line})") from None


def find_definitions(text: str, name: str) -> list[tuple[str, int, str]]:
    """Function definitions named ``name`` in ``text`` (comments and literals skipped).

    Returns:
        ``(file, line, parameter text)`` for each ``name(...) {`` found, in source order, with
        locations resolved through ``#line`` markers.
    """
    toks = rewrite_tokens(text)
    loc = Locator(text, "<source>")
    found: list[tuple[str, int, str]] = []
    for k, tok in enumerate(toks):
        if tok.kind == "pp":
            loc.directive(tok)
            continue
        if tok.kind != "id" or tok.text != name or k + 1 >= len(toks) or toks[k + 1].text != "(":
            continue
        close = match_forward(toks, k + 1, len(toks))
        if close < 0:
            continue
        j = close + 1
        while j < len(toks) and toks[j].kind == "id":  # const, noexcept, __attribute__-free qualifiers
            j += 1
        if j < len(toks) and toks[j].kind == "punct" and toks[j].text == "{":
            params = " ".join(t.text for t in toks[k + 2:close])
            params = re.sub(r"\s+([,)\]*&])", r"\1", params).replace("( ", "(").replace("[ ", "[")
            file, line = loc.locate(tok.start)
            found.append((file, line, params))
    return found
