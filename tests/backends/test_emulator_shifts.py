"""Shifts by the width of their type or more: the emulator computes what a GPU computes.

PTX ``shl``/``shr`` clamp the amount: ``x << s`` is 0, ``x >> s`` is 0 (or -1 for a negative signed
value) for any ``s`` >= the width (an amount taken as unsigned, so a negative one counts as huge).
The emulator's source rewrite (``rewrite.find_shifts``) wraps every shift's left operand in the
prelude's ``__sg_sh`` / ``__sg_sha``, which give that value and report a non-fatal finding of kind
``shift-clamped`` naming the line; ``-fsanitize=shift-exponent`` stays as the backstop (a shift the
rewrite leaves alone fails as ``undefined-shift``).

- the rewrite: left-operand extents (precedence, casts, calls, unary operators, chains, compound
  assignment), ``#define`` bodies, what it leaves alone (templates, ``<<<...>>>``, ``operator<<``,
  macros an ``#if`` expands, ambiguous ``>>``), line numbers;
- random expressions give the same values rewritten as built in (amounts in range);
- emulator launches: 32- and 64-bit values, negative values and amounts, a macro, compound
  assignment, the warning's text; the GPU Gems macro gives the output of no padding at all;
  grading GPU Gems' macro as Part 3 passes every case with a warning.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from grader.backends import Selection
from grader.backends.emulator.macros import nvcc_defines
from grader.backends.emulator import EmulatorBackend
from grader.backends.emulator.build import PRELUDE, RUNTIME_DIR
from grader.backends.emulator.rewrite import SHIFT_COMPOUND, SHIFT_MINUS, SHIFT_PLUS, rewrite_source
from grader.assignment.config import load_config
from grader.core.errors import KernelError
from grader.core.kernels import KernelSpec, Param
from grader.grading.runner import grade
from tests.conftest import BROKEN, emulator_cache, write_config
from tests.grading.test_grading import parts_of, submission
from tests.backends.test_integrity_checks import compile_part, line_of

INT = np.dtype(np.int32)
EMULATOR = Selection("emulator", "test")
GEMS = BROKEN / "part3_gems_macro.cu"


# -- the rewrite ---------------------------------------------------------------------------------------
def rewritten(code: str) -> str:
    """``code`` (one file, s.cu) as rewritten, without the part header."""
    return rewrite_source('#line 1 "s.cu"\n' + code, filename="s.cu").text.split("\n", 1)[1]


_SITE = re.compile(r', "s\.cu", \d+, \d+(?:, __LINE__, "\w+")?\)')


def short(code: str) -> str:
    """The rewrite of ``code`` with the helpers written SH( / SHA( and their site arguments dropped."""
    return _SITE.sub(")", rewritten(code)).replace("__sg_sha(", "SHA(").replace("__sg_sh(", "SH(")


@pytest.mark.parametrize("code, expected", [
    # precedence: the left operand is an additive-expression
    ("x = a + b << c;", "x = SH(a + b) << c;"),
    ("x = a * b - 1 >> c;", "x = SH(a * b - 1) >> c;"),
    ("x = a & b << c;", "x = a & SH(b) << c;"),
    ("x = a | b ^ c >> 1;", "x = a | b ^ SH(c) >> 1;"),
    ("x = a < b << c;", "x = a < SH(b) << c;"),
    ("x = a == b >> c;", "x = a == SH(b) >> c;"),
    ("x = a && b << 1 || c;", "x = a && SH(b) << 1 || c;"),
    ("x = c ? a << 1 : b >> 2;", "x = c ? SH(a) << 1 : SH(b) >> 2;"),
    ("f(a << 1, b >> 2);", "f(SH(a) << 1, SH(b) >> 2);"),
    ("return a << 1;", "return SH(a) << 1;"),
    # the right operand is the compiler's: only the left one is wrapped
    ("x = a >> b + c;", "x = SH(a) >> b + c;"),
    # unary operators, casts, calls, subscripts, members, sizeof
    ("x = -a >> 1; y = ~a << 1; z = *p << 1; w = !a << 1;",
     "x = SH(-a) >> 1; y = SH(~a) << 1; z = SH(*p) << 1; w = SH(!a) << 1;"),
    ("x = (int)a << 2;", "x = SH((int)a) << 2;"),
    ("x = (unsigned)(a + b) << 2;", "x = SH((unsigned)(a + b)) << 2;"),
    ("x = static_cast<unsigned>(a) >> 2;", "x = SH(static_cast<unsigned>(a)) >> 2;"),
    ("x = std::numeric_limits<int>::max() >> 2;", "x = SH(std::numeric_limits<int>::max()) >> 2;"),
    ("x = f(a, b)[i].y << 2 | p->q[2] >> 1;", "x = SH(f(a, b)[i].y) << 2 | SH(p->q[2]) >> 1;"),
    ("x = threadIdx.x << 1;", "x = SH(threadIdx.x) << 1;"),
    ("x = sizeof(int) << 3;", "x = SH(sizeof(int)) << 3;"),
    ("x = i++ << 1;", "x = SH(i++) << 1;"),
    # chains are left-associative; nesting
    ("x = a << b >> c;", "x = SH(SH(a) << b) >> c;"),
    ("x = a + 1 << b + 1 >> c;", "x = SH(SH(a + 1) << b + 1) >> c;"),
    ("x = (a << (b >> c)) >> d;", "x = SH((SH(a) << (SH(b) >> c))) >> d;"),
    ("x = t[a << 1] >> 2;", "x = SH(t[SH(a) << 1]) >> 2;"),
    # compound assignment
    ("x <<= n; p[i] >>= 1; *p <<= 2; s.f >>= k + 1;",
     "SHA(x) <<= n; SHA(p[i]) >>= 1; SHA(*p) <<= 2; SHA(s.f) >>= k + 1;"),
    ("if (c) y <<= 1; else y >>= 1;", "if (c) SHA(y) <<= 1; else SHA(y) >>= 1;"),
    ("for (int s = n >> 1; s > 0; s >>= 1) {}", "for (int s = SH(n) >> 1; s > 0; SHA(s) >>= 1) {}"),
    ("x = y <<= 2;", "x = SHA(y) <<= 2;"),
    # launch syntax is left alone, a shift in its configuration is not
    ("k<<<(n + 255) >> 8, 256>>>(p, n);", "k<<<SH((n + 255)) >> 8, 256>>>(p, n);"),
    # streams: the helper hands a non-integer back untouched
    ("std::cout << x << std::endl;", "SH(SH(std::cout) << x) << std::endl;"),
])
def test_the_left_operand_of_every_shift_is_wrapped(code, expected):
    assert short(code) == expected


@pytest.mark.parametrize("code", [
    "std::vector<std::vector<int>> v;",
    "A<B<C<int>>> w; x = f<g<int>>(y);",
    "typedef std::map<int, std::vector<int>> M;",
    "kernel<<<grid, block>>>(p, n);",
    "std::ostream &operator<<(std::ostream &o, const X &x);",
    "X &operator>>=(X &a, int b);",
    "// a << b\nconst char *s = \"a >> b\"; char c = '<';",
    "b = i < n && j < m >> 1;",  # two `<` that could open templates: left to the backstop
    "x = a > (b) << 2;",  # `a > (b)` could be a template-id's end: left alone
    "x = T::template f<int>() << 2;",
    "#define ALL(...) __VA_ARGS__ << 1",
])
def test_templates_launches_operators_and_ambiguous_shifts_are_left_alone(code):
    assert rewritten(code) == code


def test_the_operators_flags_say_whether_the_amount_has_a_plus_or_minus_outside_brackets():
    def flags(code: str) -> list[int]:
        return [int(m) for m in re.findall(r', "s\.cu", \d+, (\d+)', rewritten(code))]
    assert flags("x = n >> 5 + n;") == [SHIFT_PLUS]
    assert flags("x = 1 << n - 1;") == [SHIFT_MINUS]
    assert flags("x = n >> (5 + n);") == [0]
    assert flags("x = 1u << lane;") == [0]
    assert flags("x = 1u << -lane;") == [0]
    assert flags("x = a << n * 2 >> 1;") == [0, 0]
    assert flags("x = a << f(n + 1);") == [0]
    assert flags("x >>= a + b;") == [SHIFT_COMPOUND]


def test_the_gems_macro_is_rewritten_inside_its_define_with_its_name_and_line():
    text = rewritten("#define NUM_BANKS 32\n"
                     "#define CONFLICT_FREE_OFFSET(n) ((n) >> NUM_BANKS + (n) >> (2 * LOG_NUM_BANKS))\n")
    assert text.splitlines()[1] == (
        '#define CONFLICT_FREE_OFFSET(n) (__sg_sh(__sg_sh((n), "s.cu", 2, 2, __LINE__, "CONFLICT_FREE_OFFSET") '
        '>> NUM_BANKS + (n), "s.cu", 2, 0, __LINE__, "CONFLICT_FREE_OFFSET") >> (2 * LOG_NUM_BANKS))')


def test_macro_bodies_keep_their_directives_and_continuation_lines():
    code = "#define STR(x) #x\n#define CAT(a, b) a##b << 1\n#define M(x) \\\n  ((x) << \\\n   3)\nint y;\n"
    text = rewritten(code)
    assert text.count("\n") == code.count("\n")
    assert text.startswith("#define STR(x) #x\n")
    assert '#define CAT(a, b) __sg_sh(a##b, "s.cu", 2, 0, __LINE__, "CAT") << 1\n' in text
    assert '#define M(x) \\\n  (__sg_sh((x), "s.cu", 4, 0, __LINE__, "M") << \\\n   3)\n' in text


def test_macros_an_if_directive_expands_are_left_alone_with_what_they_use():
    code = ("#define LOG 5\n#define N (1 << LOG)\n#define TWICE (N << 1)\n#define OTHER (1 << 3)\n"
            "#if TWICE > 16\n#endif\n")
    text = rewritten(code)
    assert "#define N (1 << LOG)\n#define TWICE (N << 1)\n" in text
    assert "__sg_sh(1" in text.splitlines()[3]


@pytest.mark.parametrize("use, rewritten_body", [
    ("x = F(i + 1) + F(t[i == 1]);", True),  # additive or bracketed: the same operand either way
    ("x = F(i == 1);", False),  # i == (1 >> 2) in C++: wrapping `a` would shift `i == 1`
    ("x = F(c ? 1 : 2);", False),
    ("#define G(b) F(b)\nx = G(i & 1);", False),  # passed on through another macro
    ("#define LOW i & 3\nx = F(LOW);", False),  # a macro whose body has a low-precedence operator
    ("#define G(b) F((b))\nx = G(i & 1);", True),
])
def test_a_bare_macro_parameter_in_a_left_operand_is_wrapped_only_where_no_use_changes_the_operand(
        use, rewritten_body):
    text = rewritten("#define F(a) a >> 2\n" + use + "\n")
    assert text.startswith('#define F(a) __sg_sh(a, "s.cu", 1, 0, __LINE__, "F") >> 2\n' if rewritten_body
                           else "#define F(a) a >> 2\n")


def test_shared_array_dimensions_and_file_scope_shared_names_compose_with_the_shift_helpers():
    text = rewritten("__shared__ int fs[4];\n__global__ void k() {\n  __shared__ int t[1 << 5];\n"
                     "  t[0] = fs[1] << 2;\n}\n")
    assert '__sg_T1[__sg_sh(1, "s.cu", 3, 0) << 5]' in text
    assert '__sg_sh((__sg_ref0())[1], "s.cu", 4, 0) << 2' in text


def test_lines_are_kept_and_each_site_names_its_operators_line():
    code = "int f(int a,\n      int b) {\n  return a\n    << b\n    >> 1;\n}\n"
    result = rewrite_source('#line 1 "s.cu"\n' + code, filename="s.cu")
    assert result.text.count("\n") == code.count("\n") + 1
    assert result.shifts == [("s.cu", 4, "<<"), ("s.cu", 5, ">>")]


# -- random expressions: rewritten and built-in agree where the amount is in range -----------------------
def _expression(rng: random.Random, depth: int) -> tuple[str, int]:
    """A random C++ expression over unsigned values with minimal parentheses: (text, precedence),
    precedence as C++'s (higher binds tighter: 16 primary, 14 unary, 13 * /, 12 + -, 11 shifts,
    10 relational, 9 equality, 8 &, 7 ^, 6 |, 5 &&, 4 ||, 3 ?:)."""
    if depth <= 0 or rng.random() < 0.2:
        return rng.choice(["u0", "u1", "u2", "u3", "7u", "0x80000001u", "arr[s0 & 3]", "st.a", "f(u1)",
                           "(unsigned)s1", "static_cast<unsigned>(s2)", "sizeof(int)"]), 16

    def operand(minimum: int) -> str:
        text, prec = _expression(rng, depth - 1)
        return text if prec >= minimum else f"({text})"

    kind = rng.random()
    if kind < 0.35:  # a shift, amount in range (and sometimes additive: `x << s1 + 2`)
        op = rng.choice(["<<", ">>"])
        amount = rng.choice(["s0", "s1", "3", "s1 + 2", "(s2 & 7)", "s0 * 2", "f(s0) % 8"])
        return f"{operand(11)} {op} {amount}", 11
    if kind < 0.45:
        return f"{rng.choice(['-', '~', '!'])}{operand(14)}", 14
    if kind < 0.5:
        return f"{operand(4)} ? {operand(3)} : {operand(3)}", 3
    prec, op = rng.choice([(13, "*"), (12, "+"), (12, "-"), (10, "<"), (10, ">="), (9, "=="), (9, "!="),
                           (8, "&"), (7, "^"), (6, "|"), (5, "&&"), (4, "||")])
    return f"{operand(prec)} {op} {operand(prec + 1)}", prec


def _random_program(seed: int, count: int) -> str:
    rng = random.Random(seed)
    lines = []
    for k in range(count):
        text, _ = _expression(rng, 4)
        if rng.random() < 0.2:
            lines.append(f"    {{ unsigned t = {text}; t {rng.choice(['<<=', '>>='])} s{k % 3} + 1; "
                         f"r[{k}] = t; }}")
        else:
            lines.append(f"    r[{k}] = (unsigned)({text});")
    return ("#include <iostream>\n"
            "struct S { unsigned a; };\n"
            "static unsigned f(unsigned x) { return x * 3u + 1u; }\n"
            "int main(int argc, char **argv) {\n"
            "    volatile unsigned seed = argc;\n"
            "    unsigned u0 = seed * 0x9E3779B9u, u1 = u0 ^ 0xDEADBEEFu, u2 = seed + 41u, u3 = u1 >> 7;\n"
            "    int s0 = (int)seed + 2, s1 = 5, s2 = (int)(u0 & 31u);\n"
            "    unsigned arr[4] = {u0, 3u, u2, 0xFFFFFFFFu};\n"
            "    S st{u1};\n"
            f"    static unsigned r[{count}];\n"
            + "\n".join(lines) + "\n"
            f"    for (int k = 0; k < {count}; ++k) std::cout << r[k] << '\\n';\n"
            "    return 0;\n"
            "}\n")


@pytest.fixture(scope="module")
def cxx() -> str:
    exe = shutil.which("g++") or shutil.which("c++")
    if not exe:
        pytest.skip("no host C++ compiler")
    return exe


def _run_host(cxx: str, tmp_path: Path, name: str, source: str, *, helpers: bool) -> str:
    src = tmp_path / f"{name}.cpp"
    stub = ('extern "C" void __sg_shift_clamped(const char *, int, int, int, const char *, unsigned long long, '
            'int, int) {}\n'
            # the prelude's memcpy/memmove/memset are the runtime's checked ones: here, byte loops
            'extern "C" void *__sg_memmove(void *d, const void *s, size_t n) { auto *o = (char *)d; '
            'auto *i = (const char *)s; if (o < i) { for (size_t k = 0; k < n; ++k) o[k] = i[k]; } '
            'else { for (size_t k = n; k-- > 0;) o[k] = i[k]; } return d; }\n'
            'extern "C" void *__sg_memcpy(void *d, const void *s, size_t n) { return __sg_memmove(d, s, n); }\n'
            'extern "C" void *__sg_memset(void *d, int v, size_t n) { auto *o = (volatile char *)d; '
            'for (size_t k = 0; k < n; ++k) o[k] = (char)v; return d; }\n') if helpers else ""
    src.write_text(source + stub)
    exe = tmp_path / name
    defines = [f"-D{name}={value}" for name, value in nvcc_defines(90)]  # what the emulator's compile predefines
    flags = [*defines, "-include", str(PRELUDE), "-I", str(RUNTIME_DIR)] if helpers else []
    subprocess.run([cxx, "-std=c++17", "-O1", "-w", *flags, str(src), "-o", str(exe)], check=True,
                   capture_output=True, text=True, timeout=300)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60).stdout


@pytest.mark.parametrize("seed", [1, 2])
def test_random_expressions_give_the_same_values_rewritten_as_built_in(cxx, tmp_path, seed):
    program = _random_program(seed, 150)
    result = rewrite_source('#line 1 "r.cpp"\n' + program, filename="r.cpp")
    assert len(result.shifts) > 150  # (nearly) every shift was handed to the helpers
    native = _run_host(cxx, tmp_path, "native", program, helpers=False)
    emulated = _run_host(cxx, tmp_path, "rewritten", result.text, helpers=True)
    assert emulated.splitlines() == native.splitlines()


CONSTRUCTS = """\
#include <iostream>
#include <iomanip>
#include <limits>
#include <vector>
#define LOG 5
#define N (1 << LOG)
#if N > 16
#define BIG 1
#endif
#define MASK(b) ((1u << (b)) - 1u)
#define CAT(a, b) a##b << 1
enum E { EA = 1 << 3, EB = EA << 1 };
struct BF { unsigned a : 1 << 2; unsigned b : 4; };
template <int S> struct T { static const int v = 1 << S; int arr[1 << S]; };
template <class U> U twice(U x, int s) { return x << s >> 1; }
constexpr int cf(int a) { int r = a; r <<= 2; return r >> 1; }
static_assert(cf(3) == 6 && (N << 1) == 64 && EB == 16 && T<3>::v == 8, "constant shifts");
static_assert(sizeof(decltype((char)1 << 1)) == sizeof(int) && sizeof(1ull >> 1) == 8, "promoted types");
static_assert(MASK(4) == 15u && (-16 >> 2) == -4 && (0x80000000u >> 31) == 1u, "values");
alignas(1 << 4) int aligned_var;
std::ostream &operator<<(std::ostream &o, const BF &b) { return o << b.a << ' ' << b.b << std::endl; }
int switcher(int s) {
    switch (s) { case 1 << 2: return 1; case (2 << 1) + 1: return 2; default: return 0; }
}
int use(int n, volatile int &vv) {
    std::vector<std::vector<int>> v(2, std::vector<int>(3));
    std::cout << "x=" << n << std::hex << std::setw(4) << (n << 2) << std::dec << std::flush;
    std::cout << std::numeric_limits<int>::max() << '\\n' << BF{1, 2};
    BF bf{1, 3};
    int ab1 = 3, s = static_cast<int>(bf.b) << n;
    s += bf.a << 2;
    s += CAT(ab, 1);
    vv <<= 1;
    vv = vv >> 1;
    auto l = [&](int q) { return q << n; };
    E e = EA;
    int ee = e << 1;
    ee >>= EB;
    bool c = true;
    int bs = c << 4, cs = 'a' << 1;
    long long g = twice<long long>(n, 3) + twice(n, 2);
    int *p = &s;
    *p <<= 1;
    p[0] >>= 1;
    (*p) <<= 1;
    if (n) s <<= 1; else s >>= 1;
    return s + l(1) + ee + bs + cs + (int)g + switcher(4) + (int)v.size() + T<2>().arr[0] * 0 + aligned_var;
}
int main(int argc, char **) { volatile int vv = 3; return use(argc, vv) == 0; }
"""


def test_rewritten_constructs_compile_with_the_helpers_and_keep_their_constant_values(cxx, tmp_path):
    """Constant expressions (enumerators, array bounds, case labels, static_assert, template arguments,
    alignas, bit-field widths), promotions, streams and manipulators, templates, lambdas, volatile and
    compound assignments all compile rewritten, and the static_asserts hold."""
    result = rewrite_source('#line 1 "c.cpp"\n' + CONSTRUCTS, filename="c.cpp")
    assert len(result.shifts) > 40
    _run_host(cxx, tmp_path, "constructs", result.text, helpers=True)


# -- emulator launches ----------------------------------------------------------------------------------
SHIFTS_CU = """\
// Shifts in and out of range (tests/backends/test_emulator_shifts.py).
#define SHR(x, s) ((x) >> (s))  // LINE:define
extern "C" __global__ void shifts(int* out, int n)
{
    int i = threadIdx.x;
    int* o = out + 9 * i;
    unsigned lane = n + i;
    o[0] = (int)(1u << lane);  // LINE:lane
    o[1] = -8 >> (n + i);  // LINE:negative
    o[2] = 1000 >> (n + i);  // LINE:positive
    o[3] = (int)((0x123456789ull << (n + i + 28)) >> 32);  // LINE:shl64
    o[4] = (int)(-1000000000000ll >> (n + i + 28));  // LINE:shr64
    o[5] = SHR(i + 100, n + i);  // LINE:macro
    int x = 12345;
    x <<= n + i;  // LINE:compound
    o[6] = x;
    o[7] = (i << 4) >> (i - 4) ^ i >> 3;  // LINE:negative-amount
    o[8] = 1 << n + i;  // LINE:precedence
}
"""


def _ptx(value: int, amount: int, bits: int, signed: bool, left: bool) -> int:
    """What PTX shl/shr give, as a Python int of the (two's complement) result type."""
    if amount < 0 or amount >= bits:
        r = -1 if (not left and signed and value < 0) else 0
    else:
        r = (value << amount) if left else (value >> amount)
    r &= (1 << bits) - 1
    return r - (1 << bits) if signed and r >> (bits - 1) else r


def _i32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


def expected_shifts(n: int) -> list[list[int]]:
    rows = []
    for i in range(8):
        rows.append([
            _i32(_ptx(1, n + i, 32, False, True)),
            _ptx(-8, n + i, 32, True, False),
            _ptx(1000, n + i, 32, True, False),
            _i32(_ptx(_ptx(0x123456789, n + i + 28, 64, False, True), 32, 64, False, False)),
            _i32(_ptx(-1000000000000, n + i + 28, 64, True, False)),
            _ptx(i + 100, n + i, 32, True, False),
            _ptx(12345, n + i, 32, True, True),
            _ptx(_ptx(i, 4, 32, True, True), i - 4, 32, True, False) ^ (i >> 3),
            _ptx(1, n + i, 32, True, True),
        ])
    return rows


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return emulator_cache(tmp_path_factory.mktemp("emu-cache"))


@pytest.fixture(scope="module", params=["plain", "checked"])
def backend(request, cache_dir):
    be = EmulatorBackend(workers=1, cache_dir=cache_dir, nvcc_check=False, checks=request.param == "checked")
    yield be
    be.close()


@pytest.fixture(scope="module")
def shifts_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("src") / "shifts.cu"
    path.write_text(SHIFTS_CU)
    return path


def launch(be, mod, kernel, args, *, block=8, shared_bytes=0):
    """Launch; return the warnings (they must be all the findings)."""
    be.launch(mod, kernel, grid=1, block=block, shared_bytes=shared_bytes, args=args)
    return be.take_warnings()


def test_shifts_give_ptx_values_with_one_warning_per_line(backend, shifts_file, tmp_path):
    spec = KernelSpec("shifts", (Param("out", "int*", "ptr"), Param("n", "int", "int")))
    mod = compile_part(backend, tmp_path, shifts_file, (spec,), block_size=64)
    out = backend.alloc(72, INT)
    lines = {m: line_of(shifts_file, m) for m in ("define", "lane", "negative", "positive", "shl64", "shr64",
                                                  "macro", "compound", "negative-amount", "precedence")}
    # n = 0: only the negative amounts of `(i << 4) >> (i - 4)` (threads 0-3) are out of range
    warnings = launch(backend, mod, "shifts", [out, 0])
    assert backend.to_host(out).reshape(8, 9).tolist() == expected_shifts(0)
    assert [(w.kind, w.file, w.line) for w in warnings] == [("shift-clamped", "shifts.cu", lines["negative-amount"])]
    assert warnings[0].message.startswith(f"shift by -4 of a 32-bit value at shifts.cu:{lines['negative-amount']} "
                                          "gives 0, as on a GPU (PTX clamps shift amounts to 32)")
    # n = 27: 32-bit amounts 27..34 (threads 5-7 clamp); n = 33: 64-bit ones too
    for n in (27, 33):
        warnings = launch(backend, mod, "shifts", [out, n])
        assert backend.to_host(out).reshape(8, 9).tolist() == expected_shifts(n), n
        by_line = {w.line: w.message for w in warnings}
        assert all(w.kind == "shift-clamped" and w.file == "shifts.cu" for w in warnings)
        expect = ({"lane", "negative", "positive", "define", "compound", "negative-amount", "precedence"}
                  | ({"shl64", "shr64"} if n == 33 else set()))
        assert set(by_line) == {lines[m] for m in expect}, (n, by_line)
    assert by_line[lines["lane"]] == (  # n = 33: thread 0 is the first to clamp
        f"shift by 33 of a 32-bit value at shifts.cu:{lines['lane']} gives 0, as on a GPU (PTX clamps shift "
        "amounts to 32); C++ leaves it undefined (x86 takes the amount mod 32): do not rely on it")
    assert f"at shifts.cu:{lines['negative']} gives -1, as on a GPU" in by_line[lines["negative"]]
    assert "of a 64-bit value" in by_line[lines["shl64"]] and "clamps shift amounts to 64" in by_line[lines["shl64"]]
    assert "of a 64-bit value" in by_line[lines["shr64"]] and " gives -1, as on a GPU" in by_line[lines["shr64"]]
    assert (f"at shifts.cu:{lines['define']} (in macro SHR, used at line {lines['macro']}) gives 0"
            in by_line[lines["define"]])
    assert "operator precedence" not in by_line[lines["lane"]] + by_line[lines["compound"]]
    assert by_line[lines["precedence"]].endswith("C++ leaves it undefined, so check the operator precedence: "
                                                 "+ binds tighter than <<")


def test_the_warning_names_the_first_thread_whatever_the_schedule_and_workers(cache_dir, shifts_file, tmp_path):
    spec = KernelSpec("shifts", (Param("out", "int*", "ptr"), Param("n", "int", "int")))
    messages = []
    for workers, schedule in ((1, "ascending"), (2, "descending"), (2, "random")):
        be = EmulatorBackend(workers=workers, cache_dir=cache_dir, nvcc_check=False, schedule=schedule,
                             schedule_seed=5)
        try:
            mod = compile_part(be, tmp_path / schedule, shifts_file, (spec,), block_size=64)
            out = be.alloc(4 * 72, INT)
            be.launch(mod, "shifts", grid=4, block=8, shared_bytes=0, args=[out, 27])
            messages.append(sorted((w.line, w.message, w.block, w.thread) for w in be.take_warnings()))
        finally:
            be.close()
    assert messages[0] == messages[1] == messages[2]
    assert all(block == (0, 0, 0) for _, _, block, _ in messages[0])


def test_a_shift_the_rewrite_leaves_alone_still_fails_as_undefined_shift(cache_dir, tmp_path):
    """A macro an #if expands keeps its built-in shift (a call cannot be evaluated in #if): the
    sanitizer's backstop reports it."""
    path = tmp_path / "backstop.cu"
    path.write_text("#define SH(x, s) ((x) >> (s))\n#if SH(64, 1) > 2\n#endif\n"
                    'extern "C" __global__ void shifts(int* out, int n)\n{\n'
                    "    out[threadIdx.x] = SH((int)threadIdx.x, n);  // LINE:use\n}\n")
    be = EmulatorBackend(workers=1, cache_dir=cache_dir, nvcc_check=False)
    try:
        spec = KernelSpec("shifts", (Param("out", "int*", "ptr"), Param("n", "int", "int")))
        mod = compile_part(be, tmp_path, path, (spec,), block_size=64)
        out = be.alloc(8, INT)
        assert launch(be, mod, "shifts", [out, 1]) == []
        with pytest.raises(KernelError) as info:
            be.launch(mod, "shifts", grid=1, block=8, shared_bytes=0, args=[out, 40])
        assert info.value.kind == "undefined-shift"
        assert f"shift by 40 of a 32-bit value at backstop.cu:{line_of(path, 'use')}" in str(info.value)
        # a lane-mask-like amount, a plain parameter: no operator precedence advice
        assert "precedence" not in str(info.value) and "GPU Gems" not in str(info.value)
    finally:
        be.close()


def test_an_undefined_shift_whose_amount_is_a_sum_gets_the_precedence_advice(cache_dir, tmp_path):
    """The backstop's message advises on precedence only where the shift's amount has a + or - outside
    brackets (GPU Gems' `n >> NUM_BANKS + n` pattern), here through a macro an #if expands."""
    path = tmp_path / "backstop.cu"
    path.write_text("#define SH(x, s) ((x) >> 5 + (s))\n#if SH(64, 1) > 0\n#endif\n"
                    'extern "C" __global__ void shifts(int* out, int n)\n{\n'
                    "    out[threadIdx.x] = SH((int)threadIdx.x, n);  // LINE:use\n}\n")
    be = EmulatorBackend(workers=1, cache_dir=cache_dir, nvcc_check=False)
    try:
        spec = KernelSpec("shifts", (Param("out", "int*", "ptr"), Param("n", "int", "int")))
        mod = compile_part(be, tmp_path, path, (spec,), block_size=64)
        out = be.alloc(8, INT)
        with pytest.raises(KernelError) as info:
            be.launch(mod, "shifts", grid=1, block=8, shared_bytes=0, args=[out, 40])
        assert info.value.kind == "undefined-shift"
        assert (f"shift by 45 of a 32-bit value at backstop.cu:{line_of(path, 'use')}: undefined in C++" in
                str(info.value)), info.value
        assert ("check the operator precedence: `+` binds tighter than `>>` (GPU Gems' CONFLICT_FREE_OFFSET needs "
                "parentheses)") in str(info.value)
    finally:
        be.close()


def _scan_spec() -> KernelSpec:
    return KernelSpec("blelloch_scan_cf", (Param("in", "const int*", "ptr"), Param("out", "int*", "ptr"),
                                           Param("n", "int", "int")))


def test_the_gems_macro_gives_the_output_of_no_padding_with_a_warning_naming_the_macro(backend, tmp_path):
    text = GEMS.read_text()
    unpadded = tmp_path / "unpadded" / GEMS.name
    unpadded.parent.mkdir()
    unpadded.write_text(re.sub(r"#define CONFLICT_FREE_OFFSET\(n\) .*", "#define CONFLICT_FREE_OFFSET(n) 0", text))
    block = 64
    n = 2 * block
    data = np.random.default_rng(3).integers(-1000, 1000, n).astype(INT)
    outputs = []
    for path, work in ((GEMS, tmp_path / "gems"), (unpadded, tmp_path / "zero")):
        mod = compile_part(backend, work, path, (_scan_spec(),), block_size=block)
        src, out = backend.alloc(n, INT), backend.alloc(n, INT)
        backend.to_device(data, src)
        warnings = launch(backend, mod, "blelloch_scan_cf", [src, out, n], block=block,
                          shared_bytes=4 * (2 * n))
        outputs.append((backend.to_host(out), warnings))
    (gems, warnings), (zero, none) = outputs
    assert none == []
    assert gems.tolist() == zero.tolist() == np.concatenate([[0], np.cumsum(data)[:-1]]).tolist()
    define = next(k for k, line in enumerate(text.splitlines(), 1) if line.startswith("#define CONFLICT_FREE_OFFSET"))
    assert [(w.kind, w.file, w.line) for w in warnings] == [("shift-clamped", GEMS.name, define)]
    message = warnings[0].message
    assert f"of a 32-bit value at {GEMS.name}:{define} (in macro CONFLICT_FREE_OFFSET, used at line " in message
    assert message.endswith("gives 0, as on a GPU (PTX clamps shift amounts to 32); C++ leaves it undefined, so "
                            "check the operator precedence: + binds tighter than >> (GPU Gems' CONFLICT_FREE_OFFSET "
                            "needs parentheses)")


def test_grading_the_gems_macro_as_part_3_passes_every_case_with_the_warning(tmp_path):
    """GPU Gems 3's CONFLICT_FREE_OFFSET as printed parses as n >> (32 + n) >> 10: a GPU clamps, every
    offset is 0, and the scan is right; so is the emulator's, with a warning naming the macro."""
    cfg = load_config(write_config(tmp_path, block_size=64, sizes={"part3_conflict_free": [5, 128]}))
    folder = submission(tmp_path, part3_conflict_free=GEMS)
    part = parts_of(grade(folder, cfg=cfg, selection=EMULATOR, parts=["part3_conflict_free"]))["part3_conflict_free"]
    assert part.status == "pass", [(c.status, c.message) for c in part.cases]
    for c in part.cases:
        assert c.status == "pass"
        assert any(w.startswith("shift-clamped") and "part3_conflict_free.cu:" in w
                   and "CONFLICT_FREE_OFFSET needs parentheses" in w for w in c.warnings), c.warnings
