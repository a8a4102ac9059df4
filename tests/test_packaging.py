"""pip install must give the package `ljgdb` and no bare `commands` module."""
import os
import subprocess
import sys
import zipfile

from harness import ROOT


def test_wheel_contents(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), ROOT], check=True, cwd=str(tmp_path))
    wheels = [f for f in os.listdir(str(tmp_path)) if f.endswith(".whl")]
    assert len(wheels) == 1
    names = zipfile.ZipFile(os.path.join(str(tmp_path), wheels[0])).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"ljgdb"}, tops
    assert "ljgdb/commands/lval.py" in names
    assert "ljgdb/gdb_ext/layout.py" in names
    assert "ljgdb/__init__.py" in names
