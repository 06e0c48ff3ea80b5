"""OSWorld's metrics, in our own code, one module per format or application.

Each module registers its metrics under OSWorld's names (`vm.tasks.registry`), with
OSWorld's arguments and scores: `metric(result, expected, **options) -> float` in [0, 1].
A result of None (a file that was not there, a getter that failed) scores 0. A metric
never executes content from the files it compares.

| module | what it scores |
| --- | --- |
| rules | value rules ({"method": "re.I", "ref": ...}) shared by the modules below |
| general | strings, lists, JSON, text files, YAML, CSV, accessibility trees, SQLite |
| table | spreadsheets (xlsx, ods, csv): cells, formulas, styles, charts, pivots, filters |
| slides | presentations (pptx): text, shapes, styles, transitions, Impress settings |
| docs | text documents (docx, odt): text, fonts, tables, images, layout |
| pdf | PDF files: text, pages, images |
| images | images and GIMP: similarity, size, colour adjustments, GIMP settings |
| media | audio and video files, image comparison, MP3 tags |
| vlc | VLC's settings and playback state |
| chrome | the browser: tabs, URLs, bookmarks, history, cookies, extensions, HTML, archives |
| desktop | the operating system: clipboard, time zone, favourites, moved files |
| vscode | VS Code settings and keybindings, code and result files, zip archives |
| thunderbird | Thunderbird preferences, filters and folders |
"""

from __future__ import annotations

from vm.tasks.optional_modules import import_all

# Modules that register metrics; a module whose libraries are missing (the `osworld`
# extra is not installed) is skipped, and its metrics report that when asked for.
MODULES = ("general", "table", "slides", "docs", "pdf", "images", "media", "vlc", "chrome",
           "desktop", "vscode", "thunderbird")

MISSING: dict[str, str] = {}  # module -> the import error that kept it out


def load_all() -> None:
    import_all(__name__, MODULES, MISSING)
