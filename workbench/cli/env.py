"""`workbench env …`: start, list, look at and stop sandbox desktops, and manage their
snapshots. Sandboxes outlive this command; later commands attach to them by name."""

from __future__ import annotations

import argparse
import signal
import threading
import time
from pathlib import Path

from trainer.store.layout import default_workspace
from vm.errors import EnvironmentDead
from vm.providers.isolation import isolation_warnings
from vm.providers.sandbox import (
    LimitsError,
    SandboxProvider,
    reclaim_orphans,
    sweep_stale_groups,
)


def workspace_path(args: argparse.Namespace) -> Path:
    path = default_workspace(args.workspace).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--size: expected WIDTHxHEIGHT, got {text!r}"
                                         ) from None
    if not (320 <= width <= 7680 and 240 <= height <= 4320):
        raise argparse.ArgumentTypeError(f"--size: {text} is outside 320x240..7680x4320")
    return width, height


def register(subparsers: argparse._SubParsersAction) -> None:
    env = subparsers.add_parser("env", help="sandbox desktops and their snapshots")
    sub = env.add_subparsers(dest="env_command", metavar="ACTION", required=True)

    up = sub.add_parser("up", help="start a sandbox desktop and print how to reach it")
    up.add_argument("--name", default="default", help="sandbox name (default: default)")
    up.add_argument("--size", type=_size, default=(1280, 800), help="screen WIDTHxHEIGHT")
    up.add_argument("--host", default="127.0.0.1",
                    help="address the guest server binds on the host (default: loopback "
                         "only; with a network of its own, a Unix socket only, unless "
                         "--port or another address is given)")
    up.add_argument("--port", type=int, default=0,
                    help="also serve the guest server on this TCP port of the host. 0 (the "
                         "default): with a network of its own (the default), no TCP port, "
                         "a Unix socket only; with --host another address or network "
                         "'host', any free port")
    up.add_argument("--foreground", action="store_true",
                    help="stay in the foreground, stop the sandbox on Ctrl+C")
    up.set_defaults(func=cmd_up)

    ls = sub.add_parser("list", help="list sandboxes of the workspace")
    ls.set_defaults(func=cmd_list)

    shot = sub.add_parser("screenshot", help="save a screenshot as PNG")
    shot.add_argument("name")
    shot.add_argument("-o", "--output", default=None, help="PNG path (default: NAME-TIME.png)")
    shot.set_defaults(func=cmd_screenshot)

    down = sub.add_parser("down", help="stop a sandbox (its home and snapshots stay)")
    down.add_argument("name", nargs="?", default=None)
    down.add_argument("--all", action="store_true", help="stop every sandbox")
    down.set_defaults(func=cmd_down)

    snap = sub.add_parser("snapshot", help="save, list, revert, rename, delete snapshots")
    snap_sub = snap.add_subparsers(dest="snapshot_command", metavar="ACTION", required=True)
    save = snap_sub.add_parser("save", help="save the sandbox's current state")
    save.add_argument("name")
    save.add_argument("snapshot")
    save.add_argument("--description", default="")
    save.set_defaults(func=cmd_snapshot_save)
    sl = snap_sub.add_parser("list", help="list snapshots")
    sl.add_argument("name")
    sl.set_defaults(func=cmd_snapshot_list)
    rv = snap_sub.add_parser("revert", help="revert to a snapshot")
    rv.add_argument("name")
    rv.add_argument("snapshot")
    rv.set_defaults(func=cmd_snapshot_revert)
    rn = snap_sub.add_parser("rename", help="rename a snapshot")
    rn.add_argument("name")
    rn.add_argument("old")
    rn.add_argument("new")
    rn.set_defaults(func=cmd_snapshot_rename)
    rm = snap_sub.add_parser("delete", help="delete a snapshot")
    rm.add_argument("name")
    rm.add_argument("snapshot")
    rm.set_defaults(func=cmd_snapshot_delete)

    doctor = sub.add_parser("doctor", help="what this host offers VMs: whether KVM runs "
                                           "guests here (the kept verdict), and how to "
                                           "probe again")
    doctor.add_argument("--probe", action="store_true",
                        help="probe KVM now (a second or so; up to --probe-timeout on a "
                             "host whose KVM hangs) and keep the verdict")
    doctor.add_argument("--forget-kvm", action="store_true",
                        help="remove the kept KVM verdicts: the next VM probes again")
    doctor.add_argument("--qemu-binary", default="qemu-system-x86_64",
                        help="the QEMU the verdict is for (default: qemu-system-x86_64)")
    doctor.add_argument("--probe-timeout", type=float, default=None,
                        help="seconds the probe guest may show no sign of life "
                             "(default: the provider's, 10)")
    doctor.set_defaults(func=cmd_doctor)


def _sweep_cgroups() -> None:
    """Remove the empty sandbox cgroups a killed workbench left (never one in use)."""
    try:
        removed = sweep_stale_groups()
    except LimitsError as exc:
        print(f"stale sandbox cgroups not swept: {exc}")
        return
    if removed:
        print(f"removed {len(removed)} empty sandbox cgroup(s) left by a killed workbench: "
              + ", ".join(str(folder) for folder in removed))


def _attach(args: argparse.Namespace) -> SandboxProvider:
    return SandboxProvider.attach(args.name, workspace_path(args))


def _handle(args: argparse.Namespace) -> SandboxProvider:
    """The running sandbox if there is one, else a handle for its stored snapshots."""
    try:
        return _attach(args)
    except EnvironmentDead:
        return SandboxProvider(args.name, workspace_path(args))


def cmd_up(args: argparse.Namespace) -> int:
    workspace = workspace_path(args)
    _sweep_cgroups()
    # it outlives this command, unless it stays in the foreground: then it ends with it
    provider = SandboxProvider(args.name, workspace, screen_size=args.size,
                               guest_host=args.host, guest_port=args.port,
                               persistent=not args.foreground)
    if provider.state_file.exists():
        existing = SandboxProvider.attach(args.name, workspace)
        if existing.health().alive:
            provider = existing
            print(f"sandbox {args.name} is already running")
    if provider.state is None:
        provider.start()
    shot = workspace / "sandboxes" / args.name / "screenshot.png"
    shot.write_bytes(provider.screenshot())
    for warning in _warnings(provider):
        print(warning)
    print(f"sandbox:     {provider.name}")
    print(f"display:     {provider.display_name}   (DISPLAY={provider.display_name} xterm &)")
    print(f"guest URL:   {provider.guest_url}")
    print(f"token:       {provider.token}")
    print(f"screenshot:  {shot}")
    print(f"home:        {provider.home}")
    if provider.identity is not None:
        print(f"user:        {provider.identity.describe()}")
    print(f"limits:      {provider.limits_description().removeprefix('limits: ')}")
    print(f"network:     {provider.network_description().removeprefix('network: ')}")
    state = provider.state
    if state is not None and state.guest_socket and provider.guest_url \
            and provider.guest_url.startswith("http+unix:"):
        target = f"--unix-socket {state.guest_socket} http://localhost"
    else:
        target = str(provider.guest_url)
    print(f"try:         curl -H 'Authorization: Bearer {provider.token}' "
          f"{target}/screen_size -X POST")
    if not args.foreground:
        print(f"stop with:   workbench env down {provider.name}")
        return 0
    print("running in the foreground; Ctrl+C stops the sandbox")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(2.0):
            health = provider.health()
            if not health.alive:
                print(f"sandbox {provider.name} died: {health.detail}")
                return 1
    except KeyboardInterrupt:
        pass
    finally:
        provider.stop()
        print(f"sandbox {provider.name} stopped")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    _sweep_cgroups()
    for line in reclaim_orphans(workspace_path(args)).values():  # a killed evaluation's
        print(line)
    sandboxes = SandboxProvider.running(workspace_path(args))
    if not sandboxes:
        print("no sandbox running (start one with: workbench env up)")
        return 0
    print(f"{'NAME':16} {'STATUS':8} {'DISPLAY':8} {'SIZE':10} {'SNAPSHOT':16} GUEST URL")
    for sandbox in sandboxes:
        state = sandbox.state
        assert state is not None
        health = sandbox.health()
        print(f"{sandbox.name:16} {'up' if health.alive else 'dead':8} {state.display:8} "
              f"{state.width}x{state.height:<5} {state.current_snapshot or '-':16} "
              f"{state.guest_url or '-'}")
        for warning in _warnings(sandbox):
            print(f"  {sandbox.name}: {warning}")
    return 0


def _warnings(provider: SandboxProvider) -> list[str]:
    """What `env up` and `env list` say of a sandbox that does not isolate fully (the
    app's Environments screen says the same)."""
    return isolation_warnings(provider.isolation, provider.network)


def cmd_screenshot(args: argparse.Namespace) -> int:
    provider = _attach(args)
    output = Path(args.output or f"{args.name}-{time.strftime('%Y%m%d-%H%M%S')}.png")
    output.write_bytes(provider.screenshot())
    print(output.resolve())
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    workspace = workspace_path(args)
    if args.all:
        targets = SandboxProvider.running(workspace)
    elif args.name:
        targets = [SandboxProvider.attach(args.name, workspace)]
    else:
        raise ValueError("env down: name a sandbox or pass --all")
    for provider in targets:
        provider.stop()
        print(f"stopped {provider.name}")
    return 0


def cmd_snapshot_save(args: argparse.Namespace) -> int:
    snap = _attach(args).save_snapshot(args.snapshot, description=args.description)
    print(f"saved {snap.name} ({snap.size_bytes} bytes, {len(snap.extra['apps'])} app(s))")
    return 0


def cmd_snapshot_list(args: argparse.Namespace) -> int:
    provider = _handle(args)  # works while stopped too
    snaps = provider.list_snapshots()
    if not snaps:
        print(f"sandbox {args.name} has no snapshots")
        return 0
    print(f"{'NAME':20} {'CREATED':20} {'SIZE':>10} {'PARENT':20} APPS")
    for snap in snaps:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snap.created))
        apps = "; ".join(snap.extra.get("apps", [])) or "-"
        print(f"{snap.name:20} {created:20} {snap.size_bytes:>10} {snap.parent or '-':20} "
              f"{apps}")
    return 0


def cmd_snapshot_revert(args: argparse.Namespace) -> int:
    provider = _attach(args)
    started = time.perf_counter()
    provider.revert_snapshot(args.snapshot)
    print(f"reverted {args.name} to {args.snapshot} in {time.perf_counter() - started:.3f} s")
    return 0


def cmd_snapshot_rename(args: argparse.Namespace) -> int:
    _handle(args).rename_snapshot(args.old, args.new)
    print(f"renamed {args.old} to {args.new}")
    return 0


def cmd_snapshot_delete(args: argparse.Namespace) -> int:
    _handle(args).delete_snapshot(args.snapshot)
    print(f"deleted {args.snapshot}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from vm.providers.qemu import kvm

    path = kvm.verdict_path()
    if args.forget_kvm:
        count = kvm.forget_verdicts()
        print(f"forgot {count} verdict{'s' if count != 1 else ''} ({path}); the next VM "
              "with accel = 'auto' or 'kvm' probes KVM again")
        return 0
    usable = kvm.kvm_usable()
    print("/dev/kvm: " + ("opens and creates VMs" if usable
                          else "missing or not usable by this user"))
    if args.probe:
        timeout = args.probe_timeout or kvm.PROBE_TIMEOUT
        verdict: kvm.KvmVerdict | None = kvm.probe_and_keep(args.qemu_binary, timeout)
    else:
        verdict = kvm.cached_verdict(args.qemu_binary)
    if verdict is None:
        print("KVM: not probed yet on this host, kernel and QEMU (the first VM with "
              "accel = 'auto' or 'kvm' probes it; `workbench env doctor --probe` does it now)")
    else:
        accelerator = "KVM" if verdict.usable else "TCG (software emulation)"
        print(verdict.describe())
        print(f"VMs with accel = 'auto' start under {accelerator}")
    print(f"verdicts are kept in {path}; `workbench env doctor --forget-kvm` removes them")
    return 0
