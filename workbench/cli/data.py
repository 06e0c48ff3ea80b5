"""`workbench import|export|stats`: move trajectories in and out of a workspace and see
what it holds. Long work shows a progress bar (on a terminal)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tqdm import tqdm

from trainer.store import EpisodeFilter, FormatError, Store, default_workspace
from trainer.store.html_export import export_html
from trainer.store.osworld_io import (
    ACTION_SPACES,
    export_episodes,
    find_result_folders,
    import_result_folder,
)
from trainer.store.sft_export import SftOptions, export_sft


def _open(args: argparse.Namespace, create: bool = False) -> Store:
    return Store.open(default_workspace(args.workspace).expanduser(), create=create)


def _add_selection(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("selection (all given conditions must hold)")
    group.add_argument("--episode", action="append", default=[], metavar="ID",
                       help="this episode (repeatable); other conditions are then ignored")
    group.add_argument("--task", action="append", default=[], metavar="ID")
    group.add_argument("--source", action="append", default=[],
                       choices=["rollout", "oracle", "human", "import", "replay"])
    group.add_argument("--status", action="append", default=[],
                       choices=["running", "done", "error", "aborted", "incomplete"])
    group.add_argument("--run", action="append", default=[], metavar="RUN")
    group.add_argument("--tag", action="append", default=[], metavar="TAG",
                       help="episodes with this tag (repeatable: all of them)")
    group.add_argument("--min-score", type=float)
    group.add_argument("--max-score", type=float)
    group.add_argument("--min-version", type=int, help="lowest policy version")
    group.add_argument("--max-version", type=int, help="highest policy version")
    annotated = group.add_mutually_exclusive_group()
    annotated.add_argument("--annotated", dest="annotated", action="store_true", default=None)
    annotated.add_argument("--not-annotated", dest="annotated", action="store_false")
    group.add_argument("--in-pool", action="store_true", default=None,
                       help="only episodes in the success pool")
    group.add_argument("--text", default="", help="instruction contains this text")
    group.add_argument("--limit", type=int, help="at most this many (oldest first)")


def _selected(store: Store, args: argparse.Namespace) -> list[str]:
    if args.episode:
        missing = [e for e in args.episode if not store.episodes.exists(e)]
        if missing:
            raise ValueError(f"--episode: no episode {', '.join(missing)} in "
                             f"{store.layout.root}")
        return list(args.episode)
    selection = EpisodeFilter(
        task_ids=args.task, sources=args.source, statuses=args.status, run_ids=args.run,
        tags=args.tag, min_score=args.min_score, max_score=args.max_score,
        min_version=args.min_version, max_version=args.max_version,
        annotated=args.annotated, in_pool=args.in_pool, text=args.text)
    ids = store.queries.ids(selection, sort="created_at", descending=False)
    return ids[:args.limit] if args.limit is not None else ids


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    imp = subparsers.add_parser("import", help="import trajectories into the workspace")
    imp_sub = imp.add_subparsers(dest="import_format", metavar="FORMAT", required=True)
    osw = imp_sub.add_parser("osworld", help="OSWorld result folders (results/...)")
    osw.add_argument("results", type=Path,
                     help="a results folder, or any folder below it, down to one task")
    osw.add_argument("--tag", action="append", default=[], help="tag the imported episodes")
    osw.add_argument("--examples", type=Path, default=None,
                     help="OSWorld evaluation_examples/examples, to fill in instructions")
    osw.add_argument("--run", default=None, help="record the episodes under this run id")
    osw.set_defaults(func=cmd_import_osworld)

    exp = subparsers.add_parser("export", help="export trajectories from the workspace")
    exp_sub = exp.add_subparsers(dest="export_format", metavar="FORMAT", required=True)
    eo = exp_sub.add_parser("osworld", help="OSWorld result folders")
    eo.add_argument("output", type=Path, help="results root to write into")
    eo.add_argument("--model", default=None,
                    help="model folder name (default: the imported one, or from the run)")
    eo.add_argument("--action-space", choices=ACTION_SPACES, default=None)
    eo.add_argument("--overwrite", action="store_true", help="write into non-empty folders")
    _add_selection(eo)
    eo.set_defaults(func=cmd_export_osworld)

    es = exp_sub.add_parser("sft", help="a JSONL fine-tuning set (Qwen2.5-VL messages)")
    es.add_argument("output", type=Path, help="the .jsonl file to write")
    es.add_argument("--window", type=int, default=5, help="screenshots per sample (default 5)")
    es.add_argument("--system-prompt", type=Path, default=None, metavar="FILE",
                    help="a text file holding the system prompt")
    es.add_argument("--copy-images", action="store_true",
                    help="copy screenshots beside the file (portable) instead of linking")
    es.add_argument("--no-corrections", action="store_true",
                    help="train on the model's responses even where a person corrected them")
    _add_selection(es)
    es.set_defaults(func=cmd_export_sft)

    eh = exp_sub.add_parser("html", help="one episode as a single-file HTML page")
    eh.add_argument("episode", help="episode id")
    eh.add_argument("-o", "--output", type=Path, default=None,
                    help="the .html file (default: episode-<id>.html)")
    eh.set_defaults(func=cmd_export_html)

    st = subparsers.add_parser("stats", help="what the workspace holds, and success per task")
    st.add_argument("--newest", type=int, default=20,
                    help="success rate over the newest N episodes per task (default 20)")
    st.add_argument("--run", default=None, help="only episodes of this run")
    st.add_argument("--all-versions", action="store_true",
                    help="one row per task instead of per task and policy version")
    st.add_argument("--threshold", type=float, default=0.5,
                    help="a score at or above this is a success (default 0.5)")
    st.set_defaults(func=cmd_stats)


def cmd_import_osworld(args: argparse.Namespace) -> int:
    folders = find_result_folders(args.results)
    if not folders:
        print(f"{args.results}: no OSWorld result folders (with traj.jsonl or result.txt)",
              file=sys.stderr)
        return 1
    counts = {"imported": 0, "already present": 0, "failed": 0}
    with _open(args, create=True) as store:
        for folder in tqdm(folders, desc="importing", unit="folder", disable=None):
            try:
                result = import_result_folder(store, folder, tags=args.tag,
                                              examples_dir=args.examples, run_id=args.run)
            except FormatError as exc:  # one bad folder does not stop the others
                tqdm.write(f"error: {exc}", file=sys.stderr)
                counts["failed"] += 1
                continue
            counts["imported" if result.imported else "already present"] += 1
            for warning in result.warnings:
                tqdm.write(f"warning: {warning}", file=sys.stderr)
        print(f"{counts['imported']} episodes imported, {counts['already present']} "
              f"already present, {counts['failed']} failed, into {store.layout.root}")
    return 1 if counts["failed"] else 0


def cmd_export_osworld(args: argparse.Namespace) -> int:
    with _open(args) as store:
        ids = _selected(store, args)
        with tqdm(total=len(ids), desc="exporting", unit="episode", disable=None) as bar:
            written = export_episodes(store, ids, args.output, model=args.model,
                                      action_space=args.action_space,
                                      overwrite=args.overwrite, progress=bar.update)
    print(f"{len(written)} result folders written under {args.output}")
    return 0


def cmd_export_sft(args: argparse.Namespace) -> int:
    system_prompt = args.system_prompt.read_text(encoding="utf-8") if args.system_prompt else ""
    options = SftOptions(window=args.window, system_prompt=system_prompt,
                         use_corrections=not args.no_corrections,
                         copy_images=args.copy_images)
    with _open(args) as store:
        ids = _selected(store, args)
        with tqdm(total=len(ids), desc="exporting", unit="episode", disable=None) as bar:
            report = export_sft(store, ids, args.output, options, progress=bar.update)
    for problem in report.problems:
        print(f"warning: {problem}", file=sys.stderr)
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(report.skipped.items()))
    print(f"{report.samples} samples from {report.episodes} episodes written to "
          f"{args.output}" + (f" (steps left out: {skipped})" if skipped else ""))
    return 0


def cmd_export_html(args: argparse.Namespace) -> int:
    output = args.output or Path(f"episode-{args.episode}.html")
    with _open(args) as store:
        problems = export_html(store, args.episode, output)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    print(f"wrote {output}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _open(args) as store:
        totals = store.queries.workspace_stats()
        stats = store.queries.task_stats(args.newest, by_version=not args.all_versions,
                                         run_id=args.run, success_threshold=args.threshold)
        root = store.layout.root
    episodes = sum(totals.episodes_by_status.values())
    print(f"workspace {root}")
    print(f"  episodes     {episodes}  (" + ", ".join(
        f"{k} {v}" for k, v in totals.episodes_by_status.items()) + ")")
    print("  sources      " + (", ".join(
        f"{k} {v}" for k, v in totals.episodes_by_source.items()) or "-"))
    print(f"  steps        {totals.steps}")
    print(f"  frames       {totals.frames}  ({totals.frame_bytes / 1e6:.1f} MB)")
    print(f"  tasks        {totals.tasks}")
    print(f"  annotations  {totals.annotations}")
    print(f"  success pool {totals.pool}")
    print(f"  runs         {totals.runs}")
    if stats:
        print(f"\nsuccess over the newest {args.newest} scored episodes "
              f"(score >= {args.threshold:g}):")
        width = max(len("task"), *(len(s.task_id) for s in stats))
        print(f"  {'task':<{width}}  version  episodes  success  mean score  newest")
        for s in stats:
            version = "-" if s.policy_version is None else str(s.policy_version)
            newest = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.newest_at))
            print(f"  {s.task_id:<{width}}  {version:>7}  {s.episodes:>8}  "
                  f"{s.success_rate:>7.0%}  {s.mean_score:>10.2f}  {newest}")
    return 0
