"""`python -m dig_jax <command> ...` — see `dig_jax.cli`."""

import sys

from dig_jax.cli import main

sys.exit(main())
