"""Whether a coding CLI is signed in, asked the way each CLI can answer without spending anything.

Never a prompt, never a model call. What each CLI offers (checked against their docs and issue
trackers; CLIs change, so an answer that is not understood is "unknown", never "signed out"):

* Claude Code: ``claude auth status`` prints a JSON object whose ``loggedIn`` boolean is the
  answer (its exit status is 1 for other errors too, so only the field decides).
* Codex CLI: ``codex login status`` exits 0 when signed in (``Logged in using ChatGPT`` / ``an API
  key``) and 1 with ``Not logged in``; the line goes to stdout or stderr depending on the version.
* Gemini CLI has no status command: its credentials are an API key in the environment
  (``GEMINI_API_KEY``, ``GOOGLE_API_KEY``, Vertex AI or Code Assist settings) or the cached Google
  sign-in ``~/.gemini/oauth_creds.json``; found or not is all that can be said.
* aider reads provider API keys from the environment, ``.env`` or ``.aider.conf.yml``, per model: not
  checked.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: How long a status command may take (they answer from local files in well under a second).
STATUS_TIMEOUT = 20.0
SIGNED_IN, SIGNED_OUT, UNKNOWN = "signed_in", "signed_out", "unknown"
#: How each CLI is installed, as its own docs say (for a preset that is not on PATH).
INSTALL_HINTS = {
    "claude": "npm install -g @anthropic-ai/claude-code",
    "codex": "npm install -g @openai/codex",
    "gemini": "npm install -g @google/gemini-cli",
    "aider": "python -m pip install aider-install && aider-install",
}
_GEMINI_KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA")


@dataclass(frozen=True)
class SignIn:
    """A CLI's sign-in as far as it can be told: ``state`` is :data:`SIGNED_IN`, :data:`SIGNED_OUT` or
    :data:`UNKNOWN`; ``detail`` says how it was told; ``fix`` how to sign in (when signed out)."""

    state: str
    detail: str
    fix: str | None = None


def sign_in(program: str, executable: str, *, environ: Mapping[str, str] | None = None,
            home: Path | None = None) -> SignIn:
    """Ask ``program`` (a preset's program name: ``claude``, ``codex``, ``gemini``, ``aider``), found
    at ``executable``, whether it is signed in. Another program: :data:`UNKNOWN`."""
    environ = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    if program == "claude":
        return _claude(executable)
    if program == "codex":
        return _codex(executable)
    if program == "gemini":
        return _gemini(environ, home)
    if program == "aider":
        return SignIn(UNKNOWN, "not checked: aider reads each provider's API key from the environment, .env or "
                      ".aider.conf.yml")
    return SignIn(UNKNOWN, "not checked: no sign-in status is known for this program")


def _run(argv: list[str]) -> tuple[int, str, str] | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=STATUS_TIMEOUT, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.returncode, done.stdout, done.stderr


def _claude(executable: str) -> SignIn:
    done = _run([executable, "auth", "status"])
    if done is None:
        return SignIn(UNKNOWN, "'claude auth status' did not answer")
    try:
        answer = json.loads(done[1])
    except ValueError:
        answer = None
    logged_in = answer.get("loggedIn") if isinstance(answer, dict) else None
    if logged_in is True:
        method = answer.get("authMethod") if isinstance(answer, dict) else None
        return SignIn(SIGNED_IN, "signed in" + (f" ({method})" if isinstance(method, str) and method else ""))
    if logged_in is False:
        return SignIn(SIGNED_OUT, "not signed in ('claude auth status')",
                      "run 'claude auth login' (or set ANTHROPIC_API_KEY)")
    return SignIn(UNKNOWN, "'claude auth status' gave no loggedIn field (a version without it?)")


def _codex(executable: str) -> SignIn:
    done = _run([executable, "login", "status"])
    if done is None:
        return SignIn(UNKNOWN, "'codex login status' did not answer")
    status, out, err = done
    said = next((line.strip() for line in (out + "\n" + err).splitlines() if line.strip()), "")
    if status == 0 and said.lower().startswith("logged in"):
        return SignIn(SIGNED_IN, said[0].lower() + said[1:])
    if "not logged in" in (out + err).lower():
        return SignIn(SIGNED_OUT, "not signed in ('codex login status')", "run 'codex login'")
    return SignIn(UNKNOWN, f"'codex login status' said: {said[:120] or f'nothing (exit {status})'}")


def _gemini(environ: Mapping[str, str], home: Path) -> SignIn:
    keys = [name for name in _GEMINI_KEYS if environ.get(name)]
    if keys:
        return SignIn(SIGNED_IN, f"credentials found ({keys[0]} is set)")
    cached = home / ".gemini" / "oauth_creds.json"
    if cached.is_file():
        return SignIn(SIGNED_IN, f"credentials found ({cached}; gemini has no status command to confirm them)")
    return SignIn(SIGNED_OUT, "no credentials found (no GEMINI_API_KEY, no ~/.gemini/oauth_creds.json)",
                  "set GEMINI_API_KEY, or run 'gemini' once and sign in with Google")


__all__ = ["INSTALL_HINTS", "SIGNED_IN", "SIGNED_OUT", "UNKNOWN", "SignIn", "sign_in"]
