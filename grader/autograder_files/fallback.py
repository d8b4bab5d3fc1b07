# Writes the platform's results.json when scangrade stopped without one (no imports of scangrade, so
# that it runs whatever broke there). Arguments: PLATFORM (gradescope or prairielearn), the
# results.json to write, the file holding scangrade's error output, WHY (what happened, one clause),
# and whether the bundle has a private config (yes/no). Error output may quote the private config
# (a hidden size in a config error): students see it only when the bundle has none.
import html, json, sys
platform, path, errors, why, private = sys.argv[1:]
try:
    with open(errors, encoding="utf-8", errors="replace") as f:
        tail = f.read()[-3000:].strip()
except OSError:
    tail = ""
detail = tail if tail and private == "no" else ""
head = (f"The autograder could not grade this submission: {why}. This is a problem of the autograder, not of "
        "your code; your course staff can see the details.")
if platform == "gradescope":
    text = "\n\n".join(x for x in (head, detail) if x)
    doc = {"score": 0.0, "output": html.escape(text, quote=False), "visibility": "visible",
           "stdout_visibility": "hidden", "tests": []}
else:  # PrairieLearn: not gradable, so the student loses no attempt and no points
    doc = {"gradable": False, "format_errors": [head.replace("; your course", "; it used no attempt, and your course")]}
    if detail:
        doc["output"] = detail
with open(path, "w", encoding="utf-8") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
