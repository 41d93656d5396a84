"""One request on an idle cluster: every latency is the profile's, to the microsecond."""

from __future__ import annotations

import math

import pytest

from easerve_core import Cluster, Deployment, Modality, Request, StageGroup
from easerve_core.plan import assemble
from sim import simulate
from sim.options import Scheduling, SimOptions
from tests.sim.conftest import AffineProfile

PROFILE = AffineProfile(encode_base_s=0.012, encode_per_token_s=3e-6, prefill_base_s=0.02,
                        prefill_per_token_s=4e-5, decode_base_s=0.004, decode_per_ctx_s=2e-8,
                        embed_bytes_per_token=14336, kv_bytes_per_token=245760)
CLUSTER = Cluster(gpu="test-gpu", num_gpus=8, link_bytes_per_s=25e9, link_latency_s=1e-5, num_links=4)
REQUEST = Request(request_id=7, arrival_s=1.5, modality=Modality.IMAGE, prompt_tokens=300,
                  output_tokens=129, mm_tokens_per_item=(2928,))


def _deployment(remote_fraction: float) -> Deployment:
    return Deployment(encode=StageGroup(num_workers=2), prefill=StageGroup(num_workers=1, tp=2),
                      decode=StageGroup(num_workers=2, tp=2), max_encode_batch=1,
                      remote_fraction=remote_fraction)


def _expected_tpot(ctx: int, out: int, kv_s: float) -> float:
    steps = [PROFILE.decode_step_s(1, ctx + 1 + j) for j in range(out - 1)]
    return (kv_s + sum(steps)) / (out - 1)


@pytest.mark.parametrize("remote_fraction", [1.0, 0.0])
def test_ttft_and_tpot_are_the_profile_latencies(remote_fraction: float) -> None:
    rec = simulate(assemble(_deployment(remote_fraction), [REQUEST], cluster=CLUSTER, profile=PROFILE),
                   PROFILE).records.iloc[0]
    seq = REQUEST.input_tokens
    encode = PROFILE.encode_s([2928])
    embed = CLUSTER.link_latency_s + PROFILE.embed_bytes(2928) / CLUSTER.link_bytes_per_s
    transfer = embed if remote_fraction == 1.0 else 0.0
    ttft = encode + transfer + PROFILE.prefill_s([seq])
    kv = CLUSTER.link_latency_s + PROFILE.kv_bytes(seq) / CLUSTER.link_bytes_per_s
    assert rec["status"] == "ok"
    assert rec["route"] == ("remote" if remote_fraction == 1.0 else "local")
    assert rec["encode_start_s"] == REQUEST.arrival_s
    assert rec["encode_end_s"] - rec["arrival_s"] == pytest.approx(encode, abs=1e-6)
    assert rec["first_token_s"] - rec["arrival_s"] == pytest.approx(ttft, abs=1e-6)
    tpot = (rec["finish_s"] - rec["first_token_s"]) / (REQUEST.output_tokens - 1)
    assert tpot == pytest.approx(_expected_tpot(seq, REQUEST.output_tokens, kv), abs=1e-6)


def test_tpot_equals_the_decode_step() -> None:
    """With a constant step and a negligible KV transfer, TPOT is the step."""
    profile = AffineProfile(decode_base_s=0.0375, kv_bytes_per_token=1)
    req = Request(request_id=0, arrival_s=0.0, modality=Modality.AUDIO, prompt_tokens=10,
                  output_tokens=1025, mm_tokens_per_item=(100,))
    rec = simulate(assemble(_deployment(1.0), [req], cluster=CLUSTER, profile=profile),
                   profile).records.iloc[0]
    tpot = (rec["finish_s"] - rec["first_token_s"]) / (req.output_tokens - 1)
    assert math.isclose(tpot, 0.0375, abs_tol=1e-6)
    assert rec["encode_batch_size"] == 1
    assert rec["encode_worker"] == 0 and rec["prefill_worker"] == 0 and rec["decode_worker"] == 0


@pytest.mark.parametrize("chunked", [True, False])
def test_aggregated_single_request(chunked: bool) -> None:
    """Chunked (the default): the 3,228-token prefill runs as a 2,048-token chunk, which encodes
    the image first (an item larger than the encoder budget runs alone), then the 1,180 left.
    Prefill-first: one encode and one prefill."""
    dep = Deployment(encode=StageGroup(num_workers=0), prefill=StageGroup(num_workers=0),
                     decode=StageGroup(num_workers=4, tp=2), architecture="aggregated")
    options = SimOptions(scheduler=Scheduling(chunked_prefill=chunked))
    rec = simulate(assemble(dep, [REQUEST], cluster=CLUSTER, profile=PROFILE), PROFILE,
                   options=options).records.iloc[0]
    seq = REQUEST.input_tokens
    chunks = [2048, seq - 2048] if chunked else [seq]
    ttft = PROFILE.encode_s([2928]) + sum(PROFILE.prefill_s([c]) for c in chunks)
    assert rec["first_token_s"] - rec["arrival_s"] == pytest.approx(ttft, abs=1e-9)
    tpot = (rec["finish_s"] - rec["first_token_s"]) / (REQUEST.output_tokens - 1)
    assert tpot == pytest.approx(_expected_tpot(REQUEST.input_tokens, REQUEST.output_tokens, 0.0),
                                 abs=1e-6)
