"""The "Add VM…" dialog of the Environments screen: a QEMU VM (name, disk image, memory,
CPUs) or a remote OSWorld guest server (name, URL, token), as the table of an
environments.toml entry (workbench.services.vm_registry validates and writes it)."""

from __future__ import annotations

import dataclasses
from typing import Any

from PyQt6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from vm.providers.qemu import QemuConfig
from workbench.services.vm_registry import VmKind

KINDS: tuple[tuple[VmKind, str], ...] = (("qemu", "QEMU VM"),
                                         ("remote", "Remote OSWorld VM"))


class AddVmDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add VM")
        self.kind_combo = QComboBox()
        for kind, text in KINDS:
            self.kind_combo.addItem(text, kind)
        self.pages = QStackedWidget()
        self.kind_combo.currentIndexChanged.connect(self.pages.setCurrentIndex)

        qemu = QWidget()
        form = QFormLayout(qemu)
        self.qemu_name = QLineEdit()
        self.image = QLineEdit()
        self.image.setPlaceholderText("the base disk image (qcow2 or raw; never written)")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        image_row = QHBoxLayout()
        image_row.addWidget(self.image, 1)
        image_row.addWidget(browse)
        defaults: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(QemuConfig)}
        self.memory = QSpinBox()
        self.memory.setRange(64, 1 << 20)
        self.memory.setSingleStep(256)
        self.memory.setSuffix(" MB")
        self.memory.setValue(int(defaults["memory_mb"]))
        self.cpus = QSpinBox()
        self.cpus.setRange(1, 256)
        self.cpus.setValue(int(defaults["cpus"]))
        form.addRow("Name:", self.qemu_name)
        form.addRow("Image file:", image_row)
        form.addRow("Memory:", self.memory)
        form.addRow("CPUs:", self.cpus)

        remote = QWidget()
        form = QFormLayout(remote)
        self.remote_name = QLineEdit()
        self.url = QLineEdit()
        self.url.setPlaceholderText("http://host:5000")
        self.token = QLineEdit()
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("empty: $WORKBENCH_GUEST_TOKEN")
        form.addRow("Name:", self.remote_name)
        form.addRow("URL:", self.url)
        form.addRow("Token:", self.token)

        self.pages.addWidget(qemu)
        self.pages.addWidget(remote)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.kind_combo)
        layout.addWidget(self.pages)
        layout.addWidget(buttons)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Base disk image", self.image.text(),
                                              "Disk images (*.qcow2 *.img *.raw);;All files (*)")
        if path:
            self.image.setText(path)

    def kind(self) -> VmKind:
        kind: VmKind = self.kind_combo.currentData()
        return kind

    def set_kind(self, kind: VmKind) -> None:
        self.kind_combo.setCurrentIndex(self.kind_combo.findData(kind))

    def table(self) -> dict[str, Any]:
        """The entry as written to environments.toml (validated by the service)."""
        if self.kind() == "remote":
            return {"name": self.remote_name.text().strip(), "url": self.url.text().strip(),
                    "token": self.token.text()}
        return {"name": self.qemu_name.text().strip(), "image": self.image.text().strip(),
                "memory_mb": self.memory.value(), "cpus": self.cpus.value()}
