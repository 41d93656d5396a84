"""Where embarrassingly parallel work runs (pool workers die with their parent:
:mod:`~easerve_core.parallel.lifeline`)."""
