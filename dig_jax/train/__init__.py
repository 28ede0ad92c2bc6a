"""Training: losses, train state, checkpoint glue and the loop (`dig_jax.train.train.train`)."""
