"""Browser demo: a small ASGI app (starlette + uvicorn) and one hand-written canvas page.

`python -m dig_jax.demo [--checkpoint FILE] [--port 8000]` (or `make demo`). The page, its
script and style ship in `dig_jax/demo/static/`; nothing is fetched from the network.
"""

from dig_jax.demo.photos import decode_photo, stroke_map
from dig_jax.demo.server import DEFAULT_CHECKPOINTS, DemoModel, create_app, default_checkpoint

__all__ = [
    "DEFAULT_CHECKPOINTS",
    "DemoModel",
    "create_app",
    "decode_photo",
    "default_checkpoint",
    "stroke_map",
]
