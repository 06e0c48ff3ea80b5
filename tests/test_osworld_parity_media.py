"""Our media and VLC metrics give OSWorld's scores: each case builds its pictures, sounds,
videos, MP3 tags, e-books, vlcrc files or VLC status XML in tmp_path and compares our metric
with the released desktop-env one."""

from __future__ import annotations

import mimetypes
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import soundfile
from mutagen.easyid3 import EasyID3
from mutagen.id3 import ID3NoHeaderError
from PIL import Image, ImageDraw, ImageOps

from tests.osworld_reference import assert_same_score, reference
from vm.tasks.metrics import media, vlc
from vm.tasks.registry import metric

mimetypes.init()

Built = tuple[tuple[Any, ...], dict[str, Any], float | None]
Case = Callable[[Path], Built]


def _compare(name: str, arguments: tuple[Any, ...], options: dict[str, Any],
             intended: float | None) -> None:
    assert_same_score(name, arguments, options, intended)


def _none_case(arguments: int, expected_argument: Any = "x") -> Case:
    def build(folder: Path) -> Built:
        return (None,) + (expected_argument,) * (arguments - 1), {}, 0.0
    return build


# --- compare_images -----------------------------------------------------------------------

def _picture(width: int = 96, height: int = 80, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    rows, columns = np.mgrid[0:height, 0:width]
    red = 130 + 70 * np.sin(columns / 9 + seed)
    green = 110 + 60 * np.cos(rows / 7 - seed)
    levels = np.stack([red, green, np.full_like(red, 90.0)], axis=-1)
    levels = levels + rng.normal(0, 5, (height, width, 3))
    picture = Image.fromarray(np.clip(levels, 0, 255).astype(np.uint8))
    ImageDraw.Draw(picture).ellipse((width // 5, height // 5, width // 2, height // 2),
                                    fill=(200, 40, 60))
    return picture


def _save(picture: Image.Image, folder: Path, name: str) -> str:
    path = folder / name
    picture.save(path)
    return str(path)


def _images(first: Image.Image, second: Image.Image, intended: float | None,
            **options: Any) -> Case:
    def build(folder: Path) -> Built:
        return (_save(first, folder, "result.png"), _save(second, folder, "gold.png")), \
            options, intended
    return build


_SLIGHTLY_CHANGED = _picture().copy()
ImageDraw.Draw(_SLIGHTLY_CHANGED).rectangle((60, 50, 80, 70), fill=(0, 0, 0))

IMAGE_CASES: dict[str, Case] = {
    "same": _images(_picture(), _picture(), 1.0),
    "other": _images(_picture(seed=4), _picture(), None),
    "slightly_changed": _images(_SLIGHTLY_CHANGED, _picture(), None),
    "negative": _images(ImageOps.invert(_picture()), _picture(), None),
    "sizes_sorted_as_tuples": _images(_picture(80, 96), _picture(96, 80), None),
    "bigger_result": _images(_picture(192, 160), _picture(), None),
    "base_same": _images(_picture(), _picture(), 1.0, reference_base_result=0.54),
    "base_other": _images(_picture(seed=4), _picture(), 0.0, reference_base_result=0.54),
    "base_changed": _images(_SLIGHTLY_CHANGED, _picture(), None, reference_base_result=0.11),
    "base_barely": _images(_SLIGHTLY_CHANGED, _picture(), 0.0, reference_base_result=0.99),
    "none": _none_case(2),
}


@pytest.mark.parametrize("case", sorted(IMAGE_CASES))
def test_compare_images(case: str, tmp_path: Path) -> None:
    _compare("compare_images", *IMAGE_CASES[case](tmp_path))


# --- check_mp3_meta -----------------------------------------------------------------------

def _tagged(folder: Path, tags: dict[str, str | list[str]] | None = None,
            name: str = "song.mp3") -> str:
    path = folder / name
    path.write_bytes(b"\xff\xfb\x90\x00" + bytes(413))  # one silent MPEG frame header
    if tags:
        file_tags = EasyID3()
        for key, value in tags.items():
            file_tags[key] = value
        file_tags.save(str(path))
    return str(path)


def _meta(tags: dict[str, str | list[str]], rules: dict[str, Any], intended: float) -> Case:
    def build(folder: Path) -> Built:
        return (_tagged(folder, tags), rules), {}, intended
    return build


_TITLE_ARTIST = {"title": {"method": "eq", "ref": "Missing You"},
                 "artist": {"method": "eq", "ref": "Cheng Xiang"}}

MP3_CASES: dict[str, Case] = {
    "title_and_artist": _meta({"title": "Missing You", "artist": "Cheng Xiang"},
                              _TITLE_ARTIST, 1.0),
    "artist_differs": _meta({"title": "Missing You", "artist": "Unknown"}, _TITLE_ARTIST, 0.0),
    "artist_absent": _meta({"title": "Missing You"}, _TITLE_ARTIST, 0.0),
    "title_differs": _meta({"title": "Cheng Xiang - Missing You", "artist": "Cheng Xiang"},
                           _TITLE_ARTIST, 0.0),
    "two_artists_joined": _meta({"title": "Duet", "artist": ["A", "B"]},
                                {"artist": {"method": "eq", "ref": "A,B"}}, 1.0),
    "regex": _meta({"title": "Nights in Shanghai"},
                   {"title": {"method": "re.I", "ref": "^nights"}}, 1.0),
    "regex_fails": _meta({"title": "Nights in Shanghai"},
                         {"title": {"method": "re", "ref": "^nights"}}, 0.0),
    "none": _none_case(2, _TITLE_ARTIST),
}


@pytest.mark.parametrize("case", sorted(MP3_CASES))
def test_check_mp3_meta(case: str, tmp_path: Path) -> None:
    _compare("check_mp3_meta", *MP3_CASES[case](tmp_path))


# --- compare_epub -------------------------------------------------------------------------

_TOC = """<?xml version='1.0' encoding='utf-8'?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
  <head><meta name="dtb:uid" content="urn:pass-through"/></head>
  <docTitle><text>Pass Through</text></docTitle>
  <navMap>
    <navPoint id="n1" playOrder="1"><navLabel><text>One</text></navLabel></navPoint>
  </navMap>
</ncx>
"""
_OPF = """<?xml version='1.0' encoding='utf-8'?>
<package xmlns="http://www.idpf.org/2007/opf" version="2.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:title>Pass Through</dc:title>
    <dc:identifier id="id">{uid}</dc:identifier>
  </metadata>
  <manifest><item id="c1" href="chapter1.html" media-type="application/xhtml+xml"/></manifest>
</package>
"""


def _chapter(title: str, paragraphs: list[str]) -> str:
    body = "\n".join(f"<p>{text}</p>" for text in paragraphs)
    return (f"<?xml version='1.0' encoding='utf-8'?>\n<html xmlns=\"http://www.w3.org/1999/"
            f"xhtml\">\n<head><title>{title}</title></head>\r\n<body>\n<h1>{title}</h1>\n"
            f"{body}\n</body>\n</html>\n")


_PARAGRAPHS = [f"Line {n} of the story, where the river keeps running." for n in range(12)]


def _epub(folder: Path, name: str, uid: str = "urn:1", chapters: int = 2,
          paragraphs: list[str] | None = None, prefix: str = "", toc: bool = True) -> str:
    path = folder / name
    with zipfile.ZipFile(path, "w") as book:
        book.writestr("mimetype", "application/epub+zip")
        if toc:
            book.writestr(f"{prefix}toc.ncx", _TOC)
        book.writestr(f"{prefix}content.opf", _OPF.format(uid=uid))
        for number in range(1, chapters + 1):
            book.writestr(f"{prefix}chapter{number}.html",
                          _chapter(f"Chapter {number}", paragraphs or _PARAGRAPHS))
        book.writestr(f"{prefix}style.css", "p { margin: 0 }")
    return str(path)


def _books(result: dict[str, Any], expected: dict[str, Any] | None,
           intended: float | None) -> Case:
    def build(folder: Path) -> Built:
        got = _epub(folder, "Pass Through.epub", **result)
        want = _epub(folder, "Pass Through Gold.epub", **(expected or {}))
        return (got, want), {}, intended
    return build


def _not_a_zip(folder: Path) -> Built:
    bad = folder / "Pass Through.epub"
    bad.write_text("plain text")
    return (str(bad), _epub(folder, "gold.epub")), {}, 0.0


EPUB_CASES: dict[str, Case] = {
    "same": _books({}, {}, 1.0),
    "other_identifier": _books({"uid": "urn:2"}, {}, 1.0),
    "edited_text": _books({"paragraphs": [*_PARAGRAPHS[:6], "Changed.", *_PARAGRAPHS[7:]]},
                          {}, None),
    # parts are paired by rank: a missing chapter shifts the pairs after it
    "missing_chapter": _books({"chapters": 1}, {}, None),
    "missing_last_part": _books({"toc": False}, {}, 1.0),  # fewer parts are not penalised
    "extra_chapter": _books({"chapters": 3}, {}, None),
    "no_pages": _books({"chapters": 0}, {}, None),
    "not_a_zip": _not_a_zip,
    "none": _none_case(2),
}


@pytest.mark.parametrize("case", sorted(EPUB_CASES))
def test_compare_epub(case: str, tmp_path: Path) -> None:
    _compare("compare_epub", *EPUB_CASES[case](tmp_path))


# --- compare_audios -----------------------------------------------------------------------

RATE = 22050


def _sound(folder: Path, name: str, samples: np.ndarray, rate: int = RATE) -> str:
    path = folder / name
    soundfile.write(path, samples.astype(np.float32), rate)
    return str(path)


def _tone(frequency: float, seconds: float = 1.5, rate: int = RATE) -> np.ndarray:
    times = np.arange(int(seconds * rate)) / rate
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 1.5 * times)
    return 0.4 * envelope * np.sin(2 * np.pi * frequency * times)


def _melody(rate: int = RATE) -> np.ndarray:
    return np.concatenate([_tone(f, 0.4, rate) for f in (330, 440, 550, 660)])


def _audio(first: Callable[[Path], str], second: Callable[[Path], str],
           intended: float | None) -> Case:
    def build(folder: Path) -> Built:
        return (first(folder), second(folder)), {}, intended
    return build


def _melody_file(folder: Path) -> str:
    return _sound(folder, "melody.wav", _melody())


def _empty_file(name: str) -> Callable[[Path], str]:
    def write(folder: Path) -> str:
        (folder / name).write_bytes(b"")
        return str(folder / name)
    return write


AUDIO_CASES: dict[str, Case] = {
    "same": _audio(_melody_file, _melody_file, 1.0),
    "other_rate": _audio(lambda folder: _sound(folder, "m44.wav", _melody(44100), 44100),
                         _melody_file, None),
    "noise": _audio(lambda folder: _sound(folder, "noise.wav",
                                          np.random.default_rng(0).normal(0, 0.2, RATE)),
                    _melody_file, None),
    "reversed": _audio(lambda folder: _sound(folder, "rev.wav", _melody()[::-1].copy()),
                       _melody_file, None),
    "both_empty": _audio(_empty_file("a.wav"), _empty_file("b.wav"), 1.0),
    "result_empty": _audio(_empty_file("a.wav"), _melody_file, 0.0),
    "none": _none_case(2),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(AUDIO_CASES))
def test_compare_audios(case: str, tmp_path: Path) -> None:
    _compare("compare_audios", *AUDIO_CASES[case](tmp_path))


@pytest.mark.slow
def test_audio_scores_order(tmp_path: Path) -> None:
    """A similar sound scores higher than noise (the score means something)."""
    gold = _melody_file(tmp_path)
    resampled = media.compare_audios(_sound(tmp_path, "m.wav", _melody(44100), 44100), gold)
    noise = media.compare_audios(
        _sound(tmp_path, "n.wav", np.random.default_rng(0).normal(0, 0.2, RATE)), gold)
    assert 0.9 < resampled <= 1.0
    assert noise < resampled - 0.1


# --- compare_videos -----------------------------------------------------------------------

def _video(folder: Path, name: str, frames: int = 20, seed: int = 0,
           changed_from: int | None = None) -> str:
    path = folder / name
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 10, (64, 64))
    for number in range(frames):
        frame = np.zeros((64, 64, 3), np.uint8)
        shift = number * 3 + (seed * 17 if changed_from is None or number >= changed_from
                              else 0)
        cv2.rectangle(frame, (shift % 50, 10), (shift % 50 + 14, 40), (255, 255, 255), -1)
        cv2.circle(frame, (32, (shift * 2) % 60), 6, (0, 0, 255), -1)
        writer.write(frame)
    writer.release()
    return str(path)


def _videos(result: dict[str, Any], expected: dict[str, Any], intended: float,
            **options: Any) -> Case:
    def build(folder: Path) -> Built:
        return ((_video(folder, "result.avi", **result), _video(folder, "gold.avi", **expected)),
                options, intended)
    return build


def _absent_videos(folder: Path) -> Built:
    # neither opens: both "end" at once, which OSWorld counts as the same video
    return (str(folder / "a.mp4"), str(folder / "b.mp4")), {}, 1.0


VIDEO_CASES: dict[str, Case] = {
    "same": _videos({}, {}, 1.0),
    "other": _videos({"seed": 1}, {}, 0.0),
    "shorter": _videos({"frames": 15}, {}, 0.0),
    "changed_late_unchecked": _videos({"seed": 1, "changed_from": 10}, {}, 1.0,
                                      max_frames_to_check=8),
    "changed_late_checked": _videos({"seed": 1, "changed_from": 10}, {}, 0.0),
    "few_mismatches_tolerated": _videos({"seed": 1, "changed_from": 17}, {}, 1.0),
    "strict_threshold": _videos({"seed": 1, "changed_from": 17}, {}, 0.0, threshold=1),
    "absent_files": _absent_videos,
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(VIDEO_CASES))
def test_compare_videos(case: str, tmp_path: Path) -> None:
    _compare("compare_videos", *VIDEO_CASES[case](tmp_path))


def test_compare_videos_without_result() -> None:
    """A result that was not fetched scores 0 (OSWorld would open None and count it as
    an empty video: 0 against a real one)."""
    assert media.compare_videos(None, "gold.mp4") == 0.0
    assert media.compare_videos(None, None) == 0.0
    assert reference("compare_videos")(None, None) == 1.0  # documented difference


# --- VLC settings (vlcrc) -----------------------------------------------------------------

def _vlcrc(**settings: str | None) -> str:
    """A vlcrc in VLC's layout: each setting as a comment (its description), then
    `#name=default` while unset or `name=value` once set."""
    defaults = {"qt-bgcone": "1", "qt-max-volume": "125", "qt-minimal-view": "0",
                "qt-slider-colours": "153;210;153;20;210;20;255;199;15;245;39;29",
                "one-instance-when-started-from-file": "1", "play-and-exit": "0",
                "global-key-play-pause": "", "key-play-pause": "Space",
                "input-record-path": ""}
    lines = ["\ufeff###", "###  vlc 3.0.16", "###", "", "[qt] # Qt interface", ""]
    for name, default in defaults.items():
        lines.append(f"# {name.replace('-', ' ')} (string)")
        value = settings.get(name.replace("-", "_"))
        lines.append(f"#{name}={default}" if value is None else f"{name}={value}")
        lines.append("")
    return "\n".join(lines) + "\n"


def _config(rule: dict[str, Any], intended: float, text: str | None = None,
            **settings: str | None) -> Case:
    def build(folder: Path) -> Built:
        path = folder / "vlcrc"
        path.write_text(text if text is not None else _vlcrc(**settings), encoding="utf-8")
        return (str(path), rule), {}, intended
    return build


BLACKISH = {"type": "blackish"}
CONFIG_CASES: dict[str, tuple[str, Case]] = {
    "bgcone/off": ("check_qt_bgcone", _config({"expected_qt_bgcone": 0}, 1.0, qt_bgcone="0")),
    "bgcone/default": ("check_qt_bgcone", _config({"expected_qt_bgcone": 0}, 0.0)),
    "bgcone/no_line": ("check_qt_bgcone", _config({"expected_qt_bgcone": 1}, 1.0, text="")),
    "bgcone/text_expected": ("check_qt_bgcone",
                             _config({"expected_qt_bgcone": "0"}, 1.0, qt_bgcone="0")),
    "max_volume/200": ("check_qt_max_volume",
                       _config({"expected_qt_max_volume": 200}, 1.0, qt_max_volume="200")),
    "max_volume/default": ("check_qt_max_volume",
                           _config({"expected_qt_max_volume": 200}, 0.0)),
    "max_volume/other": ("check_qt_max_volume",
                         _config({"expected_qt_max_volume": 200}, 0.0, qt_max_volume="150")),
    "minimal_view/on": ("check_qt_minimal_view",
                        _config({"expected_qt_minimal_view": 1}, 1.0, qt_minimal_view="1")),
    "minimal_view/default": ("check_qt_minimal_view",
                             _config({"expected_qt_minimal_view": 1}, 0.0)),
    "one_instance/off": ("check_one_instance_when_started_from_file",
                         _config({"expected_one_instance_when_started_from_file": 0}, 1.0,
                                 one_instance_when_started_from_file="0")),
    "one_instance/default": ("check_one_instance_when_started_from_file",
                             _config({"expected_one_instance_when_started_from_file": 0},
                                     0.0)),
    "global_key/set": ("check_global_key_play_pause",
                       _config({"expected_global_key_play_pause": 1}, 1.0,
                               global_key_play_pause="Ctrl+Alt+p")),
    "global_key/unset": ("check_global_key_play_pause",
                         _config({"expected_global_key_play_pause": 1}, 0.0)),
    "global_key/emptied": ("check_global_key_play_pause",
                           _config({"expected_global_key_play_pause": 1}, 0.0,
                                   global_key_play_pause=" ")),
    "global_key/expect_unset": ("check_global_key_play_pause",
                                _config({"expected_global_key_play_pause": 0}, 1.0)),
    "slider/blackish": ("check_qt_slider_colours",
                        _config(BLACKISH, 1.0, qt_slider_colours="0;0;0;20;20;20;50;50;50;99;0;0")),
    "slider/one_grey": ("check_qt_slider_colours",
                        _config(BLACKISH, 0.0,
                                qt_slider_colours="0;0;0;20;20;20;50;50;50;100;0;0")),
    "slider/default": ("check_qt_slider_colours", _config(BLACKISH, 0.0)),
    "slider/garbled": ("check_qt_slider_colours",
                       _config(BLACKISH, 0.0, qt_slider_colours="0;0;x")),
    "slider/incomplete_triple": ("check_qt_slider_colours",
                                 _config(BLACKISH, 1.0, qt_slider_colours="0;0;0;200")),
    "slider/match": ("check_qt_slider_colours",
                     _config({"type": "match", "expected_qt_slider_colours": "1;2;3"}, 1.0,
                             qt_slider_colours="1;2;3")),
    "slider/match_other": ("check_qt_slider_colours",
                           _config({"type": "match", "expected_qt_slider_colours": "1;2;3"},
                                   0.0)),
    "recordings/desktop": ("is_vlc_recordings_folder",
                           _config({"recording_file_path": "/home/user/Desktop"}, 1.0,
                                   input_record_path="/home/user/Desktop")),
    "recordings/other": ("is_vlc_recordings_folder",
                         _config({"recording_file_path": "/home/user/Desktop"}, 0.0,
                                 input_record_path="/home/user/Videos")),
    "recordings/unset": ("is_vlc_recordings_folder",
                         _config({"recording_file_path": "/home/user/Desktop"}, 0.0)),
    "bgcone/none": ("check_qt_bgcone", _none_case(2, {"expected_qt_bgcone": 0})),
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_vlc_settings(case: str, tmp_path: Path) -> None:
    name, build = CONFIG_CASES[case]
    arguments, options, intended = build(tmp_path)
    if arguments[0] is None:  # OSWorld opens the path whatever it is (TypeError)
        assert metric(name)(*arguments) == 0.0
        return
    _compare(name, arguments, options, intended)


def test_check_play_and_exit(tmp_path: Path) -> None:
    """Not in desktop-env 1.0.2 (OSWorld added it later): checked by hand."""
    path = tmp_path / "vlcrc"
    path.write_text(_vlcrc())
    assert vlc.check_play_and_exit(str(path), {"expected_play_and_exit": 0}) == 1.0
    assert vlc.check_play_and_exit(str(path), {"expected_play_and_exit": 1}) == 0.0
    path.write_text(_vlcrc(play_and_exit="1"))
    assert vlc.check_play_and_exit(str(path), {"expected_play_and_exit": 0}) == 0.0
    assert vlc.check_play_and_exit(str(path), {"expected_play_and_exit": 1}) == 1.0
    assert vlc.check_play_and_exit(str(path), {"expected_play_and_exit": "1"}) == 1.0
    path.write_text("")  # no line: VLC's default, off
    assert vlc.check_play_and_exit(str(path), {"expected_play_and_exit": 0}) == 1.0
    path.write_text("#play-and-exit=0\nplay-and-exit=1\n")  # the last line counts
    assert vlc.check_play_and_exit(str(path), {"expected_play_and_exit": 1}) == 1.0
    assert vlc.check_play_and_exit(None, {"expected_play_and_exit": 0}) == 0.0
    with pytest.raises(ValueError, match="expected_play_and_exit"):
        vlc.check_play_and_exit(str(path), {"expected": 0})


# --- is_vlc_fullscreen --------------------------------------------------------------------

@pytest.mark.parametrize(("screen", "window", "intended"), [
    ({"width": 1920, "height": 1080}, {"width": 1920, "height": 1080}, 1.0),
    ({"width": 1920, "height": 1080}, {"width": 1280, "height": 1080}, 0.0),
    ({"width": 1920, "height": 1080}, {"width": 1920, "height": 1000}, 0.0),
    ({"width": 1920, "height": 1080}, None, 0.0),
    (None, {"width": 1920, "height": 1080}, 0.0),
])
def test_is_vlc_fullscreen(screen: Any, window: Any, intended: float) -> None:
    _compare("is_vlc_fullscreen", (screen, window), {}, intended)


# --- is_vlc_playing -----------------------------------------------------------------------

def _status(state: str, meta: dict[str, str], stream: dict[str, str] | None = None) -> str:
    infos = "".join(f'<info name="{name}">{value}</info>' for name, value in meta.items())
    streams = "".join(f'<info name="{name}">{value}</info>'
                      for name, value in (stream or {}).items())
    return ("<?xml version=\"1.0\" encoding=\"utf-8\" standalone=\"yes\" ?>\n<root>"
            "<fullscreen>false</fullscreen><volume>256</volume>"
            f"<state>{state}</state><information><category name=\"meta\">{infos}</category>"
            f"<category name=\"Stream 0\">{streams}</category></information></root>")


RICK = "Rick Astley - Never Gonna Give You Up (Official Music Video).mp4"
STREAM = ("https://devstreaming-cdn.apple.com/videos/streaming/examples/"
          "img_bipbop_adv_example_fmp4/master.m3u8")


def _playing(text: str, rule: dict[str, Any], intended: float) -> Case:
    def build(folder: Path) -> Built:
        path = folder / "status.xml"
        path.write_text(text, encoding="utf-8")
        return (str(path), rule), {}, intended
    return build


FILE_RULE = {"type": "file_name", "file_name": RICK}
URL_RULE = {"type": "url", "url": STREAM}
PLAYING_CASES: dict[str, Case] = {
    "file/name": _playing(_status("playing", {"filename": RICK}), FILE_RULE, 1.0),
    "file/title_first": _playing(_status("playing", {"title": f"/home/user/{RICK}"}),
                                 FILE_RULE, 1.0),
    "file/other": _playing(_status("playing", {"filename": "other.mp4"}), FILE_RULE, 0.0),
    "file/paused": _playing(_status("paused", {"filename": RICK}), FILE_RULE, 0.0),
    "file/stopped_no_info": _playing(_status("stopped", {}), FILE_RULE, 0.0),
    "file/no_info": _playing(_status("playing", {}), FILE_RULE, 0.0),
    "file/empty_filename_then_title": _playing(_status("playing", {"filename": "",
                                                                   "title": RICK}),
                                               FILE_RULE, 1.0),
    "url/full": _playing(_status("playing", {"url": STREAM}), URL_RULE, 1.0),
    "url/file_name_only": _playing(_status("playing", {"filename": "master.m3u8"}),
                                   URL_RULE, 1.0),
    "url/same_host_longer_path": _playing(
        _status("playing", {"title": STREAM.replace("/master.m3u8", "/master.m3u8/x")}),
        URL_RULE, 1.0),
    "url/other_host": _playing(_status("playing", {"title": "https://example.com/master"}),
                               URL_RULE, 0.0),
    "url/stream_codec_only": _playing(_status("playing", {}, {"Codec": "H264 - MPEG-4 AVC"}),
                                      URL_RULE, 0.0),
    "url/paused": _playing(_status("paused", {"url": STREAM}), URL_RULE, 0.0),
}


@pytest.mark.parametrize("case", sorted(PLAYING_CASES))
def test_is_vlc_playing(case: str, tmp_path: Path) -> None:
    _compare("is_vlc_playing", *PLAYING_CASES[case](tmp_path))


def test_every_media_metric_is_compared() -> None:
    names = {name for name, _ in CONFIG_CASES.values()}
    assert names == {"check_qt_bgcone", "check_qt_max_volume", "check_qt_minimal_view",
                     "check_one_instance_when_started_from_file",
                     "check_global_key_play_pause", "check_qt_slider_colours",
                     "is_vlc_recordings_folder"}
    # the others have their own tests above: compare_images, check_mp3_meta, compare_epub,
    # compare_audios, compare_videos, is_vlc_fullscreen, is_vlc_playing; check_play_and_exit
    # by hand


# --- documented differences (docs/osworld-differences/images.md) --------------------------

def test_mp3_without_tags_scores_zero(tmp_path: Path) -> None:
    """An MP3 without an ID3 tag: OSWorld raises ID3NoHeaderError; we score 0."""
    bare = _tagged(tmp_path)
    assert media.check_mp3_meta(bare, _TITLE_ARTIST) == 0.0
    with pytest.raises(ID3NoHeaderError):
        reference("check_mp3_meta")(bare, _TITLE_ARTIST)


def test_epub_pages_in_folders(tmp_path: Path) -> None:
    """Pages inside a folder of the archive (OEBPS/...): OSWorld writes each page to a
    folder it did not create (FileNotFoundError); we compare them."""
    got = _epub(tmp_path, "r.epub", prefix="OEBPS/")
    want = _epub(tmp_path, "g.epub", prefix="OEBPS/")
    assert media.compare_epub(got, want) == 1.0
    with pytest.raises(FileNotFoundError):
        reference("compare_epub")(got, want)


def test_vlc_settings_without_file() -> None:
    """A vlcrc that could not be fetched (None): OSWorld opens None (TypeError); 0."""
    assert vlc.check_qt_max_volume(None, {"expected_qt_max_volume": 200}) == 0.0
    with pytest.raises(TypeError):
        reference("check_qt_max_volume")(None, {"expected_qt_max_volume": 200})
    assert vlc.is_vlc_playing(None, FILE_RULE) == 0.0


def test_malformed_rules_raise_value_error(tmp_path: Path) -> None:
    path = tmp_path / "vlcrc"
    path.write_text(_vlcrc())
    with pytest.raises(ValueError, match="check_qt_slider_colours"):
        vlc.check_qt_slider_colours(str(path), {"type": "greenish"})
    assert reference("check_qt_slider_colours")(str(path), {"type": "greenish"}) is None
    with pytest.raises(ValueError, match="recording_file_path"):
        vlc.is_vlc_recordings_folder(str(path), {})
    status = tmp_path / "status.xml"
    status.write_text(_status("playing", {"filename": RICK}))
    with pytest.raises(ValueError, match="is_vlc_playing"):
        vlc.is_vlc_playing(str(status), {"type": "title"})
    with pytest.raises(ValueError, match="check_mp3_meta"):
        media.check_mp3_meta(_tagged(tmp_path, {"title": "x"}), {"title": "x"})
    with pytest.raises(ValueError, match="reference_base_result"):
        media.compare_images("a.png", "b.png", reference_base_result="high")
