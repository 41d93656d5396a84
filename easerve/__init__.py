"""easerve: encode-aware disaggregated serving of multimodal LLMs.

The command-line front door lives in :mod:`easerve.cli`; the library lives
in the layers of DESIGN.md §3: ``easerve_core`` (pure policies and the shared
vocabulary), ``sim`` (SimPy engine), ``live`` (transformers engine) and
``calibration`` (specs, roofline, fitting).
"""

__version__ = "0.1.0"
