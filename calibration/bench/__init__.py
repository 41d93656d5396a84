"""Calibration from a real engine's serving benchmark (docs/calibration.md §6).

A benchmark gives per-request end-to-end timings (TTFT, inter-token
latencies, input and output lengths), not stage logs. :mod:`.readers` reads
the three tools' files into one :class:`~calibration.bench.readers.BenchRun`;
:mod:`.compare` simulates the config's deployment on the benchmark's requests
and rate and tabulates the errors; :mod:`.refit` fits what end-to-end
timings determine (one scale on the stages before the first token, one on the
decode step) and writes it as a ``scaled`` profile (:mod:`calibration.scaled`).
"""
