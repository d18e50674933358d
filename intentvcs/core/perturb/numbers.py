"""Numbers, times, money and percentages as a speech recogniser writes them.

``spoken_numbers(text)`` finds every written number and returns
``(start, end, words)`` triples: ``7`` -> ``seven``, ``7:30`` -> ``seven thirty``,
``7:05`` -> ``seven oh five``, ``2 pm`` -> ``two p m``, ``7:30am`` and ``7.30 pm``
-> ``seven thirty a m`` / ``p m``, ``$5.50`` -> ``five dollars fifty cents`` (``€``
euros and cents, ``£`` pounds and pence), ``3rd`` -> ``third``, ``2019`` -> ``twenty nineteen``,
``40%`` -> ``forty percent``, ``3.5`` -> ``three point five``, long digit
strings (card numbers, PINs with a leading zero) digit by digit. Words come
from num2words in US style (no "and", no hyphens). Numbers that are only read
whole stay as written: ``12:30:45``, ``1.2.3``, ``$5.5``, ``555-1234``
(``_WHOLE``).
"""

from __future__ import annotations

import re

from num2words import num2words

_INT = r"\d{1,3}(?:,\d{3})+|\d+"
# "am", "a m", "a.m.", "a. m.": the dot after the "m" is taken only in the "a.m." form; after "am" it
# ends the sentence ("wake me at 7 am." -> "seven a m.").
_AMPM = r"(?P<{name}>[ap])(?:\.\s?m\b\.?|\s?m\b)"
# Numbers read whole, or not at all: matched first and left as written (``spoken_numbers`` skips them),
# since spelling out a part tears them apart ("12:30:45" -> "twelve thirty:forty five", "$5.5" ->
# "five dollars.five", "555-1234" -> "five hundred fifty five-twelve thirty four"): three or more groups
# of digits joined by "." or ":" (a clock time with seconds, a version, an address), an amount ($, € or £)
# with other than two decimals, and phone-like runs of digits joined by "-" (three groups or more, or a
# 3-digit group and a 4-digit one: "555-1234"; a range such as "3-5" or "1994-2009" is said part by part).
# Each alternative starts where no digit precedes, so that no digit run is scanned from each of its digits.
_WHOLE = (r"(?<![\d,])[$\u20ac\u00a3]?\d[\d,]*(?:[.:]\d+){2,}"
          r"|[$\u20ac\u00a3]\d[\d,]*\.(?!\d{2}\b)\d+"
          r"|(?<!\d)(?:\d+(?:-\d+){2,}|\d{3}-\d{4})(?!\d)")
_PATTERN = re.compile(
    r"(?P<whole>" + _WHOLE + r")"
    r"|(?P<time>\b(?P<th>\d{1,2})(?::|\.(?=[0-5]\d\s?[ap]\.?\s?m\b))(?P<tm>\d{2})"
    r"(?:\s?" + _AMPM.format(name="tap") + r"|\b))"
    r"|(?P<hour>\b(?P<hh>\d{1,2})\s?" + _AMPM.format(name="hap") + r")"
    r"|(?P<money>(?P<currency>[$\u20ac\u00a3])(?P<dollars>" + _INT + r")(?:\.(?P<cents>\d{2}))?\b)"
    r"|(?P<percent>\b(?P<pnum>(?:" + _INT + r")(?:\.\d+)?)\s?%)"
    r"|(?P<ordinal>\b(?P<onum>" + _INT + r")(?:st|nd|rd|th)\b)"
    r"|(?P<decimal>\b(?P<dint>\d+)\.(?P<dfrac>\d+)\b)"
    r"|(?P<number>\b(?P<num>" + _INT + r")\b)",
    re.IGNORECASE,
)
_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
# num2words names numbers past the quintillions and overflows past about 10**306; nobody says one that
# long as one number, so it is read digit by digit. Checked on the digit string, before int(): Python
# refuses to convert one of more than 4,300 digits (sys.get_int_max_str_digits).
SAID_WHOLE_DIGITS = 18


def cardinal(number: str) -> str:
    """``"123"`` (thousands separators allowed) -> ``one hundred twenty three`` (what ASR
    prints, US style); past ``SAID_WHOLE_DIGITS`` digits, digit by digit."""
    plain = _plain(number)
    if len(plain) > SAID_WHOLE_DIGITS:
        return _digits(plain)
    return _us_style(num2words(int(plain)))


def ordinal(number: str) -> str:
    """``"101"`` -> ``one hundred first``; past ``SAID_WHOLE_DIGITS`` digits, digit by digit,
    the last one ordinal."""
    plain = _plain(number)
    if len(plain) > SAID_WHOLE_DIGITS:
        return " ".join([_digits(plain[:-1]), num2words(int(plain[-1]), to="ordinal")])
    return _us_style(num2words(int(plain), to="ordinal"))


def _plain(number: str) -> str:
    """The digits of a written integer, separators and leading zeros dropped (``"007"`` -> ``"7"``)."""
    return number.replace(",", "").lstrip("0") or "0"


def _us_style(words: str) -> str:
    return words.replace(" and ", " ").replace("-", " ").replace(",", "")


def _digits(s: str) -> str:
    return " ".join(_DIGITS[int(c)] for c in s)


def _integer(s: str) -> str:
    if "," not in s and (len(s) > 4 or (len(s) > 1 and s[0] == "0")):
        return _digits(s)  # account numbers and PINs are read digit by digit
    if "," not in s and len(s) == 4 and 1100 <= int(s) <= 2099 and not 2000 <= int(s) <= 2009:
        return num2words(int(s), to="year").replace("-", " ")  # "twenty nineteen"
    return cardinal(s)


def _clock(hour: str, minute: str | None, ampm: str | None) -> str:
    words = [cardinal(hour)]
    if minute is not None and minute != "00":
        m = int(minute)
        words.append("oh " + _DIGITS[m] if m < 10 else cardinal(minute))
    elif minute == "00" and not ampm:
        words.append("o'clock")
    if ampm:
        words.append(ampm.lower() + " m")
    return " ".join(words)


# Currency sign -> (unit, units, hundredth, hundredths) as said after the amount.
_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "\u20ac": ("euro", "euros", "cent", "cents"),
               "\u00a3": ("pound", "pounds", "penny", "pence")}


def _say(m: re.Match) -> str:
    if m.group("time"):
        return _clock(m.group("th"), m.group("tm"), m.group("tap"))
    if m.group("hour"):
        return _clock(m.group("hh"), None, m.group("hap"))
    if m.group("money"):
        dollars = m.group("dollars")
        unit, units, cent, cents_word = _CURRENCIES[m.group("currency")]
        words = f"{cardinal(dollars)} {unit if _plain(dollars) == '1' else units}"
        cents = m.group("cents")
        if cents and int(cents):
            words += f" {cardinal(cents)} {cent if int(cents) == 1 else cents_word}"
        return words
    if m.group("percent"):
        number = m.group("pnum")
        whole, _, frac = number.partition(".")
        said = _integer(whole) if not frac else f"{cardinal(whole)} point {_digits(frac)}"
        return said + " percent"
    if m.group("ordinal"):
        return ordinal(m.group("onum"))
    if m.group("decimal"):
        return f"{cardinal(m.group('dint'))} point {_digits(m.group('dfrac'))}"
    return _integer(m.group("num"))


def _glued(text: str, m: re.Match) -> bool:
    """Whether match ``m`` is only part of a number: a digit and a ``.`` or ``,`` join it to more digits
    (``1.5k``, ``v2.0``, ``2,5``), a number no alternative reads whole; said in part, it tore apart
    (``one.5k``, ``v2.zero``, ``two,five``)."""
    start, end = m.start(), m.end()
    return ((start >= 2 and text[start - 1] in ".," and text[start - 2].isdigit())
            or (end + 1 < len(text) and text[end] in ".," and text[end + 1].isdigit()))


def spoken_numbers(text: str) -> list[tuple[int, int, str]]:
    """Every written number in ``text`` as ``(start, end, spoken words)``, less those read only
    whole (``_WHOLE``: ``12:30:45``, ``$5.5``, ``555-1234``, ``1.2.3``) and parts of a number
    no alternative reads whole (``_glued``: ``1.5k``, ``v2.0``), which stay as written."""
    return [(m.start(), m.end(), _say(m)) for m in _PATTERN.finditer(text)
            if not m.group("whole") and not _glued(text, m)]
