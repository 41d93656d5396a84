"""The paper's evaluation in the simulator: setups, studies, HAS choices, figures, report.

Entry point: :func:`easerve.experiments.reproduce.reproduce` (``easerve
reproduce``). Each study is a function returning a tidy DataFrame
(:mod:`.studies`); :mod:`.report` puts them beside the paper's figures
(:mod:`.paper`). Notebooks read the CSVs a run writes.
"""
