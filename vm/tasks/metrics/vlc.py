"""VLC metrics (OSWorld's desktop_env/evaluators/metrics/vlc.py): settings read from VLC's
`vlcrc` text file, playback read from the status XML of VLC's web interface, and the
window's size. The files are parsed as text or XML, never run.

vlcrc holds one `name=value` line per setting, commented out (`#name=default`) while the
setting keeps its default. Like OSWorld, the settings checks take the last line that
mentions the setting, commented or not, and the built-in default when no line does.
"""

from __future__ import annotations

import logging
import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from vm.tasks.registry import register_metric

logger = logging.getLogger(__name__)

# the slider colours VLC uses when qt-slider-colours is not set: four RGB triples
_DEFAULT_SLIDER_COLOURS = "153;210;153;20;210;20;255;199;15;245;39;29"
_BLACKISH_BELOW = 100


def _read_text(path: Any) -> str:
    with open(path, "rb") as file:
        return file.read().decode("utf-8")


def _rule_field(metric: str, rule: Any, field: str) -> Any:
    if not isinstance(rule, Mapping) or field not in rule:
        raise ValueError(f"{metric}: the rule needs a {field!r} field, got {rule!r:.80}")
    return rule[field]


def _setting(config: str, marker: str, default: str) -> str:
    """The text after the last '=' of the last line containing `marker`, stripped; the
    default when no line does."""
    value = default
    for line in config.split("\n"):
        if marker in line:
            value = line.split("=")[-1].strip()
    return value


def _expected_text(metric: str, rule: Any, field: str) -> Any:
    """The rule's expected value; a number is compared as its decimal text."""
    expected = _rule_field(metric, rule, field)
    return str(expected) if isinstance(expected, int) else expected


def _setting_is(metric: str, config_path: Any, rule: Any, name: str, default: str) -> float:
    """1 when vlcrc's setting `name` equals rule["expected_<name with _>"]."""
    if config_path is None:
        return 0.0
    expected = _expected_text(metric, rule, f"expected_{name.replace('-', '_')}")
    return float(_setting(_read_text(config_path), f"{name}=", default) == expected)


@register_metric("check_qt_bgcone")
def check_qt_bgcone(result: Any, rule: Any, **options: Any) -> float:
    """1 when the interface's background cone setting (qt-bgcone, on by default) equals
    rule["expected_qt_bgcone"] (0 or 1)."""
    return _setting_is("check_qt_bgcone", result, rule, "qt-bgcone", "1")


@register_metric("check_qt_max_volume")
def check_qt_max_volume(result: Any, rule: Any, **options: Any) -> float:
    """1 when the maximum volume in percent (qt-max-volume, 125 by default) equals
    rule["expected_qt_max_volume"]."""
    return _setting_is("check_qt_max_volume", result, rule, "qt-max-volume", "125")


@register_metric("check_qt_minimal_view")
def check_qt_minimal_view(result: Any, rule: Any, **options: Any) -> float:
    """1 when the minimal interface setting (qt-minimal-view, off by default) equals
    rule["expected_qt_minimal_view"]."""
    return _setting_is("check_qt_minimal_view", result, rule, "qt-minimal-view", "0")


@register_metric("check_one_instance_when_started_from_file")
def check_one_instance_when_started_from_file(result: Any, rule: Any, **options: Any) -> float:
    """1 when "use only one instance when started from file manager"
    (one-instance-when-started-from-file, on by default) equals
    rule["expected_one_instance_when_started_from_file"]."""
    return _setting_is("check_one_instance_when_started_from_file", result, rule,
                       "one-instance-when-started-from-file", "1")


@register_metric("check_play_and_exit")
def check_play_and_exit(result: Any, rule: Any, **options: Any) -> float:
    """1 when "quit at the end of the playlist" (play-and-exit, off by default) equals
    rule["expected_play_and_exit"]."""
    return _setting_is("check_play_and_exit", result, rule, "play-and-exit", "0")


@register_metric("check_global_key_play_pause")
def check_global_key_play_pause(result: Any, rule: Any, **options: Any) -> float:
    """1 when whether a global play/pause hotkey is set ("1" when the last
    global-key-play-pause line has a key after its '=', else "0") equals
    rule["expected_global_key_play_pause"]."""
    if result is None:
        return 0.0
    expected = _expected_text("check_global_key_play_pause", rule,
                              "expected_global_key_play_pause")
    key = _setting(_read_text(result), "global-key-play-pause=", "")
    return float(("1" if key else "0") == expected)


def _slider_colours(text: str) -> list[tuple[int, ...]] | None:
    """The RGB triples of a qt-slider-colours value ("r;g;b;r;g;b;..."; an incomplete last
    triple is dropped), or None when a part is not a number."""
    try:
        levels = [int(part) for part in text.split(";")]
    except ValueError:
        return None
    return list(zip(levels[0::3], levels[1::3], levels[2::3], strict=False))


@register_metric("check_qt_slider_colours")
def check_qt_slider_colours(result: Any, rule: Any, **options: Any) -> float:
    """Checks the volume slider's colours (qt-slider-colours). rule["type"] "match": 1 when
    the setting equals rule["expected_qt_slider_colours"]; "blackish": 1 when every colour
    has red, green and blue all below 100 (a value that does not parse scores 0).

    As in OSWorld, the last line that merely mentions the setting counts, even one without
    an '=' (then its whole text is the value)."""
    if result is None:
        return 0.0
    kind = _rule_field("check_qt_slider_colours", rule, "type")
    if kind not in ("match", "blackish"):
        raise ValueError(f"check_qt_slider_colours: rule type must be 'match' or 'blackish', "
                         f"got {kind!r}")
    value = _setting(_read_text(result), "qt-slider-colours", _DEFAULT_SLIDER_COLOURS)
    if kind == "match":
        expected = _rule_field("check_qt_slider_colours", rule, "expected_qt_slider_colours")
        return float(value == expected)
    colours = _slider_colours(value)
    if colours is None:
        return 0.0
    return float(all(level < _BLACKISH_BELOW for colour in colours for level in colour))


@register_metric("is_vlc_recordings_folder")
def is_vlc_recordings_folder(result: Any, rule: Any, **options: Any) -> float:
    """1 when the first setting line (not a comment) about input-record-path has the value
    rule["recording_file_path"]."""
    if result is None:
        return 0.0
    expected = _rule_field("is_vlc_recordings_folder", rule, "recording_file_path")
    for line in _read_text(result).split("\n"):
        if line.startswith("#") or not line.strip():
            continue
        if "input-record-path" in line:
            return float(line.split("=")[-1].strip() == expected)
    return 0.0


@register_metric("is_vlc_fullscreen")
def is_vlc_fullscreen(result: Any, expected: Any, **options: Any) -> float:
    """1 when the two sizes ({"width": ..., "height": ...}: VLC's window and the screen)
    are equal; a size that could not be read scores 0."""
    if result is None or expected is None:
        return 0.0
    try:
        return float(result["width"] == expected["width"]
                     and result["height"] == expected["height"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"is_vlc_fullscreen: sizes must have width and height, got "
                         f"{result!r:.60} and {expected!r:.60}") from exc


# where VLC's status XML may name what plays, in the order they are tried
_FILE_FIELDS = (("meta", "filename"), ("meta", "title"), ("meta", "uri"), ("meta", "location"),
                ("meta", "name"))
_URL_FIELDS = (("meta", "url"), ("meta", "URI"), ("meta", "location"), ("meta", "title"),
               ("meta", "filename"), ("Stream 0", "Codec"), ("Stream 0", "Type"),
               ("Stream 0", "Language"))


def _first_info(status: ElementTree.Element, fields: tuple[tuple[str, str], ...]) -> str | None:
    """The first non-empty <information><category name=C><info name=N> text among fields."""
    for category, name in fields:
        found = status.find(f'information/category[@name="{category}"]/info[@name="{name}"]')
        if found is not None and found.text:
            return found.text
    return None


def _names_file(shown: str, file_name: str) -> bool:
    return os.path.basename(shown) == file_name or shown.endswith(file_name)


def _names_url(shown: str, url: str) -> bool:
    """Whether what VLC shows stands for `url`: it contains or ends with the URL, is the
    URL's file name (as VLC shows an HLS stream), or is a URL on the same host whose path
    contains the expected path."""
    if url in shown:
        return True
    try:
        wanted = urlparse(url)
        if shown == os.path.basename(wanted.path):
            return True
        if "://" not in shown:
            return False
        seen = urlparse(shown)
    except ValueError:  # not a URL urllib can split
        return False
    return wanted.netloc == seen.netloc and wanted.path in seen.path


@register_metric("is_vlc_playing")
def is_vlc_playing(result: Any, rule: Any, **options: Any) -> float:
    """1 when VLC's status (the web interface's status.xml) says "playing" and what plays
    matches the rule: {"type": "file_name", "file_name": ...} (the file's name, or the end
    of its path) or {"type": "url", "url": ...}."""
    if result is None:
        return 0.0
    kind = _rule_field("is_vlc_playing", rule, "type")
    if kind not in ("file_name", "url"):
        raise ValueError(f"is_vlc_playing: rule type must be 'file_name' or 'url', got "
                         f"{kind!r}")
    wanted = _rule_field("is_vlc_playing", rule, kind)
    status = ElementTree.fromstring(_read_text(result))
    state = status.find("state")
    if state is None:
        raise ValueError(f"is_vlc_playing: {result} is not VLC's status (no <state>)")
    if state.text != "playing":
        return 0.0
    if kind == "file_name":
        shown = _first_info(status, _FILE_FIELDS)
        return float(shown is not None and _names_file(shown, wanted))
    shown = _first_info(status, _URL_FIELDS)
    return float(shown is not None and _names_url(shown, wanted))
