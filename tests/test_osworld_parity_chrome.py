"""Our browser metrics give OSWorld's scores: each case builds the value a Chrome getter
returns (tab URLs, bookmarks, History and Cookies rows, Preferences, desktop shortcuts) or
the HTML files and archives in tmp_path, and compares our metric with the released
desktop-env one. Differences are in docs/osworld-differences/chrome.md."""

from __future__ import annotations

import functools
import mimetypes
import shutil
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymupdf
import pytest
import tldextract

from tests.osworld_reference import assert_same_score, reference_module
from vm.tasks.metrics import chrome
from vm.tasks.registry import metric

mimetypes.init()

Built = tuple[tuple[Any, ...], dict[str, Any], float | None]
Case = Callable[[Path], Built]


@pytest.fixture(autouse=True)
def _offline_suffixes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """OSWorld's compare_urls calls tldextract.extract, which may download the public
    suffix list; both sides use the list bundled with tldextract instead."""
    monkeypatch.setattr(tldextract, "extract", chrome._SUFFIXES)
    yield


@functools.cache
def _reference_chrome() -> Any:
    """OSWorld's metrics/chrome.py, loaded once (every metric here is defined in it)."""
    return reference_module("chrome")


def reference(name: str) -> Any:
    """OSWorld's released function of that name in metrics/chrome.py."""
    return getattr(_reference_chrome(), name)


def _compare(name: str, arguments: tuple[Any, ...], options: dict[str, Any],
             intended: float | None) -> float:
    return assert_same_score(name, arguments, options, intended)


def _values(*arguments: Any, intended: float | None, **options: Any) -> Case:
    """A case whose arguments are plain values (what the getters return)."""
    def build(folder: Path) -> Built:
        return arguments, options, intended
    return build


def _cases(name: str, cases: dict[str, Case]) -> list[Any]:
    return [pytest.param(name, case, id=f"{name}/{key}") for key, case in sorted(cases.items())]


def _tab(url: str, content: str = "") -> dict[str, str]:
    return {"title": "A page", "url": url, "content": content}


# --- URLs of tabs ----------------------------------------------------------------------------

_PATTERN_CASES: dict[str, Case] = {
    "string_found": _values("https://www.drugs.com/tamiflu.html#side-effects",
                            {"expected": [r"^https://(www\.)?drugs\.com/tamiflu\.html#side"]},
                            intended=1.0),
    "string_not_found": _values("https://www.drugs.com/tamiflu.html",
                                {"expected": [r"^https://(www\.)?drugs\.com/sfx/"]},
                                intended=0.0),
    "dict_found": _values(_tab("https://www.ticketmaster.com/help/Ticket-Delivery-FAQs"),
                          {"expected": ["Ticket-Delivery-FAQs"]}, intended=1.0),
    "dict_not_found": _values(_tab("https://www.ticketmaster.com/help"),
                              {"expected": ["Ticket-Delivery-FAQs"]}, intended=0.0),
    "anchored_settings": _values("chrome://settings/appearance/",
                                 {"expected": ["^chrome://settings/appearance/?$"]},
                                 intended=1.0),
    "anchored_settings_longer": _values("chrome://settings/appearance/fonts",
                                        {"expected": ["^chrome://settings/appearance/?$"]},
                                        intended=0.0),
    # multi_apps/36037439: two patterns (and rule fields the metric ignores)
    "all_patterns": _values(
        "https://scholar.google.com/citations?hl=en&user=qRAQ5BsAAAAJ",
        {"type": "url", "url": "?hl=en&",
         "expected": ["https://scholar.google.com/citations", "user=qRAQ5BsAAAAJ"]},
        intended=1.0),
    "one_pattern_missing": _values(
        "https://scholar.google.com/citations?hl=en&user=someoneElse",
        {"type": "url", "url": "?hl=en&",
         "expected": ["https://scholar.google.com/citations", "user=qRAQ5BsAAAAJ"]},
        intended=0.0),
    "none": _values(None, {"expected": ["x"]}, intended=0.0),
    "empty_string": _values("", {"expected": [""]}, intended=0.0),
    "dict_without_url": _values({"title": "t"}, {"expected": ["t"]}, intended=0.0),
}


_ACTIVE_TAB_CASES: dict[str, Case] = {
    "same_url": _values("https://www.nfl.com/scores/2019/post4",
                        {"type": "url", "url": "https://www.nfl.com/scores/2019/post4"},
                        intended=1.0),
    "without_www_and_trailing_slash": _values(
        "https://drugs.com/npc/", {"type": "url", "url": "https://www.drugs.com/npc/"},
        intended=1.0),
    "root_slash_dropped": _values("https://www.babycenter.com/",
                                  {"type": "url", "url": "https://babycenter.com"},
                                  intended=1.0),
    "suffix_ignored": _values("https://www.drugs.co.uk/npc/",
                              {"type": "url", "url": "https://www.drugs.com/npc/"},
                              intended=1.0),
    "other_path": _values("https://www.drugs.com/npp/",
                          {"type": "url", "url": "https://www.drugs.com/npc/"}, intended=0.0),
    "other_query": _values("https://www.nfl.com/scores?week=4",
                           {"type": "url", "url": "https://www.nfl.com/scores?week=3"},
                           intended=0.0),
    "other_subdomain": _values("https://forum.drugs.com/npc/",
                               {"type": "url", "url": "https://www.drugs.com/npc/"},
                               intended=0.0),
    "dict_same": _values(_tab("https://discussions.flightaware.com/t/the-banter-thread/4412"),
                         {"type": "url",
                          "url": "https://discussions.flightaware.com/t/the-banter-thread/4412"},
                         intended=1.0),
    "dict_other": _values(_tab("https://discussions.flightaware.com/t/other/1"),
                          {"type": "url",
                           "url": "https://discussions.flightaware.com/t/the-banter-thread/4412"},
                          intended=0.0),
    "no_scheme_is_http": _values("nfl.com/scores",
                                 {"type": "url", "url": "http://www.nfl.com/scores"},
                                 intended=1.0),
    "https_is_not_http": _values("https://www.nfl.com/scores",
                                 {"type": "url", "url": "http://www.nfl.com/scores"},
                                 intended=0.0),
    "none": _values(None, {"type": "url", "url": "https://www.nfl.com/"}, intended=0.0),
    "dict_without_url": _values({"title": "t"}, {"type": "url", "url": "https://a.com/"},
                                intended=0.0),
}


_APPROXIMATE_CASES: dict[str, Case] = {
    "query_ignored": _values("chrome://password-manager/passwords?q=github",
                             {"type": "url", "url": "chrome://password-manager/passwords"},
                             intended=1.0),
    "same": _values("chrome://password-manager/passwords",
                    {"type": "url", "url": "chrome://password-manager/passwords"},
                    intended=1.0),
    "other_page": _values("chrome://password-manager/settings",
                          {"type": "url", "url": "chrome://password-manager/passwords"},
                          intended=0.0),
    "fragment_kept": _values("chrome://password-manager/passwords#x",
                             {"type": "url", "url": "chrome://password-manager/passwords"},
                             intended=0.0),
    "dict": _values(_tab("chrome://password-manager/passwords?x=1"),
                    {"type": "url", "url": "chrome://password-manager/passwords"},
                    intended=1.0),
    "none": _values(None, {"type": "url", "url": "chrome://password-manager/passwords"},
                    intended=0.0),
}


_SEARCH = ("(?i)https?://(?:www\\.)?google\\.com/(?:search\\?q=nereida(?:&|$|#)|sorry/index"
           "\\?.*?continue=https?://(?:www\\.)?google\\.com/search%3Fq%3Dnereida).*")
_SEARCH_CASES: dict[str, Case] = {
    "searched": _values(_tab("https://www.google.com/search?q=nereida&oq=nereida"),
                        {"expect": {"pattern": _SEARCH}}, intended=1.0),
    "captcha_page": _values(
        _tab("https://www.google.com/sorry/index?x=1&continue=https://www.google.com/"
             "search%3Fq%3Dnereida%26oq"), {"expect": {"pattern": _SEARCH}}, intended=1.0),
    "other_query": _values(_tab("https://www.google.com/search?q=nereidas"),
                           {"expect": {"pattern": _SEARCH}}, intended=0.0),
    "none": _values(None, {"expect": {"pattern": _SEARCH}}, intended=0.0),
}


def _tabs(*urls: str) -> list[dict[str, str]]:
    return [{"title": "t", "url": url} for url in urls]


_TRIP = ["https://www.lonelyplanet.com", "https://www.airbnb.com", "https://www.tripadvisor.com"]
_SURVEY = "file:///home/user/Desktop/annual-enterprise-survey-2021-financial-year-provisional.html"
_TABS_CASES: dict[str, Case] = {
    "all_open": _values(_tabs("https://www.tripadvisor.com/", "https://www.lonelyplanet.com/",
                              "https://www.airbnb.com/"),
                        {"type": "url", "urls": _TRIP}, intended=1.0),
    "one_missing": _values(_tabs("https://www.tripadvisor.com/", "https://www.lonelyplanet.com/",
                                 "https://www.google.com/"),
                           {"type": "url", "urls": _TRIP}, intended=0.0),
    "one_more_tab": _values(_tabs("https://www.tripadvisor.com/", "https://www.lonelyplanet.com/",
                                  "https://www.airbnb.com/", "chrome://newtab/"),
                            {"type": "url", "urls": _TRIP}, intended=0.0),
    "page_in_site": _values(_tabs("https://www.tripadvisor.com/Hotels", "https://airbnb.com",
                                  "https://www.lonelyplanet.com"),
                            {"type": "url", "urls": _TRIP}, intended=0.0),
    "local_file": _values(_tabs("https://aclanthology.org/", "https://openai.com/",
                                "https://www.linkedin.com/home/", _SURVEY),
                          {"type": "url", "urls": ["https://aclanthology.org/",
                                                   "https://openai.com/",
                                                   "https://www.linkedin.com/home/", _SURVEY]},
                          intended=1.0),
    "local_file_missing": _values(_tabs("https://aclanthology.org/", "https://openai.com/",
                                        "https://www.linkedin.com/home/",
                                        "file:///home/user/Desktop/other.html"),
                                  {"type": "url", "urls": ["https://aclanthology.org/",
                                                           "https://openai.com/",
                                                           "https://www.linkedin.com/home/",
                                                           _SURVEY]},
                                  intended=0.0),
    # OSWorld only asks that each listed URL have some open tab: one tab can serve two
    "one_tab_serves_two": _values(_tabs("https://github.com/", "https://www.google.com/"),
                                  {"type": "url", "urls": ["https://github.com",
                                                           "https://www.github.com/"]},
                                  intended=1.0),
    "empty": _values([], {"type": "url", "urls": []}, intended=0.0),
}


# --- bookmarks, extensions, shortcuts --------------------------------------------------------

def _bookmark(url: str, name: str = "page") -> dict[str, Any]:
    return {"type": "url", "name": name, "url": url}


def _folder(name: str, *children: dict[str, Any]) -> dict[str, Any]:
    return {"type": "folder", "name": name, "children": list(children)}


def _roots(*bar: dict[str, Any]) -> dict[str, Any]:
    return {"bookmark_bar": {"type": "folder", "name": "Bookmarks bar", "children": list(bar)},
            "other": {"type": "folder", "name": "Other", "children": []}}


_AUTHORS = [["https://jimfan.me/", "https://www.linkedin.com/in/drjimfan/"],
            ["https://yukezhu.me/", "https://research.nvidia.com/person/yuke-zhu"],
            "https://tensorlab.cms.caltech.edu/users/anima/"]
_LIKED = {"type": "liked_authors_websites_urls", "names": ["Liked Authors"], "urls": _AUTHORS}
_TRANSFORMER = "https://jalammar.github.io/illustrated-transformer/"
_BOOKMARK_CASES: dict[str, Case] = {
    "folder_names_equal": _values(
        _roots(_folder("Favorites"), _bookmark("https://a.org/")),
        {"type": "bookmark_bar_folders_names", "names": ["Favorites"]}, intended=1.0),
    "folder_names_extra": _values(
        _roots(_folder("Favorites"), _folder("Work")),
        {"type": "bookmark_bar_folders_names", "names": ["Favorites"]}, intended=0.0),
    "folder_inside_folder_not_on_bar": _values(
        _roots(_folder("Stuff", _folder("Favorites"))),
        {"type": "bookmark_bar_folders_names", "names": ["Favorites"]}, intended=0.0),
    "urls_equal": _values(_roots(_bookmark(_TRANSFORMER), _folder("F", _bookmark("https://b/"))),
                          {"type": "bookmark_bar_websites_urls", "urls": [_TRANSFORMER]},
                          intended=1.0),
    "urls_other": _values(_roots(_bookmark("https://jalammar.github.io/")),
                          {"type": "bookmark_bar_websites_urls", "urls": [_TRANSFORMER]},
                          intended=0.0),
    "liked_one_of_each": _values(
        _roots(_folder("Liked Authors", _bookmark("https://www.linkedin.com/in/drjimfan/"),
                       _bookmark("https://yukezhu.me/"),
                       _bookmark("https://tensorlab.cms.caltech.edu/users/anima/"))),
        _LIKED, intended=1.0),
    "liked_author_missing": _values(
        _roots(_folder("Liked Authors", _bookmark("https://jimfan.me/"),
                       _bookmark("https://tensorlab.cms.caltech.edu/users/anima/"))),
        _LIKED, intended=0.0),
    "liked_two_of_one_author": _values(
        _roots(_folder("Liked Authors", _bookmark("https://jimfan.me/"),
                       _bookmark("https://www.linkedin.com/in/drjimfan/"),
                       _bookmark("https://yukezhu.me/"),
                       _bookmark("https://tensorlab.cms.caltech.edu/users/anima/"))),
        _LIKED, intended=0.0),
    "liked_no_folder": _values(_roots(_folder("Authors", _bookmark("https://jimfan.me/"))),
                               _LIKED, intended=0.0),
    "empty": _values([], {"type": "bookmark_bar_folders_names", "names": []}, intended=0.0),
}


_EXTENSIONS = ["Zoom for Google Chrome", "Speechify \u2014 Text to Speech",
               "React Developer Tools", "Momentum", "Google Translate"]
_EXTENSION_CASES: dict[str, Case] = {
    "all_installed": _values([*_EXTENSIONS, "Google Docs Offline"],
                             {"expected": _EXTENSIONS}, intended=1.0),
    "one_missing": _values([*_EXTENSIONS[1:], "Google Docs Offline"],
                           {"expected": _EXTENSIONS}, intended=0.0),
    "none_installed": _values([], {"expected": _EXTENSIONS}, intended=0.0),
    "getter_failed": _values("Google", {"expected": _EXTENSIONS}, intended=0.0),
}


def _desktop_file(name: str, exec_line: str, newline_at_end: bool = True) -> str:
    text = (f"[Desktop Entry]\nVersion=1.0\nType=Application\nExec={exec_line}\n"
            f"Icon=chrome-app\nName={name}")
    return text + "\n" if newline_at_end else text


_GAME = "Play Puzzle Game 2048"
_GAME_EXEC = "/opt/google/chrome/google-chrome --profile-directory=Default --app-id=abc"
_SHORTCUT_CASES: dict[str, Case] = {
    "name_found": _values({"chrome-abc-Default.desktop": _desktop_file(_GAME, _GAME_EXEC),
                           "other.desktop": _desktop_file("Files", "nautilus")},
                          {"type": "name", "name": _GAME}, intended=1.0),
    "name_other": _values({"chrome-abc-Default.desktop": _desktop_file("2048", _GAME_EXEC)},
                          {"type": "name", "name": _GAME}, intended=0.0),
    "name_longer": _values({"a.desktop": _desktop_file(_GAME + " Online", _GAME_EXEC)},
                           {"type": "name", "name": _GAME}, intended=0.0),
    # the line must end with a newline, as in OSWorld
    "name_last_line_unended": _values({"a.desktop": _desktop_file(_GAME, _GAME_EXEC, False)},
                                      {"type": "name", "name": _GAME}, intended=0.0),
    "exec_found": _values({"a.desktop": _desktop_file(_GAME, _GAME_EXEC)},
                          {"type": "exec", "exec": _GAME_EXEC}, intended=1.0),
    "exec_other": _values({"a.desktop": _desktop_file(_GAME, "firefox")},
                          {"type": "exec", "exec": _GAME_EXEC}, intended=0.0),
    "no_shortcuts": _values({}, {"type": "name", "name": _GAME}, intended=0.0),
}


# --- history, cookies, font size, page content ------------------------------------------------

def _history(*urls: str) -> list[tuple[str, str, int]]:
    return [(url, "title", 13345678901234567) for url in urls]


def _cookies(*hosts: str) -> list[tuple[Any, ...]]:
    return [(13345678901234567, host, "", "name", "value", b"", "/") for host in hosts]


_HISTORY_CASES: dict[str, Case] = {
    "deleted": _values(_history("https://www.google.com/", "https://github.com/"),
                       {"type": "keywords", "keywords": ["youtube"]}, intended=1.0),
    "still_there": _values(_history("https://www.google.com/",
                                    "https://www.youtube.com/watch?v=1"),
                           {"type": "keywords", "keywords": ["youtube"]}, intended=0.0),
    "empty_history": _values([], {"type": "keywords", "keywords": ["youtube"]}, intended=1.0),
}

_COOKIE_CASES: dict[str, Case] = {
    "deleted": _values(_cookies(".google.com", "github.com"),
                       {"type": "domains", "domains": [".amazon.com"]}, intended=1.0),
    "still_there": _values(_cookies(".google.com", ".amazon.com"),
                           {"type": "domains", "domains": [".amazon.com"]}, intended=0.0),
    "www_host": _values(_cookies("www.amazon.com"),
                        {"type": "domains", "domains": [".amazon.com"]}, intended=0.0),
    "other_suffix_same_site": _values(_cookies(".amazon.co.uk"),
                                      {"type": "domains", "domains": [".amazon.com"]},
                                      intended=0.0),
    "subdomain_is_another_site": _values(_cookies("smile.amazon.com"),
                                         {"type": "domains", "domains": [".amazon.com"]},
                                         intended=1.0),
    "no_cookies": _values([], {"type": "domains", "domains": [".amazon.com"]}, intended=1.0),
}

_FONT_CASES: dict[str, Case] = {
    "range_inside": _values({"default_fixed_font_size": 13, "default_font_size": 20},
                            {"type": "range", "min": 16, "max": 99999}, intended=1.0),
    "range_bound_excluded": _values({"default_fixed_font_size": 13, "default_font_size": 16},
                                    {"type": "range", "min": 16, "max": 99999}, intended=0.0),
    "range_below": _values({"default_font_size": 12},
                           {"type": "range", "min": 16, "max": 99999}, intended=0.0),
    "value_equal": _values({"default_font_size": 24}, {"type": "value", "value": 24},
                           intended=1.0),
    "value_other": _values({"default_font_size": 20}, {"type": "value", "value": 24},
                           intended=0.0),
}

_CART = ('<html><body><div class="cart_item"><div class="cart_item_desc">'
         '<a href="/app/1">The Dota 2 Official Soundtrack</a></div></div></body></html>')
_CART_CASES: dict[str, Case] = {
    "in_cart": _values(_tab("https://store.steampowered.com/cart/", _CART),
                       {"items": ["The Dota 2 Official Soundtrack"]}, intended=1.0),
    "not_in_cart": _values(_tab("https://store.steampowered.com/cart/", _CART),
                           {"items": ["The Dota 2 Official Soundtrack", "Portal 2"]},
                           intended=0.0),
    "empty_page": _values({"title": "Connection failed", "url": "u", "content": ""},
                          {"items": ["The Dota 2 Official Soundtrack"]}, intended=0.0),
}


# --- HTML files --------------------------------------------------------------------------------

_TABLE = ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Survey</title>'
          '<script>document.title = "changed";</script></head>\n<body>\n'
          '<table class="data sheet"><tr><td sdnum="1033;0;0.00" align="right">{first}</td>'
          '<td>{second}</td></tr></table>\n<!-- generated -->\n{tail}</body></html>')


def _html_pair(first: dict[str, str], second: dict[str, str], intended: float,
               **options: Any) -> Case:
    def build(folder: Path) -> Built:
        paths = []
        for name, fields in (("result.html", first), ("gold.html", second)):
            values = {"first": "12.50", "second": "Total", "tail": ""} | fields
            text = _TABLE.format(**values)
            if "sdnum" in fields:
                text = text.replace('sdnum="1033;0;0.00"', f'sdnum="{fields["sdnum"]}"')
            if "align" in fields:
                text = text.replace('align="right"', f'align="{fields["align"]}"')
            (folder / name).write_text(text, encoding="utf-8")
            paths.append(str(folder / name))
        return tuple(paths), options, intended
    return build


_HTML_CASES: dict[str, Case] = {
    "same": _html_pair({}, {}, 1.0),
    "other_number": _html_pair({"first": "12.5"}, {}, 0.0),
    "other_word": _html_pair({"second": "Sum"}, {}, 0.0),
    "sdnum_differs": _html_pair({"sdnum": "1033;0;0.0"}, {}, 0.0),
    "sdnum_ignored": _html_pair({"sdnum": "1033;0;0.0"}, {}, 1.0, ignore_sdnum=True),
    "sdnum_ignored_other_attribute": _html_pair({"sdnum": "1033;0;0.0", "align": "left"}, {},
                                                0.0, ignore_sdnum=True),
    "ignore_sdnum_same": _html_pair({}, {}, 1.0, ignore_sdnum=True),
    "ignore_sdnum_other_text": _html_pair({"second": "Sum"}, {}, 0.0, ignore_sdnum=True),
    # the walk ends with the shorter document, so an empty element at the end is not seen
    "extra_empty_element_at_end": _html_pair({"tail": "<p></p>"}, {}, 1.0),
    "extra_text_at_end": _html_pair({"tail": "<p>notes</p>"}, {}, 0.0),
}


# --- archives ----------------------------------------------------------------------------------

def _pdf(path: Path, text: str) -> None:
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 72), text)
    document.save(str(path))
    document.close()


def _archive(folder: Path, name: str, files: dict[str, str], kind: str = "pdf") -> str:
    """An archive (zip, or tar.gz by its name) of files made from {path inside: text}."""
    source = folder / f"{name}.content"
    for inner, text in files.items():
        target = source / inner
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "pdf":
            _pdf(target, text)
        else:
            target.write_text(text, encoding="utf-8")
    path = folder / name
    if name.endswith(".zip"):
        with zipfile.ZipFile(path, "w") as archive:
            for item in sorted(source.rglob("*")):
                archive.write(item, item.relative_to(source).as_posix())
    else:
        with tarfile.open(path, "w:gz") as archive:
            for item in sorted(source.iterdir()):
                archive.add(item, item.name)
    shutil.rmtree(source)
    return str(path)


_SLIDES = {"lecture_slides/week1.pdf": "Week one: introduction to systems",
           "lecture_slides/week2.pdf": "Week two: processes and threads"}


def _archives(result: dict[str, str], gold: dict[str, str], intended: float | None,
              names: tuple[str, str] = ("result.zip", "gold_result.zip"), kind: str = "pdf",
              **options: Any) -> Case:
    def build(folder: Path) -> Built:
        return ((_archive(folder, names[0], result, kind),
                 _archive(folder, names[1], gold, kind)), options, intended)
    return build


_ARCHIVE_CASES: dict[str, Case] = {
    "pdf_in_folder_same": _archives(_SLIDES, _SLIDES, 1.0, file_path="lecture_slides",
                                    file_type="pdf"),
    "pdf_in_folder_one_differs": _archives(
        _SLIDES | {"lecture_slides/week2.pdf": "Nothing alike at all, 42"}, _SLIDES, None,
        file_path="lecture_slides", file_type="pdf"),
    "pdf_in_folder_other_names": _archives(
        {"lecture_slides/week1.pdf": "a", "lecture_slides/week3.pdf": "b"}, _SLIDES, 0.0,
        file_path="lecture_slides", file_type="pdf"),
    "pdf_top_level_same": _archives({"ch1.pdf": "Chapter one", "ch2.pdf": "Chapter two"},
                                    {"ch1.pdf": "Chapter one", "ch2.pdf": "Chapter two"}, 1.0,
                                    file_type="pdf"),
    "pdf_top_level_missing_file": _archives({"ch1.pdf": "Chapter one"},
                                            {"ch1.pdf": "Chapter one", "ch2.pdf": "Two"}, 0.0,
                                            file_type="pdf"),
    "pdf_tar_gz_same": _archives({"a.pdf": "first document", "b.pdf": "second document"},
                                 {"a.pdf": "first document", "b.pdf": "second document"}, 1.0,
                                 names=("pdf.tar.gz", "pdf_gold.tar.gz"), file_type="pdf"),
    "pdf_tar_gz_differs": _archives({"a.pdf": "first document", "b.pdf": "zzzz 123"},
                                    {"a.pdf": "first document", "b.pdf": "second document"},
                                    None, names=("pdf.tar.gz", "pdf_gold.tar.gz"),
                                    file_type="pdf"),
    "text_default_same": _archives({"a.txt": "one\n", "b.txt": "two\n"},
                                   {"a.txt": "one\n", "b.txt": "two\n"}, 1.0, kind="text"),
    "text_default_half": _archives({"a.txt": "one\n", "b.txt": "three\n"},
                                   {"a.txt": "one\n", "b.txt": "two\n"}, 0.5, kind="text"),
    "text_option_passed_on": _archives({"a.txt": "ONE\n"}, {"a.txt": "one\n"}, 1.0,
                                       kind="text", file_type="text", ignore_case=True),
}


def _no_result(arguments: tuple[Any, ...], options: dict[str, Any]) -> Case:
    return _values(*arguments, intended=0.0, **options)


_ARCHIVE_CASES["no_result"] = _no_result((None, "gold.zip"), {"file_type": "pdf"})


ALL_CASES = (_cases("is_expected_url_pattern_match", _PATTERN_CASES)
             + _cases("is_expected_active_tab", _ACTIVE_TAB_CASES)
             + _cases("is_expected_active_tab_approximate", _APPROXIMATE_CASES)
             + _cases("is_expected_search_query", _SEARCH_CASES)
             + _cases("is_expected_tabs", _TABS_CASES)
             + _cases("is_expected_bookmarks", _BOOKMARK_CASES)
             + _cases("is_expected_installed_extensions", _EXTENSION_CASES)
             + _cases("is_shortcut_on_desktop", _SHORTCUT_CASES)
             + _cases("check_history_deleted", _HISTORY_CASES)
             + _cases("is_cookie_deleted", _COOKIE_CASES)
             + _cases("check_font_size", _FONT_CASES)
             + _cases("is_added_to_steam_cart", _CART_CASES)
             + _cases("compare_htmls", _HTML_CASES)
             + _cases("compare_archive", _ARCHIVE_CASES))


@pytest.mark.parametrize(("name", "case"), ALL_CASES)
def test_same_score_as_osworld(name: str, case: Case, tmp_path: Path) -> None:
    _compare(name, *case(tmp_path))


def test_partly_alike_archives_score_between(tmp_path: Path) -> None:
    """The pdf archive whose second file differs scores the mean of 1 and a fuzzy ratio."""
    score = _compare("compare_archive",
                     *_ARCHIVE_CASES["pdf_in_folder_one_differs"](tmp_path))
    assert 0.5 <= score < 1.0


def test_compare_urls_matches_osworld() -> None:
    theirs = reference("is_expected_active_tab").__globals__["compare_urls"]
    pairs = [("https://www.airbnb.com/", "airbnb.com.sg"), ("https://www.airbnb.com/",
             "https://airbnb.com.sg"), ("HTTPS://WWW.A.COM/x", "https://a.com/x"),
             ("https://a.com/x;p?q=1#f", "https://a.com/x;p?q=1#g"), (None, None),
             ("https://a.com", None), ("localhost:8080/x", "http://localhost/x")]
    for first, second in pairs:
        assert chrome.compare_urls(first, second) == theirs(first, second)
        if first and second:
            assert chrome.compare_urls(first, second, full=False) == theirs(first, second,
                                                                             full=False)


# --- documented differences (docs/osworld-differences/chrome.md) ------------------------------

@pytest.mark.parametrize("name", ["is_expected_active_tab", "is_expected_active_tab_approximate",
                                  "is_expected_tabs"])
def test_unknown_url_rule_type_is_reported(name: str) -> None:
    """OSWorld scores a rule type other than "url" 0; we report the task-file mistake."""
    tabs: Any = _tabs("https://a.com/") if name == "is_expected_tabs" else "https://a.com/"
    rule = {"type": "title", "url": "https://a.com/", "urls": ["https://a.com/"]}
    assert reference(name)(tabs, rule) == 0
    with pytest.raises(ValueError, match=f"{name}: rule type 'title'"):
        metric(name)(tabs, rule)


@pytest.mark.parametrize(("name", "rule"), [
    ("is_expected_bookmarks", {"type": "bookmark_bar_titles"}),
    ("is_cookie_deleted", {"type": "names", "names": ["x"]}),
    ("check_history_deleted", {"type": "urls", "urls": ["x"]}),
    ("check_font_size", {"type": "minimum", "value": 1}),
    ("is_shortcut_on_desktop", {"type": "url", "url": "https://a.com/"}),
])
def test_unknown_rule_type_raises_on_both_sides(name: str, rule: dict[str, Any]) -> None:
    value: Any = {"default_font_size": 16} if name == "check_font_size" else [("x", "y")]
    if name == "is_expected_bookmarks":
        value = _roots()
    with pytest.raises(TypeError):
        reference(name)(value, rule)
    with pytest.raises(ValueError, match=name):
        metric(name)(value, rule)


@pytest.mark.parametrize(("name", "value", "rule"), [
    ("is_cookie_deleted", None, {"type": "domains", "domains": [".amazon.com"]}),
    ("check_history_deleted", None, {"type": "keywords", "keywords": ["youtube"]}),
    ("check_font_size", None, {"type": "range", "min": 16, "max": 99999}),
    ("is_added_to_steam_cart", None, {"items": ["Portal 2"]}),
    ("is_shortcut_on_desktop", None, {"type": "name", "name": "Game"}),
    ("is_shortcut_on_desktop", [], {"type": "name", "name": "Game"}),
    ("check_font_size", {"minimum_font_size": 10}, {"type": "range", "min": 16, "max": 99}),
    ("is_expected_url_pattern_match", {"url": None}, {"expected": ["x"]}),
    ("is_expected_bookmarks", {"other": {"children": []}},
     {"type": "bookmark_bar_folders_names", "names": []}),
])
def test_missing_value_scores_zero(name: str, value: Any, rule: dict[str, Any]) -> None:
    """A getter that found nothing (None, or [] off Linux for shortcuts), Preferences
    without default_font_size, Bookmarks without a bookmark bar: OSWorld raises, we
    score 0."""
    with pytest.raises((TypeError, AttributeError, KeyError)):
        reference(name)(value, rule)
    assert metric(name)(value, rule) == 0.0


def test_pattern_given_as_one_string() -> None:
    """rules["expected"] as a string: OSWorld searches for each of its characters; we
    search for the whole pattern."""
    rules = {"expected": "settings/set"}
    assert reference("is_expected_url_pattern_match")("chrome://settings/", rules) == 1.0
    assert metric("is_expected_url_pattern_match")("chrome://settings/", rules) == 0.0
    assert metric("is_expected_url_pattern_match")("chrome://settings/settle", rules) == 1.0


def test_extensions_getter_failure_with_nothing_expected() -> None:
    """The extensions getter gives "Google" when Preferences cannot be read: OSWorld takes
    it as the letters G, o, l, e, so nothing expected scores 1; we score 0."""
    assert reference("is_expected_installed_extensions")("Google", {"expected": []}) == 1.0
    assert metric("is_expected_installed_extensions")("Google", {"expected": []}) == 0.0


def test_html_that_cannot_be_read(tmp_path: Path) -> None:
    good = tmp_path / "good.html"
    good.write_text("<html><body><p>x</p></body></html>", encoding="utf-8")
    latin = tmp_path / "latin.html"
    latin.write_bytes("<html><body><p>caf\u00e9</p></body></html>".encode("latin-1"))
    for other, error in ((tmp_path / "absent.html", FileNotFoundError),
                         (latin, UnicodeDecodeError), (None, TypeError)):
        with pytest.raises(error):
            reference("compare_htmls")(other, str(good))
        assert metric("compare_htmls")(other, str(good)) == 0.0


def test_archive_gold_is_always_unpacked_afresh(tmp_path: Path) -> None:
    """OSWorld reuses a folder <gold>_gold left beside the gold archive by an earlier run;
    we unpack the gold archive into a fresh scratch folder every time."""
    files = {"a.txt": "one\n"}
    result = _archive(tmp_path, "result.zip", files, "text")
    gold = _archive(tmp_path, "gold.zip", files, "text")
    stale = tmp_path / "gold_gold"
    stale.mkdir()
    (stale / "a.txt").write_text("stale\n", encoding="utf-8")
    assert reference("compare_archive")(result, gold) == 0.0
    assert metric("compare_archive")(result, gold) == 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gold.zip", "gold_gold",
                                                         "result.zip", "result_pred"]


def test_archives_without_files(tmp_path: Path) -> None:
    """Archives whose folder holds no file, or lack the folder named by file_path: OSWorld
    raises (ZeroDivisionError, FileNotFoundError), we score 0."""
    with zipfile.ZipFile(tmp_path / "empty.zip", "w") as archive:
        archive.writestr("docs/", "")
    empty = str(tmp_path / "empty.zip")
    gold = _archive(tmp_path, "gold.zip", {"docs/a.txt": "x"}, "text")
    with pytest.raises(ZeroDivisionError):
        reference("compare_archive")(empty, empty, file_path="docs")
    assert metric("compare_archive")(empty, empty, file_path="docs") == 0.0
    with pytest.raises(FileNotFoundError):
        reference("compare_archive")(gold, gold, file_path="slides")
    assert metric("compare_archive")(gold, gold, file_path="slides") == 0.0


def test_archive_that_cannot_be_unpacked(tmp_path: Path) -> None:
    """A result that is not a zip/tar archive, or no gold: OSWorld raises, we score 0."""
    gold = _archive(tmp_path, "gold.zip", {"a.txt": "x"}, "text")
    rar = tmp_path / "result.rar"
    rar.write_bytes(b"Rar!\x1a\x07\x00")
    with pytest.raises(shutil.ReadError):
        reference("compare_archive")(str(rar), gold)
    assert metric("compare_archive")(str(rar), gold) == 0.0
    with pytest.raises(TypeError):
        reference("compare_archive")(gold, None)
    assert metric("compare_archive")(gold, None) == 0.0


def test_archive_member_outside_the_folder_is_refused(tmp_path: Path) -> None:
    """A tar member named ../x would be written outside the unpacking folder: OSWorld writes
    it there (and compares the rest), we refuse the archive."""
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "a.txt").write_text("one\n", encoding="utf-8")
    result = tmp_path / "inner" / "result.tar"
    with tarfile.open(result, "w") as archive:
        archive.add(tmp_path / "inner" / "a.txt", "a.txt")
        archive.add(tmp_path / "inner" / "a.txt", "../escaped.txt")
    gold = _archive(tmp_path / "inner", "gold.tar", {"a.txt": "one\n"}, "text")
    assert reference("compare_archive")(str(result), gold) == 1.0
    assert (tmp_path / "inner" / "escaped.txt").exists()  # written by OSWorld's unpacking
    (tmp_path / "inner" / "escaped.txt").unlink()
    assert metric("compare_archive")(str(result), gold) == 0.0
    assert not (tmp_path / "inner" / "escaped.txt").exists()


def test_archive_unknown_file_type(tmp_path: Path) -> None:
    """An unknown file_type: OSWorld raises only once the listings agree (0 before); we
    always report it."""
    result = _archive(tmp_path, "result.zip", {"a.txt": "x"}, "text")
    gold = _archive(tmp_path, "gold.zip", {"b.txt": "x"}, "text")
    assert reference("compare_archive")(result, gold, file_type="epub") == 0.0
    with pytest.raises(ValueError, match="compare_archive: file_type"):
        metric("compare_archive")(result, gold, file_type="epub")


@pytest.mark.parametrize(("name", "value", "rule"), [
    ("is_expected_active_tab", "https://a.com/", {"type": "url"}),
    ("is_expected_tabs", _tabs("https://a.com/"), {"type": "url"}),
    ("is_expected_bookmarks", _roots(), {"type": "bookmark_bar_folders_names"}),
    ("is_expected_search_query", _tab("https://a.com/"), {"expect": {}}),
    ("is_added_to_steam_cart", _tab("https://a.com/", "x"), {}),
    ("check_font_size", {"default_font_size": 16}, {"type": "range", "min": 1}),
])
def test_rule_missing_a_field_is_reported(name: str, value: Any, rule: dict[str, Any]) -> None:
    with pytest.raises(KeyError):
        reference(name)(value, rule)
    with pytest.raises(ValueError, match=name):
        metric(name)(value, rule)


def test_search_query_given_a_url_string() -> None:
    rules = {"expect": {"pattern": _SEARCH}}
    with pytest.raises(TypeError):
        reference("is_expected_search_query")("https://www.google.com/search?q=nereida", rules)
    assert metric("is_expected_search_query")("https://www.google.com/search?q=nereida",
                                              rules) == 1.0


def test_history_row_without_url() -> None:
    rows = [(None, "t", 1), ("https://www.google.com/", "t", 2)]
    rule = {"type": "keywords", "keywords": ["youtube"]}
    with pytest.raises(TypeError):
        reference("check_history_deleted")(rows, rule)
    assert metric("check_history_deleted")(rows, rule) == 1.0
