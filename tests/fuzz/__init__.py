"""Seeded fuzzers: random tensor programs compiled and compared with eager tensorplay and
PyTorch (:mod:`tests.fuzz.programs`), and Python state changed between compiled calls
(:mod:`tests.fuzz.state`)."""
