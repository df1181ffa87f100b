"""ragrig.text's repair of text entering ragrig: lone surrogates replaced and counted."""

from __future__ import annotations

import json

from ragrig.text import replace_surrogates


def test_clean_text_is_returned_as_it_is() -> None:
    for text in ("", "Phobos", "café 😀 ∑", "\ufffd already"):
        out, n = replace_surrogates(text)
        assert (out, n) == (text, 0)
        assert out is text


def test_a_lone_surrogate_from_a_json_escape_is_replaced_and_counted() -> None:
    text = json.loads('"a \\ud83d b \\udc00\\ud800 c"')
    out, n = replace_surrogates(text)
    assert (out, n) == ("a \ufffd b \ufffd\ufffd c", 3)
    out.encode("utf-8")  # now encodable


def test_a_surrogate_pair_escape_is_one_character_not_replaced() -> None:
    text = json.loads('"\\ud83d\\ude00"')
    assert replace_surrogates(text) == ("😀", 0)


def test_surrogateescape_bytes_are_replaced() -> None:
    text = b"caf\xe9.md".decode("utf-8", "surrogateescape")
    assert replace_surrogates(text) == ("caf\ufffd.md", 1)
