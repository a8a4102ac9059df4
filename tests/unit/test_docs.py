"""The documentation says what the code says (no gdb): README's command
table, the command classes' USAGE/SUMMARY/help text and the generated pages
docs/commands/<command>.md agree (docs/gen_commands.py --check), and the
README's test command is the one CI runs."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
while not os.path.exists(os.path.join(ROOT, "docs", "gen_commands.py")):
    ROOT = os.path.dirname(ROOT)
sys.path.insert(0, os.path.join(ROOT, "docs"))
import gen_commands  # noqa: E402


def test_docs_do_not_drift():
    assert gen_commands.drift() == []


def test_every_command_has_a_page_and_a_row():
    names = [c["name"] for c in gen_commands.commands()]
    assert len(names) == 23 and len(set(names)) == 23
    readme = open(os.path.join(ROOT, "README.md")).read()
    for n in names:
        assert "[`%s`](docs/commands/%s.md)" % (n, n) in readme
        assert os.path.exists(os.path.join(ROOT, "docs", "commands", n + ".md"))


def test_check_mode_exits_zero():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "docs", "gen_commands.py"), "--check"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert p.returncode == 0, p.stdout.decode()


def test_readme_test_command_is_ci_s():
    readme = open(os.path.join(ROOT, "README.md")).read()
    m = re.search(r"^(bash testprogs/run-tests\.sh)\s+#", readme, re.M)
    assert m, "README names no test command"
    ci = [ln.strip() for ln in open(os.path.join(ROOT, ".ci", "run")) if ln.strip()
          and not ln.startswith("#") and not ln.startswith(("set ", "cd "))]
    assert ci == [m.group(1)]


def test_readme_is_a_front_door():
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert len(readme.split("\n")) <= 300
    # No directory of the machine an example ran on.
    assert not re.search(r"/work/|/root/|/tmp/pytest-|/home/", readme)
    for path in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert os.path.exists(os.path.join(ROOT, path)), path


def test_generated_output_is_relative():
    for n in os.listdir(os.path.join(ROOT, "docs", "commands")):
        if n.endswith(".md"):
            text = open(os.path.join(ROOT, "docs", "commands", n)).read()
            assert not re.search(r"/work/|/root/|/tmp/pytest-|/home/", text), n


def test_no_machine_paths_in_docs():
    """No page of docs/ names a directory of the machine its output came
    from (docs/internals.md is docs/tour.py's real output, the others hold
    real output pasted from runs)."""
    for n in os.listdir(os.path.join(ROOT, "docs")):
        if n.endswith(".md"):
            text = open(os.path.join(ROOT, "docs", n)).read()
            # (/proc/PID/root/... is the kernel's, not the machine's)
            assert not re.search(r"/work/|(?<!\w)/root/|/tmp/pytest-|/home/", text), n
