"""Shared test doubles for the calibration-loop tests."""

from __future__ import annotations

from easerve_core import Cluster


class Flat:
    """Encode 0.1 s per item, prefill 0.05 s, decode steps 0.01 s; no bytes."""

    def encode_s(self, items, sm_share=1.0):
        return 0.1 * len(items)

    def prefill_s(self, seq_lens, sm_share=1.0):
        return 0.05 * len(seq_lens)

    def decode_step_s(self, batch_size, context_tokens):
        return 0.01

    def embed_bytes(self, mm_tokens):
        return 0

    def kv_bytes(self, num_tokens):
        return 0


def stage_point(profile, group, i):
    """The ``i``-th logged batch of a synthetic worker of ``group``: (stage, batch, tokens, latency).

    An encode process alternates encode batches and local prefills, a prefill
    process runs prefills, a decode process steps a batch of two whose context grows.
    """
    if group == "decode":
        return "decode", 2, 200 + 2 * i, profile.decode_step_s(2, 200 + 2 * i)
    if group == "encode" and i % 2:
        return "prefill", 1, 60, profile.prefill_s([60])
    if group == "encode":
        return "encode", 2, 96, profile.encode_s([48, 48])
    return "prefill", 1, 80, profile.prefill_s([80])


CLUSTER = Cluster(gpu="cpu", num_gpus=8, link_bytes_per_s=1e12, link_latency_s=0.0, num_links=8)


def stage_durations(records):
    """Per request (in record order): seconds in Encode, in Prefill (start to first token), in Decode."""
    encode = (records["encode_end_s"] - records["encode_start_s"]).to_numpy()
    prefill = (records["first_token_s"] - records["prefill_start_s"]).to_numpy()
    decode = (records["finish_s"] - records["first_token_s"]).to_numpy()
    return encode, prefill, decode


#: a tiny live experiment of the calibration-loop tests (one worker per stage, Qwen2-Audio tiny)
TINY_CONFIG = """
seed = 0
[model]
name = "qwen2-audio"
size = "tiny"
[cluster]
gpu = "cpu"
num_gpus = {num_gpus}
{profile}
[deployment]
encode = {{ num_workers = 1, tp = 1 }}
prefill = {{ num_workers = 1, tp = 1 }}
decode = {{ num_workers = 1, tp = 1 }}
max_encode_batch = 2
remote_fraction = 0.5
sm_sharing = "dynamic"
max_num_decode_seqs = 8
[workload]
mix = "ultravox-audio"
arrival = "poisson"
rate_hz = {rate_hz}
num_requests = {num_requests}
prompt_tokens = [8, 16]
output_tokens = [3, 6]
[live]
mm_token_scale = 0.25
num_threads = 1
encode_threads = 1
trial_timeout_s = 60.0
shutdown_timeout_s = 2.0
"""


def tiny_config(*, num_gpus: int = 8, rate_hz: float = 20.0, num_requests: int = 24, profile=None) -> str:
    """:data:`TINY_CONFIG` filled in (``profile``: a profile path for its ``[profile]`` table)."""
    table = f'[profile]\npath = "{profile}"' if profile is not None else ""
    return TINY_CONFIG.format(num_gpus=num_gpus, rate_hz=rate_hz, num_requests=num_requests, profile=table)
