"""`python -m dig_jax.demo [--checkpoint FILE] [--port 8000]`: the browser demo.

Loads the segmenter (default: the shipped gesture-agnostic checkpoint, `default_checkpoint`),
compiles it once, and serves one page on http://127.0.0.1:PORT/: pick or upload a photo, draw
with the radius-5 brush, get the mask; keep drawing to refine it. A checkpoint that cannot be
loaded ends the command with one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

from dig_jax.demo import photos

MAX_EXAMPLES = 64  # example photos are kept in memory


def load_app(checkpoint: Path | None, max_side: int = photos.MAX_SIDE, examples: int = 4):
    """(app, checkpoint path, warm-up seconds); any failure to load raises ValueError."""
    from dig_jax.demo.server import DemoModel, create_app, default_checkpoint
    from dig_jax.export import load_segmenter

    path = default_checkpoint() if checkpoint is None else Path(checkpoint)
    try:
        model = DemoModel(load_segmenter(path), name=path.name)
        model.warm_up()
    except Exception as exc:  # a corrupt file fails in many ways (bad magic, msgpack, shapes)
        raise ValueError(f"cannot load checkpoint {path}: {type(exc).__name__}: {exc}") from exc
    app = create_app(model, photos.example_photos(examples, max_side), max_side)
    return app, path


def check_listen(host: str, port: int) -> None:
    """OSError unless a server can listen on (host, port) now: the address resolves, the port
    is free and allowed. The test socket is closed again at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.create_server((host, port), family=family):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=None, help="a .digjax segmenter file")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--max-side",
        type=int,
        default=photos.MAX_SIDE,
        help="uploads are downscaled to this long side (px)",
    )
    parser.add_argument("--examples", type=int, default=4, help="example photos offered")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:  # uvicorn would print nothing and serve nothing
        parser.error(f"--port must be in 1..65535, got {args.port}")
    if args.max_side < 32:  # uploads would shrink to nothing
        parser.error(f"--max-side must be >= 32 px, got {args.max_side}")
    if not 1 <= args.examples <= MAX_EXAMPLES:
        parser.error(f"--examples must be in 1..{MAX_EXAMPLES}, got {args.examples}")
    try:
        check_listen(args.host, args.port)
    except OSError as error:  # uvicorn would fail only after "ready" was printed
        parser.error(f"--host/--port: cannot listen on {args.host}:{args.port} ({error})")
    try:
        app, path = load_app(args.checkpoint, args.max_side, args.examples)
    except ValueError as exc:
        print("dig_jax.demo: error: " + " ".join(str(exc).split()), file=sys.stderr)
        return 2
    import uvicorn

    print(f"dig_jax.demo: {path.name} ready on http://{args.host}:{args.port}/", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    from dig_jax.cpu import prepare_entry_point

    prepare_entry_point()  # on jemalloc: CPU calls on this thread (see it)
    sys.exit(main())
