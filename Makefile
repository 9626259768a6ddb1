# The two commands of the README: `make up` (Zonda's main job on a local control plane) and
# `make test` (every test, both tiers). Each installs what it needs first.
PYTHON ?= python3
PIP_FLAGS ?= --quiet --disable-pip-version-check

.PHONY: install binaries browser up test unit cluster lint crds bench screenshots

install:
	$(PYTHON) -m pip install $(PIP_FLAGS) -e ".[test]"

binaries:
	bash hack/build-cluster-binaries.sh

# `zonda up` builds only the binaries its executor needs (etcd, kube-apiserver, kubectl for the local
# executor), printing each step with the ones that remain; the tests need all seven (`binaries`).
up: install
	$(PYTHON) -m controller.cli up

# Chromium and Graphviz from Debian for tests/ui (a no-op once installed).
browser:
	bash hack/install-browser.sh

test: install binaries browser
	$(PYTHON) -m pytest tests -p no:cacheprovider

# Retakes docs/ui/*.png (a plain `make test` writes them to build/ui-screenshots/, untracked).
screenshots: install binaries browser
	ZONDA_UPDATE_SCREENSHOTS=1 $(PYTHON) -m pytest tests/ui -p no:cacheprovider

unit: install
	$(PYTHON) -m pytest tests/unit -q

cluster: install binaries
	$(PYTHON) -m pytest tests/cluster

lint: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy
	lint-imports
	hadolint Dockerfile

crds:
	$(PYTHON) -m zonda.resources.crds crds
	cp crds/*.yaml helm/zonda/crds/
