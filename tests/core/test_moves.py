"""The make-before-break planner (easerve_core.moves): who stays, where new workers go, in what order."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from easerve_core.moves import Slot, Step, plan_moves


def E(*gpus: int) -> Slot:
    return Slot("encode", gpus)


def P(*gpus: int) -> Slot:
    return Slot("prefill", gpus)


def D(*gpus: int) -> Slot:
    return Slot("decode", gpus)


def test_the_same_deployment_moves_nothing():
    now = [E(0), P(1), D(2, 3)]
    plan = plan_moves(now, now, num_gpus=8, gpus_per_node=8)
    assert plan.keep == tuple(now) and plan.steps == () and plan.gpus_moved == 0


def test_with_a_free_gpu_the_new_worker_warms_before_the_old_one_drains():
    # E2 P1 D1 on GPUs 0-3 -> E1 P2 D1: the second Prefill worker comes up on free GPU 4 at once;
    # the encoder on GPU 1 drains only in the next step, once it is warm
    plan = plan_moves([E(0), E(1), P(2), D(3)], [E(0), P(1), P(2), D(3)], num_gpus=8, gpus_per_node=8)
    assert plan.keep == (E(0), P(2), D(3))
    assert plan.steps == (Step(up=(P(4),)), Step(drain=(E(1),)))
    assert plan.target == (E(0), P(2), D(3), P(4)) and plan.gpus_moved == 1


def test_without_a_free_gpu_the_move_is_staged_one_worker_at_a_time():
    # E3 P2 D1 on six GPUs -> E1 P1 D4: three workers leave, one at a time, each replaced on its GPU
    plan = plan_moves([E(0), E(1), E(2), P(3), P(4), D(5)], [E(0), P(1), D(2), D(3), D(4), D(5)],
                      num_gpus=6, gpus_per_node=6)
    assert plan.keep == (E(0), P(3), D(5))
    assert plan.steps == (Step(drain=(E(1),), up=(D(1),)), Step(drain=(E(2),), up=(D(2),)),
                          Step(drain=(P(4),), up=(D(4),)))
    assert all(not step.unserved for step in plan.steps)


def test_a_drain_that_would_empty_a_stage_waits_for_one_that_does_not():
    # the lone encoder (holding the LM) must become one without it, and a second encoder must come:
    # the second decoder leaves first (Decode keeps one), the lone encoder only once its peer is up
    lone = Slot("encode", (0,), local_prefill=True)
    plan = plan_moves([lone, P(1), D(2), D(3)], [E(0), E(1), P(2), D(3)], num_gpus=4, gpus_per_node=4)
    assert plan.keep == (P(1), D(2))
    assert plan.steps == (Step(drain=(D(3),), up=(E(3),)), Step(drain=(lone,), up=(E(0),)))
    assert all(not step.unserved for step in plan.steps)


def test_a_tp_change_with_no_free_gpu_says_which_stage_goes_unserved():
    # one TP-2 decoder -> two TP-1 decoders on the same GPUs: no order keeps Decode served
    plan = plan_moves([E(0), P(1), D(2, 3)], [E(0), P(1), D(2), D(3)], num_gpus=4, gpus_per_node=4)
    assert plan.steps == (Step(drain=(D(2, 3),), up=(D(2), D(3)), unserved=("decode",)),)


def test_a_stage_the_target_drops_drains_last():
    plan = plan_moves([E(0), P(1), D(2)], [E(0), D(1), D(2)], num_gpus=4, gpus_per_node=4)
    assert plan.steps == (Step(up=(D(3),)), Step(drain=(P(1),)))


def test_new_workers_are_aligned_and_never_span_a_node():
    plan = plan_moves([E(0), D(1)], [E(0), D(1), D(2, 3), D(4, 5, 6, 7)], num_gpus=8, gpus_per_node=4)
    assert plan.steps == (Step(up=(D(4, 5, 6, 7), D(2, 3))),)


def test_kept_workers_that_fragment_the_gpus_fall_back_to_the_layout():
    plan = plan_moves([E(0), D(1), E(2), D(3)], [E(0, 1), D(2), D(3)], num_gpus=4, gpus_per_node=4)
    assert plan.fallback
    assert plan.target == (E(0, 1), D(2), D(3))


def test_gpus_still_draining_are_used_last():
    # GPU 3 is still draining from an earlier move: the new worker waits for it
    plan = plan_moves([E(0), P(1), D(2)], [E(0), P(1), D(2), D(3)], num_gpus=4, gpus_per_node=4, busy=[3])
    assert plan.steps == (Step(up=(D(3),)),)


TPS = st.sampled_from([1, 2])


@st.composite
def deployments(draw, num_gpus=8):
    """A random layout: stage workers on consecutive GPUs, encode first."""
    slots, at = [], 0
    for stage in ("encode", "prefill", "decode"):
        tp = draw(TPS)
        count = draw(st.integers(1 if stage != "prefill" else 0, 3))
        for _ in range(count):
            if at + tp > num_gpus:
                break
            slots.append(Slot(stage, tuple(range(at, at + tp))))
            at += tp
    if not any(s.stage == "decode" for s in slots):
        last = Slot("decode", (num_gpus - 2, num_gpus - 1))
        slots = [s for s in slots if s.gpus[-1] < num_gpus - 2] + [last]
    return slots


@settings(max_examples=150, deadline=None)
@given(deployments(), deployments(), st.booleans())
def test_any_move_reaches_the_target_with_every_gpu_held_once(now, then, serve_first):
    plan = plan_moves(now, then, num_gpus=8, gpus_per_node=8, serve_first=serve_first)
    final = plan.target
    assert Counter(s.kind for s in final) == Counter(s.kind for s in then)
    gpus = [g for s in final for g in s.gpus]
    assert len(gpus) == len(set(gpus))
    # replay the steps: an up slot's GPUs are free or drained by then; every leaving worker drains once
    held = {g: s for s in now for g in s.gpus}
    drained = set()
    for step in plan.steps:
        for s in step.drain:
            assert s not in drained and s in now and s not in plan.keep
            drained.add(s)
            for g in s.gpus:
                del held[g]
        for s in step.up:
            assert not set(s.gpus) & set(held)
            held.update(dict.fromkeys(s.gpus, s))
    assert drained == set(now) - set(plan.keep)


def _lm(*gpus: int) -> Slot:
    return Slot("encode", gpus, local_prefill=True)


def test_serve_first_brings_the_smaller_decoder_up_before_the_larger_one_drains():
    # resolution's move: E2x2 (LM held) + one TP-4 decoder -> E1x2 P2x2 D1x2. By default the TP-2
    # decoder waits for the TP-4 one's GPUs (Decode dark while it drains); with serve_first it comes
    # up on the leaving encoder's GPUs and the TP-4 decoder drains beside it
    now, target = [_lm(0, 1), _lm(2, 3), D(4, 5, 6, 7)], [_lm(0, 1), P(2, 3), P(4, 5), D(6, 7)]
    plain = plan_moves(now, target, num_gpus=8, gpus_per_node=8)
    assert plain.steps[-1] == Step(drain=(D(4, 5, 6, 7),), up=(P(4, 5), D(6, 7)), unserved=("decode",))
    plan = plan_moves(now, target, num_gpus=8, gpus_per_node=8, serve_first=True)
    assert plan.keep == (_lm(0, 1),)
    assert plan.steps == (Step(drain=(_lm(2, 3),), up=(D(2, 3),), unserved=("prefill",)),
                          Step(drain=(D(4, 5, 6, 7),), up=(P(4, 5), P(6, 7)), unserved=("prefill",)))
    assert all("decode" not in step.unserved for step in plan.steps)


def test_serve_first_keeps_the_other_workers_off_the_gpus_the_losing_stage_needs():
    # and back: the TP-4 decoder needs GPUs 4-7, so the two Prefill workers drain first and nothing
    # else takes their GPUs; the TP-2 decoder drains only once the TP-4 one is up
    now, target = [_lm(0, 1), D(2, 3), P(4, 5), P(6, 7)], [_lm(0, 1), _lm(2, 3), D(4, 5, 6, 7)]
    plan = plan_moves(now, target, num_gpus=8, gpus_per_node=8, serve_first=True)
    assert plan.steps == (Step(drain=(P(4, 5),)), Step(drain=(P(6, 7),), up=(D(4, 5, 6, 7),)),
                          Step(drain=(D(2, 3),), up=(_lm(2, 3),)))
    assert not plan.fallback and all(not step.unserved for step in plan.steps)
    plain = plan_moves(now, target, num_gpus=8, gpus_per_node=8)
    assert plain.steps[-1].unserved == ("decode",)


def test_serve_first_changes_nothing_where_no_stage_loses_every_worker():
    now, target = [E(0), E(1), E(2), P(3), P(4), D(5)], [E(0), P(1), D(2), D(3), D(4), D(5)]
    assert (plan_moves(now, target, num_gpus=6, gpus_per_node=6, serve_first=True)
            == plan_moves(now, target, num_gpus=6, gpus_per_node=6))
