"""Pure pieces of the live executor: options, ledger book-keeping, profiling smoke test."""

from __future__ import annotations

import subprocess
import sys

import pytest

from easerve_core.request import Modality, Request
from live.events import EVENT_TYPES, At, Done, Sent, StageRow, Stamped, Stamps
from live.ledger import Ledger, utilization
from live.options import LiveOptions
from live.profiling import profile_stages
from live.zoo import ModelSpec


def _requests(n: int) -> list[Request]:
    return [Request(request_id=i, arrival_s=0.1 * i, modality=Modality.IMAGE, prompt_tokens=8,
                    output_tokens=4, mm_tokens_per_item=(16,)) for i in range(n)]


def test_options_validate_and_name_the_field():
    assert LiveOptions.from_dict(None).num_threads == 1
    with pytest.raises(ValueError, match="unknown live field"):
        LiveOptions.from_dict({"threads": 2})
    with pytest.raises(ValueError, match=r"live\.trial_timeout_s"):
        LiveOptions(trial_timeout_s=0)
    with pytest.raises(ValueError, match=r"the SM-share table is the plan's: \[profile\] sm_share_table"):
        LiveOptions.from_dict({"sm_share_table": {"1": 0.5}})


def test_ledger_follows_hand_offs_and_fails_what_a_dead_worker_held():
    ledger = Ledger(_requests(4))
    ledger.set_t0(100.0)
    for rid in range(4):
        ledger.issue(rid, ("encode", 0))
    ledger.apply(Sent(worker=("encode", 0), request_id=0, to=("prefill", 0)))
    ledger.apply(At(worker=("prefill", 0), request_id=0))
    ledger.apply(Sent(worker=("encode", 0), request_id=1, to=("prefill", 0)))
    # an out-of-order "at" from an earlier stage does not move a request back
    ledger.apply(At(worker=("encode", 0), request_id=0))
    ledger.apply(Done(worker=("decode", 0), request_id=2, finish_s=101.5, tokens=(1, 2),
                      stamps=Stamps(first_token_s=101.0)))
    ledger.apply(Stamped(worker=("encode", 0), request_id=2, stamps=Stamps(encode_end_s=100.5)))
    lost = ledger.worker_died(("prefill", 0), -9)
    assert lost == [0, 1]  # 1 was in flight to it
    ledger.apply(Done(worker=("decode", 0), request_id=0, finish_s=102.0, tokens=(), stamps=Stamps()))
    rec = ledger.records
    assert rec[0].status == "failed" and "prefill worker 0 died" in rec[0].error
    assert rec[2].status == "ok" and rec[2].finish_s == pytest.approx(1.5)
    assert rec[2].encode_end_s == pytest.approx(0.5)  # late stamp still lands
    ledger.apply(Sent(worker=("encode", 0), request_id=3, to=("prefill", 0)))
    assert rec[3].status == "failed" and "which died" in rec[3].error
    assert ledger.open_ids == []


def test_the_ledger_takes_every_event_type_and_names_the_known_for_another():
    ledger = Ledger([])
    assert ledger.kinds == set(EVENT_TYPES)
    with pytest.raises(ValueError, match="unknown event dict; known: Ready, At, Sent"):
        ledger.apply({"kind": "gone"})  # type: ignore[arg-type]


def test_stamps_land_on_the_record_relative_to_the_trial_start():
    ledger = Ledger(_requests(1))
    ledger.set_t0(10.0)
    ledger.issue(0, ("encode", 0))
    stamps = Stamps(encode_start_s=10.5, encode_end_s=11.0, encode_batch_size=2, encode_worker=1,
                    mm_tokens=12, route="remote", prefill_worker=0)
    ledger.apply(Stamped(worker=("encode", 1), request_id=0, stamps=stamps))
    later = stamps.with_(prefill_start_s=11.5, first_token_s=12.0, decode_worker=0)
    ledger.apply(Done(worker=("decode", 0), request_id=0, finish_s=13.0, tokens=(5,), stamps=later))
    rec = ledger.records[0]
    assert (rec.encode_start_s, rec.encode_end_s, rec.prefill_start_s, rec.first_token_s, rec.finish_s) == (
        0.5, 1.0, 1.5, 2.0, 3.0)
    assert (rec.encode_batch_size, rec.encode_worker, rec.mm_tokens, rec.route, rec.prefill_worker,
            rec.decode_worker) == (2, 1, 12, "remote", 0, 0)
    assert ledger.tokens[0] == [5] and rec.status == "ok"


def test_utilization_steps_up_and_down():
    ledger = Ledger([])
    ledger.set_t0(0.0)
    for start, end, share in [(1.0, 2.0, 0.5), (1.5, 3.0, 0.5)]:
        ledger.apply(StageRow(worker=("encode", 0), stage="encode", index=0, group="encode", start_s=start,
                              end_s=end, batch_size=1, tokens=4, sm_share=share))
    util = utilization(ledger.stage_log(), [("encode", 0)])
    assert util["busy_frac"].tolist() == [0.0, 0.5, 1.0, 0.5, 0.0]


def test_profiling_smoke():
    frame = profile_stages(ModelSpec(name="llava-next", size="tiny"), encode_batches=(1, 2),
                           prefill_lengths=(16,), decode_batches=(1, 2), decode_context=8, reps=1)
    assert list(frame["stage"]) == ["encode", "encode", "prefill", "decode", "decode"]
    assert (frame["median_s"] > 0).all()


def test_live_never_imports_simpy():
    code = "import sys, live, live.profiling, easerve.cli.live_cmd; print('simpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_many_workers_start_with_spawn():
    from live.placement import queues_needed, start_method

    assert queues_needed(3) == 3 * 4 + 16 + 4
    # each worker is handed only its own queues (Channels.for_worker): 30 workers' fit the
    # forkserver's 256 descriptors, 31 do not
    assert start_method(30, "forkserver") == "forkserver"
    assert start_method(31, "forkserver") == "spawn"
    assert start_method(7, "spawn") == "spawn"


@pytest.mark.parametrize("model", ["llava-next", "qwen2-audio"])
def test_the_plan_holds_the_items_the_live_model_is_built_with(model: str) -> None:
    """[live] mm_token_scale is applied once, to the plan: the simulator runs what live builds."""
    from live.trial import Trial
    from tests.live.conftest import FAMILY_MIX, live_config, live_plan

    scale = FAMILY_MIX[model][1]
    plan = live_plan(live_config(model))
    full = live_plan(live_config(model, live={"mm_token_scale": 1.0}))
    assert [r.mm_tokens_per_item for r in plan.requests] == [
        tuple(max(1, round(t * scale)) for t in r.mm_tokens_per_item) for r in full.requests]
    # what the model is fed, read back from the built inputs: the plan's items (up to the family's
    # geometry: anyres tiles round 58 tokens to 56), not scaled again (that would be ~2 tokens)
    fed = [t for r in Trial(plan).model_requests() for t in r.mm_tokens_per_item]
    planned = [t for r in plan.requests for t in r.mm_tokens_per_item]
    assert len(fed) == len(planned) and all(abs(f - p) <= 0.1 * p for f, p in zip(fed, planned, strict=True))
