# The two commands the README gives.  Each sets itself up on a fresh machine:
# a virtualenv in .venv, the kit installed into it, and the pinned Apache
# Artemis fetched from Maven Central into a cache outside git.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: main test setup system-deps vectors bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# libpcap lets scapy compile BPF filters for the loopback capture tests; Chromium renders the report site
# in the browser test (tests/reports/test_browser.py).
system-deps:
	@if ! ldconfig -p 2>/dev/null | grep -q libpcap.so; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && apt-get install -y -qq libpcap0.8 >/dev/null; \
	  else echo "note: libpcap not found and cannot be installed here; capture tests will say so"; fi; \
	fi
	@if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	  else echo "note: chromium not found and cannot be installed here; the browser test will say so"; fi; \
	fi

setup: $(BIN)/python system-deps
	$(BIN)/pip install -q -e '.[dev]' tox
	$(BIN)/cck artemis fetch
	$(BIN)/cck artemis build-tools
	@if command -v npm >/dev/null; then $(BIN)/cck install-allure; \
	else echo "note: npm not found: the allure HTML report will not be built (cck install-allure)"; fi

# The main job: the conformance suite against the embedded reference broker (its broker cases on 3 processes side by
# side, docs/conformance.md; then the client cases of the kit's own client against it), evidence and allure results
# under evidence/<stamp>/<run-id>/, then the report site of both runs under report/<stamp>/ (python -m cck.reports:
# docs/reports.md).  A suite that fails still gets its report; make then exits with the first run's non-zero status.
main: setup
	$(BIN)/pip install -q -e '.[reports]'
	@stamp=$$(date -u +%Y%m%dT%H%M%SZ); dir=evidence/$$stamp; status=0; \
	$(BIN)/cck run --target reference --jobs 3 --evidence-dir "$$dir" || status=$$?; \
	$(BIN)/cck run --client kit --evidence-dir "$$dir" || { s=$$?; [ $$status = 0 ] && status=$$s; }; \
	$(BIN)/cck report --evidence "$$dir" --out "report/$$stamp" || exit $$?; \
	echo "evidence: $(CURDIR)/$$dir/"; \
	echo "report:   $(CURDIR)/report/$$stamp/index.html"; \
	if [ -f "report/$$stamp/allure/index.html" ]; then \
	  echo "allure:   $(CURDIR)/report/$$stamp/allure/index.html"; fi; \
	exit $$status

# pyenv hides Pythons that are installed but not selected; put every installed
# 3.12/3.13 on PATH (at the end) so tox finds them.  Where none exist, tox skips
# those envs and says so.
space := $(subst ,, )
EXTRA_PYTHONS := $(subst $(space),:,$(strip $(wildcard $(HOME)/.pyenv/versions/3.12*/bin $(HOME)/.pyenv/versions/3.13*/bin)))

# Every test: the tox matrix (lint, type, and two Python envs that split the tests between them (tox.ini): py311, the
# oldest Python supported, and `newest`, the newest the machine has (3.13 here); py312 and py313 run all of them by
# hand with `tox -e`).  The envs without timing cases run two at a time (this machine has two cores); the conformance
# envs, whose timing cases want the machine to themselves, run one after another afterwards.  Longest first: newest
# (the JVM-driven tests and the codec's and reference's again, about 14 min) on one core while py311 (about 6),
# reports (about 7) and wheel share the other, then type and lint.
UNIT_ENVS := newest,py311,reports,wheel,type,lint
# The stock clients' client cases run by hand (tox -e conformance-clients-stock: a JVM per case).
CONFORMANCE_ENVS := conformance-reference,conformance-clients,conformance-artemis244,conformance-artemis228
test: setup
	PATH="$$PATH$(if $(EXTRA_PYTHONS),:$(EXTRA_PYTHONS))" $(BIN)/tox run-parallel -p 2 --parallel-no-spinner -e $(UNIT_ENVS)
	PATH="$$PATH$(if $(EXTRA_PYTHONS),:$(EXTRA_PYTHONS))" $(BIN)/tox run -e $(CONFORMANCE_ENVS)

vectors: setup
	$(BIN)/cck artemis vectors

bench: setup
	$(BIN)/python benchmarks/codec_bench.py

clean:
	rm -rf $(VENV) .tox build *.egg-info report
