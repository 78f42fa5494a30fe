"""Versioned prompt templates: ``<name>.<version>.txt`` files in this folder with an optional ``<<<system>>>`` and a
``<<<user>>>`` section. Placeholders are ``${field}`` (``string.Template``), inserted verbatim and never re-parsed; a
template names its own version, which data prep writes into ``extra_info.prompt_version``.

``neutralize(text, tags)`` defuses look-alike verdict tags in untrusted text before it is placed in a prompt:
``<score>`` becomes ``‹score›``, so no parser can read it as a verdict or a closing delimiter.
"""

from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass
from functools import lru_cache

PROMPT_DIR = os.path.dirname(os.path.abspath(__file__))
_SECTION = re.compile(r"^<<<(system|user)>>>[ \t]*\n", re.MULTILINE)
_FIELD = string.Template.pattern


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    version: str
    system: str | None
    user: str

    @property
    def id(self) -> str:
        return f"{self.name}.{self.version}"

    def fields(self) -> set[str]:
        found = (m["named"] or m["braced"] for p in (self.system or "", self.user) for m in _FIELD.finditer(p))
        return {name for name in found if name}

    def render(self, **values: str) -> list[dict]:
        """Chat messages for ``values``; KeyError names any missing field, extra fields are an error too."""
        missing = self.fields() - values.keys()
        extra = values.keys() - self.fields()
        if missing or extra:
            raise KeyError(f"template {self.id}: missing fields {sorted(missing)}, unexpected {sorted(extra)}")
        parts = (("system", self.system), ("user", self.user))
        return [{"role": r, "content": string.Template(t).substitute(values)} for r, t in parts if t or r == "user"]


@lru_cache(maxsize=None)
def load(name: str, version: str = "v1") -> PromptTemplate:
    path = os.path.join(PROMPT_DIR, f"{name}.{version}.txt")
    if not os.path.exists(path):
        avail = sorted(f[:-4] for f in os.listdir(PROMPT_DIR) if f.endswith(".txt"))
        raise FileNotFoundError(f"no prompt template {name}.{version} in {PROMPT_DIR}; available: {avail}")
    parts = _SECTION.split(open(path, encoding="utf-8").read())
    sections = dict(zip(parts[1::2], (part.strip("\n") for part in parts[2::2])))
    if "user" not in sections:
        raise ValueError(f"{path}: needs a <<<user>>> section")
    return PromptTemplate(name, version, sections.get("system"), sections["user"])


#: The one list of look-alike tags defused in untrusted text before it is placed in a judge prompt
#: (import it, never keep a copy): the verdict and reasoning format,
#: every delimiter our templates use, and chat-role words.
NEUTRALIZED_TAGS = tuple(
    "score think answer better candidate reference problem question query response response_a response_b solution "
    "system user assistant instruction instructions "
    # chat templates' own markers written as tags: Gemma's turns, Llama 2's </s>, ChatML's words
    "start_of_turn end_of_turn s bos eos im_start im_end eot_id".split()
)

_TAG_LIKE = re.compile(r"<\s*(/?)\s*([A-Za-z_][\w-]*)\s*>")


def neutralize(text: str, tags: tuple[str, ...] = NEUTRALIZED_TAGS) -> str:
    """Replace ``<tag>``/``</tag>`` (any case, inner spaces) for ``tags`` with ``‹tag›``/``‹/tag›``."""
    wanted = {t.lower() for t in tags}
    return _TAG_LIKE.sub(lambda m: f"\u2039{m[1]}{m[2]}\u203a" if m[2].lower() in wanted else m[0], text)
