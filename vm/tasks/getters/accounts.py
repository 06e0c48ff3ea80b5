"""The user's Google account: OSWorld's googledrive_file getter, and the Google Drive and
settings code that the `googledrive` and `login` setup steps (vm/tasks/steps/accounts.py)
share with it.

Nothing here works without the user's own settings file, named by the environment
variable WORKBENCH_GOOGLE_CREDENTIALS (a path). Without it, the getter raises GetterError
and the steps fail, each naming the variable. The file is YAML (or JSON) holding what
OSWorld keeps in two files, `evaluation_examples/settings/googledrive/settings.yml` (PyDrive's
settings, for the Drive API) and `evaluation_examples/settings/google/settings.json` (the
account the `login` step signs in with); a task's own `settings_file` is not read:

    # the OAuth client (from Google Cloud's console), either inline ...
    client_config:
      client_id: 1234-abc.apps.googleusercontent.com
      client_secret: GOCSPX-...
    # ... or as the client_secrets.json downloaded from the console
    # ({"installed": {"client_id": ..., "client_secret": ..., "token_uri": ...}})
    client_config_file: client_secrets.json
    # the saved OAuth token PyDrive writes (oauth2client's JSON: access_token,
    # refresh_token, client_id, client_secret, token_uri); relative to this file
    save_credentials_file: credentials.json
    # or the token's fields right here: refresh_token, access_token, token_uri
    # the account of the `login` step (OSWorld's google/settings.json)
    email: your_google_account@gmail.com
    password: your_google_account_password

OSWorld's settings.yml works as it is, as long as its file paths are absolute or relative
to the settings file. The token needs Drive's full scope
(https://www.googleapis.com/auth/drive); a refresh token is exchanged for an access token
at Google's OAuth endpoint. Drive is used through its documented REST API, version 2 (the
one PyDrive uses, whose queries name files by `title`): files.list, files.get with
alt=media, files.insert, files.delete and files.trash.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from vm.tasks.files import save_local
from vm.tasks.getters.files import GetterError
from vm.tasks.registry import EvalContext, register_getter

CREDENTIALS_ENV = "WORKBENCH_GOOGLE_CREDENTIALS"
TOKEN_URI = "https://oauth2.googleapis.com/token"
DRIVE_API = "https://www.googleapis.com/drive/v2"
DRIVE_UPLOAD = "https://www.googleapis.com/upload/drive/v2/files"
FOLDER_TYPE = "application/vnd.google-apps.folder"
GOOGLE_TYPES = "application/vnd.google-apps."  # Docs, Sheets, ...: no bytes to download
HTTP_TIMEOUT = 60.0


class GoogleSettingsError(ValueError):
    """The credentials setting is absent or its file is unusable; the message says why."""


def _load_mapping(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GoogleSettingsError(f"{CREDENTIALS_ENV}: cannot read {path}: {exc}") from None
    try:
        import yaml

        data = yaml.safe_load(text)
    except ImportError:  # pyyaml (osworld extra) missing: JSON still reads
        data = json.loads(text)
    except Exception as exc:
        raise GoogleSettingsError(f"{path}: not valid YAML/JSON: {exc}") from None
    if not isinstance(data, dict):
        raise GoogleSettingsError(f"{path}: expected a mapping of settings")
    return data


@dataclass(frozen=True)
class GoogleSettings:
    """The user's settings file, read."""

    path: Path
    data: dict[str, Any]

    def _file(self, key: str) -> dict[str, Any]:
        name = self.data.get(key)
        if not name:
            return {}
        path = Path(str(name)).expanduser()
        return _load_mapping(path if path.is_absolute() else self.path.parent / path)

    def oauth(self) -> dict[str, str]:
        """client_id, client_secret, refresh_token, access_token, token_uri (as present),
        from the client config, the saved token and the file's own fields, in that
        order (a later one wins)."""
        client = self.data.get("client_config") or {}
        secrets = self._file("client_config_file")
        client_file = secrets.get("installed") or secrets.get("web") or secrets
        fields: dict[str, str] = {}
        for source in (client_file, client, self._file("save_credentials_file"), self.data):
            if isinstance(source, dict):
                fields.update({k: str(source[k]) for k in (
                    "client_id", "client_secret", "refresh_token", "access_token",
                    "token_uri") if source.get(k)})
        if not fields.get("access_token") and not (
                fields.get("refresh_token") and fields.get("client_id")
                and fields.get("client_secret")):
            raise GoogleSettingsError(
                f"{self.path}: no usable OAuth token: give access_token, or refresh_token "
                "with client_id and client_secret (see vm/tasks/getters/accounts.py)")
        return fields

    def account(self) -> tuple[str, str]:
        """The Google account's email and password (for the `login` step)."""
        email, password = self.data.get("email"), self.data.get("password")
        if not isinstance(email, str) or not isinstance(password, str) or not email:
            raise GoogleSettingsError(f"{self.path}: needs the account's `email` and "
                                      "`password` to sign in")
        return email, password


def load_settings() -> GoogleSettings:
    """The settings file that WORKBENCH_GOOGLE_CREDENTIALS names; GoogleSettingsError if
    the variable is unset or the file unreadable."""
    value = os.environ.get(CREDENTIALS_ENV, "").strip()
    if not value:
        raise GoogleSettingsError(
            f"this needs the user's Google account: set {CREDENTIALS_ENV} to the path of a "
            "settings file with an OAuth token for Google Drive (and the account's email "
            "and password for `login`); its format is described in "
            "vm/tasks/getters/accounts.py")
    path = Path(value).expanduser()
    return GoogleSettings(path, _load_mapping(path))


def access_token(settings: GoogleSettings, session: requests.Session) -> str:
    """A fresh access token (by the refresh token, when there is one)."""
    fields = settings.oauth()
    if fields.get("refresh_token") and fields.get("client_id") and fields.get("client_secret"):
        response = session.post(fields.get("token_uri", TOKEN_URI), timeout=HTTP_TIMEOUT, data={
            "grant_type": "refresh_token", "refresh_token": fields["refresh_token"],
            "client_id": fields["client_id"], "client_secret": fields["client_secret"]})
        if response.ok and response.json().get("access_token"):
            return str(response.json()["access_token"])
        if not fields.get("access_token"):
            raise RuntimeError(f"Google refused the refresh token of {settings.path}: "
                               f"HTTP {response.status_code} {response.text[:200]}")
    return fields["access_token"]


def new_session() -> requests.Session:
    """The HTTP session Google is spoken to with (tests put a stand-in here)."""
    return requests.Session()


class Drive:
    """A thin client of Google Drive's REST API (v2)."""

    def __init__(self, settings: GoogleSettings, session: requests.Session | None = None):
        self.session = session or new_session()
        self.session.headers["Authorization"] = f"Bearer {access_token(settings, self.session)}"

    def _call(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        response = self.session.request(method, url, timeout=HTTP_TIMEOUT, **kwargs)
        if not response.ok:
            raise RuntimeError(f"Google Drive: {method} {url}: HTTP {response.status_code} "
                               f"{response.text[:300]}")
        return response

    def search(self, query: str) -> list[dict[str, Any]]:
        """Every file matching a Drive (v2) search query, all pages."""
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"q": query, "maxResults": 1000}
        while True:
            page = self._call("GET", f"{DRIVE_API}/files", params=params).json()
            items += page.get("items", [])
            if not page.get("nextPageToken"):
                return items
            params["pageToken"] = page["nextPageToken"]

    def download(self, file_id: str) -> bytes:
        return self._call("GET", f"{DRIVE_API}/files/{file_id}", params={"alt": "media"}
                          ).content

    def delete(self, file_id: str, trash: bool = False) -> None:
        if trash:
            self._call("POST", f"{DRIVE_API}/files/{file_id}/trash")
        else:
            self._call("DELETE", f"{DRIVE_API}/files/{file_id}")

    def _parents(self, parent: str) -> list[dict[str, str]]:
        return [] if parent == "root" else [{"id": parent}]

    def make_folder(self, title: str, parent: str = "root") -> str:
        body = {"title": title, "mimeType": FOLDER_TYPE, "parents": self._parents(parent)}
        return str(self._call("POST", f"{DRIVE_API}/files", json=body).json()["id"])

    def upload(self, title: str, data: bytes, parent: str = "root") -> str:
        boundary = uuid.uuid4().hex
        meta = json.dumps({"title": title, "parents": self._parents(parent)})
        body = (f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
                f"{meta}\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n"
                ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
        response = self._call("POST", DRIVE_UPLOAD, params={"uploadType": "multipart"},
                              data=body,
                              headers={"Content-Type": f"multipart/related; boundary={boundary}"})
        return str(response.json()["id"])


def path_queries(names: list[str]) -> list[str]:
    """The search queries that walk a folder path: folders, then the file (any type)."""
    return [f"title = '{name}' and mimeType = '{FOLDER_TYPE}' and trashed = false"
            if i < len(names) - 1 else f"title = '{name}' and trashed = false"
            for i, name in enumerate(names)]


def find(drive: Drive, queries: list[str]) -> dict[str, Any] | None:
    """Walk down from My Drive: each query is searched among the previous match's children
    (the first match taken); None when one finds nothing."""
    parent, found = "root", None
    for query in queries:
        matches = drive.search(f'( {query} ) and "{parent}" in parents')
        if not matches:
            return None
        found = matches[0]
        parent = str(found["id"])
    return found


def _strings(config: dict[str, Any], key: str) -> list[str]:
    value = config.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GetterError(f"getter 'googledrive_file': {key} must be a list of strings")
    return value


def _requests(config: dict[str, Any]) -> tuple[list[list[str]], list[str], bool]:
    """(query lists, dests, whether a list is returned) from query/path[_list] and dest."""
    for key, many, by_path in (("query", False, False), ("path", False, True),
                               ("query_list", True, False), ("path_list", True, True)):
        if key not in config:
            continue
        if many:
            groups = config[key]
            if not isinstance(groups, list):
                raise GetterError(f"getter 'googledrive_file': {key} must be a list of lists")
            parts = [_strings({key: g}, key) for g in groups]
            dests = _strings(config, "dest")
        else:
            parts = [_strings(config, key)]
            dest = config.get("dest")
            if not isinstance(dest, str):
                raise GetterError("getter 'googledrive_file': dest must be a file name")
            dests = [dest]
        if len(dests) != len(parts):
            raise GetterError(f"getter 'googledrive_file': dest must be as long as {key}")
        return [path_queries(p) if by_path else p for p in parts], dests, many
    raise GetterError("getter 'googledrive_file': needs query, path, query_list or path_list")


@register_getter("googledrive_file")
def get_googledrive_file(context: EvalContext, config: dict[str, Any]
                         ) -> str | list[str | None] | None:
    """Files from the user's Google Drive, saved in the cache folder as `dest`; their local
    paths. A file is named by `path` (folder names then the file's title) or by `query`
    (Drive search queries, each searched in the previous match); `path_list`/`query_list`
    with a list `dest` fetch several and give a list. A file not found, or a Google Docs
    file (which has no bytes to download), gives None. Needs WORKBENCH_GOOGLE_CREDENTIALS."""
    groups, dests, many = _requests(config)
    try:
        drive = Drive(load_settings())
    except GoogleSettingsError as exc:
        raise GetterError(f"getter 'googledrive_file': {exc}") from None
    paths: list[str | None] = []
    for queries, dest in zip(groups, dests, strict=True):
        found = find(drive, queries)
        if found is None or str(found.get("mimeType", "")).startswith(GOOGLE_TYPES):
            paths.append(None)
            continue
        data = drive.download(str(found["id"]))
        paths.append(str(save_local(data, context.cache_dir, dest)))
    return paths if many else paths[0]
