"""The runtime: where work runs, where studies are stored, and file I/O, kept out of the pure core.

:mod:`runtime.parallel` runs independent tasks in this process, on a local
pool of processes that die with their parent (ctypes ``prctl``), or on Ray.
:mod:`runtime.has` opens HAS's Optuna storages and drives a search on them.
:mod:`runtime.files`, :mod:`runtime.configs`, :mod:`runtime.traces`,
:mod:`runtime.profiles` and :mod:`runtime.results` read and write the files
(configs, traces, profiles, run folders) whose data the core parses.
The front door (``easerve``), ``sim``, ``live`` and ``calibration`` may import
it; ``easerve_core`` never does (tests/core/test_purity.py). Layers:
docs/architecture.md.
"""
