"""Code points that do not print reach no report as themselves: noncharacters (U+10FFFF, U+FDD0,
U+FFFE), format characters that hide text, private-use and unassigned code points are written as
escapes by the one cleaner (grader/core/safe_text.py), in every report format of the table
(grader/render/formats.py), the terminal's and the class report's included."""

from __future__ import annotations

import json
import shutil

from grader.cli import main
from grader.render.formats import FORMATS
from grader.core.safe_text import printable
from tests.conftest import ATTACKS, write_config

ATTACK = ATTACKS / "compile_error_noncharacters.cu"
#: What the attack's #error lines hold, each as it must be written in every report.
HELD = {"\U0010ffff": "\\U0010ffff", "\ufdd0": "\\ufdd0", "\ufffe": "\\ufffe", "\U0001ffff": "\\U0001ffff",
        "\u200b": "\\u200b", "\u2060": "\\u2060", "\u00ad": "\\xad", "\ufeff": "\\ufeff",
        "\U000e0041": "\\U000e0041", "\U000e007f": "\\U000e007f", "\ue000": "\\ue000", "\u0378": "\\u0378",
        "\u00a0": "\\xa0"}


def _not_printing(text: str) -> list[str]:
    return sorted({f"U+{ord(c):04X}" for c in text if not c.isprintable() and c not in "\n\t"})


def test_the_cleaner_escapes_every_code_point_that_does_not_print_and_keeps_the_rest():
    starts = "\x1b\x90\x98\x9b\x9d\x9e\x9f"  # an escape sequence's start: removed with what follows it
    every = "".join(chr(c) for c in range(0x110000) if chr(c) not in starts)
    cleaned = printable(every)
    assert _not_printing(cleaned) == []
    assert printable(cleaned) == cleaned  # idempotent
    for c, escape in HELD.items():
        assert c in every and escape in cleaned and printable(c) == escape
    kept = "ä 中 😀 … — é\u0301 tab\tnewline\n"  # letters, symbols, a combining accent: as they are
    assert printable(kept) == kept
    assert printable("a\r\nb\rc") == "a\nb\\x0dc"


def test_noncharacters_in_compiler_output_reach_no_report_format(tmp_path, capsys):
    from grader.render.class_report import class_report
    from grader.core.results import result_from_dict

    folder = tmp_path / "sub"
    folder.mkdir()
    shutil.copy(ATTACK, folder / "part1_naive.cu")
    config = write_config(tmp_path, sizes={"part1_naive": [5]})
    outputs = {f.name: tmp_path / f"report-{f.name}" for f in FORMATS.values() if f.flag}
    argv = ["grade", str(folder), "--config", str(config), "--backend", "emulator"]
    for f in FORMATS.values():
        if f.flag:
            argv += [f.flag, str(outputs[f.name])]
    assert main(argv) == 1
    printed = capsys.readouterr()
    texts = {name: path.read_text(encoding="utf-8") for name, path in outputs.items()}
    texts["text"] = printed.out + printed.err  # the terminal report (the format without an option)
    assert set(texts) == set(FORMATS)
    data = json.loads(texts["json"])
    texts["class report"] = class_report([("student", result_from_dict(data))])
    for name, text in texts.items():
        assert _not_printing(text) == [], name
        assert not any(c in text for c in HELD), name
    message = data["parts"][0]["message"]
    assert data["parts"][0]["status"] == "compile-error"
    assert all(escape in message for escape in HELD.values()), message
    assert "score: 100\\U0010ffff/100 \\ufdd0points\\ufffe" in message
    # and in the formats that are JSON, where a parser would read the raw code point back
    for name in ("gradescope", "prairielearn"):
        assert "\\U0010ffff" in json.dumps(json.loads(texts[name]), ensure_ascii=False), name
