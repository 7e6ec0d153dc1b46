"""The HTML report renders in headless Chromium: table and images visible (Debian's chromium)."""
from __future__ import annotations

import shutil

import pytest

import eval as eval_cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_or_fail() -> str:
    if not CHROMIUM:
        pytest.fail("chromium is not installed (apt-get install chromium); the browser checks cannot run")
    return CHROMIUM


def test_report_renders_in_chromium(in_data_dir, tmp_path):
    exe = chromium_or_fail()
    from playwright.sync_api import sync_playwright

    report = tmp_path / "report.html"
    assert eval_cli.main(["--controller", "zero", "--baseline", "pid", "--data_path", "data", "--num_segs", "4",
                          "--report", str(report), "--no_progress"]) == 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        n_rows = page.locator("table").first.locator("tbody tr").count()
        loaded = page.evaluate("Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)")
        heading = page.locator("h1").inner_text()
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()
    assert "zero" in heading
    assert n_rows == 3  # test, baseline, ratio
    assert len(loaded) >= 4 and all(loaded)
    assert (tmp_path / "report.png").stat().st_size > 10_000
