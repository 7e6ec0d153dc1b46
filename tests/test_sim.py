"""Parity of the batched engine with a plain rollout written from SPEC.md, and its building blocks."""
from __future__ import annotations

import random

import numpy as np
import pytest

from ppo_training.constants import VOCAB_SIZE
from ppo_training.controllers import OfficialControllerAdapter, PIDController, ZeroController
from ppo_training.controllers.official import load_official_controller
from ppo_training.data import list_segment_files, load_segments, segment_seed
from ppo_training.evaluation import evaluate
from ppo_training.sim import BINS, BatchedSimulator, compute_costs, decode, encode
from ppo_training.sim.backends import sample_from_logits
from ppo_training.sim.reference import ReferencePID, ReferenceZero, reference_rollout

FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures" / "controllers"


# -- tokenizer, seeds, costs, sampling ---------------------------------------------------------------
def test_tokenizer_edges():
    assert encode(np.array([-5.0, 5.0, -7.0, 9.0])).tolist() == [0, 1023, 0, 1023]
    k = np.arange(VOCAB_SIZE)
    assert np.array_equal(encode(BINS), k)  # right=True: a value equal to a bin maps to that bin
    above = np.nextafter(BINS[:-1], np.inf)
    assert np.array_equal(encode(above), k[1:])  # just above bin k belongs to bin k+1
    assert np.array_equal(decode(encode(BINS)), BINS)
    assert decode(np.array([0, 1023])).tolist() == [-5.0, 5.0]
    assert decode(np.array([512])).dtype == np.float64


def test_seed_depends_on_path_string():
    assert segment_seed("data/00000.csv") == 3285
    assert segment_seed("./data/00000.csv") == 3963


def test_segment_seed_is_the_official_harness_one_for_any_spelling(tmp_path, monkeypatch, real_files_src):
    # The official harness seeds with str(Path(p)), so "./data/x.csv" and "data//x.csv" are "data/x.csv".
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "00000.csv").write_bytes(real_files_src[0].read_bytes())
    monkeypatch.chdir(tmp_path)
    seeds = {s.seed for s in load_segments(["data/00000.csv", "./data/00000.csv", "data//00000.csv"])}
    assert seeds == {3285}


def test_cost_formula():
    rng = np.random.default_rng(0)
    target, pred = rng.normal(size=(3, 600)), rng.normal(size=(3, 600))
    costs = compute_costs(target, pred)
    for b in range(3):
        t, p = target[b, 100:500], pred[b, 100:500]
        lat = np.mean((t - p) ** 2) * 100
        jerk = np.mean((np.diff(p) / 0.1) ** 2) * 100
        assert costs["lataccel_cost"][b] == lat
        assert costs["jerk_cost"][b] == jerk
        assert costs["total_cost"][b] == 50 * lat + jerk
    one = compute_costs(target[1], pred[1])
    assert one["total_cost"] == costs["total_cost"][1]
    # steps from 500 on do not count
    pred2 = pred.copy()
    pred2[:, 500:] += 100
    assert np.array_equal(compute_costs(target, pred2)["total_cost"], costs["total_cost"])
    with pytest.raises(ValueError, match="cost window"):
        compute_costs(target[:, :499], pred[:, :499])


def test_batched_sampling_equals_random_choice():
    rng = np.random.default_rng(1)
    logits = (rng.normal(size=(64, VOCAB_SIZE)) * rng.uniform(0.1, 8, size=(64, 1))).astype(np.float32)
    seeds = rng.integers(0, 10_000, size=64)
    uniforms = np.array([np.random.RandomState(s).random_sample() for s in seeds])
    got = sample_from_logits(logits, uniforms)
    for b in range(64):
        x = logits[b][None, None, :] / 0.8
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        p = e / np.sum(e, axis=-1, keepdims=True)
        assert got[b] == np.random.RandomState(seeds[b]).choice(VOCAB_SIZE, p=p[0, -1])


# -- engine parity with the reference rollout -------------------------------------------------------------
@pytest.fixture(scope="module")
def reference_costs(request):
    """Reference rollouts of PID and zero on the eight real segments (computed once)."""
    return {}


def _reference(cache, session, path, kind):
    key = (path, kind)
    if key not in cache:
        ctrl = ReferencePID() if kind == "pid" else ReferenceZero()
        cache[key] = reference_rollout(session, path, ctrl)
    return cache[key]


@pytest.mark.parametrize("kind", ["pid", "zero"])
def test_batch_n_equals_reference(in_data_dir, onnx_backend, reference_session, reference_costs, kind):
    files = list_segment_files("data")
    assert files[0] == "data/00000.csv"
    ctrl = PIDController() if kind == "pid" else ZeroController()
    sim = BatchedSimulator(onnx_backend, load_segments(files), full=True)
    res = sim.rollout(ctrl, keep_histories=True)
    for b, path in enumerate(files):
        ref = _reference(reference_costs, reference_session, path, kind)
        for c in ("lataccel_cost", "jerk_cost", "total_cost"):
            assert res.costs[c][b] == ref[c], (path, c)
        assert np.array_equal(res.current[b], np.array(ref["current"]))
        assert np.array_equal(res.action[b], np.array(ref["action"]))


def test_batch_one_shuffled_and_cost_only_agree(in_data_dir, onnx_backend, reference_session, reference_costs):
    files = list_segment_files("data")
    ref = {f: _reference(reference_costs, reference_session, f, "pid")["total_cost"] for f in files}
    # batch 1
    one = BatchedSimulator(onnx_backend, load_segments(files[:1])).rollout(PIDController())
    assert one.costs["total_cost"][0] == ref[files[0]]
    # shuffled order, cost-only (stops at step 500), and batched through evaluate() in chunks of 3
    shuffled = files[:]
    random.Random(0).shuffle(shuffled)
    table = evaluate(PIDController(), shuffled, backend=onnx_backend, batch_size=3, progress=False).table
    assert table["segment"].tolist() == shuffled
    for path, cost in zip(table["segment"], table["total_cost"]):
        assert cost == ref[path], path


def test_mixed_lengths_share_a_batch(in_data_dir, onnx_backend, reference_session, reference_costs):
    segs = load_segments(list_segment_files("data"))
    lengths = {s.n_rows for s in segs}
    assert lengths == {599, 600}, "the real segments include 599- and 600-row files"
    sim = BatchedSimulator(onnx_backend, segs, full=True)
    res = sim.rollout(PIDController(), keep_histories=True)
    for b, seg in enumerate(segs):
        assert len(res.current[b]) == seg.n_rows
        ref = _reference(reference_costs, reference_session, seg.path, "pid")
        assert np.array_equal(res.current[b], np.array(ref["current"]))


def test_official_format_controllers(in_data_dir, onnx_backend, reference_session):
    files = list_segment_files("data", 3)
    # with the folder's own __init__ (a challenge checkout), and identical to the batched PID
    adapter = OfficialControllerAdapter.from_path(FIXTURES / "pid_official.py")
    got = evaluate(adapter, files, backend=onnx_backend, progress=False).table["total_cost"].to_numpy()
    pid = evaluate(PIDController(), files, backend=onnx_backend, progress=False).table["total_cost"].to_numpy()
    assert np.array_equal(got, pid)
    # a controller that reads state and future plan, over full-length rollouts (plan shrinks at the end)
    ff_cls = load_official_controller(FIXTURES / "plan_feedforward.py")
    adapter = OfficialControllerAdapter(ff_cls)
    sim = BatchedSimulator(onnx_backend, load_segments(files), full=True)
    res = sim.rollout(adapter, keep_histories=True)
    # every instance saw every step, warm-up included (rows past a shorter segment's end are ignored)
    assert [inst.calls for inst in adapter.instances] == [sim.end_step - 20] * len(files)
    for b, path in enumerate(files):
        ref = reference_rollout(reference_session, path, ff_cls())
        assert res.costs["total_cost"][b] == ref["total_cost"]
        assert np.array_equal(res.action[b], np.array(ref["action"]))


def test_standalone_official_file_without_package(tmp_path, in_data_dir, onnx_backend):
    src = (FIXTURES / "pid_official.py").read_text()
    (tmp_path / "solo").mkdir()
    (tmp_path / "solo" / "mypid.py").write_text(src)
    adapter = OfficialControllerAdapter.from_path(tmp_path / "solo" / "mypid.py")
    files = list_segment_files("data", 2)
    a = evaluate(adapter, files, backend=onnx_backend, progress=False).table["total_cost"]
    b = evaluate(PIDController(), files, backend=onnx_backend, progress=False).table["total_cost"]
    assert a.tolist() == b.tolist()


def test_step_api_and_done(in_data_dir, onnx_backend):
    sim = BatchedSimulator(onnx_backend, load_segments(list_segment_files("data", 2)))
    inputs = sim.reset()
    assert inputs.step == 20 and inputs.warmup
    assert inputs.future_lataccel.shape == (2, 49)
    n = 0
    while inputs is not None:
        inputs = sim.step(np.zeros(2))
        n += 1
    assert n == 480 and sim.done
    with pytest.raises(RuntimeError):
        sim.step(np.zeros(2))


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_last_position_graph_gives_the_full_graphs_logits_bit_for_bit(onnx_backend, reference_session, batch):
    """The pruned graph (last MLP, final LayerNorm and head for the last position only) against the
    unmodified model run one segment at a time, on random inputs spanning the model's range."""
    rng = np.random.default_rng(batch)
    states = np.concatenate([rng.uniform(-2, 2, (batch, 20, 1)), rng.normal(0, 1, (batch, 20, 1)),
                             rng.uniform(0, 35, (batch, 20, 1)), rng.normal(0, 1, (batch, 20, 1))], -1).astype(np.float32)
    tokens = rng.integers(0, 1024, (batch, 20))
    got = onnx_backend.logits(states, tokens)
    assert got.shape == (batch, 1, 1024)
    for b in range(batch):
        full = reference_session.run(None, {"states": states[b : b + 1], "tokens": tokens[b : b + 1]})[0]
        assert np.array_equal(got[b, 0], full[0, -1]), b
