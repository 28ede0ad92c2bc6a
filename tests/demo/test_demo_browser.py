"""End to end in headless Chromium: open the page, draw a lasso with pointer events, check the
mask against the ground truth and against `predict` on the same stroke, refine, undo, and a
refused upload. Saves a screenshot (also to $DIG_JAX_SCREENSHOT when set).

Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them); skips without them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import dig_jax
from dig_jax.data.pipeline import resolve_source
from dig_jax.demo import photos
from dig_jax.demo.server import DemoModel, create_app, default_checkpoint
from dig_jax.gestures import Gesture, GestureKind, rasterize, simulate_creation
from dig_jax.metrics import iou

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver)",
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common import utils

    class LoopbackService(Service):  # talk to chromedriver on 127.0.0.1, never "localhost"
        @property
        def service_url(self) -> str:
            return f"http://127.0.0.1:{self.port}"

        def is_connectable(self) -> bool:
            return utils.is_url_connectable(self.port, host="127.0.0.1")

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-extensions",
        "--no-first-run",
        "--window-size=1100,820",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=LoopbackService(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _scene():
    """(checkpoint, the example photo, its ground truth {0,1,255}) — the shipped checkpoint
    on the first GrabCut photo when present, else a tiny model on a procedural scene."""
    examples = photos.example_photos(1)
    photo, origin = examples[0]
    if origin["source"] == "grabcut":
        record = next(r for r in resolve_source("grabcut") if r.image_id == origin["image_id"])
    else:
        record = resolve_source("procedural:1:0", image_size=(384, 512))[0]
    loaded = record.load()
    assert loaded.image.shape == photo.image.shape
    largest = int(np.argmax(loaded.instances.reshape(len(loaded.instances), -1).sum(1)))
    gt = loaded.instances[largest].copy()
    gt[loaded.void > 0] = 255
    return examples, gt


def _wait(driver, script: str, timeout: float = 60.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.02).until(
        lambda d: d.execute_script(script)
    )


def _draw(driver, points: np.ndarray, shape, pointer: str = "mouse") -> None:
    """Press, move through `points` (photo px), release: real pointer events via WebDriver
    from a `pointer` = "mouse" | "pen" | "touch"."""
    from selenium.webdriver.common.action_chains import ActionBuilder
    from selenium.webdriver.common.actions.pointer_input import PointerInput

    rect = driver.execute_script("return document.getElementById('canvas').getBoundingClientRect()")
    h, w = shape
    css = [
        (
            round(rect["left"] + (x + 0.5) * rect["width"] / w),
            round(rect["top"] + (y + 0.5) * rect["height"] / h),
        )
        for x, y in points
    ]
    actions = ActionBuilder(driver, mouse=PointerInput(pointer, pointer), duration=5)
    actions.pointer_action.move_to_location(*css[0]).pointer_down()
    for x, y in css[1:]:
        actions.pointer_action.move_to_location(x, y)
    actions.pointer_action.pointer_up()
    actions.perform()


def test_draw_a_lasso_in_the_browser(browser, tmp_path, serving, tiny_single):
    examples, gt = _scene()
    photo = examples[0][0]
    try:
        checkpoint = default_checkpoint()
    except ValueError:
        checkpoint = tiny_single  # no shipped checkpoint: only page == predict is checked
    seg = dig_jax.load_segmenter(checkpoint)
    lasso = simulate_creation(GestureKind.LOOSE_LASSO, gt == 1, np.random.default_rng(0))
    points = np.concatenate([lasso.points, lasso.points[:1]])  # back to the start: closed
    points = np.clip(points, 0, np.array(photo.shape[::-1]) - 1)

    with serving(create_app(DemoModel(seg, checkpoint.name), examples)) as url:
        browser.get(url + "/")
        _wait(browser, "return window.digDemo && window.digDemo.ready")
        _draw(browser, points, photo.shape)
        _wait(browser, "return window.digDemo.predictions >= 1")
        state = browser.execute_script(
            "const s = window.digDemo; return {mask: s.mask, points: s.lastPoints, "
            "latency: s.lastLatencyMs, response: s.lastResponse, "
            "error: document.getElementById('message').className}"
        )
        assert state["error"] == ""
        shot = browser.get_screenshot_as_png()
        (tmp_path / "demo.png").write_bytes(shot)
        if os.environ.get("DIG_JAX_SCREENSHOT"):
            Path(os.environ["DIG_JAX_SCREENSHOT"]).write_bytes(shot)

        # The page sent the stroke that was drawn (pointer -> photo pixels is right) ...
        drawn = rasterize(Gesture(GestureKind.SCRIBBLE, points, False), photo.shape)
        sent = photos.stroke_map(state["points"], photo.shape)
        assert iou(sent, drawn) > 0.8
        # ... and shows what `predict` gives for it.
        page_mask = photos.decode_mask(state["mask"], photo.shape)
        want = seg.predict(photo.image, sent)
        page_iou, predict_iou = float(iou(page_mask, gt)), float(iou(want, gt))
        print(
            f"\nbrowser lasso on {photo.name} with {checkpoint.name}: IoU page {page_iou:.3f}, "
            f"predict {predict_iou:.3f}; release -> mask drawn {state['latency']:.0f} ms "
            f"(predict {state['response']['predict_ms']:.0f} ms, "
            f"server {state['response']['server_ms']:.0f} ms)"
        )
        assert abs(page_iou - predict_iou) < 0.01
        if checkpoint != tiny_single and examples[0][1]["source"] == "grabcut":
            assert page_iou > 0.5  # a loose lasso on GrabCut: 0.79 on average (README)

        # A pen click inside refines the mask (the previous mask goes in); Undo brings it back.
        rows, cols = np.nonzero(gt == 1)
        inside = np.array([[cols[len(cols) // 2], rows[len(rows) // 2]]], np.float32)
        _draw(browser, inside, photo.shape, "pen")
        _wait(browser, "return window.digDemo.predictions >= 2")
        state2 = browser.execute_script(
            "const s = window.digDemo; return {mask: s.mask, points: s.lastPoints}"
        )
        click = photos.stroke_map(state2["points"], photo.shape)
        want2 = seg.predict(photo.image, click, page_mask)
        np.testing.assert_array_equal(photos.decode_mask(state2["mask"], photo.shape), want2)
        browser.find_element("id", "undo").click()
        _wait(browser, f"return window.digDemo.mask === {state['mask']!r}", timeout=10)

        # A file that is not an image: a one-line message on the page; drawing still works.
        bad = tmp_path / "notes.txt"
        bad.write_text("not a photo")
        browser.find_element("id", "upload").send_keys(str(bad))
        _wait(browser, "return document.getElementById('message').className === 'error'")
        message = browser.find_element("id", "message").text
        assert "not an image" in message
        _draw(browser, np.concatenate([inside, inside + 8]), photo.shape, "touch")
        _wait(browser, "return window.digDemo.predictions >= 3")
