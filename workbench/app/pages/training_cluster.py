"""The Training screen's Cluster tab: the nodes of the shown Ray run and the actors on
each, with their states and restarts, from the file the run's driver keeps
(workbench/services/cluster_status.py), refreshed with the screen's poll."""

from __future__ import annotations

import time

from PyQt6.QtGui import QBrush, QColor
from PyQt6.QtWidgets import QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from trainer.runtime.cluster_status import ClusterStatus
from workbench.services.cluster_status import (
    ClusterReading,
    age_text,
    node_groups,
    resources_text,
)

COLUMNS = ("Node / actor", "State", "Restarts", "Where")
TROUBLE = QColor("#c0392b")  # a dead node, a dead or lost actor


class ClusterPanel(QWidget):
    """A tree of node → actors; the line above it says how old the picture is."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel("Not a Ray run")
        self.summary.setObjectName("cluster-summary")
        self.summary.setWordWrap(True)
        self.tree = QTreeWidget()
        self.tree.setObjectName("cluster-tree")
        self.tree.setColumnCount(len(COLUMNS))
        self.tree.setHeaderLabels(COLUMNS)
        self.tree.setRootIsDecorated(True)
        self.tree.setColumnWidth(0, 180)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary)
        layout.addWidget(self.tree, 1)
        self.status: ClusterStatus | None = None  # the picture in the tree

    def show_reading(self, reading: ClusterReading | None) -> bool:
        """Show a read of the run's cluster file (None: no run shown); False when there
        is nothing to show (not a Ray run, or one not started yet)."""
        if reading is None or not reading.found:
            self.summary.setText("Not a Ray run (no cluster file)"
                                 if reading is None else
                                 f"Not a Ray run, or not started yet: no {reading.path}")
            self._fill(None)
            return False
        if reading.error is not None:
            self.summary.setText(f"Cannot show the cluster: {reading.error}")
            self._fill(None)
            return True
        status = reading.status
        assert status is not None
        alive = sum(node.alive for node in status.nodes)
        self.summary.setText(
            f"{alive} of {len(status.nodes)} nodes alive, {len(status.actors)} roles; "
            f"as of {age_text(time.time() - status.written_at)} ({status.reason})")
        if status != self.status:
            self._fill(status)
        return True

    def _fill(self, status: ClusterStatus | None) -> None:
        self.status = status
        self.tree.clear()
        if status is None:
            return
        for group in node_groups(status):
            node = group.node
            if node is None:
                top = QTreeWidgetItem(["Not placed (yet)", "", "", ""])
            else:
                where = ": ".join(filter(None, (f"{node.hostname} ({node.address})",
                                                resources_text(node.resources))))
                top = QTreeWidgetItem([f"node {node.short_id}",
                                       "alive" if node.alive else "dead", "", where])
                top.setToolTip(0, f"Ray node {node.node_id}")
                top.setToolTip(3, where)
                if not node.alive:
                    top.setForeground(1, QBrush(TROUBLE))
            for actor in group.actors:
                child = QTreeWidgetItem([actor.name, actor.state, str(actor.restarts),
                                         actor.detail])
                child.setToolTip(0, actor.role)
                if actor.state in ("dead", "lost"):
                    child.setForeground(1, QBrush(TROUBLE))
                child.setToolTip(3, actor.detail)
                top.addChild(child)
            self.tree.addTopLevelItem(top)
            top.setExpanded(True)
        self.tree.resizeColumnToContents(1)
        self.tree.resizeColumnToContents(2)
