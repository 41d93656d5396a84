"""The sections of the serving check (bench/gpu/serve_check.py), over one :class:`Check`.

:class:`Check` owns the run's state: the plan, the deadline, the runner, the
work folder (configs and every step's output) and ``$OUT`` (through
:class:`bench.gpu.plan.Sink`). Each section writes configs, runs its steps
(skipped when the budget no longer holds their estimated time), reads their
outputs (bench/gpu/serve_read.py) into rows and ``summary.json``, and packs
``$OUT`` again, so whatever ends the run, the files say how far it got.

The module stays past 300 lines because its sections are methods of :class:`Check` that
share its state (the deadline, the runner, the sink) and run in order.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import platform
import shutil
import tarfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.gpu import serve_read as read
from bench.gpu.plan import Sink
from bench.gpu.serve_configs import capacity_rate, live_changes, write_config
from bench.gpu.serve_plan import SCHEMAS, STEPS, SearchArgs, ServePlan
from bench.gpu.serve_steps import Runner, StepResult
from live.gpu.lanes import LanePool, null_pool
from live.gpu.timing import Deadline

ROOT = Path(__file__).resolve().parents[2]
#: step folders packed into runs.tgz, in this order (the search's study.db stays out)
PACKED = ("serve", "fidelity", "heldout", "search")
VERSIONS = ("torch", "transformers", "numpy", "pandas", "scipy", "simpy", "optuna", "pyarrow",
            "cuda-bindings")


def gpu_label() -> str | None:
    """``h200`` on an H200, the device name made file-safe elsewhere; None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(0)
    return "h200" if "H200" in name else "".join(c if c.isalnum() else "-" for c in name.lower())


class Check:
    """One serving check (see the module docstring)."""

    def __init__(self, plan: ServePlan, *, out: Path, work: Path, runner: Runner, deadline: Deadline) -> None:
        self.plan, self.out, self.work, self.runner, self.deadline = plan, out, work, runner, deadline
        self.sink = Sink(out, schemas=SCHEMAS)
        self.summary = self.sink.summary
        self.summary.update(steps={}, fidelity={})
        self.lanes: LanePool = null_pool()

    # -- the frame ------------------------------------------------------------
    def start(self) -> None:
        versions = {}
        for pkg in VERSIONS:
            try:
                versions[pkg] = md.version(pkg)
            except md.PackageNotFoundError:
                versions[pkg] = None
        self.summary["env"] = {"python": platform.python_version(), "versions": versions,
                               "device": self.plan.device, "gpu_label": self.plan.gpu_label,
                               "runner": self.runner.mode,
                               "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.summary["plan"] = _plain(self.plan)
        self._guard("levels", self._levels)
        self.sink.write_summary()

    def _levels(self) -> None:
        """The SM levels this device builds (the encode worker builds the same), to read lanes back."""
        if self.plan.device != "cuda":
            self.summary["levels"] = {"source": "null pool: nominal SMs (no device)",
                                      "rows": self.lanes.rows()}
            return
        import torch

        from live.gpu.green import GreenContextPool

        props = torch.cuda.get_device_properties(0)
        self.summary["env"].update(device_name=props.name, sm_count=props.multi_processor_count,
                                   torch_cuda=torch.version.cuda, memory_bytes=props.total_memory)
        pool = GreenContextPool.build()
        try:
            self.lanes = LanePool.from_rows(pool.lanes.rows())
            self.summary["levels"] = {"source": "green contexts built by this process",
                                      "rows": pool.lanes.rows(), "report": pool.report}
        finally:
            pool.close()

    def _guard(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run a piece of this process's own work; record an error and go on."""
        try:
            return fn()
        except Exception as exc:
            self.summary["errors"][name] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}"
            self.runner.log(f"{name} FAILED: {type(exc).__name__}: {exc}")
            return None

    def _step(self, name: str, module: str, argv: Sequence[str], *, need_s: float = 0.0,
              key: str | None = None) -> StepResult | None:
        """Run a step if the budget holds ``need_s`` (at least its ``min_s``); at most its cap."""
        key = key or name
        left = self.deadline.left_s() - self.plan.reserve_s
        need = min(self.plan.caps_s[name], max(self.plan.min_s[name], need_s))
        if left < need:
            self.summary["steps"][key] = {"ok": False, "skipped": f"{left:.0f} s left, needs {need:.0f} s"}
            self.runner.log(f"{key}: skipped ({left:.0f} s left, needs {need:.0f} s)")
            self.sink.write_summary()
            return None
        result = self.runner.run(key, module, argv, min(self.plan.caps_s[name], left))
        self.summary["steps"][key] = result.to_dict()
        self.sink.write_summary()
        return result

    def pack(self) -> None:
        """runs.tgz of every step folder so far (rewritten whole), then summary.json."""
        tmp = self.out / ".runs.tgz.tmp"
        with tarfile.open(tmp, "w:gz") as tar:
            for toml in sorted(self.work.glob("*.toml")):
                tar.add(toml, arcname=f"configs/{toml.name}")
            for name in PACKED:
                if (self.work / name).is_dir():
                    tar.add(self.work / name, arcname=name, filter=_no_study_db)
        tmp.replace(self.out / "runs.tgz")
        self.sink.write_summary()

    def finish(self, *, wall_s: float) -> None:
        self._guard("pack", self.pack)
        self.summary.update(wall_s=round(wall_s, 1),
                            finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            files=sorted(str(p.relative_to(self.out)) for p in self.out.rglob("*")
                                         if p.is_file() and not p.name.startswith(".")))
        self.sink.write_summary()
        self.sink.close()
        for name, s in self.summary["steps"].items():
            state = "skipped" if "skipped" in s else ("ok" if s["ok"] else f"exit {s['rc']}")
            self.runner.log(f"  {name:<14} {state:<10} {s.get('secs', 0):7.1f} s")

    def all_ok(self) -> bool:
        steps = self.summary["steps"].values()
        return not self.summary["errors"] and all(s.get("ok") or "skipped" in s for s in steps)

    # -- configs --------------------------------------------------------------
    def _config(self, name: str, profile: Path | None, note: str, *, seed: int | None = None,
                workload: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None) -> Path:
        plan = self.plan
        changes = live_changes(plan, profile)
        changes["live"].update(startup_timeout_s=plan.live_startup_timeout_s,
                               trial_timeout_s=plan.live_trial_timeout_s)
        if seed is not None:
            changes["seed"] = seed
        if workload:
            changes["workload"] = {k: v for k, v in workload.items() if v is not None}
        if cluster:
            changes["cluster"] = cluster
        return write_config(ROOT / plan.base_config, self.work / f"{name}.toml", changes, note=note)

    def _validate(self, name: str, config: Path, profile: Path, specs: Sequence[str], repeats: int, *,
                  need_s: float, key: str | None = None) -> Path | None:
        dest = self.work / (key or name)
        argv = ["validate", str(config), "--profile", str(profile), "--out", str(dest), "--repeats",
                str(repeats), "--host-cores", "profile", "--device", self.plan.device, "--sweep", *specs]
        result = self._step(name, "easerve", argv, need_s=need_s, key=key)
        return dest if result is not None and (dest / "fidelity.csv").exists() else None

    # -- sections -------------------------------------------------------------
    def calibrate(self) -> Path | None:
        plan, dest = self.plan, self.work / "profile.json"
        argv = ["calibrate", "--model", plan.model, "--size", plan.size, "--device", plan.device,
                "--out", str(dest), *(["--quick"] if plan.calibrate_quick else []),
                *(["--reps", str(plan.calibrate_reps)] if plan.calibrate_reps else [])]
        self._step("calibrate", "easerve", argv)
        if dest.exists():
            shutil.copyfile(dest, self.out / "profile.json")
            self.summary["calibrate"] = profile_facts(dest)
            return dest
        if plan.fallback_profile:  # serve and validate still run, on an earlier profile (said loudly)
            self.summary["calibrate"] = {"fallback_profile": plan.fallback_profile}
            return ROOT / plan.fallback_profile
        return None

    def serve(self, profile: Path) -> None:
        plan = self.plan
        probe = self._config("serve", profile, "serving ablation (issue 20 a)")
        rate = self._guard("capacity", lambda: capacity_rate(plan, probe, profile))
        if rate is None:
            rate = {"rate_hz": plan.serve_fallback_rate_hz, "num_requests": plan.serve_requests_bounds[0],
                    "sim_capacity_rps": None}
        self.summary["capacity"] = rate
        config = self._config("serve", profile, f"serving ablation (issue 20 a) at {rate['rate_hz']} req/s",
                              workload={"rate_hz": rate["rate_hz"], "num_requests": rate["num_requests"]})
        specs = [plan.serve_spec(m) for m in plan.serve_modes]
        need = plan.estimate_s(len(specs) * plan.serve_repeats, rate["rate_hz"], rate["num_requests"])
        folder = self._validate("serve", config, profile, specs, plan.serve_repeats, need_s=need)
        if folder is not None:
            self._guard("serve:read", lambda: self._read_serve(folder, specs))
        self.pack()

    def _read_serve(self, folder: Path, specs: Sequence[str]) -> None:
        for row in read.fidelity_rows(folder, "serve"):
            self.sink.row("fidelity.csv", row)
        modes: dict[str, Any] = {}
        for mode, spec in zip(self.plan.serve_modes, specs, strict=True):
            rows = read.split_rows(folder, spec, mode, self.lanes)
            for row in rows:
                self.sink.row("serve.csv", row)
            modes[mode] = {"deployment": spec, **read.mode_metrics(folder, spec),
                           "split": read.split_summary(rows)}
        self.summary["serve"] = {"modes": modes, "bars": read.bars(folder)}

    def fidelity(self, profile: Path) -> None:
        plan = self.plan
        workload = {"rate_hz": plan.fidelity_rate_hz, "num_requests": plan.fidelity_num_requests}
        config = self._config("fidelity", profile, "fidelity on new trials (issue 20 b)", workload=workload)
        rate = plan.fidelity_rate_hz or 20.0
        n = plan.fidelity_num_requests or 200
        specs = list(plan.fidelity_specs)
        repeats = plan.fidelity_repeats
        if self.deadline.left_s() - plan.reserve_s < plan.estimate_s(len(specs) * repeats, rate, n):
            repeats = 1  # fewer repeats rather than no new trials
        folder = self._validate("fidelity", config, profile, specs, repeats,
                                need_s=plan.estimate_s(len(specs) * repeats, rate, n))
        if folder is None:
            return self.pack()
        first = self._record_round("calibrated", folder, profile, repeats)
        self.pack()
        if first and plan.refit_when == "missed":
            return None
        refit = self.work / "profile-refit.json"
        runs = sorted(str(p) for p in folder.glob("runs/*/live-*"))
        self._step("refit", "easerve", ["calibrate", "--from-runs", *runs, "--profile", str(profile),
                                        "--out", str(refit)])
        if not refit.exists():
            return self.pack()
        shutil.copyfile(refit, self.out / "profile-refit.json")
        heldout = self._config("heldout", profile, f"further new trials, workload seed {plan.heldout_seed}",
                               seed=plan.heldout_seed, workload=workload)
        need = plan.estimate_s(len(specs) * plan.heldout_repeats, rate, n)
        folder = self._validate("heldout", heldout, refit, specs, plan.heldout_repeats, need_s=need)
        if folder is not None:
            self._record_round("refit", folder, refit, plan.heldout_repeats)
        self.pack()
        return None

    def _record_round(self, name: str, folder: Path, profile: Path, repeats: int) -> bool:
        for row in read.fidelity_rows(folder, name):
            self.sink.row("fidelity.csv", row)
        checks = read.bars(folder)
        met = read.bars_met(checks)
        self.summary["fidelity"][name] = {"bars": checks, "met": met, "repeats": repeats,
                                          "profile": profile.name, "folder": folder.name}
        return met

    def encode_call(self) -> None:
        plan = self.plan
        argv = ["--out", str(self.out / "encode_call.csv"), "--device", plan.device, "--size", plan.size,
                "--families", *plan.call_families, "--item-tokens", *map(str, plan.call_item_tokens),
                "--reps", str(plan.call_reps)]
        self._step("encode_call", "bench.gpu.encode_call", argv)

    def kernels(self) -> None:
        """GEMM and attention on the device against the measured and fitted prices, into the summary."""
        dest = self.work / "kernels.json"
        argv = ["--out", str(dest), *(["--dry-run"] if self.plan.kernels_dry_run else [])]
        self._step("kernels", "bench.gpu.kernels", argv)
        if dest.exists():
            self.summary["kernels"] = json.loads(dest.read_text())
            self.sink.write_summary()

    def search(self) -> None:
        plan = self.plan
        left = self.deadline.left_s() - plan.reserve_s
        args = plan.search_full if left >= plan.search_full_min_s else plan.search_reduced
        config = args.config or str(self._search_config(args))
        dest = self.work / "search"
        self._step("search", "easerve", args.argv(config, str(dest)))
        self.summary["search"] = {"args": _plain(args), "full": args == plan.search_full,
                                  **(self._guard("search:read", lambda: confirm_facts(dest)) or {})}
        self.pack()

    def _search_config(self, args: SearchArgs) -> Path:
        """The dry run's: the tiny base on its calibrated profile, three worker slots, a few requests."""
        profile = self.work / "profile.json"
        return self._config("search", profile if profile.exists() else None, "HAS confirmation (dry run)",
                            workload={"rate_hz": args.rate_hz,
                                      "num_requests": self.plan.fidelity_num_requests},
                            cluster={"num_gpus": 3})


def profile_facts(path: Path) -> dict[str, Any]:
    """What the summary keeps of a calibrated profile: fit, table, device sharing."""
    doc = json.loads(path.read_text())
    params = doc.get("params", {})
    host = params.get("host", {})
    raw = params.get("measured", {}).get("host_rows", {})
    return {"gpu": doc.get("gpu"), "fit_error": doc.get("fit_error"),
            "held_out_error": params.get("held_out_error"), "sm_share_table": doc.get("sm_share_table"),
            "num_host_cores": host.get("num_host_cores"), "device_sharing": raw.get("device_sharing"),
            "contention": raw.get("contention")}


def confirm_facts(folder: Path) -> dict[str, Any]:
    """The confirmation's ranking and errors, before and after its refit (if it got that far)."""
    path = folder / "confirm" / "summary.json"
    if not path.exists():
        return {"confirm": None}
    data = json.loads(path.read_text())
    keep = ("ranking", "errors")
    return {"confirm": {"command": data.get("command"), "wall_s": data.get("wall_s"),
                        "interrupted": data.get("interrupted"),
                        "before_refit": {k: (data.get("before_refit") or {}).get(k) for k in keep},
                        "after_refit": {k: (data.get("after_refit") or {}).get(k) for k in keep}
                        if data.get("after_refit") else None}}


def _plain(obj: Any) -> Any:
    from dataclasses import asdict, is_dataclass

    return asdict(obj) if is_dataclass(obj) and not isinstance(obj, type) else obj


def _no_study_db(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if info.name.endswith(("study.db", "study.db-journal")) else info


__all__ = ["STEPS", "Check", "confirm_facts", "gpu_label", "profile_facts"]
