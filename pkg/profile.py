"""Write a layout profile of a LuaJIT build (the engine's
gdb_ext/layouts/writer.py, read with pyelftools, no gdb) as one JSON file.

  python3 -m ljgdb.profile BINARY_OR_DEBUG_FILE [--binary STRIPPED_FILE] [-o OUT.json]
"""
import argparse
import json
import sys

from ljgdb.gdb_ext.layouts.writer import make_profile


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m ljgdb.profile",
                                 description="Write the layout profile of a LuaJIT build "
                                             "(a binary or debug file with DWARF) as JSON.")
    ap.add_argument("file")
    ap.add_argument("-o", "--output", help="where to write it (default: standard output)")
    ap.add_argument("--binary", help="the stripped file whose debug file FILE is (for its "
                                     "version string)")
    a = ap.parse_args(argv)
    try:
        doc = make_profile(a.file, a.binary)
    except ImportError as e:
        sys.exit("ljgdb.profile: %s: install pyelftools (pip install pyelftools, or Debian's "
                 "python3-pyelftools)" % e)
    except (OSError, ValueError) as e:
        sys.exit("ljgdb.profile: %s" % e)
    except Exception as e:  # the engine's NotLuaJITError and the like: one line
        sys.exit("ljgdb.profile: %s: %s" % (a.file, e))
    text = json.dumps(doc, indent=0, sort_keys=True) + "\n"
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
