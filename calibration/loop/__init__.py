"""The calibration loop (DESIGN.md §7, docs/calibration.md): measure, fit, simulate, run live, compare, refit.

* :mod:`calibration.loop.measure`: the profiling run of ``easerve calibrate`` (imports torch and live);
* :mod:`calibration.loop.samples`: points -> samples -> fitted profile, held-out check, SM-share table;
* :mod:`calibration.loop.host`: the host model a CPU profile carries, as simulator knobs;
* :mod:`calibration.loop.refit`: live stage logs -> samples, with the host contention taken out;
* :mod:`calibration.loop.stalls`, :mod:`calibration.loop.warmup`: each process's one-off pause and
  its first batches' warm-up in live stage logs, fitted as host-model fields;
* :mod:`calibration.loop.fidelity`: sim-vs-live tables, bars, Kendall tau, distribution plots;
* :mod:`calibration.loop.runner`: one deployment and workload in both engines.

Importing this package imports none of them (``measure`` and ``runner`` load torch).
"""
