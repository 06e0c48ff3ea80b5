"""Map points between the resized image a model saw and the real screen.

Qwen2.5-VL-based models (UI-TARS-1.5) answer in absolute pixels of the image after
`smart_resize`; Qwen2-VL-style models answer in relative 0..1000 units; agents prompted
with the screen size (OSWorld's pyautogui agents) answer in screen pixels. The resize must
use the same min/max pixels as the prompt builder, so both read one `ImageBudget`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from vm.actions import ParseError

# One 28x28 block (14-pixel patches, 2x2 merge) becomes one visual token.
PATCH_FACTOR = 28
MAX_ASPECT_RATIO = 200
DEFAULT_MIN_PIXELS = 4 * PATCH_FACTOR * PATCH_FACTOR
DEFAULT_MAX_PIXELS = 16384 * PATCH_FACTOR * PATCH_FACTOR

CoordinateSystem = Literal["absolute", "relative", "screen"]
COORDINATE_SYSTEMS: tuple[str, ...] = get_args(CoordinateSystem)
RELATIVE_SCALE = 1000  # Qwen2-VL-style coordinates run 0..1000 on each axis


@dataclass(frozen=True)
class ImageBudget:
    """How many pixels (hence visual tokens) one screenshot may cost."""

    min_pixels: int = DEFAULT_MIN_PIXELS
    max_pixels: int = DEFAULT_MAX_PIXELS
    factor: int = PATCH_FACTOR  # sides are rounded to multiples of this

    def __post_init__(self) -> None:
        if self.factor <= 0:
            raise ValueError(f"image budget: factor must be positive, got {self.factor}")
        if not 0 < self.min_pixels <= self.max_pixels:
            raise ValueError(f"image budget: need 0 < min_pixels <= max_pixels, got "
                             f"min_pixels={self.min_pixels}, max_pixels={self.max_pixels}")

    def resized_size(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) of a `width` x `height` image after smart_resize."""
        resized_height, resized_width = smart_resize(height, width, self.factor,
                                                     self.min_pixels, self.max_pixels)
        return resized_width, resized_height

    def visual_tokens(self, width: int, height: int) -> int:
        """Visual tokens of one image of that size (one per factor x factor block)."""
        resized_width, resized_height = self.resized_size(width, height)
        return (resized_width // self.factor) * (resized_height // self.factor)


def smart_resize(height: int, width: int, factor: int = PATCH_FACTOR,
                 min_pixels: int = DEFAULT_MIN_PIXELS,
                 max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[int, int]:
    """(height, width) rounded to multiples of `factor` with the pixel count kept within
    [min_pixels, max_pixels] and the aspect ratio kept as well as that allows.

    The same rule as qwen_vl_utils.smart_resize (tests check they agree), written here so
    that parsing a response does not import torch, which qwen_vl_utils does.
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"smart_resize: image size must be positive, got {width}x{height}")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise ValueError(f"smart_resize: aspect ratio must be below {MAX_ASPECT_RATIO}, "
                         f"got {width}x{height}")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


@dataclass(frozen=True)
class CoordinateMapping:
    """From model coordinates to screen pixels for one screen size and image budget."""

    screen_size: tuple[int, int]  # (width, height) of the real screen
    resized_size: tuple[int, int]  # (width, height) of the image the model saw
    system: CoordinateSystem = "absolute"

    def __post_init__(self) -> None:
        if self.system not in COORDINATE_SYSTEMS:
            raise ValueError(f"coordinate system: expected one of {list(COORDINATE_SYSTEMS)}, "
                             f"got {self.system!r}")
        for name, (w, h) in (("screen_size", self.screen_size),
                             ("resized_size", self.resized_size)):
            if w <= 0 or h <= 0:
                raise ValueError(f"coordinate mapping: {name} must be positive, got {w}x{h}")

    @classmethod
    def for_screen(cls, screen_size: tuple[int, int], budget: ImageBudget | None = None,
                   system: CoordinateSystem = "absolute") -> CoordinateMapping:
        budget = budget or ImageBudget()
        return cls(screen_size, budget.resized_size(*screen_size), system)

    @classmethod
    def identity(cls, screen_size: tuple[int, int]) -> CoordinateMapping:
        """Model coordinates are screen pixels (e.g. pyautogui code written for the screen)."""
        return cls(screen_size, screen_size, "screen")

    @property
    def _model_extent(self) -> tuple[float, float]:
        if self.system == "relative":
            return float(RELATIVE_SCALE), float(RELATIVE_SCALE)
        if self.system == "screen":
            return float(self.screen_size[0]), float(self.screen_size[1])
        return float(self.resized_size[0]), float(self.resized_size[1])

    def to_screen(self, x: float, y: float) -> tuple[int, int]:
        """Screen pixel for a model point, clamped onto the screen (however far off it is:
        a 400-digit coordinate lands on the edge). ParseError for NaN."""
        extent_x, extent_y = self._model_extent
        width, height = self.screen_size
        return (_onto_screen(x, extent_x, width, "x"), _onto_screen(y, extent_y, height, "y"))

    def to_model(self, x: int, y: int) -> tuple[int, int]:
        """The model point that names screen pixel (x, y) (for writing targets)."""
        extent_x, extent_y = self._model_extent
        width, height = self.screen_size
        return round(x / width * extent_x), round(y / height * extent_y)


def _onto_screen(value: float, extent: float, size: int, name: str) -> int:
    """round(value / extent * size) clamped to 0..size-1, for any int or float."""
    try:
        scaled = float(value) / extent * size
    except OverflowError:  # an int too large for a float: far off one edge
        scaled = math.inf if value > 0 else -math.inf
    if math.isnan(scaled):
        raise ParseError(f"coordinate {name}: not a number ({value!r})")
    return min(max(round(min(max(scaled, -1.0), float(size))), 0), size - 1)
