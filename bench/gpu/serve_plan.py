"""What the serving check of issue 20 runs (the plan), and the files it returns.

:func:`full_plan` is the H200 run: the ``small`` Qwen2-Audio, green-context
partitions, about 420 s of steps inside the wrapper's 480 s limit.
:func:`dry_plan` is the same script on the CPU with the ``tiny`` model, the
``cpu-threads`` backend and a handful of requests per trial, so that the
whole path (configs, commands, time guards, parsing, packing, post-processing)
runs in ``make test``.

Every step is an ``easerve`` command line or a ``python -m`` module
(bench/gpu/serve_steps.py) with a cap in seconds; a step starts only when the
total budget still holds its ``min_s``, and runs for at most its cap or what
is left of the budget less ``reserve_s`` (kept for packing the files).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: CSVs the check writes under $OUT (columns documented in bench/gpu/README.md)
SCHEMAS: Mapping[str, tuple[str, ...]] = {
    "serve.csv": ("mode", "repeat", "index", "stage", "start_s", "end_s", "batch_size", "tokens",
                  "sm_share", "lane", "lane_sms", "total_sms", "overlaps_encode"),
    "fidelity.csv": ("round", "deployment", "metric", "sim", "live", "rel_error", "live_spread_frac",
                     "repeats"),
    "encode_call.csv": ("family", "size", "device", "item_tokens", "batch_size", "reps", "wall_ms",
                        "kernel_ms", "overhead_ms", "overhead_frac"),
}

#: every file the check can return: at most 8, one level deep (the device tool's limits)
OUT_FILES = ("summary.json", "log.txt", "profile.json", "profile-refit.json", "runs.tgz", *SCHEMAS)

#: the sharing modes of the serving ablation (section a), in run order
SERVE_MODES = ("dynamic", "static", "time-slice")

#: steps in run order; each has a cap and a minimum in the plan's ``caps_s`` / ``min_s``
STEPS = ("calibrate", "serve", "fidelity", "refit", "heldout", "encode_call", "kernels", "search")


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchArgs:
    """One ``easerve search ... --confirm`` invocation (section c)."""

    config: str  # a path, or "" for the config the dry run writes (tiny model, its own profile)
    rate_hz: float
    trials: int
    confirm: int
    repeats: int
    baselines: str
    refit: bool = True
    num_requests: int | None = None  # fewest requests per simulated trial (None: search's default)

    def argv(self, config: str, out: str) -> list[str]:
        return ["search", config, "--rate", f"{self.rate_hz:g}", "--trials", str(self.trials),
                "--confirm", str(self.confirm), "--repeats", str(self.repeats),
                "--baselines", self.baselines, *(["--refit"] if self.refit else []),
                *(["--min-requests", str(self.num_requests)] if self.num_requests else []), "--out", out]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServePlan:
    """Every knob of one serving check (sizes, rates, trials, caps in seconds)."""

    device: str
    size: str
    gpu_label: str
    base_config: str
    partition_backend: str
    total_budget_s: float
    caps_s: Mapping[str, float]
    min_s: Mapping[str, float]
    reserve_s: float = 10.0
    model: str = "qwen2-audio"
    calibrate_quick: bool = False
    calibrate_reps: int | None = None
    #: serve and validate on this profile if calibrating fails (recorded; "" for none)
    fallback_profile: str = "calibration/profiles/h200/qwen2-audio-small--h200--refit.json"
    # the live executor's guards in every config written (a stuck start must not eat the budget)
    live_startup_timeout_s: float = 60.0
    live_trial_timeout_s: float = 40.0
    # what a validate step is estimated to take: its start, then per trial a start, the arrivals, a drain
    step_overhead_s: float = 15.0
    trial_start_s: float = 8.0
    trial_drain_s: float = 2.0
    # section a: EAServe with local Prefill (s < 1) under each partitioner, open loop near capacity
    serve_modes: tuple[str, ...] = SERVE_MODES
    serve_batch: int = 4
    serve_remote_fraction: float = 0.5
    capacity_probe_rate_hz: float = 400.0  # the simulator at an overload, to read its capacity
    capacity_frac: float = 0.8  # the live rate as a fraction of the simulated capacity
    serve_rate_bounds_hz: tuple[float, float] = (20.0, 300.0)
    serve_arrivals_s: float = 5.0  # the span of the arrivals: num_requests = rate x span
    serve_requests_bounds: tuple[int, int] = (200, 600)
    serve_repeats: int = 1
    serve_fallback_rate_hz: float = 60.0  # when the simulated capacity cannot be read
    # section b: fidelity on new trials, then (if a bar is missed) refit and a further new set
    fidelity_specs: tuple[str, ...] = ("b1-s1-none", "b4-s1-none", "b4-s0.5-dynamic")
    fidelity_repeats: int = 2
    fidelity_rate_hz: float | None = 40.0  # None: the base config's (20); 40 halves the trials' time
    fidelity_num_requests: int | None = None  # None: the base config's (200)
    heldout_seed: int = 1  # the further set's workload seed (the first set uses the config's)
    heldout_repeats: int = 1
    refit_when: str = "missed"  # or "always" (the dry run walks the whole path)
    # section c: HAS's live confirmation; the full command if the time holds it, else the reduced one
    search_full: SearchArgs = field(default_factory=lambda: SearchArgs(
        config="configs/small_qwen2audio_confirm_h200.toml", rate_hz=40.0, trials=30, confirm=3,
        repeats=2, baselines="dynamo,vllm"))
    search_reduced: SearchArgs = field(default_factory=lambda: SearchArgs(
        config="configs/small_qwen2audio_confirm_h200.toml", rate_hz=40.0, trials=30, confirm=2,
        repeats=1, baselines="dynamo"))
    search_full_min_s: float = 200.0
    # section d: the live encode call's cost beyond its kernels
    call_families: tuple[str, ...] = ("qwen2-audio", "llava-next", "qwen2.5-vl")
    call_item_tokens: tuple[int, ...] = (4, 48)
    call_reps: int = 20
    # the kernels step: GEMM and attention timed against the measured and fitted prices (bench/gpu/kernels.py)
    kernels_dry_run: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        if not self.total_budget_s > 0:
            raise ValueError(f"total_budget_s must be > 0, got {self.total_budget_s!r}")
        for name in ("caps_s", "min_s"):
            missing = sorted(set(STEPS) - set(getattr(self, name)))
            if missing:
                raise ValueError(f"{name} lacks steps {missing}; steps: {', '.join(STEPS)}")
        if self.refit_when not in ("missed", "always"):
            raise ValueError(f"refit_when must be 'missed' or 'always', got {self.refit_when!r}")
        unknown = sorted(set(self.serve_modes) - set(SERVE_MODES))
        if unknown:
            raise ValueError(f"unknown serve_modes {unknown}; known: {', '.join(SERVE_MODES)}")
        if not 0.0 < self.serve_remote_fraction < 1.0:
            raise ValueError(f"serve_remote_fraction must be in (0, 1): local Prefill needs s < 1, "
                             f"got {self.serve_remote_fraction!r}")

    def estimate_s(self, trials: int, rate_hz: float, num_requests: int) -> float:
        """Seconds a validate step of ``trials`` live trials is expected to take (its ``min_s``)."""
        per_trial = self.trial_start_s + num_requests / rate_hz + self.trial_drain_s
        return self.step_overhead_s + trials * per_trial

    def serve_spec(self, mode: str) -> str:
        """The ``validate --sweep`` SPEC of one serving mode (``b4-s0.5-dynamic``)."""
        return f"b{self.serve_batch}-s{self.serve_remote_fraction:g}-{mode}"


def full_plan(gpu_label: str) -> ServePlan:
    """The H200 run: steps of at most 420 s after start-up (sum of caps 485 s; the total wins).

    Estimated from the live runs of 2026-11-30 (calibrate 47 s without the
    device-sharing test, a 200-request trial at 20 req/s about 20 s with its
    start-up): calibrate ~75, serve ~55, fidelity ~110, refit ~20, held-out
    ~60, encode call ~15, kernels ~15 (torch's import and the kernel tables'
    read, then a second of timing), leaving ~55 s for the reduced search.
    """
    caps = {"calibrate": 110.0, "serve": 80.0, "fidelity": 130.0, "refit": 30.0, "heldout": 80.0,
            "encode_call": 25.0, "kernels": 30.0,
            "search": 240.0}
    mins = {"calibrate": 60.0, "serve": 30.0, "fidelity": 40.0, "refit": 10.0, "heldout": 30.0,
            "encode_call": 10.0, "kernels": 10.0,
            "search": 45.0}
    return ServePlan(device="cuda", size="small", gpu_label=gpu_label,
                     base_config="configs/small_qwen2audio_h200.toml", partition_backend="green-context",
                     total_budget_s=420.0, caps_s=caps, min_s=mins)


def dry_plan() -> ServePlan:
    """The CPU rehearsal: tiny model, a few requests per trial, one repeat, every step walked.

    Fidelity and the further set run two deployments, not three (validate
    needs two; each live trial costs the 2-core test machine about 2 s).
    """
    caps = dict.fromkeys(STEPS, 40.0)
    mins = dict.fromkeys(STEPS, 1.0)
    # one candidate cannot refit (a stage needs 4 samples); the refit's own test is test_confirm.py
    tiny_search = SearchArgs(config="", rate_hz=20.0, trials=3, confirm=1, repeats=1, baselines="",
                             refit=False, num_requests=16)
    return ServePlan(device="cpu", size="tiny", gpu_label="cpu-dry-run",
                     base_config="configs/tiny_qwen2audio_cpu.toml", partition_backend="cpu-threads",
                     total_budget_s=150.0, caps_s=caps, min_s=mins, reserve_s=2.0, fallback_profile="",
                     calibrate_quick=True, calibrate_reps=1, live_startup_timeout_s=60.0,
                     live_trial_timeout_s=30.0, step_overhead_s=1.0, trial_start_s=2.0, trial_drain_s=0.5,
                     capacity_probe_rate_hz=200.0,
                     serve_rate_bounds_hz=(10.0, 40.0), serve_arrivals_s=0.3, serve_requests_bounds=(6, 8),
                     fidelity_specs=("b1-s1-none", "b4-s0.5-dynamic"), fidelity_repeats=1,
                     fidelity_rate_hz=40.0,
                     fidelity_num_requests=6, refit_when="always",
                     search_full=tiny_search, search_reduced=tiny_search, search_full_min_s=1.0,
                     call_families=("qwen2-audio",), call_item_tokens=(4,), call_reps=2,
                     kernels_dry_run=True)
