"""docs/architecture.md's import rules, kept by a walk of every import the
code makes: at the top of a module and inside functions alike (an import
inside a function is still an edge at run time); only the imports under
`if TYPE_CHECKING:` (annotations, never run) are left out.

- No two modules import each other, directly or round a longer circle.
- Imports point down the folders: the engine (gdb_ext/) never imports
  commands/ or pkg/; no wing of the engine imports a backend; a backend
  imports only backends, layouts/, vm/ and the engine's root; and each
  wing only the wings the architecture puts below it.
- No module imports a name that starts with an underscore from another."""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = "ljgdb"
TOP = ("gdb_ext", "commands", "pkg")

# folder -> the folders it may import (besides itself).
BELOW = {
    "gdb_ext": (),
    "gdb_ext.layouts": ("gdb_ext",),
    "gdb_ext.vm": ("gdb_ext", "gdb_ext.layouts"),
    "gdb_ext.jit": ("gdb_ext", "gdb_ext.layouts", "gdb_ext.vm"),
    "gdb_ext.stack": ("gdb_ext", "gdb_ext.layouts", "gdb_ext.vm", "gdb_ext.jit"),
    "gdb_ext.heap": ("gdb_ext", "gdb_ext.layouts", "gdb_ext.vm", "gdb_ext.jit", "gdb_ext.stack"),
    "gdb_ext.backends": ("gdb_ext", "gdb_ext.layouts", "gdb_ext.vm"),
}


def module_files(root, tops=TOP):
    """{module name relative to the package: its file}."""
    out = {}
    for top in tops:
        for dirpath, dirnames, files in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                    out[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


def _type_only(tree):
    """The ids of the nodes under `if TYPE_CHECKING:`."""
    skip = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            skip.update(id(m) for m in ast.walk(n))
    return skip


def imports_of(name, source, is_package, modules):
    """[(module imported, [names imported from it])] of one module's source."""
    tree = ast.parse(source)
    skip = _type_only(tree)
    here = name.split(".") if is_package else name.split(".")[:-1]
    out = []
    for n in ast.walk(tree):
        if id(n) in skip:
            continue
        if isinstance(n, ast.ImportFrom):
            if n.level:
                base = here[:len(here) - (n.level - 1)]
                target = ".".join(base + ([n.module] if n.module else []))
            else:
                target = n.module or ""
                if target.startswith(PACKAGE + "."):
                    target = target[len(PACKAGE) + 1:]
            for a in n.names:
                sub = target + "." + a.name
                if sub in modules:
                    out.append((sub, []))
                elif target in modules:
                    out.append((target, [a.name]))
        elif isinstance(n, ast.Import):
            for a in n.names:
                t = a.name[len(PACKAGE) + 1:] if a.name.startswith(PACKAGE + ".") else a.name
                if t in modules:
                    out.append((t, []))
    return [(m, names) for m, names in out if m != name]


def graph(files):
    """{module: {module it imports: [names]}} of {module: file}."""
    g = {}
    for name, path in files.items():
        with open(path) as f:
            src = f.read()
        edges = g[name] = {}
        for m, names in imports_of(name, src, path.endswith("__init__.py"), files):
            edges.setdefault(m, []).extend(names)
    return g


def circles(g):
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def folder(name):
    parts = name.split(".")
    if parts[0] == "gdb_ext":
        return ".".join(parts[:2]) if len(parts) > 2 else "gdb_ext"
    return parts[0]


def wrong_ways(g):
    """[(importer, imported, why)] against the folder rules."""
    out = []
    for a in sorted(g):
        fa = folder(a)
        for b in sorted(g[a]):
            fb = folder(b)
            if fa == fb:
                continue
            if fa.startswith("gdb_ext") and not fb.startswith("gdb_ext"):
                out.append((a, b, "the engine imports %s" % fb))
            elif fa in BELOW and fb.startswith("gdb_ext") and fb not in BELOW[fa]:
                out.append((a, b, "%s may import only %s" % (fa, ", ".join(BELOW[fa]))))
    return out


def private_names(g):
    return [(a, b, n) for a in sorted(g) for b, names in g[a].items() for n in names
            if n.startswith("_") and not n.startswith("__")]


def test_the_code_keeps_the_import_rules():
    g = graph(module_files(ROOT))
    assert len(g) >= 90 and "gdb_ext.stack.recorder" in g
    assert circles(g) == []
    assert wrong_ways(g) == []
    assert private_names(g) == []


def test_the_walk_sees_what_it_checks(tmp_path):
    """The walk finds a circle made by an import inside a function, an
    upward import and a private name, and leaves a TYPE_CHECKING import
    out (a check that cannot fail would keep no rule)."""
    files = {
        "gdb_ext/__init__.py": "",
        "gdb_ext/vm/__init__.py": "",
        "gdb_ext/vm/a.py": "def f():\n    from ..stack.b import g\n",
        "gdb_ext/stack/__init__.py": "",
        "gdb_ext/stack/b.py": "from ..vm import a\nfrom ..vm.a import _hidden\n"
                              "from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    from ..backends import live\n",
        "gdb_ext/backends/__init__.py": "",
        "gdb_ext/backends/live.py": "",
    }
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    g = graph(module_files(str(tmp_path), ("gdb_ext",)))
    assert circles(g) == [["gdb_ext.stack.b", "gdb_ext.vm.a"]]
    assert [(a, b) for a, b, _ in wrong_ways(g)] == [("gdb_ext.vm.a", "gdb_ext.stack.b")]
    assert private_names(g) == [("gdb_ext.stack.b", "gdb_ext.vm.a", "_hidden")]
    assert "gdb_ext.backends.live" not in g["gdb_ext.stack.b"]
