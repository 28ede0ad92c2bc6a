"""`python -m dig_jax <command> ...` — see `dig_jax.cli`."""

import sys

from dig_jax.cli import console_main

sys.exit(console_main())
