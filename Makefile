# SPDX-License-Identifier: Apache-2.0
# InferScope developer targets. Set up first (README, first command): python3 -m venv .venv && ...
# Everything generated goes to outputs/ (git-ignored; the pre-commit hook blocks committing it).
#
#   make demo        profile examples/llm_demo.py -> outputs/demo_llm_trace.iscope, outputs/llm_report.{md,html}
#                    make demo MODEL=Qwen/Qwen3-0.6B-Base DEMO_ARGS="--stress-mode --batch-size 8 --max-new-tokens 128"
#   make test        the test suite
#   make coverage    the suite under pytest-cov: HTML in coverage/html/, total printed
#   make integration demo + the live-collection tests, end to end
#   make bench       the quick benchmarks (bench/README.md has the full ones)
#   make examples    regenerate examples/reports/ (deterministic: committed or shared traces only)
#   make hooks       enable scripts/git-hooks for this clone
#   make cleanup-temp-docs  remove reports/traces left in the repository root
#   make clean       also outputs/, coverage/ and caches

PY ?= .venv/bin/python
OUT ?= outputs
MODEL ?=
DEMO_ARGS ?=
INFERSCOPE = $(PY) -m inferscope

.PHONY: help demo test coverage integration bench examples examples-demo-trace hooks cleanup-temp-docs clean

help:
	@sed -n 's/^#   make /make /p' Makefile

demo:
	@mkdir -p $(OUT)
	$(INFERSCOPE) run --report $(OUT)/llm_report.md -- $(PY) examples/llm_demo.py $(if $(MODEL),--model $(MODEL)) $(DEMO_ARGS) --output $(OUT)/demo_llm_trace.iscope
	$(INFERSCOPE) analyze $(OUT)/demo_llm_trace.iscope -o $(OUT)/llm_report.html -q
	@echo "demo: trace $(OUT)/demo_llm_trace.iscope, reports $(OUT)/llm_report.md and $(OUT)/llm_report.html"

test:
	$(PY) -m pytest

coverage:
	@rm -rf coverage && mkdir -p coverage
	$(PY) -m pytest --cov --cov-report=html --cov-report=
	@$(PY) -m coverage report --format=total | sed 's/^/coverage total: /; s/$$/% (HTML: coverage\/html\/index.html)/'

integration: demo
	$(PY) -m pytest -m live

bench:
	$(PY) bench/bench_kineto.py --skip-synthetic --repeat 1
	$(PY) bench/bench_nsys.py --sizes 1e5 --repeat 1
	$(PY) bench/bench_overhead.py --pairs 5 --workloads demo --modes base,inferscope

examples:
	$(PY) scripts/make_examples.py

# re-record the CPU demo trace behind examples/reports/cpu_demo.* (a live run: not deterministic)
examples-demo-trace:
	$(PY) scripts/make_examples.py --record-demo

hooks:
	git config core.hooksPath scripts/git-hooks
	@echo "pre-commit hook enabled (scripts/git-hooks/pre-commit)"

cleanup-temp-docs:
	rm -f report.md report.json report.html timeline.json report_*.md report_*.html report_*.json \
	      trace_*.json llm_report.* demo_llm_trace.* scaling_summary.* *.iscope *.iscope.journal
	rm -rf inferscope-out tables

clean: cleanup-temp-docs
	rm -rf $(OUT) coverage .coverage .coverage.* .pytest_cache build dist bench/out
	find . -name __pycache__ -type d -not -path './.venv/*' -prune -exec rm -rf {} +
