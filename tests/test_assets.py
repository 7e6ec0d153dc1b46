"""Tests of ppo_training.assets: fetching the model and segment CSVs from local copies, offline.

The source of real assets is the shared folder beside the checkout (``../shared/tinyphysics``);
every test writes into ``tmp_path`` only, and the network is never used (downloads are stubbed).
"""
from __future__ import annotations

import shutil
import urllib.error
import zipfile
from pathlib import Path

import pytest

import ppo_training
from ppo_training import assets

SHARED = Path(ppo_training.PROJECT_ROOT).parent / "shared" / "tinyphysics"
# Every CSV of the shared copy (evaluation and training-region segments) is fetched.
N_SHARED_CSV = len(list((SHARED / "data").glob("*.csv")))

pytestmark = pytest.mark.skipif(
    not (SHARED / "models" / assets.MODEL_NAME).is_file() or not (SHARED / "data").is_dir(),
    reason=f"shared TinyPhysics assets not found at {SHARED}",
)


@pytest.fixture(autouse=True)
def _no_env_no_network(monkeypatch):
    """No test may pick up a real $TINYPHYSICS_ASSETS or reach the network."""
    monkeypatch.delenv(assets.ENV_VAR, raising=False)

    def refuse(*args, **kwargs):
        raise urllib.error.URLError("network disabled in tests")

    monkeypatch.setattr(assets.urllib.request, "urlopen", refuse)


def shared_csvs() -> list[Path]:
    return sorted((SHARED / "data").glob("*.csv"))


def csv_names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.csv"))


def no_temp_files(folder: Path) -> bool:
    return not list(folder.rglob("*.part"))


def test_fetch_from_shared_folder_then_noop(tmp_path):
    dest = tmp_path / "proj"
    report = assets.fetch(SHARED, dest=dest, progress=False)

    mp = assets.model_path(dest)
    assert mp == dest / "models" / "tinyphysics.onnx"
    assert assets.md5_of(mp) == assets.MODEL_MD5
    assert report.model == "copied"
    assert csv_names(dest / "data") == [p.name for p in shared_csvs()]
    assert len(report.data_copied) == N_SHARED_CSV
    assert not (dest / "data" / "SHA256SUMS").exists()
    for p in shared_csvs():
        assert (dest / "data" / p.name).read_bytes() == p.read_bytes()
    assert no_temp_files(dest)
    st = assets.status(dest)
    assert st.ok and st.n_csv == N_SHARED_CSV and not st.synthetic

    mtimes = {p: p.stat().st_mtime_ns for p in dest.rglob("*") if p.is_file()}
    again = assets.fetch(SHARED, dest=dest, progress=False)
    assert again.nothing_copied
    assert again.model == "present" and again.data_copied == [] and again.data_kept == N_SHARED_CSV
    assert {p: p.stat().st_mtime_ns for p in dest.rglob("*") if p.is_file()} == mtimes


def test_cli_fetch_and_status(tmp_path, capsys):
    dest = tmp_path / "proj"
    assert assets.main(["status", "--dest", str(dest)]) == 1
    assert "MISSING" in capsys.readouterr().out
    assert assets.main(["fetch", "--from", str(SHARED), "--dest", str(dest), "--no-progress"]) == 0
    capsys.readouterr()
    assert assets.main(["fetch", "--from", str(SHARED), "--dest", str(dest), "--no-progress"]) == 0
    assert "nothing copied" in capsys.readouterr().out
    assert assets.main(["status", "--dest", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "md5 OK" in out and f"{N_SHARED_CSV} CSV files" in out


def test_data_only_and_model_only(tmp_path):
    d1, d2 = tmp_path / "a", tmp_path / "b"
    r1 = assets.fetch(SHARED, dest=d1, want_model=False, progress=False)
    assert r1.model is None and not assets.model_path(d1).exists()
    assert len(csv_names(d1 / "data")) == N_SHARED_CSV
    r2 = assets.fetch(SHARED, dest=d2, want_data=False, progress=False)
    assert r2.model == "copied" and not (d2 / "data").exists()


def test_fetch_from_zip_flattens(tmp_path):
    src = shared_csvs()[:2]
    zpath = tmp_path / "SYNTHETIC_V0.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("SYNTHETIC_V0/", "")
        zf.write(src[0], "SYNTHETIC_V0/00000.csv")
        zf.write(src[1], "SYNTHETIC_V0/00001.csv")
        # macOS junk and non-CSV members must be ignored.
        zf.writestr("__MACOSX/SYNTHETIC_V0/._00000.csv", b"junk")
        zf.writestr("SYNTHETIC_V0/README.txt", b"not data")
    dest = tmp_path / "proj"
    report = assets.fetch(zpath, dest=dest, want_model=False, progress=False)
    assert csv_names(dest / "data") == ["00000.csv", "00001.csv"]
    assert not (dest / "data" / "SYNTHETIC_V0").exists()
    assert (dest / "data" / "00001.csv").read_bytes() == src[1].read_bytes()
    assert report.data_copied == ["00000.csv", "00001.csv"]
    assert assets.fetch(zpath, dest=dest, want_model=False, progress=False).nothing_copied


def test_zip_without_model_reports_model_missing(tmp_path):
    zpath = tmp_path / "data.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.write(shared_csvs()[0], "SYNTHETIC_V0/00000.csv")
    dest = tmp_path / "proj"
    with pytest.raises(assets.AssetError, match="model not found"):
        assets.fetch(zpath, dest=dest, progress=False)
    # The data part was still done, and the error carries the report.
    assert csv_names(dest / "data") == ["00000.csv"]


def test_fetch_from_unzipped_folder_with_synthetic_v0(tmp_path):
    src = tmp_path / "unzipped"
    (src / "SYNTHETIC_V0").mkdir(parents=True)
    for p in shared_csvs()[:3]:
        shutil.copy(p, src / "SYNTHETIC_V0" / p.name)
    dest = tmp_path / "proj"
    assets.fetch(src, dest=dest, want_model=False, progress=False)
    assert csv_names(dest / "data") == [p.name for p in shared_csvs()[:3]]


def test_bare_csv_folder_has_no_model(tmp_path, capsys):
    src = tmp_path / "csvs"
    src.mkdir()
    shutil.copy(shared_csvs()[0], src / "00000.csv")
    dest = tmp_path / "proj"
    assert assets.main(["fetch", "--from", str(src), "--dest", str(dest), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "model not found" in err and str(src) in err
    assert csv_names(dest / "data") == ["00000.csv"]
    assert not assets.model_path(dest).exists()


def test_challenge_repo_checkout(tmp_path):
    repo = tmp_path / "controls_challenge"
    (repo / "models").mkdir(parents=True)
    shutil.copy(SHARED / "models" / assets.MODEL_NAME, repo / "models" / assets.MODEL_NAME)
    (repo / "tinyphysics.py").write_text("# stand-in\n")
    (repo / "data").mkdir()  # empty, as in a fresh checkout

    dest = tmp_path / "proj"
    with pytest.raises(assets.AssetError, match="absent") as info:
        assets.fetch(repo, dest=dest, progress=False)
    assert info.value.report is not None and info.value.report.model == "copied"
    assert assets.md5_of(assets.model_path(dest)) == assets.MODEL_MD5
    assert assets.fetch(repo, dest=dest, want_data=False, progress=False).nothing_copied

    for p in shared_csvs()[:2]:
        shutil.copy(p, repo / "data" / p.name)
    report = assets.fetch(repo, dest=tmp_path / "proj2", progress=False)
    assert report.model == "copied" and len(report.data_copied) == 2


def test_corrupt_model_is_rejected(tmp_path):
    src = tmp_path / "src"
    (src / "models").mkdir(parents=True)
    good = (SHARED / "models" / assets.MODEL_NAME).read_bytes()
    (src / "models" / assets.MODEL_NAME).write_bytes(good[:-1] + bytes([good[-1] ^ 0xFF]))
    dest = tmp_path / "proj"
    with pytest.raises(assets.AssetError, match="md5"):
        assets.fetch(src, dest=dest, want_data=False, progress=False)
    assert not assets.model_path(dest).exists()
    assert no_temp_files(dest)


def test_bad_model_at_dest_is_replaced(tmp_path):
    dest = tmp_path / "proj"
    mp = assets.model_path(dest)
    mp.parent.mkdir(parents=True)
    mp.write_bytes(b"not a model")
    assert not assets.status(dest).model_ok
    report = assets.fetch(SHARED, dest=dest, want_data=False, progress=False)
    assert report.model == "copied" and assets.md5_of(mp) == assets.MODEL_MD5


def source_copy(tmp_path: Path) -> Path:
    """A writable copy of the shared source folder (data/ with its SHA256SUMS; no model)."""
    src = tmp_path / "src"
    shutil.copytree(SHARED / "data", src / "data")
    (src / "data").chmod(0o755)
    for p in (src / "data").iterdir():
        p.chmod(0o644)
    return src


def tamper(path: Path) -> None:
    """Change one byte, keeping the size (a size check alone cannot notice)."""
    data = path.read_bytes()
    path.write_bytes(data.replace(b"0", b"1", 1))


def test_checksum_file_in_source_is_enforced(tmp_path):
    src = source_copy(tmp_path)
    assert (src / "data" / assets.CHECKSUM_FILE).is_file()
    tamper(src / "data" / "00003.csv")
    dest = tmp_path / "proj"
    with pytest.raises(assets.AssetError, match="sha256"):
        assets.fetch(src, dest=dest, want_model=False, progress=False)
    assert not (dest / "data" / "00003.csv").exists()
    assert no_temp_files(dest)


def test_every_copied_file_is_verified_and_every_problem_named(tmp_path, capsys):
    src = source_copy(tmp_path)
    data = src / "data"
    tamper(data / "00003.csv")
    tamper(data / "05001.csv")
    shutil.copy(data / "00000.csv", data / "99999.csv")  # not in SHA256SUMS: cannot be verified
    (data / "00005.csv").unlink()  # listed in SHA256SUMS, gone from the source
    dest = tmp_path / "proj"
    (dest / "data").mkdir(parents=True)
    (dest / "data" / "00003.csv").write_text("what was there before\n")

    rc = assets.main(["fetch", "--from", str(src), "--dest", str(dest), "--data-only", "--no-progress"])
    assert rc == 1
    out, err = capsys.readouterr()
    for name in ("00003.csv", "05001.csv", "99999.csv", "00005.csv"):
        assert name in err, name
    assert "refused 2 file(s)" in err and "not listed in" in err and "missing from" in err
    # Nothing refused reached a final name, and what was already there is untouched.
    assert (dest / "data" / "00003.csv").read_text() == "what was there before\n"
    assert not (dest / "data" / "05001.csv").exists() and not (dest / "data" / "99999.csv").exists()
    copied = sorted(set(p.name for p in shared_csvs()) - {"00003.csv", "05001.csv", "00005.csv"})
    assert csv_names(dest / "data") == sorted(copied + ["00003.csv"])
    for name in copied:
        assert (dest / "data" / name).read_bytes() == (SHARED / "data" / name).read_bytes()
    assert f"{len(copied)} CSV files written" in out
    assert no_temp_files(dest)


def test_present_file_with_other_content_is_copied_again(tmp_path):
    dest = tmp_path / "proj"
    first = assets.fetch(SHARED, dest=dest, want_model=False, progress=False)
    assert first.data_verified == N_SHARED_CSV and first.checksum_file == SHARED / "data" / "SHA256SUMS"
    victim = dest / "data" / "00002.csv"
    tamper(victim)
    report = assets.fetch(SHARED, dest=dest, want_model=False, progress=False)
    assert report.data_copied == ["00002.csv"] and report.data_replaced == ["00002.csv"]
    assert report.data_kept == N_SHARED_CSV - 1 and report.data_verified == N_SHARED_CSV
    assert victim.read_bytes() == (SHARED / "data" / "00002.csv").read_bytes()


def test_malformed_checksum_file_is_named(tmp_path):
    src = source_copy(tmp_path)
    sums = src / "data" / assets.CHECKSUM_FILE
    sums.write_text(sums.read_text() + "not a checksum line\n")
    with pytest.raises(assets.AssetError, match=r"SHA256SUMS: line 154 is not in sha256sum format"):
        assets.fetch(src, dest=tmp_path / "proj", want_model=False, progress=False)


def test_env_var_is_honoured(tmp_path, monkeypatch):
    monkeypatch.setenv(assets.ENV_VAR, str(SHARED))
    dest = tmp_path / "proj"
    report = assets.fetch(dest=dest, progress=False)
    assert str(SHARED) in report.source and assets.ENV_VAR in report.source
    assert assets.status(dest).ok


def test_offline_without_source_names_from(tmp_path, capsys):
    dest = tmp_path / "proj"
    rc = assets.main(["fetch", "--dest", str(dest), "--no-progress"])
    assert rc != 0
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert "could not reach raw.githubusercontent.com" in err
    assert "--from" in err and assets.ENV_VAR in err
    assert "Traceback" not in err
    assert not assets.model_path(dest).exists() and no_temp_files(dest)


def test_offline_data_download_leaves_nothing(tmp_path, capsys):
    dest = tmp_path / "proj"
    assert assets.main(["fetch", "--dest", str(dest), "--data-only", "--no-progress"]) == 1
    assert "huggingface.co" in capsys.readouterr().err
    assert csv_names(dest / "data") == [] and no_temp_files(dest)


def test_upstream_noop_when_present(tmp_path):
    # Everything present and valid: no download is even attempted (urlopen raises in tests).
    dest = tmp_path / "proj"
    assets.fetch(SHARED, dest=dest, progress=False)
    report = assets.fetch(dest=dest, progress=False)
    assert report.nothing_copied and report.model == "present"


def test_nonexistent_source(tmp_path, capsys):
    missing = tmp_path / "no_such_folder"
    rc = assets.main(["fetch", "--from", str(missing), "--dest", str(tmp_path / "proj")])
    assert rc == 1
    err = capsys.readouterr().err
    assert "error:" in err and str(missing) in err and "does not exist" in err


def test_synthetic_dest_is_not_mixed(tmp_path):
    from ppo_training.data.segments import SYNTHETIC_MANIFEST

    assert assets.SYNTHETIC_MANIFEST == SYNTHETIC_MANIFEST
    dest = tmp_path / "proj"
    (dest / "data").mkdir(parents=True)
    (dest / "data" / SYNTHETIC_MANIFEST).write_text("{}")
    with pytest.raises(assets.AssetError, match="generated"):
        assets.fetch(SHARED, dest=dest, want_model=False, progress=False)
