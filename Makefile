# Every target creates .venv (editable install with dev extras) when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
CONFIG ?= experiments/lite_dataaug.py:demo
WORKDIR ?= workdirs/$(basename $(notdir $(firstword $(subst :, ,$(CONFIG)))))_$(lastword $(subst :, ,$(CONFIG)))
PYTEST_ARGS ?=
# pytest-xdist workers for `make test`: two processes on two cores halve the suite's wall time
# (6 min 55 s against 11 min 22 s, 2026-12-01); TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
CHECKPOINT ?= checkpoints/lite_iterative_offline_long3x.digjax
DATASETS ?= grabcut,berkeley
# where evaluate / attack / rclicks / notebooks write (default results/<target>)
OUT ?= results/$@
# make demo DEMO_ARGS="--checkpoint FILE.digjax --port 8001"
DEMO_ARGS ?=

.PHONY: venv train test test-quick lint format bench notebooks attack evaluate predict demo clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

train: $(STAMP)
	$(BIN)/python -m dig_jax.train --config $(CONFIG) --workdir $(WORKDIR)

test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# the suite without the tests marked slow (cold compiles of whole training runs, notebooks)
test-quick: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not slow" $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	@for f in benchmarks/[!_]*.py; do echo "== $$f"; $(BIN)/python $$f --quick || exit 1; done

attack: $(STAMP)
	$(BIN)/python -m dig_jax.attack --checkpoint $(CHECKPOINT) --datasets $(DATASETS) --out $(OUT)

.PHONY: rclicks
rclicks: $(STAMP)  # RClicks: MAP = ud | dt | sm | a clickability model file (default dt)
	$(BIN)/python -m dig_jax.rclicks --checkpoint $(CHECKPOINT) --datasets $(DATASETS) --map $(or $(MAP),dt) --out $(OUT)

evaluate: $(STAMP)
	$(BIN)/python -m dig_jax.evaluate --predictor $(CHECKPOINT),grabcut,filled --datasets $(DATASETS) --out $(OUT)

demo: $(STAMP)
	$(BIN)/python -m dig_jax.demo $(DEMO_ARGS)

notebooks: $(STAMP)
	$(BIN)/python -m dig_jax.notebooks $(NOTEBOOKS) --out $(OUT)

# make predict IMAGE=photo.jpg POINTS="120,80" [CHECKPOINT=...] [OUT=mask.png]
predict: $(STAMP)
	$(BIN)/python -m dig_jax.predict --checkpoint $(CHECKPOINT) --image $(IMAGE) \
	  $(if $(GESTURE),--gesture $(GESTURE),--points "$(POINTS)") --out $(if $(filter results/predict,$(OUT)),results/predict/mask.png,$(OUT))

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .jax_cache
