"""Vetting tasks before they train anyone: what an OSWorld task tree needs here (audit),
proof that a task is solvable (check), a do-nothing run of each task with its report kept
in the workspace (smoke, smoke_reports, stand-in files for missing downloads), and whether
an evaluator can be trusted (evaluator_audit).

Qt-free, above vm and agents: `workbench tasks ...`, the app's task suite view and the
evaluation command use them. Each module is imported by name where it is needed."""
