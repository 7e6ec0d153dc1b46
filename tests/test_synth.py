"""Tests of the synthetic segment generator (ppo_training.data.synth)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ppo_training.constants import ACC_G, CONTROL_START_IDX
from ppo_training.data.segments import (
    SYNTHETIC_MANIFEST,
    is_synthetic_dir,
    list_segment_files,
    load_segment,
    read_synthetic_manifest,
)
from ppo_training.data.synth import generate_segment, write_dataset

ROOT = Path(__file__).resolve().parents[1]

# Pooled statistics of the 8 real segments of the challenge data (measured once; the tests must
# not need the real files): speed 0 (stopped; min -0.07) .. 34.0 m/s, |target| p90 0.58 m/s^2,
# mean 0.154; |target rate| mean 0.103 m/s^3.
REAL_MAX_SPEED = 34.0
REAL_ABS_TARGET_P90 = 0.582
REAL_ABS_TARGET_MEAN = 0.154
REAL_ABS_RATE_MEAN = 0.103


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "synthetic"
    write_dataset(out, 12, seed=3, progress=False)
    return out


@pytest.fixture(scope="module")
def many() -> list[dict]:
    return [generate_segment(np.random.default_rng([7, k])) for k in range(300)]


def test_files_load_with_load_segment(dataset):
    files = list_segment_files(dataset)
    assert [Path(f).name for f in files] == [f"synth_{k:05d}.csv" for k in range(12)]
    for f in files:
        seg = load_segment(f)
        assert seg.n_rows == 600
        for col in (seg.v_ego, seg.a_ego, seg.roll_lataccel, seg.target_lataccel):
            assert np.isfinite(col).all()
        assert np.isfinite(seg.steer_command[:CONTROL_START_IDX]).all()
        assert np.isnan(seg.steer_command[CONTROL_START_IDX:]).all()
        assert (seg.v_ego >= 0).all()
        assert np.abs(seg.target_lataccel).max() <= 5.0
        assert np.abs(seg.steer_command[:CONTROL_START_IDX]).max() <= 2.0


def test_csv_format(dataset):
    lines = (dataset / "synth_00000.csv").read_text().splitlines()
    assert lines[0] == "t,vEgo,aEgo,roll,targetLateralAcceleration,steerCommand"
    assert len(lines) == 601
    row = lines[1 + 42].split(",")
    assert len(row) == 6 and float(row[0]) == pytest.approx(4.2)
    assert lines[1 + CONTROL_START_IDX].endswith(",")  # empty steer from row 100 on
    assert not lines[CONTROL_START_IDX].endswith(",")
    # full precision: values round-trip exactly through repr
    assert all(repr(float(x)) == x for x in row)
    assert not list(dataset.glob(".*tmp*"))


def test_manifest_and_label(dataset):
    assert is_synthetic_dir(dataset)
    assert is_synthetic_dir(dataset / "synth_00003.csv")
    m = read_synthetic_manifest(dataset)
    assert m == json.loads((dataset / SYNTHETIC_MANIFEST).read_text())
    assert m["synthetic"] is True and m["seed"] == 3 and m["n"] == 12 and m["rows"] == 600
    assert m["generator"] == "ppo_training.data.synth" and m["version"]
    assert "synthetic" in m["note"].lower()
    assert m["parameters"]["steer_gain"] > 0
    # the manifest is written last: it is not older than any CSV
    newest_csv = max(p.stat().st_mtime_ns for p in dataset.glob("*.csv"))
    assert (dataset / SYNTHETIC_MANIFEST).stat().st_mtime_ns >= newest_csv


def test_deterministic_and_per_file(tmp_path, dataset):
    write_dataset(tmp_path / "a", 4, seed=3, progress=False)
    for k in range(4):
        name = f"synth_{k:05d}.csv"
        assert (tmp_path / "a" / name).read_bytes() == (dataset / name).read_bytes()
    write_dataset(tmp_path / "b", 2, seed=4, progress=False)
    assert (tmp_path / "b" / "synth_00000.csv").read_bytes() != (dataset / "synth_00000.csv").read_bytes()
    # rewriting a folder with fewer files removes the stale ones and updates the manifest
    write_dataset(tmp_path / "a", 2, seed=3, progress=False)
    assert sorted(p.name for p in (tmp_path / "a").glob("*.csv")) == ["synth_00000.csv", "synth_00001.csv"]
    assert read_synthetic_manifest(tmp_path / "a")["n"] == 2


def test_rows_option(tmp_path):
    paths = write_dataset(tmp_path / "r", 1, seed=0, rows=550, progress=False)
    assert load_segment(paths[0]).n_rows == 550
    seg = generate_segment(np.random.default_rng(0), rows=200)  # the Python API allows short ones
    assert len(seg["vEgo"]) == 200


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="n must be"):
        write_dataset(tmp_path / "x", 0, seed=0, progress=False)
    with pytest.raises(ValueError, match="seed"):
        write_dataset(tmp_path / "x", 1, seed=-1, progress=False)
    with pytest.raises(ValueError, match="rows"):
        write_dataset(tmp_path / "x", 1, seed=0, rows=499, progress=False)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(FileExistsError, match="not a folder"):
        write_dataset(afile, 1, seed=0, progress=False)
    real_like = tmp_path / "real"
    real_like.mkdir()
    (real_like / "00000.csv").write_text("t\n")
    with pytest.raises(FileExistsError, match="did not write"):
        write_dataset(real_like, 1, seed=0, progress=False)
    assert not is_synthetic_dir(real_like)


def test_cli(tmp_path):
    out = tmp_path / "cli"
    ok = subprocess.run([sys.executable, "-m", "ppo_training.data.synth", "--n", "2", "--out", str(out),
                         "--seed", "1", "--no-progress"], cwd=ROOT, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert len(list_segment_files(out)) == 2 and is_synthetic_dir(out)
    bad = subprocess.run([sys.executable, "-m", "ppo_training.data.synth", "--n", "0", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "n must be a positive integer" in bad.stderr


def test_distributions_resemble_real(many):
    v = np.concatenate([s["vEgo"] for s in many])
    target = np.concatenate([s["targetLateralAcceleration"] for s in many])
    rate = np.concatenate([np.diff(s["targetLateralAcceleration"]) / 0.1 for s in many])
    roll = np.concatenate([s["roll"] for s in many])
    assert v.min() >= 0 and v.max() <= REAL_MAX_SPEED * 1.3
    assert 12 < v.mean() < 28  # real 21.0
    assert REAL_ABS_TARGET_P90 / 2 < np.percentile(np.abs(target), 90) < REAL_ABS_TARGET_P90 * 2
    assert REAL_ABS_TARGET_MEAN / 2 < np.abs(target).mean() < REAL_ABS_TARGET_MEAN * 2
    assert REAL_ABS_RATE_MEAN / 2 < np.abs(rate).mean() < REAL_ABS_RATE_MEAN * 2
    roll_lat = np.sin(roll) * ACC_G
    assert 0.1 < roll_lat.mean() < 0.4 and np.abs(roll).max() < 0.2  # real mean 0.22 m/s^2


def test_aego_matches_speed_derivative(many):
    corrs = []
    for s in many:
        dv = np.diff(s["vEgo"]) / 0.1
        a = s["aEgo"][1:]
        stopped = (s["vEgo"][1:] == 0) & (s["vEgo"][:-1] == 0)
        assert (a[stopped] == 0).all()
        if dv.std() > 0.05:
            corrs.append(np.corrcoef(a, dv)[0, 1])
    assert np.median(corrs) > 0.95 and np.min(corrs) > 0.5  # real: 0.90-1.00


def test_warmup_steer_follows_target(many):
    # simulator steer = -steerCommand ~ K (target - roll_lataccel) 3 steps ahead, plus an offset
    xs, ys = [], []
    for s in many:
        steer = -s["steerCommand"][:CONTROL_START_IDX]
        ahead = np.arange(CONTROL_START_IDX) + 3
        x = s["targetLateralAcceleration"][ahead] - np.sin(s["roll"][ahead]) * ACC_G
        xs.append(x - x.mean())
        ys.append(steer - steer.mean())
    slope = np.dot(np.concatenate(xs), np.concatenate(ys)) / np.dot(np.concatenate(xs), np.concatenate(xs))
    assert 0.3 < slope < 0.8  # real fit: 0.52
