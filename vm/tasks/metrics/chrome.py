"""Browser metrics (OSWorld's desktop_env/evaluators/metrics/chrome.py): the URL of the
active tab, the open tabs, bookmarks, installed extensions, history, cookies, the font
size, desktop shortcuts, a page's content, saved HTML files and archives of files.

They score the values the Chrome getters return: a URL string, or a dict with "url"
(and "title", "content") for a tab; a list of such dicts for the open tabs; the "roots"
object of Chrome's Bookmarks file; rows of the History and Cookies databases; the
"webkit.webprefs" object of Preferences; a {file name: text} dict of .desktop files.
HTML is parsed with BeautifulSoup over lxml and archives are unpacked into a scratch
folder: no page script and nothing inside an archive is ever run.

Two URLs are "the same site" (`compare_urls`) as OSWorld decides it: a missing scheme
means http, the host is cut to its registrable name without the public suffix
(www.airbnb.com and airbnb.com.sg are both "airbnb"), "www" alone is dropped as a
subdomain, a lone "/" path is dropped; scheme, remaining path, parameters, query and
fragment must then agree. The public suffixes come from tldextract's bundled list
(OSWorld's may download a newer one; we never go to the network).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

import tldextract
from bs4 import BeautifulSoup, Tag

from vm.tasks.registry import metric, register_metric

logger = logging.getLogger(__name__)

# the public suffix list shipped inside tldextract: no download, no cache on disk
_SUFFIXES = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)
_HAS_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+\-.]*://")

# compare_archive's file_type -> the metric that compares one pair of unpacked files
ARCHIVE_FILE_METRICS: dict[str, str] = {
    "text": "compare_text_file",
    "pdf": "compare_pdfs",
    "docx": "compare_docx_files",
    "ppt": "compare_pptx_files",
    "image": "compare_images",
    "csv": "compare_csv",
    "table": "compare_table",
    "audio": "compare_audios",
    "video": "compare_videos",
}


# --- URLs -----------------------------------------------------------------------------------

def _site_url(url: str, full: bool = True) -> str:
    """`url` rewritten so that two addresses of the same page on the same site are equal
    (see the module docstring); without `full`, parameters, query and fragment go."""
    parts = urlparse(url if _HAS_SCHEME.match(url) else f"http://{url}")
    host = _SUFFIXES(parts.netloc.lower())
    subdomain = "" if host.subdomain == "www" else host.subdomain
    netloc = f"{subdomain}.{host.domain}" if subdomain else host.domain
    path = "" if parts.path == "/" else parts.path
    extras = (parts.params, parts.query, parts.fragment) if full else ("", "", "")
    return urlunparse((parts.scheme.lower(), netloc, path, *extras))


def compare_urls(url1: str | None, url2: str | None, full: bool = True) -> bool:
    """Whether two URLs name the same page of the same site (OSWorld's utils.compare_urls);
    None equals only None."""
    if url1 is None or url2 is None:
        return url1 is url2
    return _site_url(url1, full) == _site_url(url2, full)


def _tab_url(tab: Any) -> Any:
    """The URL of a tab value: the string itself, or a dict's "url" (None when absent)."""
    return tab.get("url") if isinstance(tab, Mapping) else tab


def _rule_field(name: str, rule: Any, field: str) -> Any:
    if not isinstance(rule, Mapping) or field not in rule:
        raise ValueError(f"{name}: the rule needs a {field!r} field, got {rule!r:.120}")
    return rule[field]


def _unsupported(name: str, rule_type: Any) -> ValueError:
    return ValueError(f"{name}: rule type {rule_type!r} is not supported")


def _check_url_rule(name: str, rule: Any) -> None:
    kind = _rule_field(name, rule, "type")
    if kind != "url":
        raise _unsupported(name, kind)


@register_metric("is_expected_active_tab")
def is_expected_active_tab(active_tab_info: Any, rule: Any, **options: Any) -> float:
    """1 when the active tab's URL (a string, or a dict's "url") is the same page as
    rule["url"] by `compare_urls`; rule["type"] must be "url"."""
    if not active_tab_info:
        return 0.0
    _check_url_rule("is_expected_active_tab", rule)
    expected = _rule_field("is_expected_active_tab", rule, "url")
    actual = _tab_url(active_tab_info)
    if actual is not None and not isinstance(actual, str):
        return 0.0
    return float(compare_urls(expected, actual))


def _without_query(url: str) -> str:
    return urlunparse(urlparse(url)._replace(query=""))


@register_metric("is_expected_active_tab_approximate")
def is_expected_active_tab_approximate(active_tab_info: Any, rule: Any,
                                       **options: Any) -> float:
    """1 when the active tab's URL equals rule["url"] once both lose their query string
    (the text is otherwise compared as it is); rule["type"] must be "url"."""
    if not active_tab_info:
        return 0.0
    _check_url_rule("is_expected_active_tab_approximate", rule)
    expected = _rule_field("is_expected_active_tab_approximate", rule, "url")
    actual = _tab_url(active_tab_info)
    if not isinstance(actual, str) or not isinstance(expected, str):
        return 0.0
    return float(_without_query(expected) == _without_query(actual))


def _patterns(name: str, rules: Any, field: str) -> list[str]:
    found = _rule_field(name, rules, field)
    patterns = [found] if isinstance(found, str) else found
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise ValueError(f"{name}: rules[{field!r}] must be a list of regular expressions, "
                         f"got {found!r:.120}")
    return patterns


@register_metric("is_expected_url_pattern_match")
def is_expected_url_pattern_match(result: Any, rules: Any, **options: Any) -> float:
    """1 when every regular expression in rules["expected"] is found (re.search) in the
    URL: the result itself when a string, else its "url"."""
    if not result:
        return 0.0
    url = _tab_url(result)
    if not isinstance(url, str):
        logger.warning("is_expected_url_pattern_match: no URL in %r", result)
        return 0.0
    patterns = _patterns("is_expected_url_pattern_match", rules, "expected")
    return float(all(re.search(pattern, url) for pattern in patterns))


@register_metric("is_expected_search_query")
def is_expected_search_query(active_tab_info: Any, rules: Any, **options: Any) -> float:
    """1 when rules["expect"]["pattern"] is found (re.search) in the active tab's "url"."""
    if not active_tab_info:
        return 0.0
    pattern = _rule_field("is_expected_search_query",
                          _rule_field("is_expected_search_query", rules, "expect"), "pattern")
    url = _tab_url(active_tab_info)
    return float(isinstance(url, str) and re.search(pattern, url) is not None)


@register_metric("is_expected_tabs")
def is_expected_tabs(open_tabs: Any, rule: Any, **options: Any) -> float:
    """1 when as many tabs are open as rule["urls"] lists and each listed URL is the same
    page (`compare_urls`) as some open tab's; rule["type"] must be "url". Like OSWorld,
    two listed URLs may both be matched by one tab when the counts agree."""
    if not open_tabs:
        return 0.0
    _check_url_rule("is_expected_tabs", rule)
    expected = _rule_field("is_expected_tabs", rule, "urls")
    actual = [_tab_url(tab) for tab in open_tabs]
    if len(expected) != len(actual):
        return 0.0
    return float(all(any(isinstance(url, str) and compare_urls(wanted, url) for url in actual)
                     for wanted in expected))


# --- bookmarks, extensions, shortcuts ------------------------------------------------------

def _bar_children(bookmarks: Any) -> list[Mapping[str, Any]] | None:
    """The entries directly on the bookmark bar of a Bookmarks file's "roots"; None when
    the file has no bookmark bar."""
    bar = bookmarks.get("bookmark_bar") if isinstance(bookmarks, Mapping) else None
    children = bar.get("children") if isinstance(bar, Mapping) else None
    if not isinstance(children, list):
        logger.warning("is_expected_bookmarks: no bookmark_bar.children in %.120r", bookmarks)
        return None
    return [child for child in children if isinstance(child, Mapping)]


def _of_type(entries: Iterable[Mapping[str, Any]], kind: str, field: str) -> list[Any]:
    return [entry.get(field) for entry in entries if entry.get("type") == kind]


def _one_of_each(choices: list[Any], wanted: set[Any]) -> bool:
    """Whether picking one URL from each choice (a URL or a list of alternatives) can give
    exactly the set `wanted`."""
    groups = [[choice] if isinstance(choice, str) else list(choice) for choice in choices]
    return any(set(picked) == wanted for picked in itertools.product(*groups))


@register_metric("is_expected_bookmarks")
def is_expected_bookmarks(bookmarks: Any, rule: Any, **options: Any) -> float:
    """Scores the bookmark bar by rule["type"]:
    "bookmark_bar_folders_names": the bar's folder names, as a set, equal rule["names"];
    "bookmark_bar_websites_urls": the bar's bookmark URLs, as a set, equal rule["urls"];
    "liked_authors_websites_urls": the bar's first folder named "Liked Authors" holds
    bookmarks whose URL set is one URL from each entry of rule["urls"] (a URL, or a list
    of acceptable alternatives)."""
    kind = _rule_field("is_expected_bookmarks", rule, "type")
    if kind not in ("bookmark_bar_folders_names", "bookmark_bar_websites_urls",
                    "liked_authors_websites_urls"):
        raise _unsupported("is_expected_bookmarks", kind)
    bar = _bar_children(bookmarks) if bookmarks else None
    if bar is None:
        return 0.0
    if kind == "bookmark_bar_folders_names":
        names = _rule_field("is_expected_bookmarks", rule, "names")
        return float(set(_of_type(bar, "folder", "name")) == set(names))
    if kind == "bookmark_bar_websites_urls":
        urls = _rule_field("is_expected_bookmarks", rule, "urls")
        return float(set(_of_type(bar, "url", "url")) == set(urls))
    folder = next((entry for entry in bar
                   if entry.get("type") == "folder" and entry.get("name") == "Liked Authors"),
                  None)
    if folder is None:
        return 0.0
    children = [c for c in folder.get("children") or [] if isinstance(c, Mapping)]
    saved = set(_of_type(children, "url", "url"))
    return float(_one_of_each(_rule_field("is_expected_bookmarks", rule, "urls"), saved))


@register_metric("is_expected_installed_extensions")
def is_expected_installed_extensions(installed_extensions: Any, expected: Any,
                                     **options: Any) -> float:
    """1 when every name in expected["expected"] is among the installed extensions' names
    (the getter's list)."""
    if not installed_extensions or not isinstance(installed_extensions, list):
        return 0.0
    wanted = _rule_field("is_expected_installed_extensions", expected, "expected")
    return float(set(wanted) <= set(installed_extensions))


@register_metric("is_shortcut_on_desktop")
def is_shortcut_on_desktop(shortcuts: Any, rule: Any, **options: Any) -> float:
    """1 when some desktop shortcut's text (the getter's {file: text}) has the line
    "Name=<rule["name"]>" (rule type "name") or "Exec=<rule["exec"]>" (type "exec"),
    ended by a newline."""
    kind = _rule_field("is_shortcut_on_desktop", rule, "type")
    if kind not in ("name", "exec"):
        raise _unsupported("is_shortcut_on_desktop", kind)
    line = f"{kind.capitalize()}={_rule_field('is_shortcut_on_desktop', rule, kind)}\n"
    if not isinstance(shortcuts, Mapping):
        return 0.0
    return float(any(isinstance(text, str) and line in text for text in shortcuts.values()))


# --- history, cookies, settings, page content ----------------------------------------------

@register_metric("check_history_deleted")
def check_history_deleted(history_data: Any, rule: Any, **options: Any) -> float:
    """1 when no visited URL (first column of the History rows) contains any of
    rule["keywords"] (rule type "keywords")."""
    kind = _rule_field("check_history_deleted", rule, "type")
    if kind != "keywords":
        raise _unsupported("check_history_deleted", kind)
    keywords = _rule_field("check_history_deleted", rule, "keywords")
    if history_data is None:
        return 0.0
    urls = [row[0] for row in history_data if isinstance(row[0], str)]
    return float(not any(keyword in url for keyword in keywords for url in urls))


@register_metric("is_cookie_deleted")
def is_cookie_deleted(cookie_data: Any, rule: Any, **options: Any) -> float:
    """1 when no cookie's host (second column of the Cookies rows) is the same site as
    one of rule["domains"] by `compare_urls` (rule type "domains")."""
    kind = _rule_field("is_cookie_deleted", rule, "type")
    if kind != "domains":
        raise _unsupported("is_cookie_deleted", kind)
    domains = _rule_field("is_cookie_deleted", rule, "domains")
    if cookie_data is None:
        return 0.0
    hosts = [row[1] for row in cookie_data]
    return float(not any(compare_urls(domain, host) for domain in domains for host in hosts))


@register_metric("check_font_size")
def check_font_size(font_size: Any, rule: Any, **options: Any) -> float:
    """1 when Chrome's default font size (the getter's "default_font_size") equals
    rule["value"] (type "value") or lies strictly between rule["min"] and rule["max"]
    (type "range")."""
    kind = _rule_field("check_font_size", rule, "type")
    if kind not in ("value", "range"):
        raise _unsupported("check_font_size", kind)
    if not isinstance(font_size, Mapping) or "default_font_size" not in font_size:
        return 0.0
    size = font_size["default_font_size"]
    if kind == "value":
        return float(size == _rule_field("check_font_size", rule, "value"))
    low = _rule_field("check_font_size", rule, "min")
    high = _rule_field("check_font_size", rule, "max")
    try:
        return float(low < size < high)
    except TypeError:  # a size that is not a number
        return 0.0


@register_metric("is_added_to_steam_cart")
def is_added_to_steam_cart(active_tab_info: Any, rule: Any, **options: Any) -> float:
    """1 when every text in rule["items"] appears in the cart page's HTML (the page
    getter's "content")."""
    items = _rule_field("is_added_to_steam_cart", rule, "items")
    content = active_tab_info.get("content") if isinstance(active_tab_info, Mapping) else None
    if not isinstance(content, str):
        return 0.0
    return float(all(item in content for item in items))


# --- HTML files -----------------------------------------------------------------------------

def _html(path: Any) -> BeautifulSoup | None:
    """The parsed HTML file (UTF-8), or None when it cannot be read."""
    if not path:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        logger.debug("compare_htmls: cannot read %s: %s", path, exc)
        return None
    return BeautifulSoup(text, "lxml")


def _same_node(first: Any, second: Any, ignore_sdnum: bool) -> bool:
    """Two nodes met at the same step of the walks: texts must be equal; elements must
    have the same tag, the same stripped text and the same attributes (without `sdnum`,
    LibreOffice's number format, when ignore_sdnum)."""
    if not isinstance(first, Tag) or not isinstance(second, Tag):
        return not isinstance(first, Tag) and not isinstance(second, Tag) and first == second
    if first.name != second.name or first.text.strip() != second.text.strip():
        return False
    if first.attrs == second.attrs:
        return True
    if not ignore_sdnum:
        return False
    return ({k: v for k, v in first.attrs.items() if k != "sdnum"}
            == {k: v for k, v in second.attrs.items() if k != "sdnum"})


@register_metric("compare_htmls")
def compare_htmls(html_path1: Any, html_path2: Any, *, ignore_sdnum: Any = None,
                  **options: Any) -> float:
    """1 when two HTML files match node by node, walking both documents in order (as
    OSWorld does, the walk stops at the end of the shorter document)."""
    first, second = _html(html_path1), _html(html_path2)
    if first is None or second is None:
        return 0.0
    return float(all(_same_node(a, b, bool(ignore_sdnum))
                     for a, b in zip(first.descendants, second.descendants, strict=False)))


# --- archives -------------------------------------------------------------------------------

# the archive kinds shutil.unpack_archive (OSWorld's unpacker) tells by the file's name
_TAR_ENDINGS = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


def _extract(archive: str, folder: Path) -> bool:
    """Unpack a zip or tar archive, told by its name as shutil does, into `folder`; False
    for another name. Tar members that would land outside the folder, or links leading
    out of it, are refused (tarfile's "data" filter); zip names are kept inside it."""
    if archive.endswith(".zip"):
        with zipfile.ZipFile(archive) as opened:
            opened.extractall(folder)
        return True
    if archive.endswith(_TAR_ENDINGS):
        with tarfile.open(archive) as opened:
            opened.extractall(folder, filter="data")
        return True
    return False


def _unpack(archive: Any, folder: Path) -> Path | None:
    """The folder holding the unpacked archive; None when it is not a file or cannot be
    unpacked."""
    if not isinstance(archive, (str, os.PathLike)) or not os.path.isfile(archive):
        return None
    folder.mkdir(parents=True)
    try:
        unpacked = _extract(os.fspath(archive), folder)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        logger.debug("compare_archive: cannot unpack %s: %s", archive, exc)
        return None
    if not unpacked:
        logger.debug("compare_archive: %s is not a zip or tar archive", archive)
    return folder if unpacked else None


def _file_metric(file_type: Any) -> str:
    if file_type not in ARCHIVE_FILE_METRICS:
        raise ValueError(f"compare_archive: file_type must be one of "
                         f"{sorted(ARCHIVE_FILE_METRICS)}, got {file_type!r}")
    return ARCHIVE_FILE_METRICS[file_type]


@register_metric("compare_archive")
def compare_archive(pred_path: Any, gold_path: Any, *, file_path: str = "",
                    file_type: str = "text", **options: Any) -> float:
    """The mean score of the unpacked files compared pairwise by the metric for
    `file_type` (see ARCHIVE_FILE_METRICS; the other options go to it), taking the entries
    of folder `file_path` inside each archive; 0 unless both folders list the same names."""
    compare = metric(_file_metric(file_type))
    if not pred_path or not gold_path:
        return 0.0
    with tempfile.TemporaryDirectory(prefix="workbench-archive-") as scratch:
        pred_root = _unpack(pred_path, Path(scratch) / "pred")
        gold_root = _unpack(gold_path, Path(scratch) / "gold")
        if pred_root is None or gold_root is None:
            return 0.0
        pred_folder, gold_folder = pred_root / file_path, gold_root / file_path
        if not pred_folder.is_dir() or not gold_folder.is_dir():
            return 0.0
        names = sorted(os.listdir(pred_folder))
        if not names or names != sorted(os.listdir(gold_folder)):
            return 0.0
        total = sum(float(compare(str(pred_folder / name), str(gold_folder / name), **options))
                    for name in names)
        return total / len(names)
