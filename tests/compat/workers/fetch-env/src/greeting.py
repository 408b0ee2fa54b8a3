"""A sibling module of entry.py, imported by plain name as on Cloudflare."""


def shout(word: str) -> str:
    return word.upper() + "!"
