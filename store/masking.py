"""Passwords masked out of store URLs, driver errors, log lines and log records (those: masked_log.py)."""

from __future__ import annotations

import re

MASK = "***"
# `scheme://user:password@`: the user part stops at the first `:`, the password
# runs to the last `@` of the word (a raw URL may hold an unescaped `@` in it).
_USERINFO_PASSWORD = re.compile(r"(?P<pre>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@'\"]*:)[^\s'\"]*@")
# `?password=...`, `&password=...`, and libpq's `password=...` keyword form;
# punctuation that ends a sentence after the value is the sentence's.
_PARAM_PASSWORD = re.compile(r"(?i)(?<![A-Za-z0-9])(password=)[^&\s'\"]*?(?=[:,;.)\]]*(?:[&\s'\"]|$))")


def masked(text_or_url: object) -> str:
    """The text (or URL) with every password in it shown as `***`.

    Store URLs, driver errors and agents' log lines are read on every machine
    that shares the store, and printed into terminals and CI logs: each of
    those goes through here before it is shown or stored.
    """
    render = getattr(text_or_url, "render_as_string", None)  # a URL (SQLAlchemy's, or lite.SqliteFile)
    if render is not None:
        text = render(hide_password=True)
    else:
        text = str(text_or_url)
    if "://" in text:
        text = _USERINFO_PASSWORD.sub(lambda m: m["pre"] + MASK + "@", text)
    if "=" in text:
        text = _PARAM_PASSWORD.sub(lambda m: m[1] + MASK, text)
    return text
