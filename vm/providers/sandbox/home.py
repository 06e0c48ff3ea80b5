"""A sandbox's folders on the host (`SandboxFolders`): made private to it at each start,
and the map between the paths its programs and OSWorld's tasks use (/home/user, /tmp, ~)
and the host folders they name."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from vm.providers.isolation import INSIDE_HOME, INSIDE_TMP
from vm.providers.sandbox.identity import HostIdentity, give_tree_to

OSWORLD_HOME = INSIDE_HOME  # OSWorld images' user home: the sandbox home


class SandboxFolders:
    """Where one sandbox's files lie: sandboxes/<name>/ and snapshots/<name>/ of its
    workspace."""

    def __init__(self, workspace: Path, name: str) -> None:
        self.workspace = workspace
        self.name = name
        self.root = workspace / "sandboxes" / name
        self.home = self.root / "home"
        self.logs = self.root / "logs"
        self.state_file = self.root / "state.json"
        self.xauthority = self.root / "xauthority"
        self.tmp = self.root / "tmp"
        # shown read-only at INSIDE_WORKBENCH: passwd, X cookie, terminal launcher, rc.xml
        self.workbench = self.root / "workbench"
        self.snapshots = workspace / "snapshots" / name

    def make(self, identity: HostIdentity | None) -> None:
        """The sandbox's folders on the host: every one of them 0700, so no other local
        user reaches its files (the workspace's sandboxes/ and snapshots/ too); its home
        and /tmp belong to the inside user's host identity (a home of an older start, made
        before identities, is given to it: links are changed, never followed)."""
        for folder in (self.workspace / "sandboxes", self.root, self.logs,
                       self.workspace / "snapshots", self.snapshots):
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(0o700)
        # shown read-only at INSIDE_WORKBENCH: the inside user reads it, nobody else can
        # reach it (the sandbox's folder above is 0700)
        self.workbench.mkdir(exist_ok=True)
        self.workbench.chmod(0o755)
        # /tmp starts empty, as after a boot (nothing an agent planted there last time)
        if self.tmp.is_dir() and not self.tmp.is_symlink():
            shutil.rmtree(self.tmp, ignore_errors=True)
        for folder in (self.home, self.tmp):
            folder.mkdir(exist_ok=True)
            if identity is not None and identity.owner() is not None:
                info = folder.stat()
                if (info.st_uid, info.st_gid) != identity.owner():
                    give_tree_to(folder, identity)
            folder.chmod(0o700)

    def guest_location(self, path: str, inside_tmp: bool) -> tuple[Path, str]:
        """(host folder, path beneath it) of a guest path: `~/…`, `/home/user/…` or
        relative: the home; the host path of a file in the home or the sandbox's /tmp;
        `/tmp/…` when `inside_tmp` (in namespaces, where /tmp is the sandbox's own): its
        /tmp. Anything else is refused (PermissionError). Only the words are looked at:
        links are left to Beneath, which the file calls go through."""
        outside = PermissionError(f"path {path!r} is outside sandbox {self.name}'s home "
                                  f"{self.home}")
        if path == "~" or path.startswith("~/"):
            return self.home, path[2:]
        if not os.path.isabs(path):
            return self.home, path
        places = [(OSWORLD_HOME, self.home), (str(self.home), self.home),
                  (str(self.tmp), self.tmp)]
        for prefix, folder in places:
            if path == prefix or path.startswith(prefix + "/"):
                return folder, path[len(prefix) + 1:]
        if path == str(self.workspace) or path.startswith(f"{self.workspace}/"):
            raise outside  # a host path elsewhere in the workspace (another sandbox's)
        if inside_tmp and (path == INSIDE_TMP or path.startswith(INSIDE_TMP + "/")):
            return self.tmp, path[len(INSIDE_TMP) + 1:]
        raise outside

    def inside_path(self, path: Path) -> str:
        """The path inside the sandbox of a host path in its home or /tmp."""
        path = Path(path)
        for host, inside in ((self.home, INSIDE_HOME), (self.tmp, INSIDE_TMP)):
            if path == host or host in path.parents:
                return inside + str(path)[len(str(host)):]
        return str(path)

    def host_folder(self, cwd: str) -> Path | None:
        """The host folder of a working folder inside (None: not in the home or /tmp)."""
        for host, inside in ((self.home, INSIDE_HOME), (self.tmp, INSIDE_TMP)):
            if cwd == inside or cwd.startswith(inside + "/"):
                return Path(str(host) + cwd[len(inside):])
        return None
