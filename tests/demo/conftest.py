"""Fixtures for the demo tests: tiny random checkpoints and a real server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dig_jax.export import save_segmenter
from dig_jax.models.interactive import build_segmenter
from dig_jax.train.config import base_config


def tiny_checkpoint(path, multihead: bool):
    """A randomly initialised tiny HRNet (working size 32) saved at `path`."""
    config = base_config("tiny")
    config.model.multihead = multihead
    model = build_segmenter(config.model)
    x = jnp.zeros((1, 32, 32, model.in_channels))
    abstract = jax.eval_shape(lambda: model.init(jax.random.key(0), x, train=False))
    rng = np.random.default_rng(0)

    def fill(keypath, leaf):
        if "var" in jax.tree_util.keystr(keypath):  # BatchNorm running variances are positive
            return rng.uniform(0.5, 1.5, leaf.shape).astype(leaf.dtype)
        return (0.2 * rng.standard_normal(leaf.shape)).astype(leaf.dtype)

    return save_segmenter(path, jax.tree_util.tree_map_with_path(fill, abstract), config)


@pytest.fixture(scope="session")
def tiny_single(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("demo") / "single.digjax", multihead=False)


@pytest.fixture(scope="session")
def tiny_multi(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("demo") / "multi.digjax", multihead=True)


@pytest.fixture(scope="session")
def serving():
    """`with serving(app) as url:` runs `app` on a free port of 127.0.0.1 (see `_serving`)."""
    return _serving


@pytest.fixture(scope="session")
def http():
    """`http(url, data=None, headers=None) -> (status, JSON or bytes)` (see `_request`)."""
    return _request


@contextlib.contextmanager
def _serving(app) -> Iterator[str]:
    """Run `app` with uvicorn in a thread on a free port of 127.0.0.1; yields its base URL and
    stops the server on exit."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the demo server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy


def _request(url: str, data: bytes | dict | None = None, headers: dict | None = None):
    """(status, parsed JSON or raw bytes) of a GET (data None) or POST to `url`."""
    headers = dict(headers or {})
    if isinstance(data, dict):
        data = json.dumps(data).encode()
        headers.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(url, data=data, headers=headers)
    try:
        with _OPENER.open(req, timeout=60) as resp:
            status, body, kind = resp.status, resp.read(), resp.headers.get_content_type()
    except urllib.error.HTTPError as exc:
        status, body, kind = exc.code, exc.read(), exc.headers.get_content_type()
    return status, json.loads(body) if kind == "application/json" else body
