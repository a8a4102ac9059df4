"""The tests' harness, imported as support.<module> by every test (the one
tests/conftest.py puts tests/ and the checkout on sys.path) and by bench/
and docs/tour.py (which put them there themselves):

  stop       run gdb with ljgdb on a build: one stop live and from its core
             (Stop), the builds (manifest, variants), markers around each
             command's output (wrap_commands, cut_outputs), qemu for arm64
  multistop  a program that stops several times, one core per stop
  host       real host programs (nginx, Tarantool) run in the background
  moments    random moments of a spinning VM, and the judge of lbt there
  corerun    many commands on one core in the core reader (run as a script)
  synth      synthetic LuaJIT memory from the layouts in tests/data (unit tests)
  flamesvg   ljgdb's SVG flame graph read back: boxes by path against folded counts
"""
