"""A subprocess body shared by the allocator tests: page faults per call of a jitted function
with 64 MiB of XLA temporaries (16384 pages of 4 KiB)."""

FAULTS_PER_CALL = """
import resource
import jax, jax.numpy as jnp
f = jax.jit(lambda x, w1, w2: (x @ w1) @ w2)  # x @ w1: a 64 MiB temporary
args = jnp.ones((8192, 32)), jnp.ones((32, 2048)), jnp.ones((2048, 8))
compiled = f.lower(*args).compile()
assert compiled.memory_analysis().temp_size_in_bytes >= 2**26
faults = []
for _ in range(10):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    compiled(*args).block_until_ready()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""  # the fewest faults of calls 3-10 are min(faults[2:])
