"""The GPU path of the live executor: SM partitions, real-size stage modules, timing.

* :mod:`live.gpu.lanes`: stream lanes, SM levels and the lane lookup (pure;
  :func:`~live.gpu.lanes.null_pool` is the CPU stand-in).
* :mod:`live.gpu.green`: CUDA green contexts built once per SM level through
  ``cuda.bindings`` (imported lazily), and :class:`~live.gpu.green.GreenContextBackend`,
  the ``live.partition.Backend`` that turns a share into a stream.
* :mod:`live.gpu.realsize` / :mod:`live.gpu.realsize_lm`: encoders and a few
  LM layers at published sizes (``full``) or tiny (``tiny``), random weights.
* :mod:`live.gpu.timing`: clocks, deadlines, repeated timing, per-layer marks.

Everything here imports without CUDA; bench/gpu/run_device_check.py is the
one script that exercises it on a device (bench/gpu/README.md).
"""
