"""Checkpoints load without running code from the file; trusted old ones convert once."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from ppo_training import PROJECT_ROOT
from ppo_training.utils import checkpoint as ck
from ppo_training.utils.checkpoint import FORMAT, CheckpointError, load_checkpoint, save_atomic

REFERENCE = PROJECT_ROOT / "models" / "reference" / "ppo_reference.pt"


class WritesMarker:
    """Unpickling this object runs code: it writes a marker file (stands in for any payload)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('code ran')",))


def _minimal(**extra) -> dict:
    return {"format": FORMAT, "policy": {}, "config": {}, "obs_dim": 27, **extra}


@pytest.fixture()
def crafted(tmp_path):
    """A .pt file that runs code when fully unpickled, and the marker that code would write."""
    marker = tmp_path / "marker"
    path = tmp_path / "shared_policy.pt"
    torch.save(_minimal(extra=WritesMarker(marker)), path)
    return path, marker


def test_pickled_code_is_refused_and_nothing_runs(crafted, tmp_path):
    path, marker = crafted
    with pytest.raises(CheckpointError, match="shared_policy.pt: refused") as info:
        load_checkpoint(path)
    assert "exec" in str(info.value) and ck.CONVERT_COMMAND in str(info.value)
    assert not marker.exists()
    # The file really is hostile: full unpickling (what loading did before) runs its code.
    copy = tmp_path / "copy.pt"
    shutil.copy(path, copy)
    torch.load(copy, weights_only=False)
    assert marker.read_text() == "code ran"


def test_every_loader_refuses_the_crafted_file(crafted, in_data_dir, model_path, capsys):
    from ppo_training.cli import evaluate as eval_cli
    from ppo_training.controllers.policy import PolicyController
    from ppo_training.export import main as export_main
    from ppo_training.training import load_config, train

    path, marker = crafted
    with pytest.raises(CheckpointError, match="refused"):
        PolicyController.from_checkpoint(path)
    with pytest.raises(CheckpointError, match="refused"):
        train(load_config(None, {"run_name": "x", "runs_dir": str(path.parent / "runs")}), resume=str(path))
    assert eval_cli.main(["--model_path", str(path), "--data_path", "data", "--tinyphysics_model", str(model_path),
                          "--no_progress"]) == 1
    assert export_main(["--model_path", str(path), "--out", str(path.parent / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("shared_policy.pt: refused") == 2
    assert not marker.exists()


def test_save_writes_only_safe_values(tmp_path):
    path = save_atomic(_minimal(stats={"cost": [np.float64(1.5)]}, rng=np.arange(3, dtype=np.uint32),
                                seed=np.int64(7), where=tmp_path), tmp_path / "c.pt")
    raw = torch.load(path, weights_only=True)
    assert type(raw["stats"]["cost"][0]) is float and type(raw["seed"]) is int and raw["where"] == str(tmp_path)
    assert torch.equal(raw["rng"], torch.tensor([0, 1, 2], dtype=torch.uint32))
    with pytest.raises(CheckpointError, match=r"d.pt\['bad'\]: a builtins.object"):
        save_atomic(_minimal(bad=object()), tmp_path / "d.pt")
    assert not (tmp_path / "d.pt").exists() and not list(tmp_path.glob(".d.pt.*"))


def test_trusted_old_checkpoint_converts_once(tmp_path, capsys):
    old = tmp_path / "old.pt"
    # As an older version could have written it: numpy scalars and arrays pickled as objects.
    torch.save(_minimal(best_val=np.float64(3.25), env_rng=[np.arange(4)], stats={"a": [np.float32(1)]}), old)
    with pytest.raises(CheckpointError, match="numpy"):
        load_checkpoint(old)
    new = tmp_path / "new.pt"
    assert ck.main(["convert", str(old), str(new)]) == 0
    assert "converted" in capsys.readouterr().out
    got = load_checkpoint(new)
    assert got["best_val"] == 3.25 and type(got["best_val"]) is float
    assert torch.equal(got["env_rng"][0], torch.arange(4)) and got["stats"] == {"a": [1.0]}
    assert ck.main(["check", str(new)]) == 0
    assert ck.main(["convert", str(tmp_path / "missing.pt"), str(new)]) == 1
    assert "missing.pt: no such checkpoint file" in capsys.readouterr().err


def test_unreadable_file_is_named(tmp_path):
    bad = tmp_path / "garbage.pt"
    bad.write_bytes(b"\x00not a checkpoint")
    with pytest.raises(CheckpointError, match="garbage.pt: not a readable checkpoint"):
        load_checkpoint(bad)


def test_reference_policy_loads_without_unpickling_code():
    ckpt = load_checkpoint(REFERENCE)
    assert ckpt["format"] == FORMAT and ckpt["global_step"] > 0
    torch.load(REFERENCE, weights_only=True)
