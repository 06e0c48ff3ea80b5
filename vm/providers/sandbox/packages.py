"""`apt`, `apt-get` and `pip` inside a sandbox, as OSWorld's tasks use them offline.

A sandbox's packages are this machine's (its /usr is bound read-only), so nothing can be
installed inside. OSWorld's setups run `sudo -S apt update -y && sudo -S apt install jq -y`
to have a tool the task needs: here `update` and `upgrade` succeed doing nothing, `install`
succeeds when every package named is installed on this machine (the Makefile's
APT_PACKAGES has those OSWorld's tasks install) and fails naming what is missing and where
to add it; `remove` fails. As on OSWorld's image, changing packages needs root (sudo:
vm.providers.sandbox.sudo). Other sub-commands (`list`, `show`, `policy`) run the real
program. `pip install` succeeds when every requirement is installed for the Python the
sandbox runs (its `python`), else fails naming it; other pip commands run the real pip.

The sandbox runs it from its commands folder (vm.providers.sandbox.image) as
`python -m vm.providers.sandbox.packages NAME ARGS`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib import metadata

from vm.providers.isolation import INSIDE_BIN

MODULE = "vm.providers.sandbox.packages"
APT_NAMES = ("apt", "apt-get")
PIP_NAMES = ("pip", "pip3")
NAMES = (*APT_NAMES, *PIP_NAMES)
APT_FAILED = 100  # apt's status for an error
# apt options that take the next word as their value
_APT_VALUE_OPTIONS = frozenset({"-o", "--option", "-t", "--target-release",
                                "--default-release", "-c", "--config-file", "-a",
                                "--host-architecture"})
_NOTHING_TO_DO = ("update", "upgrade", "full-upgrade", "dist-upgrade", "autoclean", "clean")
_REMOVING = ("remove", "purge", "autoremove", "autopurge")
_INSTALLING = ("install", "reinstall")
# pip install options that take the next word as their value
_PIP_VALUE_OPTIONS = frozenset({"-i", "--index-url", "--extra-index-url", "-f",
                                "--find-links", "-t", "--target", "--prefix", "--root",
                                "-c", "--constraint", "--platform", "--python-version",
                                "--implementation", "--abi", "--src", "--upgrade-strategy",
                                "--progress-bar", "--cache-dir", "--log", "--timeout",
                                "--retries", "--proxy", "--trusted-host", "--cert",
                                "--client-cert", "--exists-action", "--root-user-action",
                                "--report", "--config-settings", "-C", "--global-option",
                                "--no-binary", "--only-binary", "--python"})
_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)$")
MISSING_PACKAGE = ("E: a sandbox cannot install packages: {package} is not installed here; "
                   "add it to the Makefile's APT_PACKAGES (a sandbox's packages are this "
                   "machine's)")
NOT_ROOT = ("E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: "
            "Permission denied)\nE: Unable to acquire the dpkg frontend lock "
            "(/var/lib/dpkg/lock-frontend), are you root?")


def real_program(name: str) -> str | None:
    """The program `name` on PATH past the sandbox's own commands folder."""
    folders = [f for f in os.environ.get("PATH", "").split(os.pathsep)
               if f and os.path.realpath(f) != os.path.realpath(INSIDE_BIN)]
    return shutil.which(name, path=os.pathsep.join(folders))


def installed_version(package: str) -> str | None:
    """The version of Debian package `package` installed on this machine; None if it is
    not installed (dpkg's database is the host's, bound read-only)."""
    try:
        result = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}|${Version}",
                                 "--", package], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    status, _, version = result.stdout.partition("|")
    return version if result.returncode == 0 and status.startswith("ii") else None


def apt_packages(words: list[str]) -> list[str]:
    """The package names an `apt install` command line gives (options, their values,
    versions, releases and architectures left out)."""
    packages = []
    words = list(words)
    while words:
        word = words.pop(0)
        if word in _APT_VALUE_OPTIONS and words:
            words.pop(0)
        elif not word.startswith("-"):
            packages.append(re.split(r"[=/:]", word, maxsplit=1)[0])
    return packages


def apt(name: str, args: list[str]) -> int:
    """OSWorld's `apt`/`apt-get` commands, offline (see the module docstring)."""
    command = next((word for word in args if not word.startswith("-")), None)
    if command is None or command not in (*_NOTHING_TO_DO, *_REMOVING, *_INSTALLING):
        real = real_program(name)
        if real is None:
            print(f"E: {name} is not installed here", file=sys.stderr)
            return APT_FAILED
        os.execv(real, [name, *args])
    if os.geteuid() != 0:
        print(NOT_ROOT, file=sys.stderr)
        return APT_FAILED
    print("Reading package lists... Done")
    if command in _NOTHING_TO_DO:
        print(f"N: a sandbox's packages are this machine's: `{name} {command}` has nothing "
              "to do")
        return 0
    if command in _REMOVING:
        print(f"E: a sandbox cannot remove packages: its packages are this machine's, "
              f"read-only (`{name} {command}`)", file=sys.stderr)
        return APT_FAILED
    rest = args[args.index(command) + 1:]
    packages = apt_packages(rest)
    files = [p for p in packages if p.endswith(".deb") or p.startswith((".", "/"))]
    if files:
        print(f"E: a sandbox cannot install package files ({', '.join(files)})",
              file=sys.stderr)
        return APT_FAILED
    if not packages:
        print("0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.")
        return 0
    print("Building dependency tree... Done\nReading state information... Done")
    versions = {package: installed_version(package) for package in packages}
    missing = [package for package, version in versions.items() if version is None]
    if missing:
        print(MISSING_PACKAGE.format(package=", ".join(missing)), file=sys.stderr)
        return APT_FAILED
    for package, version in versions.items():
        print(f"{package} is already the newest version ({version}).")
    print("0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.")
    return 0


def pip_requirements(words: list[str]) -> tuple[list[str], list[str]]:
    """(requirements, what cannot be checked here: files, folders, URLs, -r/-e) of a
    `pip install` command line."""
    requirements: list[str] = []
    unchecked: list[str] = []
    words = list(words)
    while words:
        word = words.pop(0)
        if word in ("-r", "--requirement", "-e", "--editable"):
            unchecked.append(f"{word} {words.pop(0) if words else ''}".strip())
        elif word.startswith(("--requirement=", "--editable=")):
            unchecked.append(word)
        elif word in _PIP_VALUE_OPTIONS and words:
            words.pop(0)
        elif word.startswith("-"):
            continue
        elif "/" in word or word.startswith(".") or word.endswith((".whl", ".tar.gz", ".zip")):
            unchecked.append(word)
        else:
            requirements.append(word)
    return requirements, unchecked


def unsatisfied(requirement: str) -> str | None:
    """Why `requirement` (`name`, `name[extra]`, `name>=1.2`) is not installed for this
    Python; None when it is."""
    match = _REQUIREMENT.match(requirement)
    if match is None:
        return f"{requirement!r} is no requirement this sandbox can check"
    name, _extras, specifier = match.groups()
    try:
        version = metadata.version(name)
    except metadata.PackageNotFoundError:
        return f"{name} is not installed here"
    specifier = specifier.strip().split(";")[0].strip()
    if specifier:
        try:
            from packaging.specifiers import InvalidSpecifier, SpecifierSet
        except ImportError:
            return None  # installed; its version cannot be compared here
        try:
            if not SpecifierSet(specifier).contains(version, prereleases=True):
                return f"{name} {version} is installed here, not {specifier}"
        except InvalidSpecifier:
            return f"{requirement!r} is no requirement this sandbox can check"
    return None


def pip(name: str, args: list[str]) -> int:
    """`pip install` of what is installed succeeds, of anything else fails saying so;
    other pip commands run the real pip."""
    command = next((word for word in args if not word.startswith("-")), None)
    if command != "install":
        real = real_program(name)
        if real is None:
            print(f"{name}: not installed here", file=sys.stderr)
            return 1
        os.execv(real, [name, *args])
    requirements, unchecked = pip_requirements(args[args.index(command) + 1:])
    problems = [f"{word}: a sandbox cannot install from it" for word in unchecked]
    problems += [why for why in map(unsatisfied, requirements) if why is not None]
    if problems:
        print(f"ERROR: a sandbox cannot install Python packages (its Python, {sys.executable}, "
              f"is this machine's, read-only): {'; '.join(problems)}; add what a task needs "
              "to the workbench's Python environment (pyproject.toml)", file=sys.stderr)
        return 1
    for requirement in requirements:
        match = _REQUIREMENT.match(requirement)
        assert match is not None
        print(f"Requirement already satisfied: {requirement} "
              f"({metadata.version(match.group(1))})")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in NAMES:
        print(f"usage: python -m {MODULE} {{{','.join(NAMES)}}} ARGS", file=sys.stderr)
        return 2
    name, rest = args[0], args[1:]
    return apt(name, rest) if name in APT_NAMES else pip(name, rest)


if __name__ == "__main__":
    sys.exit(main())
