"""The main window: the Environments, Live, Trajectories, Training and Evaluations screens
as pages beside a list to switch between them (a welcome page until a workspace is open),
the workspace they show (open, create, recent), menus built from the declared commands,
background work in the status bar, and what is remembered between launches."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from PyQt6.QtCore import QRect, Qt, pyqtSignal
from PyQt6.QtGui import QCloseEvent, QGuiApplication, QResizeEvent
from PyQt6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMenu,
    QMessageBox,
    QStackedWidget,
    QStyle,
    QWidget,
)

from trainer.store import EpisodeFilter, Store, StoreError
from trainer.store.layout import DB_NAME
from workbench.app.actions import AppActions
from workbench.app.pages.trajectories import TrajectoriesPage
from workbench.app.pages.welcome import WelcomePage
from workbench.app.settings import AppSettings
from workbench.app.widgets.review_keys_dialog import (
    ReviewKeysDialog,
    apply_review_keys,
    review_keys,
)
from workbench.app.widgets.shortcuts_dialog import ShortcutsDialog
from workbench.app.widgets.task_progress import TaskProgress
from workbench.app.workers import Workers
from workbench.services.startup_episode import LOOK_AT, startup_episode

if TYPE_CHECKING:  # built when first shown: their imports (tasks, plots) wait till then
    from workbench.app.pages.environments import EnvironmentsPage
    from workbench.app.pages.evaluations import EvaluationsPage
    from workbench.app.pages.live import LivePage
    from workbench.app.pages.training import TrainingPage

SCREENS: tuple[tuple[str, str], ...] = (("environments", "Environments"),
                                        ("trajectories", "Trajectories"),
                                        ("training", "Training"), ("live", "Live"),
                                        ("evaluations", "Evaluations"))
SCREEN_ICONS = (QStyle.StandardPixmap.SP_ComputerIcon,
                QStyle.StandardPixmap.SP_FileDialogDetailedView,
                QStyle.StandardPixmap.SP_MediaPlay, QStyle.StandardPixmap.SP_DesktopIcon,
                QStyle.StandardPixmap.SP_FileDialogContentsView)
APP_TITLE = "GUI Agent Workbench"
NAVIGATION_WIDTH = 140  # pixels: the screen list with its titles
COMPACT_NAVIGATION_WIDTH = 48  # pixels: icons only (titles as tooltips)
COMPACT_NAVIGATION_BELOW = 1600  # window pixels wide: below, the screen list is icons
DEFAULT_SIZE = (1440, 900)  # a first window on a screen with room for it
FRAME_ALLOWANCE = (8, 40)  # pixels a window manager's frame may add (title bar, borders)


class MainWindow(QMainWindow):
    workspace_opened = pyqtSignal(object)  # Path

    def __init__(self, settings: AppSettings, workspace: Path | None = None, *,
                 open_last: bool = True) -> None:
        super().__init__()
        self.settings = settings
        self.store: Store | None = None
        self.workspace: Path | None = None
        self.trajectories: TrajectoriesPage | None = None
        # The other screens, built when first shown (or asked for): name -> page.
        self.pages: dict[str, QWidget] = {}
        self.workers = Workers(parent=self)
        self.workers.failed.connect(self.show_message)
        self.commands = AppActions(self)
        apply_review_keys(self.commands, review_keys(settings))
        self.setWindowTitle(APP_TITLE)
        self._build()
        self._connect_commands()
        self._restore_window()
        last = settings.workspace
        if workspace is not None:
            self.open_workspace(workspace, create=True)
        elif open_last and last is not None and (last / DB_NAME).exists():
            self.open_workspace(last)
        else:
            self._show_welcome()

    # -- layout -------------------------------------------------------------------------

    def _build(self) -> None:
        menus = self.commands.build_menus(self.menuBar())  # type: ignore[arg-type]
        file_menu = menus["&File"]
        self.recent_menu = QMenu("Open &Recent", self)
        file_menu.insertMenu(self.commands["quit"], self.recent_menu)
        file_menu.insertSeparator(self.commands["quit"])
        self.recent_menu.aboutToShow.connect(self._fill_recent)

        self.navigation = QListWidget()
        style = self.style()
        assert style is not None
        for (_, title), icon in zip(SCREENS, SCREEN_ICONS, strict=True):
            item = QListWidgetItem(style.standardIcon(icon), title)
            item.setToolTip(title)
            self.navigation.addItem(item)
        self.navigation.setFixedWidth(NAVIGATION_WIDTH)
        self.navigation_compact = False
        self.navigation.setSpacing(3)
        self.navigation.currentRowChanged.connect(self._navigated)
        self.stack = QStackedWidget()
        self.welcome = WelcomePage()
        self.welcome.open_requested.connect(self.ask_open_workspace)
        self.welcome.new_requested.connect(self.ask_new_workspace)
        self.welcome.recent_chosen.connect(lambda path: self.open_workspace(Path(path)))
        self.stack.addWidget(self.welcome)
        central = QWidget()
        self.body_layout = QHBoxLayout(central)  # the screen list, then the page
        self.body_layout.setContentsMargins(0, 0, 0, 0)
        self.body_layout.setSpacing(0)
        self.body_layout.addWidget(self.navigation)
        self.body_layout.addWidget(self.stack, 1)
        self.setCentralWidget(central)

        status = self.statusBar()
        assert status is not None
        self.workspace_label = QLabel("no workspace")
        status.addPermanentWidget(self.workspace_label)
        self.progress = TaskProgress(self.workers)
        status.addPermanentWidget(self.progress)

    def _connect_commands(self) -> None:
        a = self.commands
        a["new_workspace"].triggered.connect(self.ask_new_workspace)
        a["open_workspace"].triggered.connect(self.ask_open_workspace)
        a["quit"].triggered.connect(self.close)
        for i, (name, _) in enumerate(SCREENS):
            a[f"show_{name}"].triggered.connect(lambda _, n=name: self.show_screen(n))
            a[f"show_{name}"].setData(i)
        a["refresh"].triggered.connect(self.refresh)
        a["cancel_tasks"].triggered.connect(self.workers.cancel_all)
        a["about"].triggered.connect(self._about)
        a["show_shortcuts"].triggered.connect(self.show_shortcuts)
        a["review_keys"].triggered.connect(self.ask_review_keys)
        a["skip_episode"].triggered.connect(lambda _: on_page("skip_episode"))
        # Bound to the window too: the keys work while the menu bar is hidden (M).
        self.addActions(list(a.actions.values()))

        def on_page(method: str, *args: object) -> None:
            page = self.trajectories
            if page is not None and self.current_screen() == "trajectories":
                getattr(page, method)(*args)

        def on_player(method: str) -> None:
            page = self.trajectories
            if page is not None and self.current_screen() == "trajectories":
                getattr(page.stepping_player(), method)()

        for name, method in (("first_step", "first"), ("previous_step", "previous"),
                             ("next_step", "next"), ("last_step", "last")):
            a[name].triggered.connect(lambda _, m=method: on_player(m))
        a["play"].triggered.connect(lambda _: on_player("toggle_play"))
        for name, method in (("zoom_in", "zoom_in"), ("zoom_out", "zoom_out"),
                             ("zoom_fit", "zoom_fit"), ("zoom_actual", "zoom_actual"),
                             ("full_screen", "open_full_screen")):
            a[name].triggered.connect(lambda _, m=method: on_player(m))
        a["show_after"].toggled.connect(self._show_after)
        a["toggle_episode_list"].toggled.connect(
            lambda on: self.trajectories.set_drawer_open(on)
            if self.trajectories is not None else None)
        a["focus_mode"].toggled.connect(self.set_focus_mode)
        a["reset_layout"].triggered.connect(self.reset_layout)
        for label in ("correct", "wrong", "critical"):
            a[f"label_{label}"].triggered.connect(
                lambda _, lb=label: on_page("label_step", lb))
        a["label_clear"].triggered.connect(lambda _: on_page("label_step", None))
        a["pick_correction"].toggled.connect(lambda on: on_page("set_picking", on))
        for which in ("step", "episode"):
            a[f"edit_{which}_note"].triggered.connect(
                lambda _, w=which: on_page("edit_note", w))
        a["accept_episode"].triggered.connect(lambda _: on_page("toggle_verdict", "accept"))
        a["reject_episode"].triggered.connect(lambda _: on_page("toggle_verdict", "reject"))
        def toggle_pool(on: bool) -> None:
            on_page("set_in_pool", on)
            self._sync_pool_command()

        a["toggle_pool"].triggered.connect(toggle_pool)
        a["compare"].triggered.connect(lambda _: on_page("compare"))
        a["next_unreviewed"].triggered.connect(lambda _: on_page("next_unreviewed"))
        a["reviewer_name"].triggered.connect(lambda _: self.ask_reviewer_name())
        for kind in ("html", "osworld", "jsonl"):
            a[f"export_{kind}"].triggered.connect(lambda _, k=kind: on_page("ask_export", k))
        self._enable_episode_commands(False)

    def _enable_episode_commands(self, enabled: bool) -> None:
        for action in self.commands.group("episode"):
            action.setEnabled(enabled)

    # -- screens ------------------------------------------------------------------------

    def show_screen(self, name: str) -> None:
        names = [n for n, _ in SCREENS]
        if self.store is None or name not in names:
            return
        self.navigation.setCurrentRow(names.index(name))

    def current_screen(self) -> str | None:
        if self.store is None:
            return None
        row = self.navigation.currentRow()
        return SCREENS[row][0] if 0 <= row < len(SCREENS) else None

    def _navigated(self, row: int) -> None:
        if not 0 <= row < len(SCREENS) or self.store is None:
            return
        name = SCREENS[row][0]
        page = self.trajectories if name == "trajectories" else self.page(name)
        if page is None:
            return
        self.stack.setCurrentWidget(page)
        if name != "trajectories":
            self.set_focus_mode(False)
        self._enable_episode_commands(name == "trajectories")
        self.settings.screen = name

    def _show_welcome(self, problem: str = "") -> None:
        self.welcome.set_recent(self.settings.recent_workspaces)
        self.welcome.problem.setText(problem)
        self.stack.setCurrentWidget(self.welcome)
        self.navigation.setEnabled(False)
        self._enable_episode_commands(False)

    def _show_episodes(self, selection: EpisodeFilter) -> None:
        """An evaluation's heatmap cell double-clicked: its episodes on Trajectories."""
        self.show_screen("trajectories")
        if self.trajectories is not None:
            self.trajectories.show_episodes(selection)
            self.show_message(f"{len(self.trajectories.rows)} episode(s) of "
                              f"{' '.join(selection.tags)} on {selection.task_ids[0]}")

    def _show_environment(self, name: str) -> None:
        """A live tile double-clicked: that environment on the Environments screen."""
        self.show_screen("environments")
        if self.environments is not None:
            self.environments.show_sandbox(name)

    def show_message(self, text: str) -> None:
        status = self.statusBar()
        if status is not None:
            status.showMessage(text, 10_000)

    # -- workspaces ---------------------------------------------------------------------

    def open_workspace(self, path: Path, create: bool = False) -> bool:
        """Show the workspace at `path` (creating it when `create`); False when it cannot
        be opened (the reason is shown)."""
        path = Path(path).expanduser().resolve()
        try:
            store = Store.open(path, create=create)
        except (StoreError, OSError) as exc:
            self.show_message(str(exc))
            if self.store is None:
                self._show_welcome(str(exc))
            return False
        self._close_workspace()
        self.store = store
        self.workspace = path
        self.trajectories = TrajectoriesPage(store, self.workers, self.settings.author)
        self.stack.addWidget(self.trajectories)
        self.trajectories.message.connect(self.show_message)
        self.trajectories.player.set_speed(self.settings.play_speed)
        self.trajectories.advance_after_verdict = self.settings.advance_after_verdict
        self.trajectories.player.speed.currentIndexChanged.connect(self._speed_changed)
        self.trajectories.player.playing_changed.connect(self.commands["play"].setChecked)
        self.trajectories.review.picking_changed.connect(
            self.commands["pick_correction"].setChecked)
        self.trajectories.review.episode_review_changed.connect(
            lambda review: self.commands["toggle_pool"].setChecked(review.in_pool))
        self._open_startup_episode(store, path)
        self.trajectories.player.episode_loaded.connect(self._episode_loaded)
        self.trajectories.player.full_screen_opened.connect(self._share_review_keys)
        show_after = self.settings.show_after
        self.commands["show_after"].setChecked(show_after)
        self.trajectories.player.set_show_after(show_after)
        self.trajectories.drawer_button.toggled.connect(
            self.commands["toggle_episode_list"].setChecked)
        self._restore_layout()
        self.navigation.setEnabled(True)
        self.settings.workspace = path
        self.setWindowTitle(f"{path.name} — {APP_TITLE}")
        self.workspace_label.setText(str(path))
        names = [n for n, _ in SCREENS]
        screen = self.settings.screen if self.settings.screen in names else "trajectories"
        self.navigation.setCurrentRow(-1)
        self.show_screen(screen)
        if store.recovered:
            self.show_message(f"{len(store.recovered)} episode(s) left running by a process "
                              "that ended were marked incomplete")
        self.workspace_opened.emit(path)
        return True

    def _open_startup_episode(self, store: Store, path: Path) -> None:
        """The episode open when this workspace was last closed, else the newest with a
        step (not one aborted before its first)."""
        page = self.trajectories
        assert page is not None
        ids = [page.model.episode_id(row) for row in range(min(len(page.rows), LOOK_AT))]
        chosen = startup_episode(store.queries, self.settings.last_episode(path), ids)
        if chosen is not None and chosen != page.current_episode_id():
            page.open_episode(chosen)

    def _episode_loaded(self, episode_id: str) -> None:
        if self.workspace is not None:  # the app opens on it next time
            self.settings.set_last_episode(self.workspace, episode_id)
        self._sync_pool_command()

    def _sync_pool_command(self) -> None:
        """The pool command shows whether the episode is in the pool (also after a refusal:
        only finished episodes can go in)."""
        page = self.trajectories
        if page is not None:
            self.commands["toggle_pool"].setChecked(page.review.episode_review.in_pool)

    def _close_workspace(self) -> None:
        training, environments, live, evaluations = self._built_pages()
        if training is not None:
            training.shutdown()  # a running trainer stops cleanly (checkpoint saved)
        if evaluations is not None:
            evaluations.shutdown()  # a running `workbench eval` stops (its episodes stay)
        self.workers.cancel_all()
        self.workers.wait()
        self._save_layout()
        if environments is not None:
            environments.shutdown()
        if live is not None:
            live.shutdown()
        for page in [self.trajectories, *self.pages.values()]:
            if page is not None:
                self.stack.removeWidget(page)
                page.deleteLater()
        self.trajectories = None
        self.pages = {}
        if self.store is not None:
            self.store.close()
            self.store = None

    # -- the screens other than Trajectories, built when first needed ---------------------

    def page(self, name: str) -> QWidget | None:
        """The screen `name` of the open workspace, built now if it was not yet (its
        imports too: the bundled tasks, the plots); None without a workspace."""
        if self.store is None or self.workspace is None:
            return None
        if name not in self.pages:
            page = self._build_page(name, self.store, self.workspace)
            self.stack.addWidget(page)
            self.pages[name] = page
        return self.pages[name]

    def _build_page(self, name: str, store: Store, path: Path) -> QWidget:
        if name == "environments":
            from workbench.app.pages.environments import EnvironmentsPage

            environments = EnvironmentsPage(path, self.workers, store=store,
                                            author=self.settings.author)
            environments.message.connect(self.show_message)
            # A demonstration recorded, discarded or pooled on Environments shows up on
            # Trajectories at once (the table, the filter choices and the pool overview).
            if self.trajectories is not None:
                for signal in (environments.demonstration_finished,
                               environments.demonstration_discarded,
                               environments.demonstration_pooled):
                    signal.connect(self.trajectories.refresh)
            return environments
        if name == "live":
            from workbench.app.pages.live import LivePage

            live = LivePage(path, store)
            live.message.connect(self.show_message)
            live.activated.connect(self._show_environment)
            return live
        if name == "training":
            from workbench.app.pages.training import TrainingPage

            training = TrainingPage(store, path, workers=self.workers)
            training.message.connect(self.show_message)
            return training
        if name == "evaluations":
            from workbench.app.pages.evaluations import EvaluationsPage

            evaluations = EvaluationsPage(store, path, workers=self.workers)
            evaluations.message.connect(self.show_message)
            evaluations.show_episodes.connect(self._show_episodes)
            return evaluations
        raise ValueError(f"no screen {name!r}")

    def _built_pages(self) -> tuple[TrainingPage | None, EnvironmentsPage | None,
                                    LivePage | None, EvaluationsPage | None]:
        """The screens built so far (None: not built, nothing to close or refresh)."""
        get = self.pages.get
        return (cast("TrainingPage | None", get("training")),
                cast("EnvironmentsPage | None", get("environments")),
                cast("LivePage | None", get("live")),
                cast("EvaluationsPage | None", get("evaluations")))

    @property
    def environments(self) -> EnvironmentsPage | None:
        return cast("EnvironmentsPage | None", self.page("environments"))

    @property
    def live(self) -> LivePage | None:
        return cast("LivePage | None", self.page("live"))

    @property
    def training(self) -> TrainingPage | None:
        return cast("TrainingPage | None", self.page("training"))

    @property
    def evaluations(self) -> EvaluationsPage | None:
        return cast("EvaluationsPage | None", self.page("evaluations"))

    def ask_open_workspace(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open workspace",
                                                  str(self.workspace or Path.home()))
        if not folder:
            return
        path = Path(folder)
        if not (path / DB_NAME).exists():
            answer = QMessageBox.question(
                self, "Not a workspace",
                f"{path} holds no workspace ({DB_NAME} not found). Create one there?")
            if answer != QMessageBox.StandardButton.Yes:
                return
            self.open_workspace(path, create=True)
            return
        self.open_workspace(path)

    def ask_reviewer_name(self) -> None:
        name, ok = QInputDialog.getText(self, "Reviewer name", "The name stored with your "
                                        "labels, notes and verdicts:",
                                        text=self.settings.author)
        if ok:
            self.set_reviewer_name(name)

    def set_reviewer_name(self, name: str) -> None:
        name = name.strip()
        if not name:
            self.show_message("A reviewer name cannot be empty")
            return
        self.settings.author = name
        if self.trajectories is not None:
            self.trajectories.reviewer.author = name
        self.show_message(f"Reviewing as {name}")

    def ask_new_workspace(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "New workspace (choose an empty "
                                                  "folder)", str(Path.home()))
        if folder:
            self.open_workspace(Path(folder), create=True)

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for path in self.settings.recent_workspaces:
            action = self.recent_menu.addAction(path)
            assert action is not None
            action.triggered.connect(lambda _, p=path: self.open_workspace(Path(p)))
        if self.recent_menu.isEmpty():
            empty = self.recent_menu.addAction("(none)")
            assert empty is not None
            empty.setEnabled(False)

    def refresh(self) -> None:
        if self.trajectories is not None:
            self.trajectories.refresh()
        _, environments, _, evaluations = self._built_pages()
        if evaluations is not None:
            evaluations.refresh()
        if environments is not None:
            environments.refresh()

    # -- settings -----------------------------------------------------------------------

    def _speed_changed(self) -> None:
        if self.trajectories is not None:
            self.settings.play_speed = self.trajectories.player.playback.speed

    def _show_after(self, show: bool) -> None:
        self.settings.show_after = show
        if self.trajectories is not None:
            self.trajectories.player.set_show_after(show)

    def _share_review_keys(self, window: QWidget) -> None:
        """Label, correct and Before/After keys work in the full-screen screenshot too
        (it steps and zooms with keys of its own)."""
        window.addActions([self.commands[name] for name in (
            "label_correct", "label_wrong", "label_critical", "label_clear",
            "pick_correction", "show_after", "accept_episode", "reject_episode",
            "skip_episode")])

    # -- layout per screen size ----------------------------------------------------------

    def screen_size_key(self) -> str:
        """The available screen size the layout is remembered for, e.g. "1280x720"."""
        available = self._available()
        return "default" if available is None else \
            f"{available.width()}x{available.height()}"

    def _screen_height(self) -> int:
        """The height the default layout is made for: the screen's available height."""
        available = self._available()
        return available.height() if available is not None else self.height()

    def _restore_layout(self) -> None:
        page = self.trajectories
        if page is None:
            return
        state = self.settings.layout(self.screen_size_key())
        if state:
            page.restore_layout(state)
        else:
            page.default_layout(self._screen_height())
        self.commands["toggle_episode_list"].setChecked(page.drawer_open())

    def _save_layout(self) -> None:
        # out of focus mode first: its hidden columns would be saved collapsed
        self.set_focus_mode(False)
        if self.trajectories is not None:
            self.settings.set_layout(self.screen_size_key(), self.trajectories.layout_state())

    def reset_layout(self) -> None:
        """The default layout for this screen size (the remembered one is forgotten)."""
        self.set_focus_mode(False)
        self.settings.set_layout(self.screen_size_key(), {})
        if self.trajectories is not None:
            self.trajectories.default_layout(self._screen_height())
        self._fit_navigation()
        self.show_message(f"Layout reset for this screen ({self.screen_size_key()})")

    def set_focus_mode(self, on: bool) -> None:
        """The screenshot alone (M): the screen list, the episode list and the side
        column hidden; M again brings them back."""
        page = self.trajectories
        on = on and page is not None and self.current_screen() == "trajectories"
        if self.commands["focus_mode"].isChecked() != on:
            self.commands["focus_mode"].setChecked(on)  # comes back here
            return
        if page is not None:
            page.set_focus_mode(on)
        self.navigation.setVisible(not on)
        # the whole height for the screenshot: no menu bar or status bar either (the
        # commands stay bound to the window, M brings them back)
        for bar in (self.menuBar(), self.statusBar()):
            if bar is not None:
                bar.setVisible(not on)
        # the room of the bars and the screen list goes to the page now, not with the
        # posted layout requests
        window_layout = self.layout()
        if window_layout is not None:
            window_layout.activate()
        self.body_layout.activate()

    def _fit_navigation(self) -> None:
        """Titles beside the icons in a wide window; icons only in a narrow one."""
        compact = self.width() < COMPACT_NAVIGATION_BELOW
        if compact == self.navigation_compact:
            return
        self.navigation_compact = compact
        self.navigation.setFixedWidth(COMPACT_NAVIGATION_WIDTH if compact
                                      else NAVIGATION_WIDTH)
        for row, (_, title) in enumerate(SCREENS):
            item = self.navigation.item(row)
            if item is not None:
                item.setText("" if compact else title)
        # This runs in resizeEvent, after the window's layouts have placed the page for the
        # old width: the new width would only reach the page with the layout request it
        # posts, so anything drawn before that (a grab, a first paint) showed the page 92
        # pixels off (a gap when narrowing, the page under the list when widening). The
        # layout is redone now, in the same resize.
        self.body_layout.activate()

    def resizeEvent(self, event: QResizeEvent | None) -> None:
        super().resizeEvent(event)
        self._fit_navigation()

    def _restore_window(self) -> None:
        geometry = self.settings.bytes("geometry")
        if geometry is None or not self.restoreGeometry(geometry):
            self.resize(*DEFAULT_SIZE)
            available = self._available()
            if available is not None and (
                    available.width() < DEFAULT_SIZE[0] + FRAME_ALLOWANCE[0]
                    or available.height() < DEFAULT_SIZE[1] + FRAME_ALLOWANCE[1]):
                # a small screen: all of it (a first window never runs off the screen)
                self.setWindowState(Qt.WindowState.WindowMaximized)
        state = self.settings.bytes("state")
        if state is not None:
            self.restoreState(state)
        self.fit_to_screen()

    def _available(self) -> QRect | None:
        screen = self.screen() or QGuiApplication.primaryScreen()
        return screen.availableGeometry() if screen is not None else None

    def fit_to_screen(self) -> None:
        """Clip the window to its screen's available area (a geometry saved on a larger
        screen, or a window made bigger than the screen): no part off-screen."""
        available = self._available()
        if available is None or self.isMaximized() or self.isFullScreen():
            return
        frame, inner = self.frameGeometry(), self.geometry()
        # before it is shown the window has no frame yet: allow for a title bar
        extra_w = frame.width() - inner.width() or FRAME_ALLOWANCE[0]
        extra_h = frame.height() - inner.height() or FRAME_ALLOWANCE[1]
        width = min(inner.width(), available.width() - extra_w)
        height = min(inner.height(), available.height() - extra_h)
        if (width, height) != (inner.width(), inner.height()):
            self.resize(width, height)
        x = min(max(frame.x(), available.x()), available.right() + 1 - width - extra_w)
        y = min(max(frame.y(), available.y()), available.bottom() + 1 - height - extra_h)
        if (x, y) != (frame.x(), frame.y()):
            self.move(x, y)

    def save_settings(self) -> None:
        self.settings.set_bytes("geometry", self.saveGeometry())
        self.settings.set_bytes("state", self.saveState())
        self._save_layout()
        self.settings.sync()

    def closeEvent(self, event: QCloseEvent | None) -> None:
        training, environments, _, _ = self._built_pages()
        if training is not None and not training.confirm_close():
            if event is not None:
                event.ignore()  # the person keeps the run training
            return
        # the trainer's own sandboxes are its to stop, once it has stopped
        training_run = training.trainer.run_id if training is not None else None
        if environments is not None and not environments.confirm_close(training_run):
            if event is not None:
                event.ignore()  # the person keeps the VMs running
            return
        self.save_settings()
        self._close_workspace()
        self.settings.sync()
        super().closeEvent(event)

    def show_shortcuts(self) -> ShortcutsDialog:
        """Every key bound now, read from the window's actions and shortcuts (? or F1)."""
        dialog = ShortcutsDialog(self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()  # window-modal, and the call returns: the keys come back on close
        dialog.activateWindow()  # its keys (Esc, the arrows) from the start
        return dialog

    def ask_review_keys(self) -> None:
        dialog = ReviewKeysDialog(self.commands, self.settings, self)
        if dialog.exec() and self.trajectories is not None:
            self.trajectories.advance_after_verdict = self.settings.advance_after_verdict

    def _about(self) -> None:
        QMessageBox.about(self, APP_TITLE,
                          "<b>GUI Agent Workbench</b><p>Environments, trajectories and "
                          "training for vision-language GUI agents.</p>")
