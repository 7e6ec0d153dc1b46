"""Segment loading, file selection and splitting, and the eval.py command line (fast tests)."""
from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppo_training.constants import ACC_G
from ppo_training.data.segments import (
    SegmentError,
    list_segment_files,
    load_segment,
    split_files,
    is_official_eval_file,
)

HEADER = "t,vEgo,aEgo,roll,targetLateralAcceleration,steerCommand"


# -- helpers -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def src_lines(real_files_src) -> list[str]:
    """Lines of a real 600-row segment (header first), the template of the edited files below."""
    for f in real_files_src:
        lines = f.read_text().splitlines()
        if len(lines) == 601:
            assert lines[0] == HEADER
            return lines
    pytest.fail("no 600-row real segment found")


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def set_cell(lines: list[str], data_row: int, column: str, value: str) -> list[str]:
    """Copy of ``lines`` with one cell replaced (``data_row`` is 0-based, after the header)."""
    out = list(lines)
    col = HEADER.split(",").index(column)
    cells = out[data_row + 1].split(",")
    cells[col] = value
    out[data_row + 1] = ",".join(cells)
    return out


def drop_column(lines: list[str], column: str) -> list[str]:
    col = HEADER.split(",").index(column)
    return [",".join(c for k, c in enumerate(line.split(",")) if k != col) for line in lines]


# -- load_segment --------------------------------------------------------------------------------------
@pytest.mark.parametrize("rows", [599, 600])
def test_599_and_600_rows_load(tmp_path, src_lines, rows):
    seg = load_segment(write_lines(tmp_path / "seg.csv", src_lines[: rows + 1]))
    assert seg.n_rows == rows
    for name in ("roll_lataccel", "v_ego", "a_ego", "target_lataccel", "steer_command"):
        arr = getattr(seg, name)
        assert arr.dtype == np.float64 and arr.shape == (rows,)


def test_real_files_load(real_files_src):
    for f in real_files_src:
        seg = load_segment(f)
        assert seg.n_rows in (599, 600)
        assert seg.path == str(f)


def test_columns_follow_the_spec(tmp_path, src_lines):
    path = write_lines(tmp_path / "seg.csv", src_lines)
    df = pd.read_csv(path)
    seg = load_segment(path)
    assert np.array_equal(seg.roll_lataccel, np.sin(df["roll"].to_numpy()) * ACC_G)
    assert np.array_equal(seg.v_ego, df["vEgo"].to_numpy())
    assert np.array_equal(seg.a_ego, df["aEgo"].to_numpy())
    assert np.array_equal(seg.target_lataccel, df["targetLateralAcceleration"].to_numpy())
    assert np.array_equal(seg.steer_command, -df["steerCommand"].to_numpy(), equal_nan=True)
    # the sign flip really happens (the log is left-positive, the simulator right-positive)
    raw = float(src_lines[1].split(",")[-1])
    assert seg.steer_command[0] == -raw


def test_exponent_notation_parses_like_plain(tmp_path, src_lines):
    plain = set_cell(set_cell(src_lines, 5, "aEgo", "0.0015"), 6, "roll", "-0.00025")
    expo = set_cell(set_cell(src_lines, 5, "aEgo", "1.5e-03"), 6, "roll", "-2.5E-4")
    a = load_segment(write_lines(tmp_path / "plain.csv", plain))
    b = load_segment(write_lines(tmp_path / "expo.csv", expo))
    assert a.a_ego[5] == b.a_ego[5] == 0.0015
    assert a.roll_lataccel[6] == b.roll_lataccel[6] == math.sin(-0.00025) * ACC_G
    # a whole file rewritten in exponent notation (17 significant digits) gives the same floats
    df = pd.read_csv(tmp_path / "plain.csv")
    rows = [HEADER]
    for r in df.itertuples(index=False):
        rows.append(",".join("" if np.isnan(v) else f"{v:.16e}" for v in r))
    c = load_segment(write_lines(tmp_path / "all_expo.csv", rows))
    for name in ("roll_lataccel", "v_ego", "a_ego", "target_lataccel", "steer_command"):
        assert np.array_equal(getattr(a, name), getattr(c, name), equal_nan=True), name


def test_empty_steer_after_row_100_is_nan(tmp_path, src_lines):
    seg = load_segment(write_lines(tmp_path / "seg.csv", src_lines))
    assert np.isfinite(seg.steer_command[:100]).all()
    assert np.isnan(seg.steer_command[100:]).all()
    # a value logged after row 100 is harmless too
    seg2 = load_segment(write_lines(tmp_path / "seg2.csv", set_cell(src_lines, 150, "steerCommand", "0.5")))
    assert seg2.steer_command[150] == -0.5


def test_empty_steer_in_first_100_rows_is_an_error(tmp_path, src_lines):
    path = write_lines(tmp_path / "hole.csv", set_cell(src_lines, 42, "steerCommand", ""))
    with pytest.raises(SegmentError) as err:
        load_segment(path)
    msg = str(err.value)
    assert str(path) in msg and "steerCommand" in msg and "row 43" in msg  # 1-based data row


@pytest.mark.parametrize("column", ["vEgo", "roll", "targetLateralAcceleration", "steerCommand"])
def test_missing_column_names_file_and_column(tmp_path, src_lines, column):
    path = write_lines(tmp_path / "cols.csv", drop_column(src_lines, column))
    with pytest.raises(SegmentError) as err:
        load_segment(path)
    assert str(path) in str(err.value) and column in str(err.value)


def test_non_numeric_value_names_file_column_row_value(tmp_path, src_lines):
    path = write_lines(tmp_path / "text.csv", set_cell(src_lines, 9, "vEgo", "fast"))
    with pytest.raises(SegmentError) as err:
        load_segment(path)
    msg = str(err.value)
    assert str(path) in msg and "vEgo" in msg and "row 10" in msg and "fast" in msg


def test_empty_value_in_other_column_is_an_error(tmp_path, src_lines):
    path = write_lines(tmp_path / "gap.csv", set_cell(src_lines, 300, "targetLateralAcceleration", ""))
    with pytest.raises(SegmentError, match="targetLateralAcceleration"):
        load_segment(path)


def test_too_short_names_file_and_cost_window(tmp_path, src_lines):
    path = write_lines(tmp_path / "short.csv", src_lines[:500])  # 499 rows
    with pytest.raises(SegmentError) as err:
        load_segment(path)
    assert str(path) in str(err.value) and "cost window" in str(err.value)
    # exactly 500 rows still covers steps 100-499
    assert load_segment(write_lines(tmp_path / "ok.csv", src_lines[:501])).n_rows == 500


@pytest.mark.parametrize(
    "content",
    [b"", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), b"hello world\n", b'{"a": 1}\n'],
    ids=["empty", "binary", "text", "json"],
)
def test_not_a_csv_is_a_segment_error(tmp_path, content):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(SegmentError) as err:
        load_segment(path)
    assert str(path) in str(err.value)


def test_missing_file_is_a_segment_error(tmp_path):
    path = tmp_path / "nope.csv"
    with pytest.raises(SegmentError) as err:
        load_segment(path)
    assert str(path) in str(err.value)


# -- list_segment_files ----------------------------------------------------------------------------------
def make_folder(root: Path, names: list[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for n in names:
        (root / n).write_text(HEADER + "\n")
    return root


def test_list_sorted_first_n_and_csv_only(tmp_path):
    names = [f"{k:05d}.csv" for k in (7, 3, 12, 0, 5)]
    folder = make_folder(tmp_path / "d", names + ["SHA256SUMS", "synthetic_manifest.json", "notes.txt"])
    (folder / "sub.csv").mkdir()  # a folder named like a CSV is not a segment
    files = list_segment_files(folder)
    assert files == [str(folder / f"{k:05d}.csv") for k in (0, 3, 5, 7, 12)]
    assert list_segment_files(folder, 2) == files[:2]
    assert list_segment_files(folder, 100) == files


def test_list_path_strings_like_the_harness(tmp_path, monkeypatch):
    make_folder(tmp_path / "data", ["00001.csv", "00000.csv"])
    monkeypatch.chdir(tmp_path)
    assert list_segment_files("./data") == ["data/00000.csv", "data/00001.csv"]
    assert list_segment_files("data", 1) == ["data/00000.csv"]
    assert list_segment_files(Path("data")) == ["data/00000.csv", "data/00001.csv"]


def test_list_single_file(tmp_path, monkeypatch):
    make_folder(tmp_path / "data", ["00000.csv", "00001.csv"])
    monkeypatch.chdir(tmp_path)
    assert list_segment_files("data/00001.csv") == ["data/00001.csv"]
    assert list_segment_files("./data/00001.csv") == ["data/00001.csv"]  # str(Path(p)) as upstream


def test_list_missing_or_empty_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        list_segment_files(tmp_path / "absent")
    empty = make_folder(tmp_path / "empty", ["SHA256SUMS"])
    with pytest.raises(FileNotFoundError, match="no .csv"):
        list_segment_files(empty)


FETCH = "python -m ppo_training.assets fetch"


def test_missing_or_empty_data_names_the_command_that_fills_it(tmp_path, monkeypatch):
    import ppo_training.data.segments as segments

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(segments, "PROJECT_ROOT", tmp_path)  # as when run from the checkout
    with pytest.raises(FileNotFoundError) as info:
        list_segment_files("data")
    assert str(info.value) == (f"data: no such file or folder of segment CSVs; fetch the segments with "
                               f"`{FETCH}` (`make assets` in the checkout)")
    (tmp_path / "data").mkdir()
    with pytest.raises(FileNotFoundError, match=f"data: folder holds no .csv segment files; .*`{FETCH}`"):
        list_segment_files("data")
    with pytest.raises(FileNotFoundError) as info:
        list_segment_files("data/synthetic")
    assert "`python -m ppo_training.data.synth --n 2000 --out data/synthetic --seed 0`" in str(info.value)
    with pytest.raises(FileNotFoundError, match=f"`{FETCH} --dest elsewhere`"):
        list_segment_files("elsewhere/data")


def test_train_without_data_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    from ppo_training.cli.train import main

    monkeypatch.chdir(tmp_path)
    assert main(["--data-path", "data", "--device", "cpu", "--run-name", "no_data"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: data: no such file or folder") and f"`{FETCH} --dest .`" in err
    assert main(["--data-path", "data/synthetic", "--device", "cpu", "--run-name", "no_data"]) == 1
    assert "python -m ppo_training.data.synth --n 2000 --out data/synthetic" in capsys.readouterr().err


@pytest.mark.parametrize("n", [0, -3])
def test_list_bad_num_segs(tmp_path, n):
    folder = make_folder(tmp_path / "d", ["00000.csv"])
    with pytest.raises(ValueError, match="num_segs"):
        list_segment_files(folder, n)


# -- split_files ---------------------------------------------------------------------------------------
def fake_names(n: int, folder: str = "data") -> list[str]:
    return [f"{folder}/{k:05d}.csv" for k in range(n)]


def test_split_deterministic_disjoint_complete():
    files = fake_names(8000)
    shuffled = list(files)
    np.random.default_rng(0).shuffle(shuffled)
    a = split_files(files, val_fraction=0.1, test_fraction=0.05)
    b = split_files(shuffled, val_fraction=0.1, test_fraction=0.05)
    assert a == b  # independent of input order and of the run
    parts = [set(a[k]) for k in ("train", "val", "test")]
    assert sum(len(p) for p in parts) == len(files)
    assert set().union(*parts) == set(files)
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert all(len(a[k]) > 0 for k in a)


def test_split_reserves_the_official_evaluation_files_by_name():
    # A partial copy: the eight first evaluation files and training-region files from 05000 on.
    # The positional rule ("the first 5,000 sorted files") would reserve all of them.
    files = [f"data/{k:05d}.csv" for k in range(8)] + [f"data/{k:05d}.csv" for k in range(5000, 5145)]
    split = split_files(list(reversed(files)), val_fraction=0.1)
    assert split["test"] == files[:8]
    assert len(split["train"]) + len(split["val"]) == 145 and len(split["train"]) > 100
    assert all(not is_official_eval_file(f) for f in split["train"] + split["val"])
    assert is_official_eval_file("x/04999.csv") and not is_official_eval_file("x/05000.csv")
    assert not is_official_eval_file("data/synth_00001.csv")
    # the full upstream set: exactly 00000-04999 are reserved
    full = split_files(fake_names(20000), val_fraction=0.05)
    assert full["test"] == fake_names(5000)
    assert not set(fake_names(5000)) & (set(full["train"]) | set(full["val"]))
    # without the reservation (e.g. generated data) every file is split by its name's hash
    loose = split_files(files, reserve_official=False, val_fraction=0.1)
    assert set(files[:8]) & set(loose["train"] + loose["val"])


def test_split_is_stable_when_files_are_added():
    small = split_files(fake_names(6000), val_fraction=0.1, test_fraction=0.1)
    big = split_files(fake_names(9000), val_fraction=0.1, test_fraction=0.1)
    for key in ("train", "val", "test"):
        assert set(small[key]) <= set(big[key]), key
    # the assignment depends on the file name, not the folder it lives in
    moved = split_files(fake_names(6000, "elsewhere/x"), val_fraction=0.1, test_fraction=0.1)
    for key in ("train", "val", "test"):
        assert [Path(f).name for f in moved[key]] == [Path(f).name for f in small[key]]


def test_split_fractions_roughly_respected():
    n, val, test = 20_000, 0.05, 0.10
    split = split_files(fake_names(n), reserve_official=False, val_fraction=val, test_fraction=test)
    for key, p in (("val", val), ("test", test), ("train", 1 - val - test)):
        sigma = math.sqrt(n * p * (1 - p))
        assert abs(len(split[key]) - n * p) < 5 * sigma, (key, len(split[key]))


@pytest.mark.parametrize("val,test", [(-0.1, 0.0), (1.0, 0.0), (0.0, 1.0), (0.6, 0.5), (0.5, 0.5)])
def test_split_bad_fractions(val, test):
    with pytest.raises(ValueError):
        split_files(fake_names(10), val_fraction=val, test_fraction=test)


# -- eval.py command line ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def eval_cli():
    from ppo_training.cli import evaluate

    return evaluate


def test_eval_cli_writes_results(in_data_dir, model_path, eval_cli, capsys):
    out = in_data_dir / "results.csv"
    rc = eval_cli.main([
        "--controller", "pid", "--data_path", "data", "--num_segs", "8", "--output", str(out),
        "--tinyphysics_model", str(model_path), "--no_progress",
    ])
    assert rc == 0
    table = pd.read_csv(out)
    assert list(table.columns) == ["segment", "lataccel_cost", "jerk_cost", "total_cost"]
    assert table["segment"].tolist() == [f"data/0000{k}.csv" for k in range(8)]
    assert np.isfinite(table[["lataccel_cost", "jerk_cost", "total_cost"]].to_numpy()).all()
    assert np.allclose(table["total_cost"], 50 * table["lataccel_cost"] + table["jerk_cost"], rtol=1e-12)
    stdout = capsys.readouterr().out
    assert "average total_cost" in stdout


def test_eval_cli_bad_data_path(in_data_dir, model_path, eval_cli, capsys):
    rc = eval_cli.main(["--data_path", "no_such_folder", "--tinyphysics_model", str(model_path), "--no_progress"])
    assert rc == 1
    assert "error:" in capsys.readouterr().err


def test_eval_cli_unknown_controller(in_data_dir, model_path, eval_cli, capsys):
    rc = eval_cli.main(["--controller", "no_such_controller", "--data_path", "data",
                        "--tinyphysics_model", str(model_path), "--no_progress"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "error:" in err and "no_such_controller" in err


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_train_needs_no_data_generation():
    from ppo_training import PROJECT_ROOT

    def dry_run(target: str) -> str:
        r = subprocess.run(["make", "-n", "-B", target], cwd=PROJECT_ROOT, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    train = dry_run("train")
    assert "ppo_training.assets fetch" in train and "train.py --config config.yaml" in train
    assert "pip install --quiet --no-deps -e ." in train
    assert "ppo_training.data.synth" not in train
    assert "ppo_training.data.synth" in dry_run("synthetic")  # still available on its own
