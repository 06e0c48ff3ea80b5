"""OSWorld's getters, in our own code: each turns an evaluator's `result`/`expected`
config into a value, over the Provider interface (sandbox, QEMU VM, remote OSWorld VM).

Modules and what they hold:
- files: vm_file, cloud_file, cache_file, content_from_vm_file, vm_command_line,
  vm_command_error, rule, rule_relativeTime, list_directory, vm_json
- desktop: vm_wallpaper, vm_screen_size, vm_window_size, vm_terminal_output,
  accessibility_tree, shortcuts_on_desktop, default_video_player
- apps: the LibreOffice, GIMP, VLC, Thunderbird and VS Code configuration getters
- slides: audio_in_slide, background_image_in_slide (from pptx files)
- chrome: the browser through Chrome's DevTools protocol and its profile files
- accounts: googledrive_file (needs the user's credentials setting)
"""

from __future__ import annotations

from vm.tasks.optional_modules import import_all

MODULES = ("files", "desktop", "apps", "slides", "chrome", "accounts")

MISSING: dict[str, str] = {}  # module -> the import error that kept it out


def load_all() -> None:
    import_all(__name__, MODULES, MISSING)
