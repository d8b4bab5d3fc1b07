"""The emulator's source rewrite: what the prelude's macros cannot express.

Every ``__shared__`` declaration becomes storage in the running block's shared-memory arena:

- function scope, ``__shared__ T name[A][B];`` ->
  ``typedef T __sg_T3[A][B]; static ::__sg_slot __sg_S3 = {...};
  __sg_T3 &name = *reinterpret_cast<__sg_T3 *>(__sg_shared(&__sg_S3, sizeof(__sg_T3), <align>, <element bytes>));``
  (the first thread of a block to reach the slot allocates it; the others get the same address;
  the slot is a function-local static, so each template instantiation has its own);
- ``extern __shared__ T name[];`` -> a reference to the arena's dynamic part
  (``__sg_dyn_shared("name", <element bytes>)``), at function or file scope;
- file scope -> an accessor function ``__sg_ref3()`` defined in place, and every later use of
  ``name`` (also inside ``#define`` bodies) replaced by ``(__sg_ref3())``.

``__shared__`` may stand anywhere among the declaration specifiers, next to ``static``,
``volatile``, ``extern``, ``__device__``, ``__align__(n)``, ``alignas(n)`` or
``__attribute__((aligned(n)))``; several declarators are allowed. Comments, string and character
literals are skipped. Every line break is kept (a declaration spanning lines is rewritten on its
first line and followed by the same number of line breaks), so ``#line`` markers and compiler
diagnostics still point at the student's file and line.

Public API: :func:`rewrite_source`.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from grader.errors import CompileError

__all__ = ["rewrite_source", "RewriteResult", "find_definitions"]

_TOKEN_RE = re.compile(
    r"""
      (?P<ws>(?:[ \t\r\f\v]|\\\r?\n)+)
    | (?P<nl>\n)
    | (?P<lc>//(?:[^\n\\]|\\.)*)
    | (?P<bc>/\*.*?(?:\*/|\Z))
    | (?P<raw>(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\()
    | (?P<str>(?:u8|[uUL])?"(?:\\.|[^"\\\n])*")
    | (?P<chr>(?:u8|[uUL])?'(?:\\.|[^'\\\n])*')
    | (?P<num>\.?\d(?:[eEpP][+-]|[\w.'])*)
    | (?P<id>[A-Za-z_$][\w$]*)
    | (?P<punct>::|->|.)
    """,
    re.S | re.X,
)

_LINE_RE = re.compile(r'#\s*(?:line\s+)?(\d+)(?:\s+"((?:\\.|[^"\\])*)")?')
_DEFINE_RE = re.compile(r"#\s*define\s+[A-Za-z_]\w*(?:\([^)]*\))?")
_STRING_OR_ID_RE = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*|[A-Za-z_]\w*', re.S)

#: Names of the emulator's runtime (its memory-check hooks, entry points and ABI): a submission that
#: defines or names one could switch the checks off, so it is refused.
_RESERVED_RE = re.compile(r"__tsan_\w*|__ubsan_\w*|__asan_\w*|__sanitizer_\w*|__sg_\w*|__SG_\w*"
                          r"|sg_(?:abi_version|kernel_\w+|trim|take_output|findings|launch\w*|alloc|result)")
#: Attributes that turn the instrumentation (and so the emulator's checks) off for a function.
_UNCHECKED_ATTRIBUTES = {"no_sanitize", "__no_sanitize__", "no_sanitize_thread", "__no_sanitize_thread__",
                         "no_sanitize_undefined", "__no_sanitize_undefined__", "disable_sanitizer_instrumentation",
                         "__disable_sanitizer_instrumentation__"}

_SPEC_DROP = {"__shared__", "static", "__device__", "register", "inline", "__forceinline__"}
_PTR_OPS = {"*", "&", "const", "volatile", "__restrict__", "__restrict", "restrict"}
_STMT_STOP = {";", "{", "}", ":", "else", "do"}
_ATTRIBUTE_KEYWORDS = {"__align__", "alignas", "__attribute__", "__declspec"}
_KEYWORDS = {
    "int", "unsigned", "signed", "char", "short", "long", "float", "double", "bool", "void", "auto",
    "const", "volatile", "struct", "class", "union", "enum", "typename", "template", "operator",
    "sizeof", "alignof", "decltype", "return", "if", "for", "while", "switch", "case", "default",
}


@dataclass(frozen=True)
class _Tok:
    kind: str  # id, num, str, chr, punct, pp (a whole preprocessor directive)
    text: str
    start: int
    end: int


@dataclass
class RewriteResult:
    """The rewritten text and what was rewritten.

    Attributes:
        text: the source with every ``__shared__`` declaration replaced; same number of lines.
        shared: ``(file, line, name, kind)`` per rewritten variable, kind ``"static"`` or
            ``"dynamic"``, in source order.
    """

    text: str
    shared: list[tuple[str, int, str, str]] = field(default_factory=list)


class _Unsupported(Exception):
    def __init__(self, what: str, offset: int, lead: str = "not supported by the emulator") -> None:
        super().__init__(what)
        self.what, self.offset, self.lead = what, offset, lead


class _Locator:
    """Maps an offset of the text to (file, line) through ``#line`` markers."""

    def __init__(self, text: str, default_file: str) -> None:
        self._newlines = [i for i, c in enumerate(text) if c == "\n"]
        # (physical line where the mapping starts, file, logical line at that physical line)
        self._marks: list[tuple[int, str, int]] = [(1, default_file, 1)]

    def physical_line(self, offset: int) -> int:
        return bisect.bisect_left(self._newlines, offset) + 1

    def directive(self, tok: _Tok) -> None:
        m = _LINE_RE.match(tok.text)
        if not m:
            return
        file = m.group(2)
        if file is None:
            file = self.locate(tok.start)[0]
        else:
            file = file.encode().decode("unicode_escape") if "\\" in file else file
        next_physical = self.physical_line(tok.end) + 1
        self._marks.append((next_physical, file, int(m.group(1))))

    def locate(self, offset: int) -> tuple[str, int]:
        phys = self.physical_line(offset)
        start, file, logical = self._marks[0]
        for s, f, lg in self._marks:
            if s <= phys:
                start, file, logical = s, f, lg
        return file, logical + (phys - start)


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos, n = 0, len(text)
    line_start = True  # only whitespace seen since the last newline
    while pos < n:
        c = text[pos]
        if c == "#" and line_start:
            end = _directive_end(text, pos)
            toks.append(_Tok("pp", text[pos:end], pos, end))
            pos, line_start = end, False
            continue
        m = _TOKEN_RE.match(text, pos)
        assert m is not None  # the last alternative matches any character
        kind = m.lastgroup
        if kind == "delim":
            kind = "raw"
        end = m.end()
        if kind == "raw":
            close = text.find(")" + (m.group("delim") or "") + '"', end)
            end = n if close < 0 else close + len(m.group("delim") or "") + 2
            toks.append(_Tok("str", text[pos:end], pos, end))
            line_start = False
        elif kind == "nl":
            line_start = True
        elif kind in ("ws", "lc", "bc"):
            if "\n" in m.group() and kind == "bc":
                line_start = False  # code after a multi-line comment is not at a line start
        else:
            toks.append(_Tok(kind, m.group(), pos, end))
            line_start = False
        pos = end
    return toks


def _directive_end(text: str, pos: int) -> int:
    """End offset (exclusive, before the newline) of the directive starting at ``pos``."""
    n = len(text)
    i = pos
    while i < n:
        c = text[i]
        if c == "\n":
            if i > pos and text[i - 1] == "\\" or (i > pos + 1 and text[i - 2:i] == "\\\r"):
                i += 1
                continue
            return i
        if c == "/" and text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close < 0 else close + 2
            continue
        if c == "/" and text.startswith("//", i):
            nl = text.find("\n", i)
            return n if nl < 0 else nl
        if c in "\"'":
            m = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'').match(text, i)
            i = m.end() if m else i + 1
            continue
        i += 1
    return n


def _match_forward(toks: list[_Tok], i: int, end: int) -> int:
    """Index of the bracket closing ``toks[i]`` (one of ``( [ {``), or -1."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[toks[i].text]]
    j = i + 1
    while j < end:
        t = toks[j].text if toks[j].kind == "punct" else ""
        if t in pairs:
            stack.append(pairs[t])
        elif t in (")", "]", "}"):
            if t != stack[-1]:
                return -1
            stack.pop()
            if not stack:
                return j
        j += 1
    return -1


def _match_backward(toks: list[_Tok], i: int, lo: int) -> int:
    """Index of the bracket opening ``toks[i]`` (one of ``) ] }``), or -1."""
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = [pairs[toks[i].text]]
    j = i - 1
    while j >= lo:
        t = toks[j].text if toks[j].kind == "punct" else ""
        if t in pairs:
            stack.append(pairs[t])
        elif t in ("(", "[", "{"):
            if t != stack[-1]:
                return -1
            stack.pop()
            if not stack:
                return j
        j -= 1
    return -1


class _Rewriter:
    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.loc = _Locator(text, filename)
        self.toks = _tokenize(text)
        self.edits: list[tuple[int, int, str]] = []  # (start, end, replacement without newlines)
        self.overrides: dict[int, str] = {}  # token index -> replacement text
        self.file_names: dict[str, str] = {}  # file-scope shared name -> accessor function name
        self.next_id = 0
        self.result = RewriteResult(text="")

    # -- helpers ---------------------------------------------------------------------------
    def join(self, lo: int, hi: int) -> str:
        """Tokens [lo, hi) as text: one space where the source had a gap, none where it had none."""
        out: list[str] = []
        for k in range(lo, hi):
            if k > lo and self.toks[k].start > self.toks[k - 1].end:
                out.append(" ")
            out.append(self.overrides.get(k, self.toks[k].text))
        return "".join(out)

    def p(self, k: int) -> str:
        """Punctuation text of token k, or '' when it is not punctuation."""
        return self.toks[k].text if 0 <= k < len(self.toks) and self.toks[k].kind == "punct" else ""

    # -- main loop ---------------------------------------------------------------------------
    def run(self) -> RewriteResult:
        toks = self.toks
        scopes: list[str] = []  # "ns", "class", "func", "init"
        head = 0  # first token of the current statement head (at brace level)
        paren = 0
        i = 0
        while i < len(toks):
            t = toks[i]
            if t.kind == "pp":
                self.loc.directive(t)
                for m in _STRING_OR_ID_RE.finditer(t.text):
                    self._refuse_reserved(m.group(), t.start)
                self._rewrite_define(i)
                i += 1
                continue
            if t.kind == "id":
                self._refuse_reserved(t.text, t.start)
            if t.kind == "id" and t.text == "__shared__":
                in_func = any(s == "func" for s in scopes)
                if not in_func and any(s in ("class", "init") for s in scopes):
                    raise _Unsupported("a __shared__ declaration inside a class or an initializer", t.start)
                i = self._declaration(i, function_scope=in_func)
                head, paren = i, 0
                continue
            if t.kind == "id" and t.text in self.file_names:
                prev = self.p(i - 1)
                accessor = self.file_names[t.text]
                if prev == "::":  # ns::name -> ns::__sg_refN()
                    self.overrides[i] = f"{accessor}()"
                elif prev not in (".", "->"):
                    self.overrides[i] = f"({accessor}())"
            txt = t.text if t.kind == "punct" else ""
            if txt == "(":
                paren += 1
            elif txt == ")":
                paren = max(0, paren - 1)
            elif txt == ";" and paren == 0:
                head = i + 1
            elif txt == "{":
                scopes.append(self._classify(head, i, scopes))
                head, paren = i + 1, 0
            elif txt == "}":
                if scopes:
                    scopes.pop()
                head, paren = i + 1, 0
            i += 1
        return self._apply()

    def _refuse_reserved(self, word: str, offset: int) -> None:
        """Raise when ``word`` (an identifier of the student's code) belongs to the runtime."""
        if _RESERVED_RE.fullmatch(word):
            what = f"`{word}`: this name is reserved for the emulator's runtime (its memory-check hooks); rename it"
        elif word in _UNCHECKED_ATTRIBUTES:
            what = f"`{word}`: it would turn off the emulator's memory checks; remove it"
        else:
            return
        if not self.loc.locate(offset)[0].startswith("<scangrade"):
            raise _Unsupported(what, offset, "not allowed")

    def _classify(self, head: int, brace: int, scopes: list[str]) -> str:
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

    # -- one declaration ---------------------------------------------------------------------
    def _declaration(self, i: int, *, function_scope: bool) -> int:
        toks = self.toks
        shared_tok = toks[i]
        # statement start
        s = i - 1
        while s >= 0:
            t = toks[s]
            if t.kind == "pp" or (t.kind in ("punct", "id") and t.text in _STMT_STOP):
                break
            if t.kind == "punct" and t.text == ")":
                m = _match_backward(toks, s, 0)
                if m < 1:
                    break
                kw = toks[m - 1].text
                if m >= 2 and kw == "(" and toks[m - 2].text == "__attribute__":
                    s = m - 3
                    continue
                if m >= 1 and kw in _ATTRIBUTE_KEYWORDS:
                    s = m - 2
                    continue
                break
            if t.kind == "punct" and t.text == "]" and self.p(s - 1) == "]":
                m = _match_backward(toks, s, 0)
                if m >= 0:
                    s = m - 1
                    continue
                break
            s -= 1
        s += 1
        # statement end
        e = i + 1
        while e < len(toks):
            t = toks[e]
            if t.kind == "pp":
                raise _Unsupported("a preprocessor directive inside a __shared__ declaration", t.start)
            txt = t.text if t.kind == "punct" else ""
            if txt in ("(", "["):
                m = _match_forward(toks, e, len(toks))
                if m < 0:
                    raise _Unsupported("an unbalanced __shared__ declaration", shared_tok.start)
                e = m + 1
                continue
            if txt in ("{", "}"):
                raise _Unsupported("a __shared__ declaration with braces (an initializer or an unnamed type)",
                                   shared_tok.start)
            if txt == ";":
                break
            e += 1
        if e >= len(toks):
            raise _Unsupported("a __shared__ declaration without a terminating ';'", shared_tok.start)

        # specifiers: drop storage classes, collect alignment
        keep: list[int] = []
        dynamic = False
        align = "1"
        k = s
        while k < e:
            t = toks[k]
            w = t.text
            if t.kind == "id" and w == "extern":
                dynamic = True
                k += 1
                continue
            if t.kind == "id" and w in _SPEC_DROP:
                k += 1
                continue
            if t.kind == "id" and w in ("__align__", "alignas") and self.p(k + 1) == "(":
                m = _match_forward(toks, k + 1, e)
                align = f"({self.join(k + 2, m)})"
                k = m + 1
                continue
            if t.kind == "id" and w == "__attribute__" and self.p(k + 1) == "(":
                m = _match_forward(toks, k + 1, e)
                inner = [x.text for x in toks[k + 1:m + 1]]
                if "aligned" in inner:
                    a = k + 1 + inner.index("aligned")
                    if self.p(a + 1) == "(":
                        am = _match_forward(toks, a + 1, m)
                        align = f"({self.join(a + 2, am)})"
                    else:
                        align = "16"
                k = m + 1
                continue
            if t.kind == "punct" and w == "[" and self.p(k + 1) == "[":
                m = _match_forward(toks, k, e)
                k = m + 1
                continue
            if t.kind == "id" and w in ("typedef", "template", "friend", "constexpr", "thread_local"):
                raise _Unsupported(f"'{w}' in a __shared__ declaration", t.start)
            keep.append(k)
            k += 1

        declarators = self._split_declarators(keep)
        if not declarators:
            raise _Unsupported("a __shared__ declaration without a variable", shared_tok.start)
        specs_text = ""
        parts: list[str] = []
        for n, chunk in enumerate(declarators):
            specs, ptr, name_k, dims = self._parse_declarator(chunk, first=(n == 0), at=shared_tok.start)
            if n == 0:
                specs_text = self._join_indices(specs)
            name = toks[name_k].text
            sid = self.next_id
            self.next_id += 1
            ty = f"__sg_T{sid}"
            ptr_text = self._join_indices(ptr)
            dims_text = self._join_indices(dims)
            typedef = f"typedef {specs_text} {ptr_text}{' ' if ptr_text else ''}{ty}{dims_text};"
            if dynamic:
                addr = f"__sg_dyn_shared(\"{name}\", __sg_elem_size<{ty}>())"
                slot = ""
            else:
                slot = (f"static ::__sg_slot __sg_S{sid} = {{0u, \"{name}\", __FILE__, __LINE__}}; ")
                addr = (f"__sg_shared(&__sg_S{sid}, sizeof({ty}), __sg_align(alignof({ty}), {align}), "
                        f"__sg_elem_size<{ty}>())")
            ref = f"*reinterpret_cast<{ty} *>({addr})"
            if function_scope:
                parts.append(f"{typedef} {slot}{ty} &{name} = {ref};")
            else:
                accessor = f"__sg_ref{sid}"
                parts.append(f"{typedef} static inline {ty} &{accessor}() {{ {slot}return {ref}; }}")
                self.file_names[name] = accessor
            file, line = self.loc.locate(shared_tok.start)
            self.result.shared.append((file, line, name, "dynamic" if dynamic else "static"))
        self.edits.append((toks[s].start, toks[e].end, " ".join(parts)))
        return e + 1

    def _join_indices(self, idx: list[int]) -> str:
        if not idx:
            return ""
        out: list[str] = []
        for n, k in enumerate(idx):
            if n and (k != idx[n - 1] + 1 or self.toks[k].start > self.toks[k - 1].end):
                out.append(" ")
            out.append(self.overrides.get(k, self.toks[k].text))
        return "".join(out)

    def _split_declarators(self, keep: list[int]) -> list[list[int]]:
        chunks: list[list[int]] = [[]]
        depth = angle = 0
        for k in keep:
            w = self.p(k)
            if w in ("(", "[", "{"):
                depth += 1
            elif w in (")", "]", "}"):
                depth -= 1
            elif w == "<" and depth == 0:
                angle += 1
            elif w == ">" and depth == 0 and angle > 0:
                angle -= 1
            elif w == "," and depth == 0 and angle == 0:
                chunks.append([])
                continue
            chunks[-1].append(k)
        return [c for c in chunks if c] if any(chunks) else []

    def _parse_declarator(self, chunk: list[int], *, first: bool, at: int
                          ) -> tuple[list[int], list[int], int, list[int]]:
        toks = self.toks
        depth = 0
        for k in chunk:
            w = self.p(k)
            if w in ("(", "[", "{"):
                depth += 1
            elif w in (")", "]", "}"):
                depth -= 1
            elif w == "=" and depth == 0:
                raise _Unsupported("an initializer on a __shared__ variable", toks[k].start)
        j = len(chunk) - 1
        # trailing [dims]
        while j >= 0 and self.p(chunk[j]) == "]":
            depth = 0
            while j >= 0:
                w = self.p(chunk[j])
                if w == "]":
                    depth += 1
                elif w == "[":
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            j -= 1
        dims = chunk[j + 1:]
        if j < 0 or toks[chunk[j]].kind != "id" or toks[chunk[j]].text in _KEYWORDS:
            raise _Unsupported("this form of __shared__ declarator", toks[chunk[max(j, 0)]].start)
        name_k = chunk[j]
        j -= 1
        p = j
        while p >= 0 and toks[chunk[p]].text in _PTR_OPS and toks[chunk[p]].kind in ("punct", "id"):
            p -= 1
        run = chunk[p + 1:j + 1]
        # cv-qualifiers before the first * or & belong to the specifiers
        lead = 0
        while lead < len(run) and toks[run[lead]].text not in ("*", "&"):
            lead += 1
        ptr = run[lead:]
        specs = chunk[:p + 1] + run[:lead]
        if first and not specs:
            raise _Unsupported("a __shared__ declaration without a type", toks[name_k].start)
        if not first and specs:
            raise _Unsupported("this form of __shared__ declarator", toks[chunk[0]].start)
        if any(self.p(k) in ("(", ")") for k in ptr):
            raise _Unsupported("this form of __shared__ declarator", toks[name_k].start)
        return specs, ptr, name_k, dims

    def _rewrite_define(self, i: int) -> None:
        """Apply file-scope shared names inside a ``#define`` body, as a macro would."""
        if not self.file_names:
            return
        t = self.toks[i]
        m = _DEFINE_RE.match(t.text)
        if not m:
            return
        body = t.text[m.end():]

        def sub(mo: re.Match[str]) -> str:
            w = mo.group()
            if w not in self.file_names:
                return w
            before = body[:mo.start()].rstrip()
            if before.endswith("::"):
                return f"{self.file_names[w]}()"
            if before.endswith((".", "->")):
                return w
            return f"({self.file_names[w]}())"

        new = t.text[:m.end()] + _STRING_OR_ID_RE.sub(sub, body)
        if new != t.text:
            self.edits.append((t.start, t.end, new))

    def _apply(self) -> RewriteResult:
        text = self.text
        edits = list(self.edits)
        for k, rep in self.overrides.items():
            edits.append((self.toks[k].start, self.toks[k].end, rep))
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


def rewrite_source(text: str, *, filename: str = "<source>") -> RewriteResult:
    """Rewrite every ``__shared__`` declaration of a CUDA C++ translation unit for the emulator.

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
    except _Unsupported as exc:
        # Resolve #line markers up to the failure point (directives after it were not seen).
        loc = _Locator(text, filename)
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
    toks = _tokenize(text)
    loc = _Locator(text, "<source>")
    found: list[tuple[str, int, str]] = []
    for k, tok in enumerate(toks):
        if tok.kind == "pp":
            loc.directive(tok)
            continue
        if tok.kind != "id" or tok.text != name or k + 1 >= len(toks) or toks[k + 1].text != "(":
            continue
        close = _match_forward(toks, k + 1, len(toks))
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
