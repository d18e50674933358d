"""Numbers, times, money and percentages as a speech recogniser writes them.

``spoken_numbers(text)`` finds every written number and returns
``(start, end, words)`` triples: ``7`` -> ``seven``, ``7:30`` -> ``seven thirty``,
``7:05`` -> ``seven oh five``, ``2 pm`` -> ``two p m``, ``$5.50`` -> ``five
dollars fifty cents``, ``3rd`` -> ``third``, ``2019`` -> ``twenty nineteen``,
``40%`` -> ``forty percent``, ``3.5`` -> ``three point five``, long digit
strings (card numbers, PINs with a leading zero) digit by digit. Words come
from num2words in US style (no "and", no hyphens).
"""

from __future__ import annotations

import re

from num2words import num2words

_INT = r"\d{1,3}(?:,\d{3})+|\d+"
_AMPM = r"(?P<{name}>[ap])\.?\s?m\b\.?"
_PATTERN = re.compile(
    r"(?P<time>\b(?P<th>\d{1,2}):(?P<tm>\d{2})\b(?:\s?" + _AMPM.format(name="tap") + r")?)"
    r"|(?P<hour>\b(?P<hh>\d{1,2})\s?" + _AMPM.format(name="hap") + r")"
    r"|(?P<money>\$(?P<dollars>" + _INT + r")(?:\.(?P<cents>\d{2}))?\b)"
    r"|(?P<percent>\b(?P<pnum>(?:" + _INT + r")(?:\.\d+)?)\s?%)"
    r"|(?P<ordinal>\b(?P<onum>" + _INT + r")(?:st|nd|rd|th)\b)"
    r"|(?P<decimal>\b(?P<dint>\d+)\.(?P<dfrac>\d+)\b)"
    r"|(?P<number>\b(?P<num>" + _INT + r")\b)",
    re.IGNORECASE,
)
_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
# num2words names numbers past the quintillions and overflows past about 10**306; nobody says one that
# long as one number, so it is read digit by digit.
SAID_WHOLE_BELOW = 10**18


def cardinal(n: int) -> str:
    """``123`` -> ``one hundred twenty three`` (what ASR prints, US style)."""
    if n >= SAID_WHOLE_BELOW:
        return _digits(str(n))
    return _us_style(num2words(n))


def ordinal(n: int) -> str:
    """``101`` -> ``one hundred first``; past ``SAID_WHOLE_BELOW``, digit by digit, the last one ordinal."""
    if n >= SAID_WHOLE_BELOW:
        return " ".join([_digits(str(n)[:-1]), num2words(n % 10, to="ordinal")])
    return _us_style(num2words(n, to="ordinal"))


def _us_style(words: str) -> str:
    return words.replace(" and ", " ").replace("-", " ").replace(",", "")


def _digits(s: str) -> str:
    return " ".join(_DIGITS[int(c)] for c in s)


def _integer(s: str) -> str:
    plain = s.replace(",", "")
    n = int(plain)
    if "," not in s and (len(plain) > 4 or (len(plain) > 1 and plain[0] == "0")):
        return _digits(plain)  # account numbers and PINs are read digit by digit
    if "," not in s and len(plain) == 4 and 1100 <= n <= 2099 and not 2000 <= n <= 2009:
        return num2words(n, to="year").replace("-", " ")  # "twenty nineteen"
    return cardinal(n)


def _clock(hour: str, minute: str | None, ampm: str | None) -> str:
    words = [cardinal(int(hour))]
    if minute is not None and minute != "00":
        m = int(minute)
        words.append("oh " + _DIGITS[m] if m < 10 else cardinal(m))
    elif minute == "00" and not ampm:
        words.append("o'clock")
    if ampm:
        words.append(ampm.lower() + " m")
    return " ".join(words)


def _say(m: re.Match) -> str:
    if m.group("time"):
        return _clock(m.group("th"), m.group("tm"), m.group("tap"))
    if m.group("hour"):
        return _clock(m.group("hh"), None, m.group("hap"))
    if m.group("money"):
        dollars = int(m.group("dollars").replace(",", ""))
        words = f"{cardinal(dollars)} dollar{'' if dollars == 1 else 's'}"
        cents = m.group("cents")
        if cents and int(cents):
            words += f" {cardinal(int(cents))} cent{'' if int(cents) == 1 else 's'}"
        return words
    if m.group("percent"):
        number = m.group("pnum")
        whole, _, frac = number.partition(".")
        said = _integer(whole) if not frac else f"{cardinal(int(whole.replace(',', '')))} point {_digits(frac)}"
        return said + " percent"
    if m.group("ordinal"):
        return ordinal(int(m.group("onum").replace(",", "")))
    if m.group("decimal"):
        return f"{cardinal(int(m.group('dint')))} point {_digits(m.group('dfrac'))}"
    return _integer(m.group("num"))


def spoken_numbers(text: str) -> list[tuple[int, int, str]]:
    """Every written number in ``text`` as ``(start, end, spoken words)``."""
    return [(m.start(), m.end(), _say(m)) for m in _PATTERN.finditer(text)]
