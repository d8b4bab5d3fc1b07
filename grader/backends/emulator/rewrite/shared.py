"""``__shared__`` declarations: each becomes storage in the running block's shared-memory arena
(see :mod:`grader.backends.emulator.rewrite` for the forms).
"""

from __future__ import annotations

from grader.backends.emulator.rewrite.edits import SourceEdits
from grader.backends.emulator.rewrite.tokens import match_backward, match_forward, Unsupported

_SPEC_DROP = {"__shared__", "static", "__device__", "register", "inline", "__forceinline__"}
_PTR_OPS = {"*", "&", "const", "volatile", "__restrict__", "__restrict", "restrict"}
_STMT_STOP = {";", "{", "}", ":", "else", "do"}
_ATTRIBUTE_KEYWORDS = {"__align__", "alignas", "__attribute__", "__declspec"}
_KEYWORDS = {
    "int", "unsigned", "signed", "char", "short", "long", "float", "double", "bool", "void", "auto",
    "const", "volatile", "struct", "class", "union", "enum", "typename", "template", "operator",
    "sizeof", "alignof", "decltype", "return", "if", "for", "while", "switch", "case", "default",
}


class SharedDeclarations:
    """The rewrite of the ``__shared__`` declarations of a translation unit being rewritten
    (``unit``): :meth:`declaration` adds each declaration's replacement to ``unit.edits`` and what
    it declared to ``unit.result.shared``.

    Attributes:
        file_names: each file-scope ``__shared__`` name rewritten so far -> its accessor function
            (``__sg_refN``), which the uses of the name after it must call.
    """

    def __init__(self, unit: SourceEdits) -> None:
        self.unit = unit
        self.file_names: dict[str, str] = {}
        self._next_id = 0  # the number of the next typedef, slot and accessor

    # -- one declaration ---------------------------------------------------------------------
    def declaration(self, i: int, *, function_scope: bool) -> int:
        """Rewrite the ``__shared__`` declaration whose ``__shared__`` is ``unit.toks[i]`` (see the
        package's docstring for what it becomes; ``function_scope``: it stands in a function's
        body); the index of the token after its ``;``. File-scope names are recorded in
        ``file_names`` so that later uses call their accessor.

        Raises:
            Unsupported: a form the rewrite cannot express (an initializer, braces, a directive
                inside, ``typedef``...).
        """
        shared_tok = self.unit.toks[i]
        s = self._declaration_start(i)
        e = self._declaration_end(i)
        keep, dynamic, align = self._declaration_specifiers(s, e)
        declarators = self._split_declarators(keep)
        if not declarators:
            raise Unsupported("a __shared__ declaration without a variable", shared_tok.start)
        specs_text = ""
        parts: list[str] = []
        for n, chunk in enumerate(declarators):
            specs, ptr, name_k, dims = self._parse_declarator(chunk, first=(n == 0), at=shared_tok.start)
            if n == 0:
                specs_text = self._join_indices(specs)
            name = self.unit.toks[name_k].text
            parts.append(self._declarator_code(name, specs_text, self._join_indices(ptr), self._join_indices(dims),
                                               dynamic=dynamic, align=align, function_scope=function_scope))
            file, line = self.unit.loc.locate(shared_tok.start)
            self.unit.result.shared.append((file, line, name, "dynamic" if dynamic else "static"))
        self.unit.edits.append((self.unit.toks[s].start, self.unit.toks[e].end, " ".join(parts)))
        return e + 1

    def _declaration_start(self, i: int) -> int:
        """First token of the declaration holding toks[i]: after the statement before it (``;``,
        a brace, a label, ``else``, ``do``, a directive), attributes before ``__shared__`` included."""
        toks = self.unit.toks
        s = i - 1
        while s >= 0:
            t = toks[s]
            if t.kind == "pp" or (t.kind in ("punct", "id") and t.text in _STMT_STOP):
                break
            if t.kind == "punct" and t.text == ")":
                before = self._attribute_before(s)
                if before is None:
                    break
                s = before
                continue
            if t.kind == "punct" and t.text == "]" and self.unit.p(s - 1) == "]":
                m = match_backward(toks, s, 0)
                if m < 0:
                    break
                s = m - 1
                continue
            s -= 1
        return s + 1

    def _attribute_before(self, close: int) -> int | None:
        """Where to go on scanning leftwards past the attribute whose ``)`` is toks[close]
        (``__attribute__((...))``, ``__align__(n)``, ``alignas(n)``, ``__declspec(...)``); None
        when the parenthesis belongs to no attribute (the declaration starts after it)."""
        toks = self.unit.toks
        m = match_backward(toks, close, 0)
        if m < 1:
            return None
        kw = toks[m - 1].text
        if m >= 2 and kw == "(" and toks[m - 2].text == "__attribute__":
            return m - 3
        if kw in _ATTRIBUTE_KEYWORDS:
            return m - 2
        return None

    def _declaration_end(self, i: int) -> int:
        """Index of the ``;`` ending the declaration whose ``__shared__`` is toks[i].

        Raises:
            Unsupported: a directive or braces inside, unbalanced brackets, no ``;``.
        """
        toks = self.unit.toks
        shared_tok = toks[i]
        e = i + 1
        while e < len(toks):
            t = toks[e]
            if t.kind == "pp":
                raise Unsupported("a preprocessor directive inside a __shared__ declaration", t.start)
            txt = t.text if t.kind == "punct" else ""
            if txt in ("(", "["):
                m = match_forward(toks, e, len(toks))
                if m < 0:
                    raise Unsupported("an unbalanced __shared__ declaration", shared_tok.start)
                e = m + 1
                continue
            if txt in ("{", "}"):
                raise Unsupported("a __shared__ declaration with braces (an initializer or an unnamed type)",
                                   shared_tok.start)
            if txt == ";":
                break
            e += 1
        if e >= len(toks):
            raise Unsupported("a __shared__ declaration without a terminating ';'", shared_tok.start)
        return e

    def _declaration_specifiers(self, s: int, e: int) -> tuple[list[int], bool, str]:
        """The tokens of toks[s:e] the rewritten typedef keeps (storage classes, ``__shared__`` and
        attributes dropped), whether ``extern`` makes it dynamic shared memory, and the alignment
        asked for (a C++ expression; ``"1"`` when none).

        Raises:
            Unsupported: ``typedef``, ``template``, ``friend``, ``constexpr`` or ``thread_local``.
        """
        toks = self.unit.toks
        keep: list[int] = []
        dynamic = False
        align = "1"
        k = s
        while k < e:
            t = toks[k]
            if t.kind == "id" and t.text == "extern":
                dynamic, k = True, k + 1
                continue
            if t.kind == "id" and t.text in _SPEC_DROP:
                k += 1
                continue
            attribute = self._attribute_at(k, e)
            if attribute is not None:
                k, align = attribute[0], attribute[1] or align
                continue
            if t.kind == "id" and t.text in ("typedef", "template", "friend", "constexpr", "thread_local"):
                raise Unsupported(f"'{t.text}' in a __shared__ declaration", t.start)
            keep.append(k)
            k += 1
        return keep, dynamic, align

    def _attribute_at(self, k: int, e: int) -> tuple[int, str | None] | None:
        """An attribute starting at toks[k] (before ``e``): the index after it and the alignment it
        asks for (None when it asks none); None when no attribute starts there."""
        toks = self.unit.toks
        t = toks[k]
        if t.kind == "id" and t.text in ("__align__", "alignas") and self.unit.p(k + 1) == "(":
            m = match_forward(toks, k + 1, e)
            return m + 1, f"({self.unit.join(k + 2, m)})"
        if t.kind == "id" and t.text == "__attribute__" and self.unit.p(k + 1) == "(":
            m = match_forward(toks, k + 1, e)
            return m + 1, self._attribute_alignment(k + 1, m)
        if t.kind == "punct" and t.text == "[" and self.unit.p(k + 1) == "[":
            return match_forward(toks, k, e) + 1, None
        return None

    def _attribute_alignment(self, open_: int, close: int) -> str | None:
        """The alignment an ``__attribute__((...))`` spanning toks[open_:close + 1] asks for:
        ``aligned(n)`` gives ``(n)``, a bare ``aligned`` the largest (16); None without one."""
        inner = [x.text for x in self.unit.toks[open_:close + 1]]
        if "aligned" not in inner:
            return None
        a = open_ + inner.index("aligned")
        if self.unit.p(a + 1) == "(":
            am = match_forward(self.unit.toks, a + 1, close)
            return f"({self.unit.join(a + 2, am)})"
        return "16"

    def _declarator_code(self, name: str, specs: str, ptr: str, dims: str, *, dynamic: bool, align: str,
                         function_scope: bool) -> str:
        """The code replacing one declarator: a typedef of its type, then a reference named ``name``
        (function scope) or an accessor function ``__sg_refN()`` (file scope) to its storage in the
        block's shared-memory arena (the static slot, or the dynamic part for ``extern``)."""
        sid = self._next_id
        self._next_id += 1
        ty = f"__sg_T{sid}"
        typedef = f"typedef {specs} {ptr}{' ' if ptr else ''}{ty}{dims};"
        if dynamic:
            addr = f"__sg_dyn_shared_at(\"{name}\", __sg_elem_size<{ty}>())"
            slot = ""
        else:
            slot = (f"static ::__sg_slot __sg_S{sid} = {{0u, \"{name}\", __FILE__, __LINE__}}; ")
            addr = (f"__sg_shared_at(&__sg_S{sid}, sizeof({ty}), __sg_align(alignof({ty}), {align}), "
                    f"__sg_elem_size<{ty}>())")
        ref = f"*reinterpret_cast<{ty} *>({addr})"
        if function_scope:
            return f"{typedef} {slot}{ty} &{name} = {ref};"
        accessor = f"__sg_ref{sid}"
        self.file_names[name] = accessor
        return f"{typedef} static inline {ty} &{accessor}() {{ {slot}return {ref}; }}"

    def _join_indices(self, idx: list[int]) -> str:
        """The tokens at indices ``idx`` as text (as rewritten), a space where they were apart."""
        if not idx:
            return ""
        out: list[str] = []
        for n, k in enumerate(idx):
            if n and (k != idx[n - 1] + 1 or self.unit.toks[k].start > self.unit.toks[k - 1].end):
                out.append(" ")
            out.append(self.unit.tok_text(k))
        return "".join(out)

    def _split_declarators(self, keep: list[int]) -> list[list[int]]:
        """The token indices ``keep`` cut at commas outside brackets and template argument lists:
        one list per declarator (the first holds the specifiers too); [] when all are empty."""
        chunks: list[list[int]] = [[]]
        depth = angle = 0
        for k in keep:
            w = self.unit.p(k)
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
        """One declarator's tokens ``chunk`` (the first with the specifiers) as ``(specifier tokens,
        pointer/reference tokens, the name's token, the array dimensions' tokens)``.

        Raises:
            Unsupported: an initializer, no name or no type, specifiers on a later declarator, a
                parenthesised (function pointer) declarator.
        """
        toks = self.unit.toks
        depth = 0
        for k in chunk:
            w = self.unit.p(k)
            if w in ("(", "[", "{"):
                depth += 1
            elif w in (")", "]", "}"):
                depth -= 1
            elif w == "=" and depth == 0:
                raise Unsupported("an initializer on a __shared__ variable", toks[k].start)
        j = len(chunk) - 1
        # trailing [dims]
        while j >= 0 and self.unit.p(chunk[j]) == "]":
            depth = 0
            while j >= 0:
                w = self.unit.p(chunk[j])
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
            raise Unsupported("this form of __shared__ declarator", toks[chunk[max(j, 0)]].start)
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
            raise Unsupported("a __shared__ declaration without a type", toks[name_k].start)
        if not first and specs:
            raise Unsupported("this form of __shared__ declarator", toks[chunk[0]].start)
        if any(self.unit.p(k) in ("(", ")") for k in ptr):
            raise Unsupported("this form of __shared__ declarator", toks[name_k].start)
        return specs, ptr, name_k, dims

